"""Atomic full reindex: temp build seeded from the embedding cache, one-transaction swap, rollback, readers."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from hybridmem.sync import reindex
from hybridmem.config import Settings
from hybridmem.embeddings.fake import HashEmbedder
from hybridmem.errors import IndexCorruptError
from hybridmem.index import MemoryIndex
from hybridmem.sync.reindex import ReindexError, leftovers, open_or_quarantine, quarantine


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    (root / "MEMORY.md").write_text("# Memory\nThe payment service retries with exponential backoff.\n")
    for i in range(12):
        (root / "memory" / f"n{i:02d}.md").write_text("\n".join(f"note {i} line {j} about kafka lag and deploys"
                                                                 for j in range(60)))
    return root


def snapshot(idx: MemoryIndex) -> list[tuple]:
    return idx.store.chunk_spans()


def test_forced_reindex_reuses_the_cache_and_keeps_content(ws: Path) -> None:
    emb = HashEmbedder()
    with MemoryIndex(ws, embedder=emb) as idx:
        first = idx.sync()
        before, gen = snapshot(idx), int(idx.store.get_meta("generation"))
        report = idx.sync(force=True)
        assert report.full_reindex and (report.embedded, report.cache_hits) == (0, first.chunks)
        assert emb.embedded == first.chunks  # nothing embedded twice
        assert snapshot(idx) == before
        assert int(idx.store.get_meta("generation")) == gen + 1
        c = idx.store.consistency()
        assert c["chunks"] == c["fts_rows"] == c["vec_rows"] == first.chunks
        assert leftovers(idx.index_path) == []


def test_settings_change_triggers_atomic_full_reindex(ws: Path) -> None:
    with MemoryIndex(ws, embedder=HashEmbedder()) as idx:
        old = idx.sync().chunks
    small = Settings().override(chunking={"tokens": 64, "overlap": 0})
    with MemoryIndex(ws, settings=small, embedder=HashEmbedder()) as idx:
        report = idx.sync()
        assert report.full_reindex and report.chunks > old
        c = idx.store.consistency()
        assert c["chunks"] == c["fts_rows"] == c["vec_rows"] == report.chunks
        assert idx.sync().full_reindex is False  # stable afterwards: incremental


class ExplodingEmbedder(HashEmbedder):
    def __init__(self, after: int) -> None:
        super().__init__()
        self.after = after

    def embed_batch(self, texts, is_query=False):  # noqa: ANN001, ANN201
        if not is_query and self.embedded + len(texts) > self.after:
            raise RuntimeError("provider went away mid-reindex")
        return super().embed_batch(texts, is_query)


def test_failure_while_building_leaves_the_live_index_untouched(ws: Path) -> None:
    with MemoryIndex(ws, embedder=HashEmbedder()) as idx:
        idx.sync()
        before = snapshot(idx)
    with MemoryIndex(ws, embedder=ExplodingEmbedder(after=5)) as idx:  # other dims key -> must re-embed -> fails
        idx.embedder._dims = 32  # noqa: SLF001
        with pytest.raises(ReindexError, match="full reindex failed, the previous index is unchanged: RuntimeError: "
                                               "provider went away mid-reindex"):
            idx.sync()
        assert snapshot(idx) == before
        assert leftovers(idx.index_path) == []
    with MemoryIndex(ws, embedder=HashEmbedder()) as idx:
        assert idx.search("kafka lag", min_score=0.0, answer_threshold=0.0).results


def test_swap_failure_rolls_back_from_the_backup(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with MemoryIndex(ws, embedder=HashEmbedder()) as idx:
        idx.sync()
        before = snapshot(idx)
        (ws / "memory" / "n00.md").write_text("completely new content about invoices\n")
        real_check = reindex.check
        calls = {"n": 0}

        def check_fails_after_swap(store):  # noqa: ANN001, ANN202
            calls["n"] += 1
            if calls["n"] == 2:  # 1st: the temp index; 2nd: the live index right after the swap
                raise ReindexError("simulated verification failure")
            return real_check(store)

        monkeypatch.setattr(reindex, "check", check_fails_after_swap)
        with pytest.raises(ReindexError, match="reindex swap failed, previous index restored: simulated"):
            idx.sync(force=True)
        assert snapshot(idx) == before
        assert idx.store.consistency()["quick_check"]
        assert leftovers(idx.index_path) == []


def test_readers_keep_working_during_reindex(ws: Path) -> None:
    with MemoryIndex(ws, embedder=HashEmbedder()) as idx:
        idx.sync()
    reader = MemoryIndex(ws, embedder=HashEmbedder())
    reader.settings = reader.settings.override(sync={"sync_on_search": False})
    stop, errors, counts = threading.Event(), [], []

    def read() -> None:
        while not stop.is_set():
            try:
                counts.append(len(reader.search("kafka lag deploys", min_score=0.0, answer_threshold=0.0).results))
            except Exception as exc:  # noqa: BLE001
                errors.append(repr(exc))

    t = threading.Thread(target=read)
    t.start()
    with MemoryIndex(ws, embedder=HashEmbedder()) as writer:
        for _ in range(3):
            writer.sync(force=True)
    stop.set()
    t.join()
    reader.close()
    assert errors == [] and len(counts) > 10 and min(counts) > 0


def test_leftovers_of_a_killed_reindex_are_removed(ws: Path) -> None:
    with MemoryIndex(ws, embedder=HashEmbedder()) as idx:
        idx.sync()
        for name in ("index.sqlite.reindex-tmp", "index.sqlite.reindex-tmp-wal", "index.sqlite.bak"):
            (idx.index_path.parent / name).write_bytes(b"junk")
        assert len(leftovers(idx.index_path)) == 3
        idx.sync(force=True)
        assert leftovers(idx.index_path) == []


def test_quarantine_and_open_or_quarantine(ws: Path) -> None:
    path = ws / ".hybridmem" / "index.sqlite"
    path.parent.mkdir()
    path.write_bytes(b"garbage" * 1000)
    (path.parent / "index.sqlite-wal").write_bytes(b"x")
    with pytest.raises(IndexCorruptError):
        MemoryIndex(ws, embedder=HashEmbedder())
    idx = open_or_quarantine(lambda: MemoryIndex(ws, embedder=HashEmbedder()), path)
    assert idx.sync().files == 13
    idx.close()
    moved = sorted(p.name for p in path.parent.glob("index.sqlite.corrupt-*"))
    assert moved and moved[0].startswith("index.sqlite.corrupt-")
    assert quarantine(ws / "nope.sqlite") is None


def test_an_incremental_sync_removes_the_new_copy_a_killed_reindex_left(ws: Path) -> None:
    """A ``--rebuild`` killed mid-build left ``index.sqlite.reindex-tmp`` (as large as the index) until the next
    rebuild; a later sync that holds the index's lock removes it once nothing has written it for STALE_BUILD_S, and
    says so. A copy written lately may be a live build's; a backup may be the only good copy: both kept."""
    import fcntl
    import os
    import time

    from hybridmem.sync.reindex import STALE_BUILD_S

    with MemoryIndex(ws, embedder=HashEmbedder()) as idx:
        idx.sync()
        names = ("index.sqlite.reindex-tmp", "index.sqlite.reindex-tmp-wal", "index.sqlite.bak")
        for name in names:
            (idx.index_path.parent / name).write_bytes(b"junk" * 1000)
        assert not any("removed" in w for w in idx.sync().warnings) and len(leftovers(idx.index_path)) == 3  # recent
        old = time.time() - STALE_BUILD_S - 5
        for name in names:
            os.utime(idx.index_path.parent / name, (old, old))
        # another process's sync holds the lock (a search's quick sync may rebuild without it): nothing is removed
        fd = os.open(f"{idx.index_path}.sync.lock", os.O_RDWR | os.O_CREAT)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            assert not any("removed" in w for w in idx.sync().warnings) and len(leftovers(idx.index_path)) == 3
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        report = idx.sync()
        assert [Path(p).name for p in leftovers(idx.index_path)] == ["index.sqlite.bak"]
        assert any("removed index.sqlite.reindex-tmp (0.0 MB)" in w and "not affected" in w for w in report.warnings)
        assert idx.search("anything").results is not None
        assert not any("removed" in w for w in idx.sync().warnings)  # once
