"""``hybridmem mcp``: the real server as a subprocess, driven by the ``mcp`` SDK's own client over stdio and over
Streamable HTTP, on a keyword-only copy of the demo workspace (the model is not the point here)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx2 as httpx
import pytest

pytest.importorskip("mcp")
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from hybridmem.config import Settings  # noqa: E402
from hybridmem.index import MemoryIndex  # noqa: E402
from hybridmem.querylog import log_path, read_log  # noqa: E402
from hybridmem.serve.service import MemoryService  # noqa: E402
from hybridmem.tools import NOTHING_FOUND  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "datasets" / "demo-memory" / "workspace"
LAUNCH = "import sys; from hybridmem.cli import main; sys.exit(main())"
ENV = {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
       "HYBRIDMEM_CACHE_DIR": os.environ["HYBRIDMEM_CACHE_DIR"]}  # never the real user cache (conftest.py)
FILE = "memory/2026-10-02.md"


def _workspace(tmp: Path) -> Path:
    ws = tmp / "ws"
    shutil.copytree(DEMO, ws, ignore=shutil.ignore_patterns(".hybridmem"))
    with MemoryIndex(ws, settings=Settings().override(embedding={"provider": "none"})) as idx:
        idx.sync()
    return ws


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    return _workspace(tmp_path)


def _args(ws: Path, *extra: str) -> list[str]:
    return ["-c", LAUNCH, "mcp", str(ws), "--keyword-only", "--debounce", "0.3", *extra]


def _stdio(ws: Path, *extra: str) -> Client:
    return Client(StdioServerParameters(command=sys.executable, args=_args(ws, *extra), env=ENV))


class HttpServer:
    """``hybridmem mcp --http 127.0.0.1:0`` in a subprocess; ``url`` once it listens."""

    def __init__(self, ws: Path, *extra: str, env: dict[str, str] | None = None, bind: str = "127.0.0.1:0") -> None:
        self.proc = subprocess.Popen([sys.executable, *_args(ws, "--http", bind, *extra)],
                                     env={**ENV, **(env or {})}, stderr=subprocess.PIPE, text=True)
        line = self.proc.stderr.readline()
        m = re.search(r"http://([\d.]+):(\d+)/mcp", line)
        assert m, f"server did not start: {line}{self.proc.stderr.read() if self.proc.poll() is not None else ''}"
        self.port = int(m.group(2))
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        threading.Thread(target=self.proc.stderr.read, daemon=True).start()  # drain

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=20)


@pytest.fixture()
def http_server(ws: Path):
    server = HttpServer(ws)
    yield server
    server.close()


async def _session_checks(client: Client, ws: Path) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == {"memory_search", "memory_get", "memory_status"}
    for t in tools.values():
        assert t.annotations.read_only_hint is True and t.annotations.idempotent_hint is True
        assert t.output_schema["type"] == "object" and len(t.description) < 250
    assert set(tools["memory_search"].input_schema["properties"]) == {
        "query", "max_results", "min_score", "answer_threshold", "source", "session", "path_prefix"}
    assert tools["memory_search"].input_schema["properties"]["answer_threshold"]["default"] == 0.07
    assert set(tools["memory_get"].input_schema["properties"]) == {"path", "from", "lines"}

    r = await client.call_tool("memory_search", {"query": "retry backoff payment_processor", "max_results": 3})
    assert not r.is_error
    hits = r.structured_content["results"]
    assert hits[0]["citation"] == f"{FILE}#L1-L26" and len(hits) <= 3
    assert re.match(rf"{re.escape(FILE)}#L1-L26 \(score 0\.\d\d\)", r.content[0].text)  # calibrated: below 1

    # the answer gate refuses (one sentence, naming the way past it); answer_threshold 0 lists the nearest notes
    r = await client.call_tool("memory_search", {"query": "tiramisu recipe with mascarpone"})
    assert not r.is_error and r.structured_content["results"] == []
    assert "under its threshold of 0.07 (an answer threshold of 0 lists the nearest notes anyway)." in r.content[0].text
    r = await client.call_tool("memory_search", {"query": "tiramisu recipe with mascarpone", "answerThreshold": 0})
    assert not r.is_error and r.structured_content["results"][0]["path"] == "memory/topics/recipes.md"

    r = await client.call_tool("memory_get", {"path": FILE, "from": 3, "lines": 2})
    assert not r.is_error
    lines = (ws / FILE).read_text(encoding="utf-8").splitlines()
    assert r.structured_content["text"] == "\n".join(lines[2:4]) == r.content[0].text
    assert r.structured_content["from"] == 3 and r.structured_content["lines"] == 2

    for bad, expected in [
        (("memory_get", {"path": "../../etc/passwd"}), "path escapes the memory root: '../../etc/passwd'."),
        (("memory_get", {"path": "/etc/passwd"}), "absolute paths are refused"),
        (("memory_search", {"query": "x", "max_results": "many"}), "max_results must be an integer, got 'many'."),
        (("memory_search", {"query": "x", "source": "web"}), "source must be one of 'memory', 'sessions'"),
        (("memory_search", {"query": "x", "answer_threshold": 2}), "answer_threshold must be from 0 up to (not "
                                                                   "including) 1, got 2."),
        (("memory_search", {}), "query is required (a string)."),
        (("memory_search", {"query": "x", "colour": 1}), "unknown argument(s): colour"),
        (("memory_nope", {}), "Unknown tool 'memory_nope'."),
    ]:
        r = await client.call_tool(*bad)
        assert r.is_error, bad
        assert expected in r.content[0].text, (bad, r.content[0].text)
        assert r.content[0].text.count(". ") == 0 or "e.g." in r.content[0].text  # one sentence

    r = await client.call_tool("memory_status", {})
    st = r.structured_content
    assert (st["files"], st["chunks"], st["sync_running"], st["provider"]) == (46, 65, False, "none")
    assert st["changed_on_disk"] == 0 and st["dirty"] is False


def test_stdio_session(ws: Path) -> None:
    async def main() -> None:
        async with _stdio(ws) as client:
            await _session_checks(client, ws)

    asyncio.run(main())


def test_http_session(ws: Path, http_server: HttpServer) -> None:
    async def main() -> None:
        async with Client(http_server.url) as client:
            await _session_checks(client, ws)

    asyncio.run(main())


def test_bench_raw_http_client_speaks_to_the_server(http_server: HttpServer) -> None:
    from hybridmem.bench.serving import _raw_http_round_trips

    samples = asyncio.run(_raw_http_round_trips(http_server.url, 3))
    assert len(samples) == 3 and all(s > 0 for s in samples)


def test_http_checks_origin_and_host(http_server: HttpServer) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    evil = httpx.post(http_server.url, json=body, headers={**headers, "origin": "http://evil.example"})
    assert evil.status_code == 403
    rebinding = httpx.post(http_server.url, json=body, headers={**headers, "host": f"evil.example:{http_server.port}"})
    assert rebinding.status_code == 421
    local = httpx.post(http_server.url, json=body, headers={**headers, "origin": f"http://localhost:{http_server.port}"})
    assert local.status_code not in (403, 421)


def test_non_loopback_bind_without_token_is_refused(ws: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", LAUNCH, "mcp", str(ws), "--keyword-only", "--http", "0.0.0.0:0"],
                          env=ENV, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "refusing to serve memory on 0.0.0.0 without a bearer token" in proc.stderr


def test_http_alone_serves_where_the_settings_say(ws: Path) -> None:
    """``--http`` without a value binds ``serve.http_host``:``serve.http_port`` of the workspace's settings."""
    (ws / "hybridmem.toml").write_text('[serve]\nhttp_host = "0.0.0.0"\nhttp_port = 0\n', encoding="utf-8")
    proc = subprocess.run([sys.executable, *_args(ws, "--http")], env=ENV, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "refusing to serve memory on 0.0.0.0 without a bearer token" in proc.stderr
    (ws / "hybridmem.toml").write_text("[serve]\nhttp_port = 0\n", encoding="utf-8")
    server = HttpServer(ws, bind="")  # "--http" "" reads as --http alone
    try:
        async def main() -> set[str]:
            async with Client(server.url) as client:
                return {t.name for t in (await client.list_tools()).tools}

        assert asyncio.run(main()) == {"memory_search", "memory_get", "memory_status"}
    finally:
        server.close()


def test_token_is_required_when_set(ws: Path) -> None:
    server = HttpServer(ws, "--token", "s3cret-token")
    try:
        r = httpx.post(server.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert r.status_code == 401

        async def main() -> None:
            auth = httpx.AsyncClient(headers={"authorization": "Bearer s3cret-token"})
            from mcp.client.streamable_http import streamable_http_client

            async with auth, Client(streamable_http_client(server.url, http_client=auth)) as client:
                r = await client.call_tool("memory_search", {"query": "retry backoff"})
                assert not r.is_error and r.structured_content["results"]

        asyncio.run(main())
    finally:
        server.close()


def test_remote_http_by_ip_with_a_token(ws: Path) -> None:
    """Bound to 0.0.0.0 on port 0 with a token: reached by one of the machine's addresses (127.0.0.2 stands for the
    LAN address here) through the SDK client, and by an --allow-host name; an unknown Host is still refused (DNS
    rebinding), and the auth scheme is case-insensitive (issue #23, 8: every IP got 421, and port 0 was recorded as
    the allowed port)."""
    server = HttpServer(ws, "--token", "s3cret-token", "--allow-host", "mem.example.org", bind="0.0.0.0:0")
    url = f"http://127.0.0.2:{server.port}/mcp"
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
               "authorization": "Bearer s3cret-token"}
    try:
        async def search(scheme: str) -> dict:
            auth = httpx.AsyncClient(headers={"authorization": f"{scheme} s3cret-token"})
            from mcp.client.streamable_http import streamable_http_client

            async with auth, Client(streamable_http_client(url, http_client=auth)) as client:
                r = await client.call_tool("memory_search", {"query": "retry backoff payment_processor"})
                assert not r.is_error
                return r.structured_content

        for scheme in ("Bearer", "bearer", "BEARER"):
            assert asyncio.run(search(scheme))["results"][0]["citation"] == f"{FILE}#L1-L26", scheme
        for host, refused in [(f"evil.example:{server.port}", True), (f"192.0.2.1:{server.port}", True),
                              ("mem.example.org:1", True), (f"mem.example.org:{server.port}", False),
                              (f"MEM.example.org:{server.port}", False), (f"127.0.0.2:{server.port}", False)]:
            r = httpx.post(url, json=ping, headers={**headers, "host": host})  # passing: the SDK's own 400 or 200
            assert (r.status_code == 421) is refused and r.status_code not in (401, 403), (host, r.status_code)
        r = httpx.post(url, json=ping, headers={**headers, "origin": "http://evil.example"})
        assert r.status_code == 403
        r = httpx.post(url, json=ping, headers={**headers, "authorization": "Basic s3cret-token"})
        assert r.status_code == 401
    finally:
        server.close()


def test_log_records_searches_and_the_get_that_followed(ws: Path) -> None:
    async def main() -> None:
        async with _stdio(ws) as client:
            await client.call_tool("memory_search", {"query": "tokyo design review", "max_results": 2})
            r = await client.call_tool("memory_search", {"query": "retry backoff with api key "
                                                         "sk-proj-AbCdEf0123456789AbCdEf0123456789AbCdEf01",
                                                         "min_score": 0})
            first = r.structured_content["results"][0]
            await client.call_tool("memory_get", {"path": first["path"], "from": 1, "lines": 5})

    asyncio.run(main())
    records = read_log(log_path(ws))
    assert [r["type"] for r in records] == ["search", "search", "get"]
    s1, s2, get = records
    assert s1["query"] == "tokyo design review" and s1["args"] == {"max_results": 2}
    assert "sk-proj-AbCdEf0123456789" not in json.dumps(records) and s2["query"].startswith("retry backoff with")
    assert s2["results"][0]["citation"].startswith(get["path"] + "#L")
    assert (get["after"], get["rank"], get["from"], get["lines"]) == (s2["id"], 1, 1, 5)
    assert s1["client"] == s2["client"] == get["client"] and len(s1["ranking_hash"]) == 16


def test_settings_change_applies_on_the_next_call(ws: Path) -> None:
    with MemoryService(ws, keyword_only=True, watch=False, preload=False) as svc:
        assert len(svc.search("payment retry")["results"]) == 6
        (ws / "hybridmem.toml").write_text("[ranking]\nmax_results = 2\n", encoding="utf-8")
        assert len(svc.search("payment retry")["results"]) == 2
        (ws / "hybridmem.toml").write_text("[ranking\nbroken", encoding="utf-8")
        assert len(svc.search("payment retry")["results"]) == 2  # the last good settings keep serving
        assert "hybridmem.toml not applied" in svc.status()["settings_error"]


def test_search_does_not_wait_for_a_running_sync(ws: Path) -> None:
    with MemoryService(ws, keyword_only=True, watch=False, preload=False) as svc:
        gate = threading.Event()
        real = svc.index.syncer.sync

        def slow_sync(*a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
            gate.wait(10)
            return real(*a, **k)

        svc.index.syncer.sync = slow_sync
        svc.index.dirty = True
        t = threading.Thread(target=svc.index.sync)
        t.start()
        time.sleep(0.1)
        t0 = time.perf_counter()
        assert svc.search("retry backoff")["results"]
        assert time.perf_counter() - t0 < 2.0
        gate.set()
        t.join()


def test_a_search_waits_for_the_loading_model_up_to_model_wait_s(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hybridmem.serve.service import LOADING_REASON

    gate = threading.Event()
    monkeypatch.setattr(MemoryService, "_load_model", lambda self, index: gate.wait(30) and self._model_ready.set())
    (ws / "hybridmem.toml").write_text("[serve]\nmodel_wait_s = 0.2\n", encoding="utf-8")
    with MemoryService(ws, keyword_only=True, watch=False) as svc:
        t0 = time.perf_counter()
        out = svc.search("retry backoff")
        assert time.perf_counter() - t0 >= 0.2  # it waited (Event.wait never returns early)
        assert out["fallback"] and out["fallback_reason"] == LOADING_REASON and out["results"]
        (ws / "hybridmem.toml").write_text("[serve]\nmodel_wait_s = 30\n", encoding="utf-8")
        threading.Timer(0.3, gate.set).start()
        out = svc.search("retry backoff")  # the model arrives while this search waits: no keyword-only answer
        assert out.get("fallback_reason") != LOADING_REASON and out["results"]


@pytest.mark.slow
def test_the_first_search_of_a_fresh_server_waits_for_the_token_alignment(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The answer gate's token alignment loads after the model (its encoder session, about a second). A server's first
    search went without it, and its gate answered "what is the capital of Australia?" from an unrelated note that
    every later search refused. A search now waits for it up to ``serve.alignment_wait_s``, then goes without."""
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "buero.md").write_text(
        "# Büro\n\n- Der Schlüssel für den Serverraum liegt bei Frau Becker im dritten Stock.\n", encoding="utf-8")
    from hybridmem.embeddings.e5 import E5Embedder

    gate = threading.Event()
    load = E5Embedder._load_fast

    def slow_load(self: E5Embedder, *args: object) -> object:  # the server's warm-up loads the session slowly
        if threading.current_thread().name == "hybridmem-model":
            gate.wait(30)
        return load(self, *args)

    monkeypatch.setattr(E5Embedder, "_load_fast", slow_load)
    (ws / "hybridmem.toml").write_text("[serve]\nalignment_wait_s = 0.3\n", encoding="utf-8")
    with MemoryService(ws, watch=False) as svc:
        t0 = time.perf_counter()
        out = svc.search("who has the key to the server room?")
        assert time.perf_counter() - t0 >= 0.3 and "align" not in out["timings_ms"]  # waited, then went without
        assert out["results"] and not out["fallback"]
        (ws / "hybridmem.toml").write_text("[serve]\nalignment_wait_s = 30\n", encoding="utf-8")
        threading.Timer(0.3, gate.set).start()
        out = svc.search("who has the key to the server room?")  # the alignment arrives while this one waits
        assert "align" in out["timings_ms"] and out["results"][0]["path"] == "memory/buero.md"
    monkeypatch.setattr(E5Embedder, "_load_fast", load)
    with MemoryService(ws, watch=False) as svc:  # the real load, asked at once: the first search reads it
        assert "align" in svc.search("who has the key to the server room?")["timings_ms"]


def test_close_waits_for_the_model_still_loading(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server told to stop while its model loads lets the load finish before it closes the index (a process that
    exits while ONNX Runtime builds a session aborts)."""
    order: list[str] = []
    gate = threading.Event()

    def slow_load(self: MemoryService, index: object) -> None:
        gate.wait(30)
        order.append("loaded")
        self._model_ready.set()

    monkeypatch.setattr(MemoryService, "_load_model", slow_load)
    svc = MemoryService(ws, keyword_only=True, watch=False)
    close_index = svc.index.close
    monkeypatch.setattr(svc.index, "close", lambda: (order.append("index closed"), close_index()))
    threading.Timer(0.3, gate.set).start()
    svc.close()
    assert order == ["loaded", "index closed"]


def test_close_waits_for_a_reindex_after_a_settings_change(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same for the re-index a content setting starts in the background (it embeds on that thread)."""
    order: list[str] = []
    gate = threading.Event()

    def slow_replace(self: MemoryService, new: MemoryIndex, rebuild: int) -> None:
        gate.wait(30)
        order.append("re-indexed")
        new.close()

    monkeypatch.setattr(MemoryService, "_replace", slow_replace)
    svc = MemoryService(ws, keyword_only=True, watch=False, preload=False)
    close_index = svc.index.close
    monkeypatch.setattr(svc.index, "close", lambda: (order.append("index closed"), close_index()))
    (ws / "hybridmem.toml").write_text("[chunking]\ntokens = 120\n", encoding="utf-8")
    svc.refresh()  # chunking changes what the index holds: a new index is built in the background
    threading.Timer(0.3, gate.set).start()
    svc.close()
    assert order == ["re-indexed", "index closed"]


@pytest.mark.slow
def test_closing_right_after_start_with_the_default_model(tmp_path: Path) -> None:
    """The real load (e5 and the token alignment's session): closed at once, no loader thread outlives close(), and
    a process doing the same exits cleanly (it aborted with SIGABRT in about 1 run in 7 before close() waited)."""
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "a.md").write_text("# Notes\n\nThe motorbike got new brake pads in Hanoi in May.\n")
    svc = MemoryService(ws, watch=False)
    svc.close()
    assert not [t for t in threading.enumerate() if t.name == "hybridmem-model" and t.is_alive()]
    code = ("import sys; from hybridmem.serve.service import MemoryService; "
            "MemoryService(sys.argv[1], watch=False).close()")
    for _ in range(3):
        proc = subprocess.run([sys.executable, "-c", code, str(ws)], env=ENV, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr[-500:]


@pytest.mark.slow
def test_concurrent_http_clients_while_files_change(ws: Path, http_server: HttpServer) -> None:
    """8 clients x 50 searches over HTTP while another process edits memory files; then a fresh edit is findable
    within the debounce (0.3 s) plus one second."""
    stop = threading.Event()
    editor = subprocess.Popen([sys.executable, "-c", (
        "import sys, time, pathlib\n"
        "p = pathlib.Path(sys.argv[1]) / 'memory' / 'churn.md'\n"
        "i = 0\n"
        "while not pathlib.Path(sys.argv[2]).exists():\n"
        "    p.write_text(f'# churn\\n\\nedit number {i} about payment retries\\n'); i += 1; time.sleep(0.05)\n"
    ), str(ws), str(ws / ".stop")])

    async def client(n: int) -> int:
        async with Client(http_server.url) as c:
            errors = 0
            for i in range(50):
                r = await c.call_tool("memory_search", {"query": f"payment retry {i % 7}", "max_results": 3})
                errors += r.is_error or not r.structured_content["results"]
            return errors

    async def main() -> list[int]:
        return await asyncio.gather(*(client(n) for n in range(8)))

    try:
        assert asyncio.run(main()) == [0] * 8
    finally:
        (ws / ".stop").write_text("")
        editor.wait(timeout=20)
        stop.set()

    async def findable() -> float:
        async with Client(http_server.url) as c:
            (ws / "memory" / "fresh.md").write_text("# fresh\n\nThe zeppelin hangar code is kumquat.\n")
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < 5:
                r = await c.call_tool("memory_search", {"query": "zeppelin kumquat"})
                if any(h["path"] == "memory/fresh.md" for h in r.structured_content["results"]):
                    return time.perf_counter() - t0
                await asyncio.sleep(0.05)
            return float("inf")

    assert asyncio.run(findable()) < 0.3 + 1.0


def test_allow_write_adds_memory_write_and_the_flush_prompt(ws: Path) -> None:
    async def main() -> None:
        async with _stdio(ws) as ro:
            assert "memory_write" not in {t.name for t in (await ro.list_tools()).tools}
        async with _stdio(ws, "--allow-write") as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert tools["memory_write"].annotations.read_only_hint is False
            prompts = (await client.list_prompts()).prompts
            assert [p.name for p in prompts] == ["recall", "memory_flush"]
            flush = await client.get_prompt("memory_flush")
            assert "memory_write" in flush.messages[0].content.text

            r = await client.call_tool("memory_write", {"text": "The zeppelin hangar code is kumquat.",
                                                        "file": "memory/projects/zeppelin.md"})
            assert not r.is_error and r.structured_content == {
                "path": "memory/projects/zeppelin.md", "start_line": 1, "end_line": 1, "bytes": 36, "indexed": True}
            r = await client.call_tool("memory_search", {"query": "zeppelin hangar kumquat"})
            assert r.structured_content["results"][0]["citation"] == "memory/projects/zeppelin.md#L1"
            r = await client.call_tool("memory_write", {"text": "second note", "file": "memory/projects/zeppelin.md"})
            assert (r.structured_content["start_line"], r.structured_content["end_line"]) == (3, 3)
            assert (ws / "memory/projects/zeppelin.md").read_text() == (
                "The zeppelin hangar code is kumquat.\n\nsecond note\n")
            for bad in ("../MEMORY.md", "/tmp/x.md", "memory/../../x.md", "memory/notes.txt"):
                r = await client.call_tool("memory_write", {"text": "x", "file": bad})
                assert r.is_error, bad
            r = await client.call_tool("memory_write", {"text": "today's note"})
            assert re.fullmatch(r"memory/\d{4}-\d{2}-\d{2}\.md", r.structured_content["path"])

    asyncio.run(main())
    assert not (ws.parent / "x.md").exists() and not Path("/tmp/x.md").exists()


def test_recall_prompt_injects_or_stays_quiet(ws: Path) -> None:
    async def main() -> None:
        async with _stdio(ws) as client:
            assert "recall" in {p.name for p in (await client.list_prompts()).prompts}
            quiet = await client.get_prompt("recall", {"message": "who won the 1998 football world cup"})
            assert quiet.messages == []
            got = await client.get_prompt("recall", {"message": "retry backoff"})
            text = got.messages[0].content.text
            assert text.startswith("<memory>") and f"[{FILE}#L" in text and len(text) <= 4000
            r = await client.call_tool("memory_search", {"query": "who won the 1998 football world cup"})
            assert r.structured_content["results"] == [] and r.content[0].text.startswith(NOTHING_FOUND)

    asyncio.run(main())


@pytest.mark.slow
def test_stdio_session_with_the_default_model(tmp_path: Path) -> None:
    """The served default (e5, no torch): a Vietnamese question finds its note through the vector leg, over stdio."""
    ws = tmp_path / "ws"
    shutil.copytree(DEMO, ws, ignore=shutil.ignore_patterns(".hybridmem"))
    subprocess.run([sys.executable, "-c", LAUNCH, "index", str(ws)], env=ENV, check=True, capture_output=True)

    async def main() -> None:
        params = StdioServerParameters(command=sys.executable, args=["-c", LAUNCH, "mcp", str(ws), "--no-watch"],
                                       env=ENV)
        async with Client(params) as client:
            r = await client.call_tool("memory_search", {"query": "công thức phở bò của Mẹ cần những gia vị gì?",
                                                         "max_results": 3})
            assert not r.is_error
            out = r.structured_content
            assert (out["provider"], out["model"], out["fallback"]) == ("e5", "multilingual-e5-small", False)
            assert out["results"][0]["citation"].startswith("memory/topics/recipes.md#")
            assert out["results"][0]["vector_score"] > 0
            st = (await client.call_tool("memory_status", {})).structured_content
            assert (st["provider"], st["chunks"]) == ("e5", 65)

    asyncio.run(main())


def test_a_bare_password_in_a_query_is_redacted_in_the_log_and_prose_is_not(ws: Path) -> None:
    async def main() -> None:
        async with _stdio(ws) as client:
            for q in ("password Tr0ub4dor&3xyzzy", "password reset flow", "the password policy"):
                assert not (await client.call_tool("memory_search", {"query": q})).is_error

    asyncio.run(main())
    logged = [r["query"] for r in read_log(log_path(ws))]
    assert logged == ["password [REDACTED]", "password reset flow", "the password policy"]


def _p95(samples: list[float]) -> float:
    return sorted(samples)[int(0.95 * (len(samples) - 1))]


def test_a_3_mb_query_is_cut_and_does_not_slow_the_small_ones_beside_it(ws: Path, http_server: HttpServer) -> None:
    """Two 3 MB queries (words the redaction rules look at, the costliest kind) from another client process while one
    client runs 30 small searches: the small ones' p95 stays within 2x of theirs alone (plus 25 ms for scheduling on
    2 shared cores; the best of at most 3 rounds, as the cores are shared), and the big ones come back within seconds,
    saying they were cut. Before the cap each 3 MB query took seconds of CPU and the small ones waited behind it."""

    async def small_loop(client: Client, n: int) -> list[float]:
        out = []
        for i in range(n):
            t0 = time.perf_counter()
            r = await client.call_tool("memory_search", {"query": f"payment retry {i % 7}", "max_results": 3})
            out.append((time.perf_counter() - t0) * 1000)
            assert not r.is_error and r.structured_content["results"]
        return out

    heavy_client = (  # another process, as another agent would be: its own encoding of 3 MB never slows this one
        "import asyncio, json, sys, time\n"
        "from mcp import Client\n"
        "big = ('the api key token secret password payment retry ' * 70_000)[:3_000_000]\n"
        "async def go():\n"
        "    async with Client(sys.argv[1]) as c:\n"
        "        print('ready', flush=True)\n"
        "        while sys.stdin.readline():\n"
        "            t0 = time.perf_counter()\n"
        "            rs = await asyncio.gather(*(c.call_tool('memory_search', {'query': big}) for _ in range(2)))\n"
        "            print(json.dumps({'seconds': time.perf_counter() - t0, 'replies': [{'is_error': r.is_error,\n"
        "                'text': r.content[0].text[-200:], 'notice': (r.structured_content or {}).get('notice'),\n"
        "                'query_chars': len((r.structured_content or {}).get('query', ''))} for r in rs]}), flush=True)\n"
        "asyncio.run(go())\n")
    proc = subprocess.Popen([sys.executable, "-c", heavy_client, http_server.url], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=ENV)
    assert proc.stdout.readline().strip() == "ready"  # type: ignore[union-attr]

    async def round_(client: Client) -> tuple[float, float, dict]:
        alone = await small_loop(client, 30)
        proc.stdin.write("go\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        await asyncio.sleep(0.05)
        beside = await small_loop(client, 30)
        heavy = json.loads(await asyncio.to_thread(proc.stdout.readline))  # type: ignore[union-attr]
        return _p95(alone), _p95(beside), heavy

    async def main() -> list[tuple[float, float, dict]]:
        rounds = []
        async with Client(http_server.url) as client:
            await small_loop(client, 5)  # warm
            for _ in range(3):
                rounds.append(await round_(client))
                if rounds[-1][1] <= 2 * rounds[-1][0] + 25:
                    break
        return rounds

    try:
        rounds = asyncio.run(main())
    finally:
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait(timeout=60)
    for alone, beside, heavy in rounds:
        print(f"\nsmall searches p95 alone {alone:.1f} ms, beside two 3 MB queries {beside:.1f} ms; "
              f"the 3 MB queries took {heavy['seconds']:.2f} s")
    alone, beside, heavy = rounds[-1]
    assert beside <= 2 * alone + 25
    for _, _, heavy in rounds:
        assert heavy["seconds"] < 5
        for r in heavy["replies"]:
            assert not r["is_error"] and r["query_chars"] == 2_000
            assert r["notice"] == ("the query was cut to its first 2000 of 3000000 characters "
                                   "(tokenizer.max_query_chars)")
            assert "(note: the query was cut to its first 2000" in r["text"]
    assert max(len(rec["query"]) for rec in read_log(log_path(ws))) <= 2_000


def test_memory_get_of_a_long_file_is_capped_and_its_text_says_so(ws: Path) -> None:
    """The served memory_get returned a whole file however large; now it is cut as `hybridmem get` is, the
    structured result (which its output schema accepts) says so, and the text a host shows the model ends with it."""
    import jsonschema

    from hybridmem.config import SourcesConfig
    from hybridmem.serve.server import GET_OUTPUT, call, render

    cap = SourcesConfig().get_max_lines
    (ws / "memory" / "long.md").write_text("".join(f"line {i}\n" for i in range(1, 1001)), encoding="utf-8")
    with MemoryService(ws, keyword_only=True, watch=False, preload=False) as svc:
        out, error = call(svc, "memory_get", {"path": "memory/long.md"}, "stdio")
        assert error is None and (out["lines"], out["truncated"], out["next_from"]) == (cap, True, cap + 1)
        jsonschema.validate(out, GET_OUTPUT)
        assert render("memory_get", out).endswith(f"line {cap}\n\n(note: {out['note']})")
        out, _ = call(svc, "memory_get", {"path": FILE, "from": 1, "lines": 5}, "stdio")
        assert render("memory_get", out) == out["text"] and "truncated" not in out
