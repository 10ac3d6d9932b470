"""``memory_search`` and ``memory_get``: the two tools an agent uses, as JSON-schema definitions plus handlers.

The definitions come in the shapes the common function-calling APIs expect (OpenAI ``tools``, Anthropic ``tools``,
or bare JSON Schema); handlers take the model's arguments (a dict or a JSON string) and return a JSON string. Handlers
never raise into the agent: bad arguments and failures come back as ``{"error": ...}``.

Example:
    >>> tools = MemoryTools(MemoryIndex("datasets/demo-memory/workspace"))   # doctest: +SKIP
    >>> tools.definitions("openai")[0]["function"]["name"]                    # doctest: +SKIP
    'memory_search'
    >>> json.loads(tools.handle("memory_search", {"query": "retry backoff"}))["results"][0]["citation"]  # doctest: +SKIP
    'memory/2026-06-12.md#L14-L15'
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from hybridmem.errors import HybridMemError

CITATION_MODES = ("on", "off", "auto")
TOOL_FORMATS = ("openai", "anthropic", "json_schema")

SEARCH_DESCRIPTION = (
    "Mandatory recall step: search long-term memory (MEMORY.md, memory/*.md notes and past session transcripts) "
    "before answering questions about prior work, decisions, dates, people, preferences or todos. Returns the most "
    "relevant snippets with their path and line numbers; use memory_get to read more lines around a result."
)
GET_DESCRIPTION = (
    "Read specific lines of a memory file (MEMORY.md, memory/**/*.md or a session transcript), usually after "
    "memory_search, to pull only the lines needed and keep the context small. The path is relative to the memory root."
)

SEARCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "What to recall, in natural language or exact identifiers."},
        "max_results": {"type": "integer", "minimum": 1, "maximum": 50, "description": "How many results at most."},
        "min_score": {"type": "number", "minimum": 0, "maximum": 1, "description": "Drop results scoring lower."},
        "source": {"type": "string", "enum": ["memory", "sessions"], "description": "Only notes, or only sessions."},
        "session": {"type": "string", "description": "Only this session transcript (id or file name)."},
    },
    "required": ["query"],
    "additionalProperties": False,
}
GET_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "Path relative to the memory root, e.g. memory/2026-06-12.md."},
        "from": {"type": "integer", "minimum": 1, "description": "First line to read (1-based)."},
        "lines": {"type": "integer", "minimum": 1, "maximum": 2000, "description": "How many lines to read."},
    },
    "required": ["path"],
    "additionalProperties": False,
}


class MemoryBackend(Protocol):
    """What the tools need: :class:`~hybridmem.index.MemoryIndex` or the fallback manager."""

    def search(self, query: str, **kwargs: Any) -> Any: ...

    def get(self, path: str, from_line: int | None = None, lines: int | None = None) -> dict[str, Any]: ...


def _definition(name: str, description: str, schema: dict[str, Any], fmt: str) -> dict[str, Any]:
    if fmt == "openai":
        return {"type": "function", "function": {"name": name, "description": description, "parameters": schema}}
    if fmt == "anthropic":
        return {"name": name, "description": description, "input_schema": schema}
    if fmt == "json_schema":
        return {"name": name, "description": description, "parameters": schema}
    raise HybridMemError(f"unknown tool format {fmt!r}: expected one of {', '.join(TOOL_FORMATS)}")


def _error(message: str, **extra: Any) -> str:
    return json.dumps({"error": message, **extra}, ensure_ascii=False)


def _checked_args(args: dict[str, Any], schema: dict[str, Any], required: str) -> str:
    """The required string argument, after refusing a missing one and any argument the schema does not name."""
    value = args.get(required)
    if not isinstance(value, str):
        raise HybridMemError(f"{required} must be a string")
    unknown = set(args) - set(schema["properties"])
    if unknown:
        raise HybridMemError(f"unknown argument(s): {', '.join(sorted(unknown))}")
    return value


def _int_arg(args: dict[str, Any], name: str, lo: int, hi: int) -> int | None:
    value = args.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
        raise HybridMemError(f"{name} must be an integer")
    if not lo <= int(value) <= hi:
        raise HybridMemError(f"{name} must be between {lo} and {hi}")
    return int(value)


class MemoryTools:
    """Tool definitions and handlers over a memory backend.

    Args:
        backend: a MemoryIndex (or anything with ``search`` and ``get``).
        citations: ``on`` (always), ``off`` (never) or ``auto`` (on in direct chats, off in group chats).
        chat_type: ``direct`` or ``group``; used by ``auto``.
    """

    def __init__(self, backend: MemoryBackend, citations: str = "auto", chat_type: str = "direct") -> None:
        if citations not in CITATION_MODES:
            raise HybridMemError(f"unknown citations mode {citations!r}: expected one of {', '.join(CITATION_MODES)}")
        self.backend = backend
        self.citations = citations
        self.chat_type = chat_type

    @property
    def include_citations(self) -> bool:
        if self.citations == "auto":
            return self.chat_type == "direct"
        return self.citations == "on"

    def definitions(self, fmt: str = "openai") -> list[dict[str, Any]]:
        """Both tools' definitions in ``fmt`` (``openai``, ``anthropic`` or ``json_schema``)."""
        return [
            _definition("memory_search", SEARCH_DESCRIPTION, SEARCH_SCHEMA, fmt),
            _definition("memory_get", GET_DESCRIPTION, GET_SCHEMA, fmt),
        ]

    def handle(self, name: str, arguments: dict[str, Any] | str | None) -> str:
        """Run tool ``name`` with the model's ``arguments``; always returns a JSON string."""
        try:
            args = json.loads(arguments) if isinstance(arguments, str) else dict(arguments or {})
        except (json.JSONDecodeError, TypeError, ValueError) as exc:
            return _error(f"arguments are not a JSON object: {exc}")
        if not isinstance(args, dict):
            return _error("arguments must be a JSON object")
        handlers = {"memory_search": self.memory_search, "memory_get": self.memory_get}
        if name not in handlers:
            return _error(f"unknown tool {name!r}: expected one of {', '.join(handlers)}")
        try:
            return json.dumps(handlers[name](args), ensure_ascii=False)
        except HybridMemError as exc:
            return _error(str(exc))
        except Exception as exc:  # noqa: BLE001 - a tool must never raise into the agent loop
            return _error(f"memory is unavailable: {type(exc).__name__}: {exc}", unavailable=True)

    def memory_search(self, args: dict[str, Any]) -> dict[str, Any]:
        query = _checked_args(args, SEARCH_SCHEMA, "query")
        overrides: dict[str, Any] = {}
        max_results = _int_arg(args, "max_results", 1, 50)
        if max_results is not None:
            overrides["max_results"] = max_results
        if args.get("min_score") is not None:
            ms = args["min_score"]
            if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not 0 <= ms <= 1:
                raise HybridMemError("min_score must be a number between 0 and 1")
            overrides["min_score"] = float(ms)
        source = args.get("source")
        if source is not None and source not in ("memory", "sessions"):
            raise HybridMemError("source must be 'memory' or 'sessions'")
        session = args.get("session")
        if session is not None and not isinstance(session, str):
            raise HybridMemError("session must be a string")
        resp = self.backend.search(query, source=source, session=session, **overrides)
        out = resp.to_dict(citations=self.include_citations) if hasattr(resp, "to_dict") else dict(resp)
        out["citations"] = self.include_citations
        return out

    def memory_get(self, args: dict[str, Any]) -> dict[str, Any]:
        path = _checked_args(args, GET_SCHEMA, "path")
        return self.backend.get(path, from_line=_int_arg(args, "from", 1, 10**9), lines=_int_arg(args, "lines", 1, 2000))
