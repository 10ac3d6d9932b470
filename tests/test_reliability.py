"""Issue 18's reliability defects, one test each (2, 4, 5, 7, 8, 9, 10): each failed before its fix.

Small inline workspaces and the HashEmbedder (a real embedder without a model).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hybridmem.cli import main as cli_main
from hybridmem.embeddings.fake import HashEmbedder
from hybridmem.index import MemoryIndex
from hybridmem.sync import reindex


def small_ws(root: Path, n: int = 4) -> Path:
    (root / "memory").mkdir(parents=True)
    (root / "MEMORY.md").write_text("# Memory\nThe payment service retries with exponential backoff.\n")
    for i in range(n):
        (root / "memory" / f"note-{i}.md").write_text(f"# Note {i}\nuniqword{i} appears only in note {i}.\n")
    return root


# -- 2: a bad query never switches the provider off nor changes the index -----------------------------------------


class PickyEmbedder(HashEmbedder):
    """Refuses, as a real tokenizer or API does, texts it cannot take: lone surrogates, and any query with 'BAD'."""

    def __init__(self) -> None:
        super().__init__(dims=16)
        self.queries: list[str] = []

    def embed_batch(self, texts, is_query=False):  # noqa: ANN001, ANN201
        if is_query:
            self.queries += list(texts)
            for t in texts:
                t.encode("utf-8")  # UnicodeEncodeError on a lone surrogate
                if "BAD" in t:
                    raise ValueError("input rejected by the model")
        return super().embed_batch(texts, is_query)


def test_bad_queries_never_switch_the_provider_off_nor_strip_vectors(tmp_path: Path) -> None:
    ws = small_ws(tmp_path / "ws")
    emb = PickyEmbedder()
    with MemoryIndex(ws, embedder=emb) as idx:
        idx.sync()
        embedded = idx.status()["embedded_chunks"]
        assert embedded == 5
        for q in ["cut emoji \ud83d payment", "\udc00", "payment \ud83d\ude00 ok"] * 3:
            resp = idx.search(q, min_score=0.0, answer_threshold=0.0)
            assert "\ud83d" not in resp.query and "\udc00" not in resp.query
        assert all(not any(0xD800 <= ord(c) <= 0xDFFF for c in q) for q in emb.queries)
        assert emb.queries[0] == "cut emoji \ufffd payment"
        for _ in range(5):  # input errors: keyword-only for that query, never counted toward failover
            resp = idx.search("BAD payment", min_score=0.0, answer_threshold=0.0)
            assert resp.fallback and "ValueError: input rejected by the model" in resp.fallback_reason
            assert resp.results[0].path == "MEMORY.md"
        assert idx.embedder is emb and not idx.dirty
        resp = idx.search("payment backoff", min_score=0.0, answer_threshold=0.0)
        assert not resp.fallback and resp.results[0].vector_rank == 1
        idx.sync()
        st = idx.status()
        assert (st["provider"], st["embedded_chunks"]) == ("hash", embedded)
    with MemoryIndex(ws, embedder=HashEmbedder(dims=16)) as other:  # another process sees the same index
        assert other.status()["embedded_chunks"] == embedded


# -- 4: a search sees one generation of the index from its first read to its last ---------------------------------


@pytest.mark.parametrize("tries", [3, 0])  # 0: straight to the read transaction
def test_rebuild_between_the_legs_and_the_chunk_loads_never_mixes_generations(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tries: int) -> None:
    from hybridmem.retrieve import retriever

    monkeypatch.setattr(retriever, "_OPTIMISTIC_TRIES", tries)
    ws = small_ws(tmp_path / "ws", n=6)
    with MemoryIndex(ws, embedder=HashEmbedder(dims=16)) as idx:
        idx.sync()
        rebuilds = []
        real_rows = idx.store.chunk_rows

        def rows_after_a_rebuild(ids):  # noqa: ANN001, ANN202 - another process rebuilds right after the legs ran
            if len(rebuilds) < 2:
                n = len(rebuilds)
                (ws / "memory" / f"aaa-{n}.md").write_text("\n".join(f"shift {n} line {j} " + "x" * 60
                                                                      for j in range(80)))
                with MemoryIndex(ws, embedder=HashEmbedder(dims=16)) as other:
                    rebuilds.append(other.sync(force=True).chunks)  # chunk ids of every note move
            return real_rows(ids)

        idx.store.chunk_rows = rows_after_a_rebuild  # type: ignore[method-assign]
        for i in (3, 4, 5):
            resp = idx.search(f"uniqword{i}", min_score=0.0, answer_threshold=0.0)
            assert resp.results[0].path == f"memory/note-{i}.md" and resp.results[0].text_rank == 1
            assert all(h.text in (ws / h.path).read_text() for h in resp.results)  # every hit: its own file's text
        assert len(rebuilds) == 2 and rebuilds[1] > rebuilds[0] > 7


def test_generation_never_goes_back_and_every_chunk_commit_bumps_it(tmp_path: Path) -> None:
    ws = small_ws(tmp_path / "ws")
    with MemoryIndex(ws, embedder=HashEmbedder(dims=16)) as idx:
        idx.sync()
        g0 = idx.store.generation()
        (ws / "memory" / "note-1.md").write_text("changed\n")
        (ws / "memory" / "note-2.md").unlink()
        idx.sync()
        g1 = idx.store.generation()
        assert g1 == g0 + 4  # one delete, one write batch (keyword first), one embed batch, the end of the sync
        idx.sync(force=True)
        assert idx.store.generation() > g1


# -- 5: never write an index over a file that is not an index -----------------------------------------------------


def test_a_memory_file_or_foreign_database_given_as_index_is_refused_and_left_alone(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    import sqlite3

    ws = small_ws(tmp_path / "ws")
    (ws / "data.bin").write_bytes(b"plain bytes, not a database\n" * 10)
    foreign = tmp_path / "app.db"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE users (name TEXT)")
    targets = {ws / "MEMORY.md": "(a .md file)", ws / "data.bin": "(not an SQLite database)",
               foreign: "is not a hybridmem index: it is an SQLite database but not a hybridmem index (tables users)"}
    before = {p: p.read_bytes() for p in targets}
    for target, why in targets.items():
        for argv in (["status", str(ws)], ["index", str(ws), "--rebuild", "--keyword-only"],
                     ["search", "payment", str(ws)]):
            assert cli_main([*argv, "--index", str(target)]) == 2
            err = capsys.readouterr().err
            assert err.startswith(f"hybridmem: error: {target} ") and why in err
            assert "--rebuild" not in err and err.count("\n") == 1
    assert {p: p.read_bytes() for p in targets} == before
    assert sorted(p.name for p in tmp_path.rglob("*") if "corrupt" in p.name or p.suffix == ".bak") == []


# -- 8: a deleted index and garbage inside the file are noticed --------------------------------------------------


def test_index_deleted_while_indexing_is_an_error_not_a_success(tmp_path: Path) -> None:
    from hybridmem.errors import HybridMemError

    ws = small_ws(tmp_path / "ws")
    with MemoryIndex(ws, embedder=HashEmbedder(dims=16)) as idx:
        def delete_the_index(stage, done, total):  # noqa: ANN001, ANN202
            if idx.index_path.exists():
                idx.index_path.unlink()

        with pytest.raises(HybridMemError, match=r"index\.sqlite was deleted while indexing, so nothing was saved"):
            idx.sync(progress=delete_the_index)
        # the next sync (a watcher's, a server's) makes the index anew where it was, and it holds everything
        report = idx.sync()
        assert report.files == 5 and idx.index_path.exists()
    with MemoryIndex(ws, embedder=HashEmbedder(dims=16)) as fresh:
        assert fresh.status()["files"] == 5


def test_status_says_when_the_last_sync_was_stopped(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A first `hybridmem index` killed part way left a third of the files in an index whose status said nothing
    was wrong (integrity ok, not dirty); searches found nothing in the rest."""
    ws = small_ws(tmp_path / "ws", n=6)
    with MemoryIndex(ws, embedder=HashEmbedder(dims=16)) as idx:
        def stop(stage, done, total):  # noqa: ANN001, ANN202 - a kill, as the process sees it
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            idx.sync(progress=stop)
        assert idx.status()["sync_interrupted"] is True
    assert cli_main(["status", str(ws)]) == 0
    err = capsys.readouterr().err
    assert err.startswith("note: the last sync stopped before it finished") and "`hybridmem index` finishes it" in err
    with MemoryIndex(ws, embedder=HashEmbedder(dims=16)) as idx:
        assert idx.sync().files == 7 and idx.status()["sync_interrupted"] is False
    assert cli_main(["status", str(ws)]) == 0 and "note:" not in capsys.readouterr().err


def test_a_long_lived_index_follows_an_index_file_made_anew(tmp_path: Path) -> None:
    """A watcher ran on while its index was deleted and the user ran `hybridmem index` as told: every later sync said
    the file "was replaced by another file" and wrote nothing, so new notes stayed unfindable and deleted ones stayed
    found. It now opens the file that is there."""
    ws = small_ws(tmp_path / "ws")
    with MemoryIndex(ws, embedder=HashEmbedder(dims=16)) as watcher:
        watcher.sync()
        for p in watcher.index_path.parent.glob("index.sqlite*"):
            p.unlink()
        with MemoryIndex(ws, embedder=HashEmbedder(dims=16)) as cli:  # `hybridmem index`
            cli.sync()
        (ws / "memory" / "later.md").write_text("the quokka census happens in May\n")
        first = ws / "memory" / "note-0.md"
        first.unlink()
        report = watcher.sync()
        assert report.added == 1 and report.deleted == 1
        hits = watcher.search("quokka census", min_score=0.0, answer_threshold=0.0).results
        assert hits and hits[0].path == "memory/later.md"
    with MemoryIndex(ws, embedder=HashEmbedder(dims=16)) as reader:  # what every other command reads
        assert reader.search("quokka census", min_score=0.0, answer_threshold=0.0).results[0].path == "memory/later.md"
        assert f"memory/{first.name}" not in reader.store.files() and "memory/later.md" in reader.store.files()


def test_garbage_inside_the_index_is_found_by_status_and_search_and_rebuilt(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    ws = small_ws(tmp_path / "ws", n=60)
    for i in range(60):
        (ws / "memory" / f"note-{i}.md").write_text("\n".join(f"uniqword{i} line {j} " + "filler " * 12
                                                              for j in range(30)))
    assert cli_main(["index", str(ws), "--keyword-only"]) == 0
    index = ws / ".hybridmem" / "index.sqlite"
    data = bytearray(index.read_bytes())
    assert len(data) > 200_000
    data[65536:131072] = bytes(range(256)) * 256  # 64 KB of garbage inside the file
    index.write_bytes(bytes(data))
    capsys.readouterr()
    assert cli_main(["status", str(ws)]) == 1
    out, err = capsys.readouterr()
    assert "integrity: " in out and "quick_check failed" in out
    assert err.startswith(f"hybridmem: error: the index {index} failed its check (") and "index --rebuild" in err
    codes = []
    for i in range(60):
        codes.append(cli_main(["search", f"uniqword{i}", str(ws), "--no-sync"]))
        if codes[-1] != 0:
            break
    err = capsys.readouterr().err
    assert codes[-1] == 2 and f"hybridmem: error: the index {index} is corrupt (" in err  # a failing page says so
    assert cli_main(["index", str(ws), "--rebuild", "--keyword-only"]) == 0
    assert cli_main(["status", str(ws)]) == 0
    assert "integrity: ok" in capsys.readouterr().out
    with MemoryIndex(ws, embedder=None) as idx:
        assert idx.search("uniqword41", min_score=0.0, answer_threshold=0.0).results[0].path == "memory/note-41.md"
        assert idx.status()["files"] == 61


# -- 9: a failed rebuild never points to a backup it deleted ------------------------------------------------------


def test_failed_rollback_keeps_the_backup_it_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import re

    from hybridmem.store import Store
    from hybridmem.sync import reindex

    ws = small_ws(tmp_path / "ws")
    with MemoryIndex(ws, embedder=HashEmbedder(dims=16)) as idx:
        idx.sync()
        spans = idx.store.chunk_spans()
        real_copy = Store.copy_into
        copies = []

        def copy_fails_after_the_backup(self, target):  # noqa: ANN001, ANN202
            copies.append(target.path)
            if len(copies) >= 2:  # 1: live -> backup; 2: the swap; 3: the rollback
                raise OSError("disk I/O error (simulated)")
            return real_copy(self, target)

        monkeypatch.setattr(Store, "copy_into", copy_fails_after_the_backup)
        with pytest.raises(reindex.ReindexError, match="the rollback failed too") as info:
            idx.sync(force=True)
        monkeypatch.undo()
        named = re.search(r"previous index is kept in (\S+):", str(info.value)).group(1)
        assert named == f"{idx.index_path}.bak" and len(copies) == 3
        with _open(named) as bak:
            assert bak.chunk_spans() == spans


def _open(path: str):  # noqa: ANN202
    import contextlib

    from hybridmem.store import Store

    store = Store(path)
    return contextlib.closing(store)


# -- 7: a read-only index file or workspace still searches --------------------------------------------------------


def _run_unprivileged(argv: list[str]) -> tuple[int, str, str]:
    """``python -m hybridmem.cli ARGV`` by a process that permission bits stop (as root: without capabilities, through
    ``setpriv``, since root's CAP_DAC_OVERRIDE writes through any mode)."""
    import os
    import shutil
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    prefix: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: permission bits cannot stop a write")
        prefix = ["setpriv", "--bounding-set=-all", "--inh-caps=-all", "--"]
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run([*prefix, sys.executable, "-m", "hybridmem.cli", *argv], capture_output=True, text=True,
                         env=env, cwd="/", timeout=120)
    return out.returncode, out.stdout, out.stderr


@pytest.mark.parametrize("case", ["read-only file", "read-only folder"])
def test_read_only_index_still_searches_and_says_why_it_cannot_sync(case: str) -> None:
    import os
    import shutil
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="hm-ro-"))
    try:
        os.chmod(base, 0o755)
        ws = small_ws(base / "ws")
        (ws / "hybridmem.toml").write_text('[embedding]\nprovider = "none"\n')
        assert cli_main(["index", str(ws)]) == 0
        (ws / "memory" / "note-9.md").write_text("uniqword9 arrived after indexing\n")
        index = ws / ".hybridmem" / "index.sqlite"
        paths = [p for p in base.rglob("*")] + [base]
        for p in paths:  # nobody reads everything; writes nothing
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
        if case == "read-only file":
            os.chmod(index.parent, 0o777)
            os.chmod(index, 0o444)
            why = f"the index file {index} is read-only"
        else:
            os.chmod(index, 0o666)
            os.chmod(index.parent, 0o555)
            why = f"the folder {index.parent} is read-only"
        os.chmod(ws, 0o555)
        code, out, err = _run_unprivileged(["search", "uniqword2", str(ws), "--json"])
        assert code == 0, err
        assert json.loads(out)["results"][0]["path"] == "memory/note-2.md"
        assert err == f"note: not synced: {why}; searching the index as it is\n"
        code, out, err = _run_unprivileged(["status", str(ws), "--json"])
        assert code == 0, err
        st = json.loads(out)
        assert (st["files"], st["read_only"], st["integrity"]) == (5, why, "ok")
        code, out, err = _run_unprivileged(["index", str(ws)])
        assert code == 2
        assert err == f"hybridmem: error: cannot sync: {why}; searches still work on the index as it is\n"
    finally:
        for p in [base, *base.rglob("*")]:
            if p.is_dir():
                os.chmod(p, 0o755)
        shutil.rmtree(base)


# -- 10: huge files embed and save in bounded slices; what is past the cap is said plainly --------------------------


class DiesAfter(HashEmbedder):
    """Embeds ``budget`` texts, then fails as a killed or crashed model would."""

    def __init__(self, budget: int) -> None:
        super().__init__(dims=16)
        self.budget = budget

    def embed_batch(self, texts, is_query=False):  # noqa: ANN001, ANN201
        if not is_query and self.embedded + len(texts) > self.budget:
            raise MemoryError("simulated crash while embedding")
        return super().embed_batch(texts, is_query)


def test_a_huge_file_saves_its_embeddings_as_it_goes_and_resumes(tmp_path: Path) -> None:
    from hybridmem.sync.pending import EMBED_BATCH

    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "huge.md").write_text("".join(f"line {i} of a long log about payment retries and backoff\n"
                                                   for i in range(40_000)))
    with MemoryIndex(ws, embedder=DiesAfter(1500)) as idx:
        seen: list[tuple[str, int, int]] = []
        with pytest.raises(MemoryError):
            idx.sync(progress=lambda stage, done, total: seen.append((stage, done, total)))
        saved = idx.store.cache_count()
        slice_ = EMBED_BATCH
        assert saved == 1500 // slice_ * slice_ >= 2 * slice_  # every finished slice is committed
        embeds = [d for stage, d, _ in seen if stage == "embed"]
        assert embeds == sorted(embeds) and embeds[-1] >= saved  # progress inside the one file
        total = seen[-1][2]
        # keyword first: every chunk was stored before embedding began, the finished slices with their vectors
        assert idx.vector_progress()[0] == {"embedded": saved, "total": total}
        assert idx.store.pending_count() == total - saved
    with MemoryIndex(ws, embedder=HashEmbedder(dims=16)) as idx:
        report = idx.sync()  # the file is unchanged: only its pending chunks are embedded
        assert (report.embedded, report.chunks) == (total - saved, total)
        assert idx.vector_progress() == ({"embedded": total, "total": total}, None)


def test_get_past_max_file_bytes_says_what_was_not_indexed(tmp_path: Path) -> None:
    from hybridmem.config import Settings
    from hybridmem.errors import ArgumentError

    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "big.md").write_text("".join(f"line {i:04d} payment\n" for i in range(1000)))  # 18 bytes a line
    settings = Settings().override(sources={"max_file_bytes": 1800})
    with MemoryIndex(ws, settings=settings, embedder=None) as idx:
        report = idx.sync()
        assert report.warnings == ["memory/big.md: too large: only the first 1800 bytes indexed "
                                   "(sources.max_file_bytes = 1800)"]
        assert idx.get("memory/big.md", from_line=100, lines=5)["text"] == "line 0099 payment"
        with pytest.raises(ArgumentError, match=r"^memory/big.md: line 101 is past what was read and indexed: the "
                                                r"file is larger than sources.max_file_bytes \(1800 bytes\), so only "
                                                r"its first 100 lines are readable and searchable$"):
            idx.get("memory/big.md", from_line=101)


def test_no_index_in_a_read_only_folder_is_one_sentence(tmp_path: Path) -> None:
    import os
    import shutil
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="hm-ro-"))
    try:
        ws = small_ws(base / "ws")
        (ws / ".hybridmem").mkdir()
        for p in [base, *base.rglob("*")]:
            os.chmod(p, 0o555 if p.is_dir() else 0o444)
        code, out, err = _run_unprivileged(["search", "uniqword2", str(ws)])
        assert code == 2
        assert err == (f"hybridmem: error: cannot create the index {ws}/.hybridmem/index.sqlite: the folder is "
                       "read-only; give --index a writable path\n")
    finally:
        for p in [base, *base.rglob("*")]:
            if p.is_dir():
                os.chmod(p, 0o755)
        shutil.rmtree(base)


# -- a long-lived process's check while another process writes ----------------------------------------------------


def test_a_long_lived_check_never_reports_a_sound_index_damaged_after_another_process_wrote(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A watcher or an MCP server keeps one connection open. After another process committed a note, its check said
    "malformed inverted index for FTS5 table main.chunks_fts" of a sound index (FTS5's integrity check reads the
    table's structure as this connection last cached it), and its own full reindex took the live index for broken (no
    backup before the swap). The check now reads one committed state, the keyword table's structure read afresh."""
    ws = small_ws(tmp_path / "ws")
    with MemoryIndex(ws, embedder=HashEmbedder(dims=16)) as server:
        server.sync()
        for i in range(6):
            assert server.search(f"uniqword{i % 4}", min_score=0.0, answer_threshold=0.0).results
            assert server.check() == []
            (ws / "memory" / f"later-{i}.md").write_text(f"# Later {i}\nthe quokka census {i} happens in May\n")
            with MemoryIndex(ws, embedder=HashEmbedder(dims=16)) as other:  # `hybridmem index` in another process
                other.sync()
                assert other.check() == []
            assert server.check() == [], f"after write {i}"
        # the server's own full reindex, after another process wrote: the live index it backs up is sound
        judged: list[bool] = []
        healthy = reindex.Store.healthy
        monkeypatch.setattr(reindex.Store, "healthy", lambda store: judged.append(healthy(store)) or judged[-1])
        server.search("quokka census", min_score=0.0, answer_threshold=0.0)
        (ws / "memory" / "later-6.md").write_text("# Later 6\nthe quokka census 6 happens in May\n")
        with MemoryIndex(ws, embedder=HashEmbedder(dims=16)) as other:
            other.sync()
        assert server.sync(force=True).full_reindex and judged == [True] and server.check() == []
    with MemoryIndex(ws, embedder=HashEmbedder(dims=16)) as fresh:
        assert fresh.check() == [] and fresh.store.count_rows("chunks_fts") == 5 + 7
