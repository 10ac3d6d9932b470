"""Serving figures: what an agent host waits for, each beside the same search called in-process (the floor).

On a copy of the demo workspace (``datasets/demo-memory/workspace``), indexed once with the served settings:

* ``serving_cli_oneshot_s``: wall time of ``hybridmem search`` in a fresh process (median of 10, OS cache warm),
  beside ``serving_cli_oneshot_noalign_s``, the same with ``[embedding] token_alignment = false`` (the answer gate's
  token alignment loads an encoder session and reads the top passages), and ``serving_cli_oneshot_uncached_s``, the
  same with ``[embedding] shared_cache = false``: every run reads its top passages through the encoder again instead
  of finding the token states an earlier process stored in the user cache's ``tokens.sqlite`` (the in-process
  searches before them stored every query's);
* ``serving_mcp_first_answer_s``: from spawning ``hybridmem mcp`` to the first ``memory_search`` answer over stdio
  (median of 3), beside ``serving_mcp_first_full_s``, the first answer that used the embedding model;
* ``serving_{stdio,http}_p50_ms`` / ``_p95_ms``: warm round trips of ``memory_search`` through the SDK's client;
* ``serving_http_raw_p50_ms`` / ``_p95_ms``: the same ``tools/call`` POSTed by a plain keep-alive ``httpx2`` client to
  the same server in the same minute, so the SDK client's own share (its output-schema validation, its task hops)
  shows apart from the server's and the transport's;
* ``serving_inproc_p50_ms`` / ``_p95_ms``: ``MemoryService.search`` in this process, the floor of both.

``--quick`` runs keyword-only with fewer repetitions (the labels say so); a full run uses the default model.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from hybridmem.bench.common import LAUNCH, BenchOptions, ms, percentiles

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "datasets" / "demo-memory" / "workspace"
QUERIES = ("retry backoff for payments", "who owns the on-call rotation", "tokyo trip hotel", "certificate renewal",
           "invoice v2 schema", "connection reset errors", "design review decisions", "database migration plan")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    return env


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-c", LAUNCH, *args]


def run(opts: BenchOptions) -> dict[str, float]:
    keyword = ["--keyword-only"] if opts.quick else []  # the server's flag; the CLI reads the workspace's toml
    reps, rounds = (3, 30) if opts.quick else (10, 200)
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="hybridmem-serving-") as tmp:
        ws = Path(tmp) / "ws"
        shutil.copytree(DEMO, ws, ignore=shutil.ignore_patterns(".hybridmem"))
        if keyword:
            (ws / "hybridmem.toml").write_text('[embedding]\nprovider = "none"\n', encoding="utf-8")
        subprocess.run(_cli("index", str(ws), *keyword), env=_env(), check=True, capture_output=True)
        out.update(_inproc(ws, bool(keyword), rounds))
        out["serving_cli_oneshot_s"] = _oneshot(ws, reps)
        if not keyword:  # its peer: the same search without the answer gate's token alignment (loading its encoder)
            plain = Path(tmp) / "plain"
            shutil.copytree(ws, plain)
            (plain / "hybridmem.toml").write_text("[embedding]\ntoken_alignment = false\n", encoding="utf-8")
            out["serving_cli_oneshot_noalign_s"] = _oneshot(plain, reps)
            uncached = Path(tmp) / "uncached"
            shutil.copytree(ws, uncached)
            (uncached / "hybridmem.toml").write_text("[embedding]\nshared_cache = false\n", encoding="utf-8")
            out["serving_cli_oneshot_uncached_s"] = _oneshot(uncached, reps)
        firsts = [asyncio.run(_first_answer(ws, keyword)) for _ in range(1 if opts.quick else 3)]
        out["serving_mcp_first_answer_s"] = statistics.median(f[0] for f in firsts)
        if not keyword:
            out["serving_mcp_first_full_s"] = statistics.median(f[1] for f in firsts)
        out.update(asyncio.run(_stdio_round_trips(ws, keyword, rounds)))
        out.update(_http_round_trips(ws, keyword, rounds))
    return out


def _oneshot(ws: Path, reps: int) -> float:
    walls = []
    for i in range(reps + 1):  # the first run warms the OS cache
        t0 = time.perf_counter()
        subprocess.run(_cli("search", QUERIES[i % len(QUERIES)], str(ws), "--no-sync", "--json"), env=_env(),
                       check=True, capture_output=True)
        walls.append(time.perf_counter() - t0)
    return statistics.median(walls[1:])


def _inproc(ws: Path, keyword_only: bool, rounds: int) -> dict[str, float]:
    from hybridmem.serve.service import MemoryService

    with MemoryService(ws, keyword_only=keyword_only, watch=False, preload=False) as svc:
        for q in QUERIES:  # loads the model, builds the in-memory copies
            svc.search(q)
        samples = []
        for i in range(rounds):
            t0 = time.perf_counter()
            svc.search(QUERIES[i % len(QUERIES)])
            samples.append(time.perf_counter() - t0)
    p50, p95 = percentiles(ms(s) for s in samples)
    return {"serving_inproc_p50_ms": p50, "serving_inproc_p95_ms": p95, "serving_inproc_p50_s": p50 / 1000}


async def _first_answer(ws: Path, keyword: list[str]) -> tuple[float, float]:
    """Seconds from spawn to the first answer, and to the first answer that used the model."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=_cli("mcp", str(ws), *keyword)[1:], env=_env())
    t0 = time.perf_counter()
    async with Client(params) as client:
        r = await client.call_tool("memory_search", {"query": QUERIES[0]})
        first = time.perf_counter() - t0
        full = first
        while (r.structured_content or {}).get("fallback_reason", "") and time.perf_counter() - t0 < 120:
            r = await client.call_tool("memory_search", {"query": QUERIES[0]})
            full = time.perf_counter() - t0
            await asyncio.sleep(0.05)
    return first, full


async def _round_trips(client: Any, rounds: int) -> list[float]:
    for q in QUERIES:
        await client.call_tool("memory_search", {"query": q})
    while (await client.call_tool("memory_status", {})).structured_content.get("model_loaded") is False:
        await asyncio.sleep(0.1)
    samples = []
    for i in range(rounds):
        t0 = time.perf_counter()
        r = await client.call_tool("memory_search", {"query": QUERIES[i % len(QUERIES)]})
        samples.append(time.perf_counter() - t0)
        if r.is_error:
            raise RuntimeError(r.content[0].text)
    return samples


async def _stdio_round_trips(ws: Path, keyword: list[str], rounds: int) -> dict[str, float]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=_cli("mcp", str(ws), *keyword)[1:], env=_env())
    async with Client(params) as client:
        p50, p95 = percentiles(ms(s) for s in await _round_trips(client, rounds))
    return {"serving_stdio_p50_ms": p50, "serving_stdio_p95_ms": p95}


def _http_round_trips(ws: Path, keyword: list[str], rounds: int) -> dict[str, float]:
    from mcp import Client

    proc = subprocess.Popen(_cli("mcp", str(ws), *keyword, "--http", "127.0.0.1:0"), env=_env(),
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline() if proc.stderr else ""
        m = re.search(r"http://[\d.]+:(\d+)/mcp", line)
        if not m:
            raise RuntimeError(f"hybridmem mcp --http did not start: {line}")

        url = f"http://127.0.0.1:{m.group(1)}/mcp"

        async def main() -> list[float]:
            async with Client(url) as client:
                return await _round_trips(client, rounds)

        p50, p95 = percentiles(ms(s) for s in asyncio.run(main()))
        raw50, raw95 = percentiles(ms(s) for s in asyncio.run(_raw_http_round_trips(url, rounds)))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return {"serving_http_p50_ms": p50, "serving_http_p95_ms": p95,
            "serving_http_raw_p50_ms": raw50, "serving_http_raw_p95_ms": raw95}


async def _raw_http_round_trips(url: str, rounds: int) -> list[float]:
    """``memory_search`` as bare JSON-RPC POSTs on one keep-alive connection (handshake once, then only calls)."""
    import httpx2
    from mcp_types.version import LATEST_HANDSHAKE_VERSION

    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}

    def call(i: int, query: str) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": i, "method": "tools/call",
                "params": {"name": "memory_search", "arguments": {"query": query}}}

    async with httpx2.AsyncClient() as http:
        r = await http.post(url, headers=headers, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": LATEST_HANDSHAKE_VERSION, "capabilities": {},
            "clientInfo": {"name": "hybridmem-bench", "version": "0"}}})
        r.raise_for_status()
        headers["mcp-protocol-version"] = r.json()["result"]["protocolVersion"]
        if r.headers.get("mcp-session-id"):
            headers["mcp-session-id"] = r.headers["mcp-session-id"]
        await http.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        for i, q in enumerate(QUERIES):
            await http.post(url, headers=headers, json=call(i + 1, q))
        samples = []
        for i in range(rounds):
            t0 = time.perf_counter()
            r = await http.post(url, headers=headers, json=call(100 + i, QUERIES[i % len(QUERIES)]))
            body = r.json()
            samples.append(time.perf_counter() - t0)
            if r.status_code != 200 or "error" in body or body["result"].get("isError"):
                raise RuntimeError(f"raw tools/call failed ({r.status_code}): {r.text[:200]}")
    return samples
