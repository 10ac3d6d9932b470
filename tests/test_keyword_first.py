"""Issue 24: keyword first (chunks searchable before their vectors, embedding resumes after a kill, a search while
another process indexes answers from what is stored) and the shared embedding cache (`hybridmem cache`)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from hybridmem.cli import main as cli_main
from hybridmem.embeddings.fake import HashEmbedder
from hybridmem.index import MemoryIndex
from hybridmem.store.shared_cache import SharedCache
from hybridmem.sync.lock import sync_running, try_sync_lock
from hybridmem.sync.pending import EMBED_BATCH

ROOT = Path(__file__).resolve().parents[1]


def make_ws(root: Path, files: int = 30, lines: int = 40) -> Path:
    (root / "memory").mkdir(parents=True)
    (root / "MEMORY.md").write_text("# Memory\nThe payment service retries with exponential backoff.\n")
    for i in range(files):
        body = "\n".join(f"topic {i} line {j}: the walrus{i} ledger holds entry {j} of quota {i * j}"
                         for j in range(lines))
        (root / "memory" / f"topic-{i:03d}.md").write_text(f"# Topic {i}\n{body}\n")
    return root


def test_chunks_are_searchable_by_keyword_before_their_vectors(tmp_path: Path) -> None:
    ws = make_ws(tmp_path / "ws")
    seen: list[dict] = []

    def progress(stage: str, done: int, total: int) -> None:
        if stage == "embed" and not seen:  # the first embed batch runs: every chunk is stored, none embedded yet
            with MemoryIndex(ws, embedder=HashEmbedder(dims=16)) as reader:
                r = reader.search("walrus7 ledger", min_score=0.0, answer_threshold=0.0)
                default = reader.search("walrus7 ledger")  # the default order and gate: the keyword leg answers
                seen.append({"top": r.results[0].path, "vectors": r.vectors, "note": r.vectors_note,
                             "default_top": default.results[0].path if default.results else None,
                             "status": reader.status()["vectors"]})

    with MemoryIndex(ws, embedder=HashEmbedder(dims=16)) as idx:
        report = idx.sync(progress=progress)
        total = report.chunks
        assert idx.vector_progress() == ({"embedded": total, "total": total}, None)
        assert idx.status()["vectors"] == {"embedded": total, "total": total} and "vectors_note" not in idx.status()
    first = seen[0]
    assert first["top"] == first["default_top"] == "memory/topic-007.md"
    assert first["vectors"] == {"embedded": 0, "total": total} == first["status"]
    assert first["note"].startswith(f"vectors for 0 of {total:,} chunks")


def test_a_second_sync_leaves_the_embedding_to_the_process_holding_the_lock(tmp_path: Path) -> None:
    ws = make_ws(tmp_path / "ws", files=5)
    emb = HashEmbedder(dims=16)
    with MemoryIndex(ws, embedder=emb) as idx:
        with try_sync_lock(str(idx.index_path) + "") as held:  # another "process" indexes (another thread's lock)
            assert held
            import threading

            out: dict = {}
            t = threading.Thread(target=lambda: out.update(r=idx.sync()))
            t.start()
            t.join(30)
        report = out["r"]
        assert emb.embedded == 0 and report.chunks > 0
        assert any("another process is indexing" in w for w in report.warnings)
        assert idx.search("walrus3", min_score=0.0, answer_threshold=0.0).results[0].path == "memory/topic-003.md"
        before = emb.embedded  # the query's vector
        idx.sync()  # the lock is free again: the pending chunks are embedded, nothing else
        assert emb.embedded - before == report.chunks and idx.store.pending_count() == 0


CHILD = textwrap.dedent(
    """
    import sys, time
    from hybridmem.index import MemoryIndex
    from hybridmem.embeddings.fake import HashEmbedder

    class Slow(HashEmbedder):
        def embed_batch(self, texts, is_query=False):
            time.sleep(0.05)
            return super().embed_batch(texts, is_query)

    idx = MemoryIndex(sys.argv[1], embedder=Slow(dims=16))
    def progress(stage, done, total):
        if stage == "embed" and done >= 300:
            print("embedding", flush=True)
    idx.sync(progress=progress)
    print("done", flush=True)
    """
)


def test_kill_9_mid_embed_then_the_next_sync_resumes_where_it_stopped(tmp_path: Path) -> None:
    ws = make_ws(tmp_path / "ws", files=60, lines=600)
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(ws)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT)
    line = proc.stdout.readline().strip()  # type: ignore[union-attr]
    assert line == "embedding", proc.stderr.read()  # type: ignore[union-attr]
    time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    emb = HashEmbedder(dims=16)
    with MemoryIndex(ws, embedder=emb) as idx:
        c = idx.store.consistency()
        assert c["quick_check"] and c["chunks"] == c["fts_rows"] and c["vec_rows"] == c["embedded"]
        assert EMBED_BATCH <= c["embedded"] < c["chunks"]  # killed mid-embed: whole batches kept, the rest pending
        assert not sync_running(str(idx.index_path))  # the lock died with the process
        r = idx.search("walrus59 ledger entry 3", min_score=0.0, answer_threshold=0.0)
        assert r.results and r.vectors == {"embedded": c["embedded"], "total": c["chunks"]} and r.vectors_note
        pending = idx.store.pending_count()
        report = idx.sync()
        assert (report.added, report.changed, report.embedded) == (0, 0, pending)  # only the pending chunks
        assert emb.embedded == pending + 1  # and the one query
        c2 = idx.store.consistency()
        assert c2["embedded"] == c2["vec_rows"] == c2["chunks"] == c["chunks"]
        # the resumed vectors are the ones a clean build gives
        ids, mat, _, paths = idx.store.load_vectors("hash", "hash-v1", "")
    with MemoryIndex(tmp_path / "ws", index_path=tmp_path / "clean.sqlite", embedder=HashEmbedder(dims=16)) as clean:
        clean.sync()
        ids2, mat2, _, paths2 = clean.store.load_vectors("hash", "hash-v1", "")
    assert sorted(paths) == sorted(paths2) and np.allclose(np.sort(mat, axis=0), np.sort(mat2, axis=0))


def test_cli_search_while_another_process_indexes_answers_from_the_store(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    ws = make_ws(tmp_path / "ws", files=4)
    (ws / "hybridmem.toml").write_text('[embedding]\nprovider = "none"\n')
    assert cli_main(["index", str(ws), "--json"]) == 0
    (ws / "memory" / "late.md").write_text("# Late\nthe narwhal budget arrived late\n")
    capsys.readouterr()
    with try_sync_lock(str(ws / ".hybridmem" / "index.sqlite")):
        import threading

        out: dict = {}
        t = threading.Thread(target=lambda: out.update(rc=cli_main(["search", "walrus2 ledger", str(ws), "--json"])))
        t.start()
        t.join(30)
    captured = capsys.readouterr()
    assert out["rc"] == 0 and "another process is indexing" in captured.err
    assert json.loads(captured.out)["results"][0]["path"] == "memory/topic-002.md"
    assert cli_main(["search", "narwhal budget", str(ws), "--json"]) == 0  # free again: it syncs first
    assert json.loads(capsys.readouterr().out)["results"][0]["path"] == "memory/late.md"


# -- the shared embedding cache ------------------------------------------------------------------------------------


class SharedHash(HashEmbedder):
    shared_cache = True

    @property
    def weights_hash(self) -> str:
        return "w1"


def test_a_second_index_of_the_same_texts_embeds_nothing_with_the_shared_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HYBRIDMEM_CACHE_DIR", str(tmp_path / "uc"))
    ws = make_ws(tmp_path / "ws", files=6)
    first, second = SharedHash(dims=16), SharedHash(dims=16)
    with MemoryIndex(ws, index_path=tmp_path / "a.sqlite", embedder=first) as idx:
        r1 = idx.sync()
    with MemoryIndex(ws, index_path=tmp_path / "b.sqlite", embedder=second) as idx:  # a second checkout
        r2 = idx.sync()
        assert idx.vector_progress()[0] == {"embedded": r2.chunks, "total": r2.chunks}
    assert r1.embedded == r1.chunks > 0 and first.embedded == r1.chunks
    assert r2.embedded == 0 and second.embedded == 0 and r2.cache_hits == r2.chunks
    other = SharedHash(dims=16, model="hash-v2")  # another model never reads these rows
    with MemoryIndex(ws, index_path=tmp_path / "c.sqlite", embedder=other) as idx:
        assert idx.sync().embedded == r1.chunks


def test_shared_cache_lru_prune_and_stats(tmp_path: Path) -> None:
    cache = SharedCache(tmp_path / "c" / "embeddings.sqlite", max_bytes=0)
    key = ("p", "m", "k", "w")
    vec = np.ones(16, np.float32)
    for i in range(10):
        cache.put(key, {f"h{i}": vec * i})
        time.sleep(0.002)
    cache.get(key, ["h0", "h1"])  # read now: the most recently used
    st = cache.stats()
    assert st["rows"] == 10 and st["models"][0]["rows"] == 10
    row = st["bytes"] // 10
    removed = cache.prune(4 * row)
    assert removed == 6 and set(cache.get(key, [f"h{i}" for i in range(10)])) == {"h0", "h1", "h8", "h9"}
    assert np.allclose(cache.get(key, ["h9"])["h9"], vec * 9)
    assert cache.get(("p", "m", "k", "other"), ["h9"]) == {}
    capped = SharedCache(tmp_path / "c" / "embeddings.sqlite", max_bytes=3 * row)  # the cap prunes on put
    capped.put(key, {"new": vec})
    assert capped.stats()["rows"] <= 3 and "new" in capped.get(key, ["new"])


def test_shared_cache_that_cannot_be_opened_never_fails_a_sync(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    cache = SharedCache(blocker / "embeddings.sqlite")
    assert not cache.available and "unavailable" in (cache.error or "")
    cache.put(("p", "m", "k", "w"), {"h": np.ones(4, np.float32)})
    assert cache.get(("p", "m", "k", "w"), ["h"]) == {}


def test_cache_cli_stats_and_prune(tmp_path: Path, capsys: pytest.CaptureFixture,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYBRIDMEM_CACHE_DIR", str(tmp_path / "uc"))
    ws = make_ws(tmp_path / "ws", files=3)
    with MemoryIndex(ws, embedder=SharedHash(dims=16)) as idx:
        chunks = idx.sync().chunks
    assert cli_main(["cache", "stats", "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert st["path"] == str(tmp_path / "uc" / "embeddings.sqlite") and st["rows"] == chunks
    assert st["models"][0]["model"] == "hash-v1"
    assert st["tokens"]["path"] == str(tmp_path / "uc" / "tokens.sqlite") and st["tokens"]["rows"] == 0
    assert st["tokens"]["max_bytes"] == 512 << 20  # its own cap, under the embedding cache's 2 GB
    assert cli_main(["cache", "stats"]) == 0
    text = capsys.readouterr().out
    assert f"{chunks:,} vectors" in text and "tokens.sqlite: 0 passages' token states" in text
    for bad in (["--max-mb=-5"], ["--max-mb", "nan"], ["--max-mb", "inf"], ["--older-than=-1"]):  # a typo prunes nothing
        assert cli_main(["cache", "prune", *bad]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "must be a number >= 0" in err and "nothing was pruned" in err
    assert cli_main(["cache", "stats", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == chunks
    assert cli_main(["cache", "prune", "--max-mb", "0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["removed"] == chunks and out["rows"] == 0


def test_a_search_sync_stores_everything_but_embeds_only_a_few_chunks(tmp_path: Path) -> None:
    ws = make_ws(tmp_path / "ws", files=6)
    emb = HashEmbedder(dims=16)
    with MemoryIndex(ws, embedder=emb) as idx:
        report = idx.sync(embed_limit=3)  # what `hybridmem search` does before answering
        assert report.chunks > 3 and emb.embedded == 0 and idx.store.pending_count() == report.chunks
        assert any("`hybridmem index` embeds them" in w for w in report.warnings)
        (ws / "memory" / "new.md").write_text("# New\nthe okapi memo\n")
        idx.sync()  # no limit: the new file and the earlier pending chunks
        assert idx.store.pending_count() == 0 and emb.embedded == report.chunks + 1
        (ws / "memory" / "new2.md").write_text("# Newer\nthe quokka memo\n")
        idx.sync(embed_limit=3)  # a small change is embedded at once
        assert idx.store.pending_count() == 0


def test_an_index_built_keyword_only_answers_a_search_that_has_a_model(tmp_path: Path) -> None:
    """`hybridmem index --keyword-only`, then a search with the configured model: without a sync the keyword leg
    answers (the gate of a search whose vector leg had nothing to search) and says why; a search's sync rebuilds for
    the model keyword first and leaves the vectors to `hybridmem index` (it embedded every chunk, minutes on a large
    memory, and without a sync the gate refused every query)."""
    from hybridmem.config import Settings
    from hybridmem.searching import KEYWORD_INDEX

    ws = make_ws(tmp_path / "ws", files=6)
    (ws / "memory" / "pay.md").write_text("# Payments\nThe payment processor retries with exponential backoff.\n")
    with MemoryIndex(ws, settings=Settings().override(embedding={"provider": "none"})) as idx:
        chunks = idx.sync().chunks
    emb = HashEmbedder(dims=16)
    with MemoryIndex(ws, embedder=emb) as idx:
        resp = idx.search("payment processor backoff")
        assert resp.results[0].path == "memory/pay.md" and resp.fallback_reason == KEYWORD_INDEX
        queries = emb.embedded  # the query's vector
        report = idx.sync(embed_limit=3)  # what `hybridmem search` does before answering
        assert report.full_reindex and report.chunks == chunks and emb.embedded == queries
        assert idx.store.pending_count() == chunks
        resp = idx.search("payment processor backoff")
        assert resp.results[0].path == "memory/pay.md" and f"vectors for 0 of {chunks} chunks" in resp.vectors_note
        assert resp.fallback and "no chunk has its vector yet" in resp.fallback_reason  # the keyword gate decided
        idx.sync()  # `hybridmem index`
        assert idx.store.pending_count() == 0 and emb.embedded >= chunks


def test_the_keyword_only_note_tells_an_empty_index_and_an_empty_scope_from_missing_vectors(tmp_path: Path) -> None:
    """A scope no indexed file matches, or an index with no files, is not "another process may still be embedding"."""
    from hybridmem.retrieve import Scope
    from hybridmem.searching import NO_FILE_IN_SCOPE, NO_FILES, NO_VECTOR_FOUND, NO_VECTORS_YET, keyword_only_note
    from hybridmem.tools import NOTHING_FOUND, nothing_found

    ws = make_ws(tmp_path / "ws", files=2)
    with MemoryIndex(ws, embedder=HashEmbedder(dims=16)) as idx:
        idx.sync()
        assert idx.search("walrus1 ledger", path_prefix="nosuch/").fallback_reason == NO_FILE_IN_SCOPE
        assert idx.search("walrus1 ledger", session="nosuch").fallback_reason == NO_FILE_IN_SCOPE
        assert nothing_found(idx.search("walrus1 ledger", path_prefix="nosuch/")) == (  # what memory_search says
            f"{NOTHING_FOUND} No indexed file matches the search's scope (source, path prefix or session), so nothing "
            "was searched.")
    (tmp_path / "empty").mkdir()
    with MemoryIndex(tmp_path / "empty", embedder=HashEmbedder(dims=16)) as idx:
        idx.sync()
        assert idx.search("hello world").fallback_reason == NO_FILES
        assert nothing_found(idx.search("hello world")).startswith(f"{NOTHING_FOUND} The index holds no memory files")

    class Files:  # files in scope whose chunks lack their vector: only then may another process still be embedding
        def files_in_scope(self, scope: Scope) -> bool:
            return scope.source in (None, "memory") and "memory/a.md".startswith(scope.path_prefix or "")

    scope = Scope(path_prefix="memory/")
    assert keyword_only_note({"embedded": 3, "total": 9}, Files(), scope) == NO_VECTOR_FOUND
    assert keyword_only_note({"embedded": 0, "total": 9}, Files(), scope) == NO_VECTORS_YET
    assert keyword_only_note({"embedded": 3, "total": 9}, Files(), Scope(source="sessions")) == NO_FILE_IN_SCOPE


def test_index_waits_for_the_lock_a_search_sync_holds(tmp_path: Path) -> None:
    import threading

    ws = make_ws(tmp_path / "ws", files=3)
    with MemoryIndex(ws, embedder=HashEmbedder(dims=16)) as idx:
        released = threading.Event()
        done: list[float] = []

        def hold() -> None:
            with try_sync_lock(str(idx.index_path)):
                released.wait(10)

        t = threading.Thread(target=hold)
        t.start()
        time.sleep(0.1)
        assert sync_running(str(idx.index_path))
        waiter = threading.Thread(target=lambda: (idx.sync(wait=True), done.append(time.monotonic())))
        waiter.start()
        time.sleep(0.3)
        assert not done  # `hybridmem index` waits for the holder
        released.set()
        waiter.join(10)
        t.join(10)
        assert done and idx.store.pending_count() == 0


def test_memory_search_text_and_status_carry_the_vectors_note(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    from hybridmem.serve.server import STATUS_OUTPUT, render

    out = {"query": "q", "results": [{"path": "a.md", "citation": "a.md#L1-L2", "score": 0.5, "snippet": "x"}],
           "vectors": {"embedded": 1, "total": 2}, "vectors_note": "vectors for 1 of 2 chunks"}
    assert render("memory_search", out).endswith("(note: vectors for 1 of 2 chunks)")
    assert {"vectors", "vectors_note"} <= set(STATUS_OUTPUT["properties"])


def test_a_batch_that_fails_before_its_commit_leaves_no_cache_rows(tmp_path: Path, monkeypatch) -> None:
    # the cache rows of a batch commit with its vectors: a sync dying between the embedding and that commit (a kill,
    # a full disk) leaves the batch pending and the index's cache without it, so the next sync embeds exactly the
    # pending chunks (it used to find the batch in the cache, written a commit earlier)
    from hybridmem.store.database import Store

    ws = make_ws(tmp_path / "ws", files=40, lines=200)
    emb = HashEmbedder(dims=16)
    real = Store.set_vectors
    calls = {"n": 0}

    def failing(self, items):  # noqa: ANN001, ANN202
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError("disk full")
        return real(self, items)

    monkeypatch.setattr(Store, "set_vectors", failing)
    with MemoryIndex(ws, embedder=emb) as idx, pytest.raises(OSError, match="disk full"):
        idx.sync()
    monkeypatch.setattr(Store, "set_vectors", real)
    with MemoryIndex(ws, embedder=emb) as idx:
        c = idx.store.consistency()
        assert c["embedded"] == EMBED_BATCH < c["chunks"] and c["vec_rows"] == c["embedded"]
        assert idx.store.cache_count() == EMBED_BATCH  # the failed batch's rows rolled back with it
        pending = idx.store.pending_count()
        before = emb.embedded
        report = idx.sync()
        assert report.embedded == pending == emb.embedded - before
        c2 = idx.store.consistency()
        assert c2["embedded"] == c2["vec_rows"] == c2["chunks"]


STORE_ELSEWHERE = textwrap.dedent(
    """
    import sys
    from hybridmem.embeddings.fake import HashEmbedder
    from hybridmem.index import MemoryIndex
    with MemoryIndex(sys.argv[1], embedder=HashEmbedder(dims=16)) as idx:
        print(idx.sync().warnings)
    """
)


def test_a_chunk_stored_meanwhile_under_a_reused_id_gets_the_vector_of_its_own_text(tmp_path: Path) -> None:
    """While one sync embedded a pending chunk, another process stored the file's new text, and SQLite gave the new
    chunk the deleted one's id: the first sync attached the old text's vector to it, for good (nothing was pending).
    A vector is attached only to the text it was computed for now, and the new chunk is embedded in the same sync."""
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    note = ws / "memory" / "a.md"
    note.write_text("alpha apples avocado\n", encoding="utf-8")

    class EditedWhileEmbedding(HashEmbedder):
        edited = False

        def embed_batch(self, texts, is_query=False):  # noqa: ANN001, ANN201
            if not is_query and not self.edited:
                self.edited = True
                note.write_text("zebra zucchini zinc\n", encoding="utf-8")
                proc = subprocess.run([sys.executable, "-c", STORE_ELSEWHERE, str(ws)], cwd=ROOT, capture_output=True,
                                      text=True, timeout=120)
                assert proc.returncode == 0 and "another process is indexing" in proc.stdout, proc.stderr
            return super().embed_batch(texts, is_query)

    with MemoryIndex(ws, embedder=EditedWhileEmbedding(dims=16)) as idx:
        idx.sync()
        rows = idx.store._db.execute("SELECT id, text, embedded FROM chunks").fetchall()
        assert [(r[1], r[2]) for r in rows] == [("zebra zucchini zinc", 1)]
        got = np.frombuffer(idx.store._db.execute("SELECT embedding FROM chunks_vec WHERE rowid = ?",
                                                  (rows[0][0],)).fetchone()[0], dtype=np.float32)
        assert np.allclose(got, HashEmbedder(dims=16).embed_documents(["zebra zucchini zinc"])[0])
        assert idx.store.pending_count() == 0
