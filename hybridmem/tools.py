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
import math
from dataclasses import dataclass
from typing import Any, Iterable, Protocol

from hybridmem.config import DEFAULT_RANKING
from hybridmem.config.calibration import has_aligned_gate
from hybridmem.config.chatter import CHATTER_CHARS, chatter_model
from hybridmem.embeddings.base import encoder_query
from hybridmem.errors import ArgumentError, HybridMemError
from hybridmem.ranking.language import language_name
from hybridmem.searching import NOTHING_SEARCHED, missing_session
from hybridmem.sources import SOURCES
from hybridmem.wording import brief

CITATION_MODES = ("on", "off", "auto")
TOOL_FORMATS = ("openai", "anthropic", "json_schema")

SEARCH_DESCRIPTION = (
    "Mandatory recall step: search long-term memory (MEMORY.md, memory/*.md notes and past session transcripts) "
    "before answering questions about prior work, decisions, dates, people, preferences or todos. Returns the most "
    "relevant snippets with their path and line numbers; use memory_get to read more lines around a result. When "
    "nothing is found and the reply names languages (ask_in), memory holds notes written in them: ask the same "
    "question again, translated, in each."
)
# What memory_search says beside an empty result list: nothing scored above the min score (calibrated scores are
# probabilities of relevance, so an empty list means "not in memory", not "search failed").
NOTHING_FOUND = "Nothing relevant was found in memory for this query."


def ask_again(languages: Iterable[str]) -> str:
    """The sentence a refusal ends with where memory holds notes in other languages than the question's
    (``SearchResponse.ask_in``), or "".

    Example:
        >>> print(ask_again(["vi"]))  # doctest: +NORMALIZE_WHITESPACE
        Memory also holds notes in Vietnamese, and a question is answered less surely across languages: ask it again
        in Vietnamese.
        >>> ask_again(["ru", "es"])[-39:], ask_again([])
        ('ask it again in Russian and in Spanish.', '')
    """
    names = [language_name(code) for code in languages]
    if not names:
        return ""
    listed = ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else names[0]
    again = " and in ".join([", in ".join(names[:-1]), names[-1]]) if len(names) > 1 else names[0]
    return (f" Memory also holds notes in {listed}, and a question is answered less surely across languages: ask it "
            f"again in {again}.")


def nothing_found(resp: Any) -> str:
    """:data:`NOTHING_FOUND` and, for a :class:`~hybridmem.records.SearchResponse`, one sentence saying why: the answer
    gate, nothing to search (an empty index, or a scope no indexed file matches), no candidate at all, or the min
    score.

    Example:
        >>> nothing_found({})
        'Nothing relevant was found in memory for this query.'
    """
    ranking, config = getattr(resp, "ranking", None), getattr(resp, "config", None)
    if ranking is None or config is None:
        return NOTHING_FOUND
    if ranking.abstained:
        return (f"{NOTHING_FOUND} The answer gate put the chance that memory holds an answer at "
                f"{ranking.answer_probability:.2f}, under its threshold of {config.answer_threshold:g} (an answer "
                "threshold of 0 lists the nearest notes anyway)." + ask_again(getattr(resp, "ask_in", ())))
    reason = getattr(resp, "fallback_reason", None)
    missing = missing_session(getattr(resp, "notice", None))
    if not ranking.candidates and missing:  # a session id no folder holds: say so, not "no file in scope"
        return f"{NOTHING_FOUND} {missing[0].upper()}{missing[1:]}."
    if not ranking.candidates and reason in NOTHING_SEARCHED:  # an empty index, or a scope no file matches
        return f"{NOTHING_FOUND} {reason[0].upper()}{reason[1:]}."
    if not ranking.candidates:
        cands = getattr(resp, "candidates", None)
        ran = [leg for leg, searched, weight in (
            ("keyword", getattr(cands, "keyword_searched", True), config.text_weight),
            ("vector", getattr(cands, "vector_searched", True), config.vector_weight)) if searched and weight > 0]
        if not ran:
            return f"{NOTHING_FOUND} No search ran: each was weighted 0 or could not run (an index without vectors)."
        if len(ran) == 1:
            return f"{NOTHING_FOUND} The {ran[0]} search found no candidate (the only one this search ran)."
        return f"{NOTHING_FOUND} Neither the keyword nor the vector search found a candidate."
    return f"{NOTHING_FOUND} No candidate scored {config.min_score:g} or more."


RECALL_HEADER = "Possibly relevant memories (cite as path#lines):"


def recall(index: Any, message: str, config: Any = None, **scope: Any) -> str:
    """A context block of the memories relevant to ``message``, to prepend to an agent's prompt before it starts
    (the reference's ``prependContext``), or ``""`` when nothing passes (:func:`recall_context`, which also says
    why). The ``hybridmem recall`` command and the MCP ``recall`` prompt both give this.

    Example:
        >>> recall(MemoryIndex("datasets/demo-memory/workspace"), "how do I repot an orchid")  # doctest: +SKIP
        ''
    """
    return recall_context(index, message, config, **scope)[0]


RECALL_CHATTER = "a chat message that asks nothing, like thanks or ok: nothing injected"
RECALL_NOTHING = "nothing relevant: nothing injected"


def recall_context(index: Any, message: str, config: Any = None, **scope: Any) -> tuple[str, str]:
    """``(block, why)``: the passing hits of ``index.search`` with their citations, less those under
    ``recall_floor`` x the first hit's score, clamped to ``max_injected_chars`` (0: no cap); or ``""`` and why
    nothing was injected: :data:`RECALL_CHATTER` for a message the embedding model's chatter filter reads as chat
    (:mod:`hybridmem.config.chatter`; not searched at all), else :data:`RECALL_NOTHING`. ``scope``: as ``search``."""
    if is_chatter(index, message):
        return "", RECALL_CHATTER
    resp = index.search(message, config=config, **scope)
    floor = resp.config.recall_floor * resp.results[0].final_score if resp.results else 0.0
    block = recall_block([(h.citation, h.final_score, h.snippet) for i, h in enumerate(resp.results)
                          if i == 0 or h.final_score >= floor], resp.config.max_injected_chars)
    return block, "" if block else RECALL_NOTHING


def is_chatter(index: Any, message: str) -> bool:
    """Whether ``message`` is a chat message that asks nothing, as the chatter filter fitted for ``index``'s
    embedding model reads its query vector; for a model without a fit whose answer gate reads the bundled e5's token
    alignment (all-MiniLM-L6-v2), as e5's filter reads e5's vector. False where neither applies (keyword-only, a
    remote model, ``embedding.token_alignment = false``), or the model fails."""
    text = message.strip()
    if not text or len(text) > CHATTER_CHARS:
        return False
    embedder = index.embedder
    fit = chatter_model(getattr(embedder, "model", "")) if embedder is not None else None
    if fit is None and embedder is not None and index.settings.embedding.token_alignment \
            and has_aligned_gate(embedder.model):
        from hybridmem.embeddings.e5 import shared_token_reader

        reader = shared_token_reader(index.settings.embedding.document_runtime,
                                     index.settings.embedding.shared_cache_dir)
        embedder = getattr(reader, "__self__", None)
        fit = chatter_model(getattr(embedder, "model", "")) if embedder is not None else None
    if fit is None:
        return False
    try:
        vector = embedder.embed_query(encoder_query(text))
    except Exception:  # noqa: BLE001 - the search that follows says what failed
        return False
    return fit.is_chatter(text, vector)


def recall_block(hits: Iterable[tuple[str, float, str]], cap: int) -> str:
    """``(citation, score, snippet)`` hits as one context block within ``cap`` chars (0: no cap); a hit that
    would overrun is left out with every later one. ``""`` for no hits.

    Example:
        >>> print(recall_block([("MEMORY.md#L3", 0.81, "car repair notes")], 4000))
        <memory>
        Possibly relevant memories (cite as path#lines):
        [MEMORY.md#L3] (p=0.81)
        car repair notes
        </memory>
    """
    head, tail = f"<memory>\n{RECALL_HEADER}\n", "</memory>"
    body = ""
    for citation, score, snippet in hits:
        part = f"[{citation}] (p={score:.2f})\n{snippet.strip()}\n"
        if cap and len(head) + len(body) + len(part) + len(tail) > cap:
            break
        body += part
    return head + body + tail if body else ""


GET_DESCRIPTION = (
    "Read specific lines of a memory file (MEMORY.md, memory/**/*.md or a session transcript), usually after "
    "memory_search, to pull only the lines needed and keep the context small. The path is relative to the memory root. "
    "A long reply is cut (truncated: true, with a note) and next_from is the line to read on from."
)


@dataclass(frozen=True)
class Arg:
    """One tool argument: its JSON-schema type and bounds (written once: the schema and the checks both read them),
    and the other spellings accepted for it (OpenClaw's tools name them in camelCase: ``maxResults``)."""

    name: str
    type: str  # "string", "integer" or "number"
    description: str
    required: bool = False
    minimum: float | None = None
    maximum: float | None = None
    below: float | None = None  # an exclusive maximum (JSON schema's exclusiveMaximum)
    enum: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    max_length: int | None = None  # a string's most characters (JSON schema's maxLength)

    def schema(self, default: Any = None) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type}
        if self.minimum is not None:
            out["minimum"] = self.minimum
        if self.maximum is not None:
            out["maximum"] = self.maximum
        if self.below is not None:
            out["exclusiveMaximum"] = self.below
        if self.enum:
            out["enum"] = list(self.enum)
        if self.max_length is not None:
            out["maxLength"] = self.max_length
        if default is not None:
            out["default"] = default
        out["description"] = self.description
        return out

    def check(self, value: Any) -> Any:
        """``value`` as this argument's type, or HybridMemError saying what was expected."""
        if self.type == "string":
            if not isinstance(value, str):
                raise HybridMemError(f"{self.name} must be a string")
            if self.enum and value not in self.enum:
                raise HybridMemError(f"{self.name} must be one of {', '.join(map(repr, self.enum))}, "
                                     f"got {brief(value)}")
            if self.max_length is not None and len(value) > self.max_length:
                raise HybridMemError(f"{self.name} must be at most {self.max_length} characters, got {len(value)}")
            return value
        number = not isinstance(value, bool) and isinstance(value, (int, float)) and (
            isinstance(value, int) or math.isfinite(value))  # an int too large for a float is still a number
        if self.type == "integer" and not (number and int(value) == value):
            raise HybridMemError(f"{self.name} must be an integer, got {brief(value)}")
        if not number:
            raise HybridMemError(f"{self.name} must be a finite number, got {brief(value)}")
        lo = -math.inf if self.minimum is None else self.minimum
        hi = math.inf if self.maximum is None else self.maximum
        if not lo <= value <= hi:
            bounds = f"between {_num(lo)} and {_num(hi)}" if self.maximum is not None else f">= {_num(lo)}"
            raise HybridMemError(f"{self.name} must be {bounds}, got {brief(value)}")
        if self.below is not None and not value < self.below:
            raise HybridMemError(f"{self.name} must be from {_num(lo)} up to (not including) {_num(self.below)}, "
                                 f"got {brief(value)}")
        return int(value) if self.type == "integer" else float(value)


MAX_PATH_CHARS = 4096  # Linux's PATH_MAX: a longer path names no file, and an error would echo all of it


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


SEARCH_ARGS: tuple[Arg, ...] = (
    Arg("query", "string", "What to recall, in natural language or exact identifiers.", required=True),
    Arg("max_results", "integer", "How many results at most.", minimum=1, maximum=50, aliases=("maxResults",)),
    Arg("min_score", "number", "Drop results scoring lower.", minimum=0, maximum=1, aliases=("minScore",)),
    Arg("answer_threshold", "number", "The answer gate's bar: when its chance that memory holds an answer is lower, "
        "nothing comes back. 0 lists the nearest notes anyway (when you know memory holds the answer, e.g. in "
        "another language than the question).", minimum=0, below=1, aliases=("answerThreshold",)),
    Arg("source", "string", "Only notes, or only sessions.", enum=SOURCES),
    Arg("session", "string", "Only this session transcript (id or file name).", aliases=("sessionId",),
        max_length=MAX_PATH_CHARS),
    Arg("path_prefix", "string", "Only files whose path starts with this: a folder ends with / (memory/projects/; "
        "memory/projects would match memory/projects-old/ too), or a name's start (memory/2026-01 for January's "
        "daily notes).", aliases=("pathPrefix",), max_length=MAX_PATH_CHARS),
)
RANKING_ARGS = ("max_results", "min_score", "answer_threshold")  # memory_search's arguments that change the ranking
MAX_LINE = 2**31 - 1  # past any file's end (a huge number is refused here, not echoed in 309 digits)
GET_ARGS: tuple[Arg, ...] = (
    Arg("path", "string", "Path relative to the memory root, e.g. memory/2026-06-12.md, or a search result's "
        "citation (memory/2026-06-12.md#L3-L7: those lines unless from/lines say otherwise).", required=True,
        max_length=MAX_PATH_CHARS),
    Arg("from", "integer", "First line to read (1-based).", minimum=1, maximum=MAX_LINE,
        aliases=("from_line", "fromLine")),
    Arg("lines", "integer", "How many lines to read (default: the citation's, else to the end within a cap).",
        minimum=1, maximum=2000),
)


def build_schema(spec: tuple[Arg, ...], defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON schema of a tool's arguments (``defaults`` shown per argument, e.g. the served max_results)."""
    defaults = defaults or {}
    return {
        "type": "object",
        "properties": {a.name: a.schema(defaults.get(a.name)) for a in spec},
        "required": [a.name for a in spec if a.required],
        "additionalProperties": False,
    }


SEARCH_SCHEMA: dict[str, Any] = build_schema(SEARCH_ARGS)
GET_SCHEMA: dict[str, Any] = build_schema(GET_ARGS)


def parse_args(args: dict[str, Any], spec: tuple[Arg, ...]) -> dict[str, Any]:
    """Checked arguments by canonical name (absent and ``null`` ones left out); both tools go through here.

    Raises:
        HybridMemError: an unknown argument, one given under two spellings, a missing required one, or a value of
            the wrong type or out of bounds.
    """
    names = {n: a for a in spec for n in (a.name, *a.aliases)}
    unknown = sorted(k for k in args if k not in names)
    if unknown:
        expected = f"expected {', '.join(a.name for a in spec)}" if spec else "this tool takes no arguments"
        shown = (k if len(k) <= 80 else k[:79] + "…" for k in map(str, unknown))
        raise HybridMemError(f"unknown argument(s): {', '.join(shown)}; {expected}")
    out: dict[str, Any] = {}
    given: dict[str, str] = {}
    for key, value in args.items():
        arg = names[key]
        if value is None:
            continue
        if arg.name in given:
            raise HybridMemError(f"{arg.name} given twice (as {given[arg.name]} and {key})")
        given[arg.name] = key
        out[arg.name] = arg.check(value)
    for a in spec:
        if a.required and a.name not in out:
            raise HybridMemError(f"{a.name} is required" + (" (a string)" if a.type == "string" else ""))
    return out


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
        """Both tools' definitions in ``fmt`` (``openai``, ``anthropic`` or ``json_schema``); the search schema shows
        the served ranking's max_results, min_score and answer_threshold as defaults (the backend's settings, else the
        config's)."""
        settings = getattr(self.backend, "settings", None)
        ranking = getattr(settings, "ranking", DEFAULT_RANKING)
        defaults = {k: getattr(ranking, k) for k in RANKING_ARGS}
        return [
            _definition("memory_search", SEARCH_DESCRIPTION, build_schema(SEARCH_ARGS, defaults), fmt),
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
        handlers = {"memory_search": (self.memory_search, SEARCH_ARGS), "memory_get": (self.memory_get, GET_ARGS)}
        if name not in handlers:
            return _error(f"unknown tool {brief(name)}: expected one of {', '.join(handlers)}")
        handler, spec = handlers[name]
        try:
            checked = parse_args(args, spec)
        except HybridMemError as exc:
            return _error(str(exc), bad_arguments=True)
        try:
            return json.dumps(handler(checked), ensure_ascii=False)
        except ArgumentError as exc:
            return _error(str(exc), bad_arguments=True)
        except HybridMemError as exc:
            return _error(str(exc))
        except Exception as exc:  # noqa: BLE001 - a tool must never raise into the agent loop
            return _error(f"memory is unavailable: {type(exc).__name__}: {exc}", unavailable=True)

    def memory_search(self, args: dict[str, Any]) -> dict[str, Any]:
        """``memory_search`` with raw arguments (checked here) or already checked ones."""
        a = parse_args(args, SEARCH_ARGS)
        if not a["query"].strip():
            raise ArgumentError("query is empty: give the words to search for")
        overrides = {k: a[k] for k in RANKING_ARGS if k in a}
        scope = {k: a.get(k) for k in ("source", "session")}
        if "path_prefix" in a:
            scope["path_prefix"] = a["path_prefix"]
        resp = self.backend.search(a["query"], **scope, **overrides)
        out = resp.to_dict(citations=self.include_citations) if hasattr(resp, "to_dict") else dict(resp)
        out["citations"] = self.include_citations
        if not out.get("results"):
            out["message"] = nothing_found(resp)
        return out

    def memory_get(self, args: dict[str, Any]) -> dict[str, Any]:
        """``memory_get`` with raw arguments (checked here) or already checked ones."""
        a = parse_args(args, GET_ARGS)
        return self.backend.get(a["path"], from_line=a.get("from"), lines=a.get("lines"))
