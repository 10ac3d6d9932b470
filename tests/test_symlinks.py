"""Symlinks in a workspace (issue #23, 10): what the user configured is followed, anything else is skipped with a
warning saying how to include it, and ``memory_get`` (here over MCP, the real server and the SDK's client) reads
exactly what the indexer indexes."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest

from hybridmem.cli import main
from tests.conftest import write

pytest.importorskip("mcp")
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LAUNCH = "import sys; from hybridmem.cli import main; sys.exit(main())"
ENV = {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
       "HYBRIDMEM_CACHE_DIR": os.environ["HYBRIDMEM_CACHE_DIR"]}  # never the real user cache (conftest.py)


@pytest.fixture()
def linked(tmp_path: Path) -> Path:
    """A workspace whose ``memory/`` is a link into a synced folder, which holds a loop, a second name for one of
    its files, and two links leading out of it."""
    synced = tmp_path / "Dropbox" / "agent-memory"
    write(synced, "2026-11-01.md", "# Nov 1\n\nThe zeppelin hangar code is kumquat.\n")
    write(synced, "topics/boats.md", "# Boats\n\nThe ferry leaves at dawn.\n")
    os.symlink(synced, synced / "topics" / "loop")  # a loop: walked once
    os.symlink(synced / "2026-11-01.md", synced / "again.md")  # the same file twice: indexed once
    write(tmp_path, "private/secret.md", "# Secret\n\nThe vault password is marzipan.\n")
    os.symlink(tmp_path / "private" / "secret.md", synced / "leak.md")
    os.symlink(tmp_path / "private", synced / "leakdir")
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "# Memory\n\nLinh prefers dark mode.\n")
    os.symlink(synced, ws / "memory")
    return ws


def test_a_linked_memory_folder_is_indexed_and_links_elsewhere_are_named(linked: Path, capsys) -> None:
    assert main(["index", str(linked), "--keyword-only"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("indexed 3 files"), out  # MEMORY.md, memory/2026-11-01.md, memory/topics/boats.md
    private = os.path.realpath(linked.parent / "private")
    assert f"warning: memory/leak.md: skipped, a symlink to {private}/secret.md, outside the configured memory " \
           f"folders; to index it, add {private}/secret.md to sources.extra_paths" in err
    assert f"warning: memory/leakdir: skipped, a symlink to {private}" in err
    assert "loop" not in err and "again.md" not in err

    (linked / "hybridmem.toml").write_text(f'[sources]\nextra_paths = ["{private}"]\n', encoding="utf-8")
    assert main(["index", str(linked), "--keyword-only", "--json"]) == 0
    out, err = capsys.readouterr()
    assert '"files": 4' in out and "warning" not in err  # the advice works: the target is now configured


def test_memory_get_over_mcp_reads_what_the_indexer_reads(linked: Path) -> None:
    assert main(["index", str(linked), "--keyword-only"]) == 0

    async def run() -> None:
        params = StdioServerParameters(command=sys.executable, env=ENV, args=[
            "-c", LAUNCH, "mcp", str(linked), "--keyword-only", "--no-watch"])
        async with Client(params) as client:
            r = await client.call_tool("memory_search", {"query": "zeppelin kumquat"})
            assert [h["path"] for h in r.structured_content["results"]] == ["memory/2026-11-01.md"]
            r = await client.call_tool("memory_get", {"path": "memory/topics/boats.md", "from": 3, "lines": 1})
            assert not r.is_error and r.structured_content["text"] == "The ferry leaves at dawn."
            for path in ("memory/leak.md", "memory/leakdir/secret.md", "memory/topics/loop/leak.md"):
                r = await client.call_tool("memory_get", {"path": path})
                assert r.is_error and "marzipan" not in r.content[0].text, path
            r = await client.call_tool("memory_search", {"query": "vault password marzipan"})
            assert r.structured_content["results"] == []

    asyncio.run(run())


def test_a_file_swapped_for_a_link_elsewhere_after_indexing_is_refused(linked: Path) -> None:
    from hybridmem.errors import PathError
    from hybridmem.index import MemoryIndex

    with MemoryIndex(linked, embedder=None) as idx:
        idx.sync()
        target = linked / "memory" / "topics" / "boats.md"
        target.unlink()
        target.symlink_to(linked.parent / "private" / "secret.md")
        with pytest.raises(PathError, match="symlink that leads outside the configured memory folders"):
            idx.get("memory/topics/boats.md")


def test_the_watcher_sees_edits_in_a_linked_memory_folder(linked: Path) -> None:
    from hybridmem.index import MemoryIndex
    from hybridmem.watch import Watcher

    synced = linked.parent / "Dropbox" / "agent-memory"
    with MemoryIndex(linked, embedder=None) as idx, Watcher(idx, debounce_s=0.1) as w:
        idx.sync()
        assert str(synced) in {str(r) for r in w.roots()}  # the link's target is watched, not only the link
        (synced / "topics" / "boats.md").write_text("# Boats\n\nThe hovercraft leaves at noon.\n")
        deadline = time.monotonic() + 10
        while not idx.search("hovercraft noon").results:
            assert time.monotonic() < deadline, "an edit in the linked folder was never indexed"
            time.sleep(0.05)
        assert idx.search("hovercraft noon").results[0].path == "memory/topics/boats.md"


def test_transcripts_inside_the_memory_folder_are_still_found(tmp_path: Path) -> None:
    from hybridmem.config import SourcesConfig
    from hybridmem.sources import discover

    write(tmp_path, "memory/a.md", "# A\n")
    write(tmp_path, "memory/chats/s1.jsonl", '{"role": "user", "content": "hi"}\n')
    found = {f.path: f.source for f in discover(tmp_path, SourcesConfig(session_paths=("memory/chats",)))}
    assert found == {"memory/a.md": "memory", "memory/chats/s1.jsonl": "sessions"}
