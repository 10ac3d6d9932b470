"""The MCP server: ``memory_search``, ``memory_get``, ``memory_status`` (and ``memory_write`` plus the
``memory_flush`` prompt with ``--allow-write``) on the official ``mcp`` SDK's low-level ``Server`` (SDK major 2).

The low-level server is used rather than ``MCPServer`` because the tools' input schemas already exist, written once in
:mod:`hybridmem.tools` (``from`` is an argument name Python cannot take as a parameter), and so that every result is
built here: structured content matching the output schema, a short text rendering for hosts that only read text, and
``is_error`` with one sentence for bad arguments. Calls run on worker threads, so a slow one never stalls the others.
"""

from __future__ import annotations

import json
import re
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server

from hybridmem.config import DEFAULT_RANKING
from hybridmem.searching import notice_beside_empty
from hybridmem.serve.service import MemoryService, guarded
from hybridmem.serve.write import (FLUSH_PROMPT, FLUSH_PROMPT_DESCRIPTION, FLUSH_PROMPT_NAME, WRITE_ARGS,
                                   WRITE_DESCRIPTION, write_note)
from hybridmem.tools import (
    GET_ARGS, NOTHING_FOUND, RANKING_ARGS, SEARCH_ARGS, build_schema, parse_args, recall as tools_recall,
)
from hybridmem.wording import brief

SERVER_NAME = "hybridmem"
SEARCH_TEXT = ("Search long-term memory (MEMORY.md, memory/*.md, past sessions) before answering about prior work, "
               "decisions, dates, people, preferences or todos. Returns path#line snippets; if none and ask_in names "
               "languages, ask again translated into each.")
GET_TEXT = ("Read lines of a memory file, usually around a memory_search hit (path relative to the memory root). "
            "A long reply is cut (truncated, note) and next_from says where to read on.")
STATUS_TEXT = ("Index status: files, chunks, embedding model, last sync, whether a sync is running, and how many files "
               "changed on disk since the index read them.")

_HIT = {"type": "object", "properties": {
    "citation": {"type": "string"}, "path": {"type": "string"}, "start_line": {"type": "integer"},
    "end_line": {"type": "integer"}, "score": {"type": "number"}, "snippet": {"type": "string"},
    "source": {"type": "string"}}, "required": ["path", "start_line", "end_line", "score", "snippet"]}
_VECTORS = {"type": ["object", "null"], "properties": {"embedded": {"type": "integer"}, "total": {"type": "integer"}}}
SEARCH_OUTPUT = {"type": "object", "properties": {
    "query": {"type": "string"}, "results": {"type": "array", "items": _HIT}, "search_id": {"type": "string"},
    "provider": {"type": "string"}, "model": {"type": "string"}, "fallback": {"type": "boolean"},
    "fallback_reason": {"type": ["string", "null"]}, "message": {"type": "string"}, "notice": {"type": "string"},
    "vectors": _VECTORS, "vectors_note": {"type": "string"}, "ask_in": {"type": "array", "items": {"type": "string"}}},
    "required": ["query", "results"]}
GET_OUTPUT = {"type": "object", "properties": {
    "path": {"type": "string"}, "from": {"type": "integer"}, "lines": {"type": "integer"},
    "total_lines": {"type": "integer"}, "text": {"type": "string"}, "truncated": {"type": "boolean"},
    "next_from": {"type": ["integer", "null"]}, "note": {"type": "string"}},
    "required": ["path", "from", "lines", "text"]}
STATUS_OUTPUT = {"type": "object", "properties": {
    "files": {"type": "integer"}, "chunks": {"type": "integer"}, "provider": {"type": "string"},
    "model": {"type": "string"}, "model_loaded": {"type": "boolean"}, "last_sync": {"type": ["string", "null"]},
    "sync_running": {"type": "boolean"}, "changed_on_disk": {"type": "integer"}, "vectors": _VECTORS,
    "vectors_note": {"type": "string"}, "unread_note": {"type": "string"},
    "languages": {"type": "object", "additionalProperties": {"type": "integer"}}},
    "required": ["files", "chunks", "model", "last_sync", "sync_running"]}
WRITE_OUTPUT = {"type": "object", "properties": {
    "path": {"type": "string"}, "start_line": {"type": "integer"}, "end_line": {"type": "integer"},
    "bytes": {"type": "integer"}, "indexed": {"type": "boolean"}, "index_error": {"type": "string"},
    "redacted": {"type": "array", "items": {"type": "string"}}, "removed_characters": {"type": "integer"}},
    "required": ["path", "start_line", "end_line", "indexed"]}


def tool_list(service: MemoryService, allow_write: bool) -> list[types.Tool]:
    """The served tools; the search schema's defaults are the served ranking's."""
    ranking = getattr(service.settings, "ranking", DEFAULT_RANKING)
    defaults = {k: getattr(ranking, k) for k in RANKING_ARGS}
    read = types.ToolAnnotations(read_only_hint=True, idempotent_hint=True, destructive_hint=False,
                                 open_world_hint=False)
    tools = [
        types.Tool(name="memory_search", description=SEARCH_TEXT, input_schema=build_schema(SEARCH_ARGS, defaults),
                   output_schema=SEARCH_OUTPUT, annotations=read),
        types.Tool(name="memory_get", description=GET_TEXT, input_schema=build_schema(GET_ARGS),
                   output_schema=GET_OUTPUT, annotations=read),
        types.Tool(name="memory_status", description=STATUS_TEXT, input_schema=build_schema(()),
                   output_schema=STATUS_OUTPUT, annotations=read),
    ]
    if allow_write:
        tools.append(types.Tool(
            name="memory_write", description=WRITE_DESCRIPTION, input_schema=build_schema(WRITE_ARGS),
            output_schema=WRITE_OUTPUT, annotations=types.ToolAnnotations(
                read_only_hint=False, idempotent_hint=False, destructive_hint=False, open_world_hint=False)))
    return tools


def render(name: str, out: dict[str, Any]) -> str:
    """The text rendering of a result (what a host that ignores structured content shows the model)."""
    if name == "memory_search":
        notice = [f"(note: {out[k]})" for k in ("notice", "vectors_note") if out.get(k)]
        if not out["results"]:
            beside = [f"(note: {n})" for n in (notice_beside_empty(out.get("notice")), out.get("vectors_note")) if n]
            return "\n\n".join([out.get("message") or NOTHING_FOUND, *beside])
        parts = [f"{r.get('citation', r['path'])} (score {r['score']:.2f})\n{r['snippet']}" for r in out["results"]]
        if out.get("fallback_reason"):
            parts.append(f"(note: {out['fallback_reason']})")
        return "\n\n".join(parts + notice)
    if name == "memory_get":
        return f"{out['text']}\n\n(note: {out['note']})" if out.get("note") else out["text"]
    if name == "memory_write":
        text = f"Saved to {out['path']}#L{out['start_line']}-L{out['end_line']}."
        if out.get("redacted"):
            text += f" Secrets were replaced by [REDACTED] (rules: {', '.join(out['redacted'])})."
        if out.get("removed_characters"):
            text += f" {out['removed_characters']} control character(s) were removed."
        if not out.get("indexed", True):
            text += f" Not searchable yet: {out.get('index_error')}."
        return text
    return json.dumps(out, ensure_ascii=False)


def _client(ctx: Any) -> str:
    """Who is calling, for the query log: ``stdio`` (one client a process); over HTTP the session id, else the TCP
    peer (stateless 2026-07-28 clients have no session; their connection is kept alive between calls)."""
    request = getattr(ctx, "request", None)
    headers = getattr(request, "headers", None)
    if headers is not None:
        sid = headers.get("mcp-session-id")
        if sid:
            return f"http:{sid[:12]}"
        client = getattr(request, "client", None)
        return f"http:{client.host}:{client.port}" if client else "http"
    return "stdio"


def call(service: MemoryService, name: str, arguments: dict[str, Any] | None, client: str,
         allow_write: bool = False) -> tuple[dict[str, Any], str | None]:
    """Run one tool: ``(structured result, None)`` or ``({}, one-sentence error)``."""
    args = dict(arguments or {})
    if name == "memory_search":
        return guarded(lambda: service.search(client=client, **_checked(args, SEARCH_ARGS, "query")))
    if name == "memory_get":
        return guarded(lambda: _get(service, client, args))
    if name == "memory_status":
        return guarded(lambda: (parse_args(args, ()), service.status())[1])
    if name == "memory_write" and allow_write:
        return guarded(lambda: _write(service, args))
    return {}, f"Unknown tool {brief(name)}."


def _checked(args: dict[str, Any], spec: Any, first: str) -> dict[str, Any]:
    checked = parse_args(args, spec)
    return {first: checked.pop(first), **checked}


def _get(service: MemoryService, client: str, args: dict[str, Any]) -> dict[str, Any]:
    a = parse_args(args, GET_ARGS)
    out = service.get(a.pop("path"), client=client, **a)
    return {k: v for k, v in out.items() if v is not None}


def _write(service: MemoryService, args: dict[str, Any]) -> dict[str, Any]:
    a = parse_args(args, WRITE_ARGS)
    return write_note(service, a["text"], a.get("file"))


def build_server(service: MemoryService, allow_write: bool = False) -> Server[Any]:
    """The MCP ``Server`` over ``service``; with ``allow_write``, appends a killed writer cut short are undone first."""
    if allow_write:
        import sys

        from hybridmem.serve.notefile import recover

        undone = recover(service.workspace / "memory")
        for line in undone:
            print(f"hybridmem: {line}", file=sys.stderr, flush=True)
        if undone:  # the service indexed the files before they were cut back: index them as they are now (rows only;
            try:  # their vectors come with the next sync)
                service.index.sync(embed_limit=0)
            except Exception as exc:  # noqa: BLE001 - the server still starts; the next sync tries again
                print(f"hybridmem: indexing after the recovery failed ({exc}); the next sync tries again",
                      file=sys.stderr, flush=True)

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tool_list(service, allow_write))

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        client = _client(ctx)
        out, error = await anyio.to_thread.run_sync(call, service, params.name, params.arguments, client,
                                                    allow_write)
        if error is not None:
            return types.CallToolResult(content=[types.TextContent(text=error)], is_error=True)
        return types.CallToolResult(content=[types.TextContent(text=render(params.name, out))],
                                    structured_content=out)

    async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        prompts = [types.Prompt(name=RECALL_PROMPT_NAME, description=RECALL_PROMPT_DESCRIPTION, arguments=[
            types.PromptArgument(name="message", description="the user's message", required=True)])]
        if allow_write:
            prompts.append(types.Prompt(name=FLUSH_PROMPT_NAME, description=FLUSH_PROMPT_DESCRIPTION))
        return types.ListPromptsResult(prompts=prompts)

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        from mcp.shared.exceptions import MCPError

        if params.name == RECALL_PROMPT_NAME:
            message = (params.arguments or {}).get("message")
            if not isinstance(message, str) or not message.strip():
                raise MCPError(types.INVALID_PARAMS, "the recall prompt needs a non-empty 'message' argument")
            got, error = await anyio.to_thread.run_sync(guarded, lambda: {"block": recall(service, message)})
            if error is not None:
                raise MCPError(types.INTERNAL_ERROR, error)
            block = got["block"]
            return types.GetPromptResult(description=RECALL_PROMPT_DESCRIPTION, messages=[
                types.PromptMessage(role="user", content=types.TextContent(text=block))] if block else [])
        if params.name != FLUSH_PROMPT_NAME or not allow_write:
            raise MCPError(types.INVALID_PARAMS, f"unknown prompt {params.name!r}")
        return types.GetPromptResult(description=FLUSH_PROMPT_DESCRIPTION, messages=[
            types.PromptMessage(role="user", content=types.TextContent(text=FLUSH_PROMPT))])

    return Server(SERVER_NAME, version=_version(), instructions=SEARCH_TEXT, on_list_tools=list_tools,
                  on_call_tool=call_tool, on_list_prompts=list_prompts, on_get_prompt=get_prompt)


RECALL_PROMPT_NAME = "recall"
RECALL_PROMPT_DESCRIPTION = ("Memories relevant to a message, as a context block with path#line citations to put "
                             "before it; no messages at all when nothing relevant is in memory or the message is "
                             "chat that asks nothing (thanks, ok).")


def recall(service: MemoryService, message: str) -> str:
    """The ``recall`` prompt's context block (``""``: nothing relevant) from the served index."""
    service.refresh()
    block = tools_recall(service.index, message)
    rules = service.interim  # a re-index for stricter redaction still runs: the old index's text, redacted now
    return rules.redact(block) if rules is not None and block else block


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("hybridmem")
    except Exception:  # noqa: BLE001 - a source checkout has no installed metadata
        return "0"


async def serve_stdio(service: MemoryService, allow_write: bool = False) -> None:
    """Serve over stdin/stdout until the client closes them."""
    from mcp.server.stdio import stdio_server

    server = build_server(service, allow_write)
    async with stdio_server() as (read, write):
        send, received = anyio.create_memory_object_stream[Any](0)

        async def pump() -> None:
            from mcp.shared.message import SessionMessage

            async with send:
                async for item in read:
                    item = _reparsed(item)
                    if isinstance(item, Exception):  # the SDK hands the server what it could not read, unanswered
                        await write.send(SessionMessage(refusal(item)))
                    else:
                        await send.send(item)

        async with anyio.create_task_group() as tg:
            tg.start_soon(pump)
            await server.run(received, write, server.create_initialization_options())
            tg.cancel_scope.cancel()


# a surrogate pair, a lone surrogate (group 1), or any other escape (so an escaped backslash before "ud800" is text)
_ESCAPE = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
                     r"|(\\u[dD][89a-fA-F][0-9a-fA-F]{2})|\\.")


def lone_surrogates_replaced(raw: str) -> str:
    r"""JSON text with each lone surrogate escape (``\ud83d`` with no low half) made ``\ufffd``.

    Example:
        >>> lone_surrogates_replaced(r'"a \ud83d b \ud83d\ude00 \\ud800"')
        '"a \\ufffd b \\ud83d\\ude00 \\\\ud800"'
    """
    return _ESCAPE.sub(lambda m: "\\ufffd" if m.group(1) else m.group(0), raw)


def refusal(exc: Exception) -> types.JSONRPCError:
    """The JSON-RPC error a stdio message the SDK could not read gets (over HTTP the SDK answers 400 itself): a parse
    error for text that is not JSON, an invalid request for JSON that is not a JSON-RPC 2.0 message (or nested
    deeper than the SDK's parser reads), with the request's id where one can be read, so its client stops waiting.

    Example:
        >>> from pydantic import ValidationError
        >>> try:
        ...     types.jsonrpc_message_adapter.validate_json('{"jsonrpc": "2.0", "id": 7, "method": 5}')
        ... except ValidationError as exc:
        ...     r = refusal(exc)
        >>> r.id, r.error.code, r.error.message
        (7, -32600, 'Invalid request: not a JSON-RPC 2.0 request, notification or response')
    """
    from pydantic import ValidationError

    errors = exc.errors() if isinstance(exc, ValidationError) else []
    whole: Any = next((e.get("input") for e in errors if isinstance(e.get("input"), dict)), None)
    code, why = -32600, "Invalid request: not a JSON-RPC 2.0 request, notification or response"  # INVALID_REQUEST
    if not errors or errors[0]["type"] == "json_invalid":
        try:
            whole = json.loads(errors[0]["input"]) if errors else None
            why = f"Invalid request: {errors[0]['msg']}" if errors else f"Invalid request: {type(exc).__name__}"
        except (TypeError, ValueError, RecursionError):
            code, why = -32700, "Parse error: the message is not valid JSON"  # PARSE_ERROR
    got = whole.get("id") if isinstance(whole, dict) else None
    ident = got if isinstance(got, (str, int)) and not isinstance(got, bool) else None
    return types.JSONRPCError(jsonrpc="2.0", id=ident, error=types.ErrorData(code=code, message=why))


def _reparsed(item: Any) -> Any:
    """A stdio message the SDK's parser refused for a lone surrogate escape (a host cut a string inside an emoji),
    parsed again with U+FFFD in its place: over stdio a refused message gets no reply at all, and its client waits
    for ever. Anything else as it came."""
    from pydantic import ValidationError

    if not isinstance(item, ValidationError) or item.errors()[0]["type"] != "json_invalid":
        return item
    raw = item.errors()[0].get("input")
    fixed = lone_surrogates_replaced(raw) if isinstance(raw, str) else raw
    if fixed == raw:
        return item
    from mcp.shared.message import SessionMessage

    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(fixed, by_name=False))
    except ValidationError:
        return item
