"""Settings reloads of a running ``hybridmem mcp`` (issue #23, 7 and 11): the real server process, the SDK's client.

* A change that forces a rebuild (chunking) keeps every search on the old generation, with both legs and no wait,
  until the new one is swapped in. The embedder is the remote provider against a real local HTTP server
  (``tests/embed_server.py``) that holds document batches until the test lets them go, so "during the rebuild" is a
  state the test controls rather than a race it hopes to win.
* ``extra_paths`` added while serving: synced and watched at once.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
from embed_server import EmbedServer  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from hybridmem.config import load_settings  # noqa: E402
from hybridmem.index import MemoryIndex  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "datasets" / "demo-memory" / "workspace"
LAUNCH = "import sys; from hybridmem.cli import main; sys.exit(main())"
ENV = {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
       "HYBRIDMEM_CACHE_DIR": os.environ["HYBRIDMEM_CACHE_DIR"]}  # never the real user cache (conftest.py)
QUERY = "retry backoff payment_processor"


class GatedEmbedServer(EmbedServer):
    """Answers the test's query at once; holds every other batch (documents) while ``gate`` is clear."""

    def __init__(self, dims: int) -> None:
        super().__init__(dims=dims)
        self.gate = threading.Event()
        self.gate.set()
        self.held = 0

    def answer(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        if not any(QUERY in t for t in texts) and not self.gate.is_set():
            self.held += 1
            self.gate.wait(60)
        return super().answer(path, body)


def _stdio(ws: Path, *extra: str) -> Client:
    return Client(StdioServerParameters(command=sys.executable, args=["-c", LAUNCH, "mcp", str(ws), *extra],
                                        env=ENV))


def test_a_rebuild_keeps_searches_hybrid_and_unstalled_until_the_swap(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(DEMO, ws, ignore=shutil.ignore_patterns(".hybridmem"))
    with GatedEmbedServer(dims=16) as srv:
        embedding = (f'[embedding]\nprovider = "openai"\nbase_url = "{srv.url}/v1"\nmodel = "nomic-embed-text"\n'
                     "dims = 16\n")
        (ws / "hybridmem.toml").write_text(embedding, encoding="utf-8")
        with MemoryIndex(ws, settings=load_settings(workspace=ws)) as idx:
            idx.sync()

        async def main() -> None:
            async with _stdio(ws, "--no-watch") as client:
                async def search() -> tuple[float, dict]:
                    t0 = time.perf_counter()
                    r = await client.call_tool("memory_search", {"query": QUERY, "max_results": 3})
                    assert not r.is_error, r.content[0].text
                    return time.perf_counter() - t0, r.structured_content

                async def status() -> dict:
                    return (await client.call_tool("memory_status", {})).structured_content

                _, first = await search()
                assert first["fallback"] is False and first["results"][0]["vector_rank"] is not None
                before = await status()
                assert before["chunks"] == 65

                srv.gate.clear()  # document batches now wait: the rebuild below cannot finish
                (ws / "hybridmem.toml").write_text(embedding + "[chunking]\ntokens = 64\noverlap = 8\n",
                                                   encoding="utf-8")
                during = [await search()]  # this call applies the change: the rebuild starts in the background
                deadline = time.monotonic() + 20
                while not srv.held:  # until the rebuild is embedding (and held)
                    assert time.monotonic() < deadline, "the settings change started no rebuild"
                    during.append(await search())
                    await asyncio.sleep(0.05)
                during += [await search() for _ in range(5)]
                assert (await status())["settings_hash"] == before["settings_hash"]  # still the old generation
                for seconds, out in during:
                    assert out["fallback"] is False and out.get("fallback_reason") is None, out.get("fallback_reason")
                    assert out["results"][0]["vector_rank"] is not None and out["results"][0]["vector_score"] > 0
                    # the rebuild is held for 60 s: a search that waited for it would take that long
                    assert seconds < 10, f"a search during the rebuild took {seconds:.2f} s"

                srv.gate.set()
                deadline = time.monotonic() + 60
                while (after := await status())["settings_hash"] == before["settings_hash"]:
                    assert time.monotonic() < deadline, "the rebuilt index was never swapped in"
                    await asyncio.sleep(0.1)
                assert after["chunks"] > before["chunks"]  # 64-token chunks: the new settings apply
                seconds, out = await search()
                assert out["fallback"] is False and out["results"][0]["vector_rank"] is not None
                assert out["results"][0]["end_line"] - out["results"][0]["start_line"] < 25

        asyncio.run(main())


def _demo_keyword_only(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    shutil.copytree(DEMO, ws, ignore=shutil.ignore_patterns(".hybridmem"))
    (ws / "hybridmem.toml").write_text('[embedding]\nprovider = "none"\n', encoding="utf-8")
    with MemoryIndex(ws, settings=load_settings(workspace=ws)) as idx:
        idx.sync()
    return ws


async def _found_within(client: Client, query: str, path: str, seconds: float) -> float:
    """Seconds until ``query`` finds ``path`` over MCP (searching every 50 ms), or inf after ``seconds``."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        r = await client.call_tool("memory_search", {"query": query})
        if any(h["path"] == path for h in r.structured_content["results"]):
            return time.perf_counter() - t0
        await asyncio.sleep(0.05)
    return float("inf")


def test_extra_paths_added_while_serving_are_synced_and_watched(tmp_path: Path) -> None:
    """Issue #23, 7: memory_get of a new extra path worked at once, but search missed it until an unrelated file
    changed, and edits inside it were never seen (the watcher kept its first folders)."""
    ws = _demo_keyword_only(tmp_path)
    extra = tmp_path / "team-notes"
    extra.mkdir()
    (extra / "hangar.md").write_text("# Hangar\n\nThe zeppelin hangar code is kumquat.\n", encoding="utf-8")
    debounce = 0.3

    async def main() -> None:
        async with _stdio(ws, "--debounce", str(debounce)) as client:
            assert await _found_within(client, "zeppelin kumquat", "extra/team-notes/hangar.md", 0.1) == float("inf")
            (ws / "hybridmem.toml").write_text(f'[embedding]\nprovider = "none"\n[sources]\nextra_paths = '
                                               f'["{extra.as_posix()}"]\n', encoding="utf-8")
            seconds = await _found_within(client, "zeppelin kumquat", "extra/team-notes/hangar.md", 5)
            assert seconds < debounce + 1.0, f"the new extra path was searchable after {seconds:.2f} s"

            (extra / "hangar.md").write_text("# Hangar\n\nThe blimp hangar code is tamarind.\n", encoding="utf-8")
            (extra / "sub").mkdir()
            (extra / "sub" / "dock.md").write_text("# Dock\n\nThe airship dock opens at dawn.\n", encoding="utf-8")
            seconds = await _found_within(client, "blimp tamarind", "extra/team-notes/hangar.md", 5)
            assert seconds < debounce + 1.0, f"an edit inside the new extra path was found after {seconds:.2f} s"
            assert await _found_within(client, "airship dock dawn", "extra/team-notes/sub/dock.md", 2) < 2

    asyncio.run(main())


@pytest.mark.slow
def test_a_rebuild_with_the_default_model_never_answers_keyword_only(tmp_path: Path) -> None:
    """The same with the real default model (e5), without holding anything: searches made while the rebuild runs
    use both legs and none waits for a model."""
    ws = tmp_path / "ws"
    shutil.copytree(DEMO, ws, ignore=shutil.ignore_patterns(".hybridmem"))
    subprocess.run([sys.executable, "-c", LAUNCH, "index", str(ws)], env=ENV, check=True, capture_output=True)

    async def main() -> None:
        async with _stdio(ws, "--no-watch") as client:
            async def call(name: str, args: dict) -> dict:
                return (await client.call_tool(name, args)).structured_content

            first = await call("memory_search", {"query": QUERY})
            assert first["fallback"] is False and first["provider"] == "e5"
            before = (await call("memory_status", {}))["settings_hash"]
            (ws / "hybridmem.toml").write_text("[chunking]\noverlap = 0\n", encoding="utf-8")
            during, deadline = [], time.monotonic() + 120
            t0 = time.perf_counter()
            while (await call("memory_status", {}))["settings_hash"] == before:
                assert time.monotonic() < deadline, "the rebuilt index was never swapped in"
                during.append(await call("memory_search", {"query": QUERY}))
                await asyncio.sleep(0.25)  # leave the cores to the rebuild
            rebuild = time.perf_counter() - t0
            # A search that waited for the rebuild's model would return only after the swap and end the loop: two
            # searches at most (the one whose call applied the change, and the one that waited). Each status check
            # that still saw the old generation followed a search that had returned.
            assert len(during) >= 3, f"{len(during)} searches in a {rebuild:.1f} s rebuild: did they wait for it?"
            for out in during:
                assert out["fallback"] is False and out["results"][0]["vector_rank"] is not None
            assert (await call("memory_status", {}))["chunks"] < 65  # no overlap: fewer chunks

    asyncio.run(main())
