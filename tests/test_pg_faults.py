"""Faults on the PostgreSQL engine, on a private server each test may stop: a writer killed with SIGKILL mid-sync and
mid-reindex, the server restarted during searches, a connection terminated under a search and under a write."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from hybridmem.config import Settings
from hybridmem.embeddings.fake import HashEmbedder
from hybridmem.index import MemoryIndex
from hybridmem.store.postgres import PostgresStore, StoreConnectionError

pytest.importorskip("pgserver")
from pgserver_fixture import LocalServer  # noqa: E402

FILES = 400

WRITER = r"""
import sys
from dataclasses import replace
from pathlib import Path
from hybridmem.config import Settings
from hybridmem.embeddings.fake import HashEmbedder
from hybridmem.index import MemoryIndex
url, ns, ws, force = sys.argv[1], sys.argv[2], Path(sys.argv[3]), sys.argv[4] == "1"
s = Settings()
s = replace(s, store=replace(s.store, backend="postgres", url=url, namespace=ns))
idx = MemoryIndex(ws, index_path=ws / ".hybridmem" / "index.sqlite", settings=s, embedder=HashEmbedder(dims=64))
print("start", flush=True)
idx.sync(force=force)
print("done", flush=True)
"""


@pytest.fixture(scope="module")
def server():
    srv = LocalServer()
    yield srv
    srv.destroy()


def _settings(url: str, ns: str) -> Settings:
    s = Settings()
    return replace(s, store=replace(s.store, backend="postgres", url=url, namespace=ns))


def _workspace(root: Path, files: int = FILES, tag: str = "v1") -> Path:
    ws = root / "ws"
    (ws / "memory").mkdir(parents=True, exist_ok=True)
    (ws / "MEMORY.md").write_text("# Memory\n\nThe payment retries with backoff.\n")
    for i in range(files):
        (ws / "memory" / f"n{i:04d}.md").write_text(
            f"# Note {i}\n\n" + "\n".join(f"{tag} line {j} of note {i}: payment retry word{i}x{j}" for j in range(40)))
    return ws


def _index(url: str, ns: str, ws: Path) -> MemoryIndex:
    return MemoryIndex(ws, index_path=ws / ".hybridmem" / "index.sqlite", settings=_settings(url, ns),
                       embedder=HashEmbedder(dims=64))


def _orphans(store: PostgresStore) -> dict[str, int]:
    """Rows no live chunk or file owns (what a half-applied write would leave)."""
    q = store._q
    return {
        "postings_without_chunk": q("SELECT count(*) FROM hm_postings p WHERE p.ns = %(ns)s AND NOT EXISTS "
                                    "(SELECT 1 FROM hm_chunks c WHERE c.id = p.chunk)", store._p(), one=True)[0],
        "chunks_without_file": q("SELECT count(*) FROM hm_chunks c WHERE c.ns = %(ns)s AND NOT EXISTS (SELECT 1 FROM "
                                 "hm_files f WHERE f.ns = c.ns AND f.gen = c.gen AND f.path = c.path)", store._p(),
                                 one=True)[0],
    }


def _kill_writer_when(url: str, ns: str, ws: Path, force: bool, ready) -> None:  # noqa: ANN001
    script = ws.parent / "writer.py"
    script.write_text(WRITER)
    proc = subprocess.Popen([sys.executable, str(script), url, ns, str(ws), "1" if force else "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    probe = PostgresStore(url, ns)
    try:
        deadline = time.monotonic() + 120
        while not ready(probe):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        probe.close()


def test_kill9_writer_mid_sync_leaves_whole_files_and_no_lock(server: LocalServer, tmp_path: Path) -> None:
    ns = f"kill-{uuid.uuid4().hex[:8]}"
    ws = _workspace(tmp_path)
    _kill_writer_when(server.url, ns, ws, False, lambda s: 0 < s.counts()["files"])
    store = PostgresStore(server.url, ns)
    files = store.counts()["files"]
    assert 0 < files < FILES + 1, "the kill must land mid-sync"
    counts = store.file_chunk_counts()
    assert all(counts.get(p, 0) >= 1 for p in store.files())  # each file committed whole, with its chunks
    assert _orphans(store) == {"postings_without_chunk": 0, "chunks_without_file": 0}
    assert store.check() == []
    # the dead writer holds no lock: a new writer finishes, and then everything is there
    t0 = time.monotonic()
    idx = _index(server.url, ns, ws)
    idx.sync()
    assert time.monotonic() - t0 < 60
    assert idx.store.counts()["files"] == FILES + 1
    assert idx.search("word7x3", min_score=0, answer_threshold=0).results[0].path == "memory/n0007.md"
    idx.close()
    store.close()


def test_kill9_during_full_reindex_keeps_the_old_generation_answering(server: LocalServer, tmp_path: Path) -> None:
    ns = f"killre-{uuid.uuid4().hex[:8]}"
    ws = _workspace(tmp_path, files=150)
    idx = _index(server.url, ns, ws)
    idx.sync()
    live = idx.store.live_generation()
    before = idx.search("word7x3", min_score=0, answer_threshold=0).results[0].citation
    _kill_writer_when(server.url, ns, ws, True, lambda s: len(s.generations()) > 1 and s._q(
        "SELECT count(*) FROM hm_files WHERE ns = %(ns)s AND gen <> %(gen)s", {"ns": s.ns, "gen": live}, one=True)[0] > 5)
    assert idx.store.live_generation() == live  # never published
    assert len(idx.store.generations()) == 2  # what the dead writer left: its unpublished generation
    assert idx.search("word7x3", min_score=0, answer_threshold=0).results[0].citation == before
    assert idx.store.counts()["files"] == 151 and idx.store.check() == []
    idx.sync(force=True)  # the next full reindex removes the leftover and publishes a whole new generation
    assert idx.store.generations() == [idx.store.live_generation()] and idx.store.live_generation() != live
    assert idx.store.counts()["files"] == 151
    idx.close()


def test_server_restart_during_searches_is_retried(server: LocalServer, tmp_path: Path) -> None:
    ns = f"restart-{uuid.uuid4().hex[:8]}"
    ws = _workspace(tmp_path, files=20)
    idx = _index(server.url, ns, ws)
    idx.sync()
    assert idx.search("word3x1", min_score=0, answer_threshold=0).results[0].path == "memory/n0003.md"
    server.stop()
    restarter = threading.Timer(1.5, server.start)
    restarter.start()
    t0 = time.monotonic()
    resp = idx.search("word3x1", min_score=0, answer_threshold=0)  # waits for the server, then answers
    restarter.join()
    assert resp.results[0].path == "memory/n0003.md"
    assert time.monotonic() - t0 >= 1.0
    idx.close()


def test_server_down_is_one_sentence(server: LocalServer, tmp_path: Path) -> None:
    ns = f"down-{uuid.uuid4().hex[:8]}"
    store = PostgresStore(server.url, ns, reconnect_s=1.0)
    server.stop()
    try:
        with pytest.raises(StoreConnectionError) as err:
            store.counts()
        assert "cannot reach PostgreSQL" in str(err.value) and "\n" not in str(err.value)
    finally:
        server.start()
    assert store.counts()["chunks"] == 0  # and it recovers once the server is back
    store.close()


def test_lost_connection_retries_reads_and_rolls_back_writes(server: LocalServer, tmp_path: Path) -> None:
    ns = f"lost-{uuid.uuid4().hex[:8]}"
    ws = _workspace(tmp_path, files=10)
    idx = _index(server.url, ns, ws)
    idx.sync()
    admin = PostgresStore(server.url, f"admin-{ns}")

    def kill_backend(store: PostgresStore) -> None:
        pid = store.link.conn.info.backend_pid
        admin._q("SELECT pg_terminate_backend(%(p)s)", {"p": pid})

    kill_backend(idx.store)
    assert idx.search("word3x1", min_score=0, answer_threshold=0).results[0].path == "memory/n0003.md"  # retried
    store = idx.store
    files = store.counts()["files"]
    with pytest.raises(StoreConnectionError) as err:
        with store.transaction():
            store.delete_file("memory/n0003.md")
            kill_backend(store)
            store.delete_file("memory/n0004.md")
    assert "rolled the transaction back" in str(err.value) and "\n" not in str(err.value)
    assert store.counts()["files"] == files  # nothing of it was saved
    assert idx.search("word3x1", min_score=0, answer_threshold=0).results[0].path == "memory/n0003.md"
    admin.close()
    idx.close()
