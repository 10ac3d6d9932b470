"""What a second pair of eyes found on the MCP server (2026-12-07): messages over stdio that got no reply at all, two
settings edits in a row that left the older one served, transcripts served after they were switched off, settings
a reload applied or swallowed that a start refuses, huge arguments echoed back or reported as an outage, secrets in
the query log's arguments, and HTTP connections a slow client held open for ever. Each test fails before its fix."""

from __future__ import annotations

import json
import re
import select
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from hybridmem.serve.service import MemoryService
from test_mcp import ENV, LAUNCH, _workspace


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    ws = _workspace(tmp_path)
    (ws / "hybridmem.toml").write_text('[embedding]\nprovider = "none"\n', encoding="utf-8")
    return ws


def test_a_stdio_message_the_sdk_cannot_read_gets_an_error_reply_with_its_id(ws: Path) -> None:
    """The SDK's stdio transport handed the server what it could not parse, and the server answered nothing: the
    client waited for ever (over HTTP the SDK answers 400)."""
    proc = subprocess.Popen([sys.executable, "-c", LAUNCH, "mcp", str(ws), "--keyword-only", "--no-watch"], env=ENV,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None

    def ask(line: str) -> dict[str, Any]:
        proc.stdin.write(line.encode() + b"\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        ready, _, _ = select.select([proc.stdout], [], [], 20)
        assert ready, f"no reply to {line[:60]}"
        return json.loads(proc.stdout.readline())  # type: ignore[union-attr]

    try:
        ask('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
            '"capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}')
        proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        deep = "[" * 200 + "]" * 200
        cases = [('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"memory_s', None, -32700),
                 ('{"jsonrpc":"2.0","id":3,"method":5}', 3, -32600),
                 ('[1, 2]', None, -32600),
                 ('{"jsonrpc":"1.0","id":"four","method":"ping"}', "four", -32600),
                 ('{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"memory_search","arguments":'
                  f'{{"query":"x","session":{deep}}}}}}}', 5, -32600)]
        for line, ident, code in cases:
            reply = ask(line)
            assert (reply["id"], reply["error"]["code"]) == (ident, code), reply
            assert reply["error"]["message"].startswith(("Parse error", "Invalid request")), reply
        assert ask('{"jsonrpc":"2.0","id":6,"method":"ping"}') == {"jsonrpc": "2.0", "id": 6, "result": {}}
    finally:
        proc.stdin.close()
        proc.wait(30)


def test_of_two_settings_edits_in_a_row_the_later_is_served_whichever_index_is_built_first(ws: Path,
                                                                                            monkeypatch) -> None:
    """Each content-changing edit starts a re-index in the background; the one that finished last was served, the
    older edit's when it was slower, and the watcher it started was never stopped."""
    settings = ws / "hybridmem.toml"
    with MemoryService(ws, keyword_only=True, watch=False, preload=False) as service:
        started: list[tuple[Any, tuple[Any, ...]]] = []
        monkeypatch.setattr(service, "_background", lambda target, *args, name: started.append((target, args)))
        for tokens in (50, 100):
            settings.write_text(f'[embedding]\nprovider = "none"\n[chunking]\ntokens = {tokens}\noverlap = 10\n',
                                encoding="utf-8")
            service.refresh()
        assert len(started) == 2
        (replace_a, args_a), (replace_b, args_b) = started
        replace_b(*args_b)  # the later edit's index is built first
        assert service.index.settings.chunking.tokens == 100
        replace_a(*args_a)  # the earlier edit's, superseded, ends last
        assert service.index.settings.chunking.tokens == 100 and service.settings_error is None


def test_transcripts_switched_off_leave_the_results_at_once(ws: Path) -> None:
    """The watcher's debounce left the transcripts served for about 1.5 s after `session_paths = []`."""
    with MemoryService(ws, keyword_only=True, watch=True, preload=False) as service:
        assert any(h["path"].startswith("sessions/") for h in
                   service.search("SPKI cert renewal", source="sessions", answer_threshold=0)["results"])
        (ws / "hybridmem.toml").write_text('[embedding]\nprovider = "none"\n[sources]\nsession_paths = []\n',
                                           encoding="utf-8")
        hits = service.search("SPKI cert renewal", answer_threshold=0)["results"]
        assert hits and not [h for h in hits if h["path"].startswith("sessions/")]


@pytest.mark.parametrize("toml, why", [
    ('[ranking]\nfusion = "nope"\n', "unknown fusion ranking.fusion='nope'"),
    ('[sources]\nredact_patterns = ["a{99999999999}"]\n', "the repetition number is too large"),
])
def test_a_settings_edit_a_start_would_refuse_is_not_applied_and_is_reported(ws: Path, toml: str, why: str) -> None:
    """A fusion name rank() does not know was applied (every search then failed) and a pattern that overflows the
    regular-expression compiler was swallowed after one failing call; both are refused at start."""
    with MemoryService(ws, keyword_only=True, watch=False, preload=False) as service:
        (ws / "hybridmem.toml").write_text('[embedding]\nprovider = "none"\n' + toml, encoding="utf-8")
        for _ in range(2):
            assert service.search("payment retry", answer_threshold=0)["results"]
            assert why in (service.status()["settings_error"] or "")


def test_the_query_log_redacts_secrets_in_every_argument(ws: Path) -> None:
    secret = "ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5A"
    with MemoryService(ws, keyword_only=True, watch=False, preload=False) as service:
        service.search("payment retry", session=secret)
        service.search("payment retry", path_prefix=f"memory/{secret}")
    log = (ws / ".hybridmem" / "query-log.jsonl").read_text(encoding="utf-8")
    assert secret not in log and log.count("[REDACTED]") >= 2


def test_a_session_name_too_long_for_the_file_system_is_no_outage(ws: Path) -> None:
    """`Path.is_file()` raised ENAMETOOLONG, reported as "memory is unavailable" with the server's path in it."""
    from hybridmem.serve.service import guarded

    with MemoryService(ws, keyword_only=True, watch=False, preload=False) as service:
        out, error = guarded(service.search, "payment", session="a" * 300)
    assert error is None and out["results"] == []


def test_a_request_that_does_not_arrive_whole_in_time_is_dropped(ws: Path) -> None:
    """uvicorn held a connection that sent nothing, half a head, or a head without its body for ever, token or not:
    300 of them ran a server out of descriptors. `serve.request_timeout_s` closes each; a whole request is served."""
    (ws / "hybridmem.toml").write_text('[embedding]\nprovider = "none"\n[serve]\nrequest_timeout_s = 1\n',
                                       encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-c", LAUNCH, "mcp", str(ws), "--http", "127.0.0.1:0", "--no-watch"],
                            env=ENV, stderr=subprocess.PIPE, text=True)
    try:
        port = int(re.search(r":(\d+)/mcp", proc.stderr.readline()).group(1))  # type: ignore[union-attr]
        silent = socket.create_connection(("127.0.0.1", port))
        half = socket.create_connection(("127.0.0.1", port))
        half.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        bodiless = socket.create_connection(("127.0.0.1", port))
        bodiless.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 100\r\n\r\n{")
        time.sleep(2.5)
        for s in (silent, half, bodiless):
            s.settimeout(5)
            assert s.recv(100) == b""  # closed by the server
        whole = socket.create_connection(("127.0.0.1", port))
        whole.sendall(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        whole.settimeout(10)
        assert whole.recv(100).startswith(b"HTTP/1.1 ")  # answered (401 without the token, 4xx or 2xx with)
    finally:
        proc.terminate()
        proc.wait(20)


def test_a_settings_edit_reverted_before_its_re_index_ends_is_not_served(ws: Path, monkeypatch) -> None:
    """The revert applied in place on the old index, so the re-index of the edit stayed "the latest" and was served
    once it ended: the file named the defaults, the server served the edit."""
    settings = ws / "hybridmem.toml"
    default = settings.read_text(encoding="utf-8")
    with MemoryService(ws, keyword_only=True, watch=False, preload=False) as service:
        tokens = service.index.settings.chunking.tokens
        started: list[tuple[Any, tuple[Any, ...]]] = []
        monkeypatch.setattr(service, "_background", lambda target, *args, name: started.append((target, args)))
        settings.write_text(default + "[chunking]\ntokens = 50\noverlap = 10\n", encoding="utf-8")
        service.refresh()
        settings.write_text(default + "\n", encoding="utf-8")  # the edit undone (another size: a change to see)
        service.refresh()
        (replace, args), = started
        replace(*args)
        assert service.index.settings.chunking.tokens == tokens != 50


def test_a_slow_reply_to_a_request_that_closes_its_connection_is_not_cut() -> None:
    """h11 reads a request sent with `Connection: close` (urllib's default) as MUST_CLOSE, never DONE: the request
    timeout took it for unfinished and closed the connection in the middle of the reply."""
    import asyncio
    import threading

    import uvicorn

    from hybridmem.serve.http import _timed_protocol, listen_socket

    async def slow(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        for part in (b"one ", b"two ", b"three"):
            await asyncio.sleep(0.6)  # 1.8 s in all, past the 1 s limit
            await send({"type": "http.response.body", "body": part, "more_body": part != b"three"})

    sock = listen_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(slow, log_level="warning", http=_timed_protocol(1.0), ws="none",
                                           lifespan="off"))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    try:
        for connection in (b"close", b"keep-alive"):
            client = socket.create_connection(("127.0.0.1", port), timeout=10)
            client.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: " + connection + b"\r\n\r\n")
            got = b""
            while not got.endswith(b"0\r\n\r\n") and (chunk := client.recv(1000)):  # the chunked body's end
                got += chunk
            client.close()
            assert got.startswith(b"HTTP/1.1 200") and b"three\r\n0\r\n\r\n" in got, got
    finally:
        server.should_exit = True
        thread.join(10)


def test_a_redaction_pattern_added_while_serving_applies_before_the_re_index_ends(ws: Path, monkeypatch) -> None:
    """A pattern added to sources.redact_patterns re-indexes in the background; meanwhile the old index, built
    without it, served the secret in search snippets and memory_get."""
    secret = "zebra-7731-quokka"
    (ws / "memory" / "vault.md").write_text(f"# Vault\n\nThe locker code is {secret}.\n", encoding="utf-8")
    with MemoryService(ws, keyword_only=True, watch=False, preload=False) as service:
        service.index.sync()
        assert secret in service.get("memory/vault.md")["text"]
        started: list[Any] = []
        monkeypatch.setattr(service, "_background", lambda target, *args, name: started.append((target, args)))
        (ws / "hybridmem.toml").write_text('[embedding]\nprovider = "none"\n[sources]\n'
                                           'redact_patterns = ["zebra-\\\\d+-quokka"]\n', encoding="utf-8")
        hits = service.search("locker code", answer_threshold=0)["results"]
        assert started and hits and all(secret not in h["snippet"] for h in hits)
        assert any("[REDACTED]" in h["snippet"] for h in hits)
        assert secret not in service.get("memory/vault.md")["text"]
        (replace, args), = started
        replace(*args)  # the re-index ends: its own text is redacted, and nothing is passed through twice
        assert service.interim is None and secret not in service.get("memory/vault.md")["text"]


def test_a_secret_the_query_cap_cuts_in_two_is_not_logged_in_part(ws: Path) -> None:
    """The log redacted the query as searched, cut to tokenizer.max_query_chars: a token the cut split in two matched
    no rule, and its first characters were logged."""
    secret = "ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5A"
    query = "x " * 994 + f"token {secret}"  # the cut (2,000 characters) falls inside the token
    with MemoryService(ws, keyword_only=True, watch=False, preload=False) as service:
        out = service.search(query)
    assert len(out["query"]) < len(query)
    logged = json.loads((ws / ".hybridmem" / "query-log.jsonl").read_text(encoding="utf-8").splitlines()[-1])
    assert "ghp_" not in logged["query"] and logged["query"].endswith("token [REDAC")
