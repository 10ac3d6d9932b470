"""Faults: kill -9 during a full reindex, searching while another process syncs, corrupt index files, bad input.

Every test uses the real store (SQLite FTS5 + sqlite-vec) and the HashEmbedder (a real embedder without a model).
"""

from __future__ import annotations

import hashlib
import os
import json
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hybridmem.cli import main as cli_main
from hybridmem.config import Settings
from hybridmem.embeddings.fake import HashEmbedder
from hybridmem.errors import IndexCorruptError, PathError
from hybridmem.index import MemoryIndex
from hybridmem.sync.reindex import leftovers

ROOT = Path(__file__).resolve().parents[1]
WORDS = ("alpha beta gamma delta payment retry backoff timing belt car repair kafka queue deploy rollback schema "
         "index vector search memory agent invoice tenant latency budget").split()


def make_workspace(root: Path, files: int, lines: int = 120, seed: int = 1) -> Path:
    rng = random.Random(seed)
    (root / "memory").mkdir(parents=True)
    (root / "MEMORY.md").write_text("# Memory\nThe payment service retries with exponential backoff.\n")
    for i in range(files):
        body = "\n".join(" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(lines))
        (root / "memory" / f"topic-{i:04d}.md").write_text(body)
    return root


def tree_hashes(root: Path) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and ".hybridmem" not in p.parts:
            out[p.relative_to(root).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def assert_consistent(ws: Path) -> dict:
    with MemoryIndex(ws, embedder=HashEmbedder()) as idx:
        c = idx.store.consistency()
        assert c["quick_check"] is True
        assert c["chunks"] == c["fts_rows"] == c["vec_rows"] == c["embedded"] > 0
        st = idx.status()
        assert st["chunks"] == c["chunks"] and st["files"] > 0
        resp = idx.search("payment retry backoff", min_score=0.0, answer_threshold=0.0)
        assert resp.results, "search returned nothing after the crash"
        assert not resp.fallback
        return {"chunks": c["chunks"], "generation": int(idx.store.get_meta("generation", "0"))}


CHILD_REINDEX = textwrap.dedent(
    """
    import sys, time
    from hybridmem.index import MemoryIndex
    from hybridmem.embeddings.fake import HashEmbedder
    idx = MemoryIndex(sys.argv[1], embedder=HashEmbedder())
    print("ready", flush=True)
    t = time.perf_counter()
    idx.sync(force=True)
    print("done", time.perf_counter() - t, flush=True)
    """
)


def _start_child(ws: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", CHILD_REINDEX, str(ws)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT)
    line = proc.stdout.readline()  # type: ignore[union-attr]
    assert line.strip() == "ready", proc.stderr.read()  # type: ignore[union-attr]
    return proc


@pytest.mark.slow
def test_kill_9_during_full_reindex_at_20_moments(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws", files=60)
    with MemoryIndex(ws, embedder=HashEmbedder()) as idx:
        idx.sync()
    before = tree_hashes(ws)
    base = assert_consistent(ws)
    # Calibrate: how long a full reindex takes once the child is ready.
    proc = _start_child(ws)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    duration = float(out.split()[-1])
    assert duration > 0.3, f"workspace too small to kill mid-reindex ({duration:.2f}s)"
    outcomes: list[dict] = []
    scale, attempts = 1.0, 0
    while sum(o["killed"] for o in outcomes) < 20 and attempts < 60:
        attempts += 1
        k = sum(o["killed"] for o in outcomes)
        delay = duration * scale * k / 19  # 0 .. the calibrated end: the last moments fall on the swap
        proc = _start_child(ws)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        killed = proc.returncode == -signal.SIGKILL
        state = assert_consistent(ws)  # opens, status consistent, search works
        assert state["chunks"] == base["chunks"]
        assert tree_hashes(ws) == before, "a source file changed"
        outcomes.append({"delay": round(delay, 3), "killed": killed, "generation": state["generation"]})
        if not killed:
            scale *= 0.85  # this run was faster than the calibration: aim earlier
    # Leftover temp/backup files are cleaned by the next reindex.
    with MemoryIndex(ws, embedder=HashEmbedder()) as idx:
        idx.sync(force=True)
    assert leftovers(ws / ".hybridmem" / "index.sqlite") == []
    assert_consistent(ws)
    kills = [o for o in outcomes if o["killed"]]
    assert len(kills) == 20, f"only {len(kills)} runs were killed before they finished"
    gens = [o["generation"] for o in outcomes]
    assert gens == sorted(gens), "generation went backwards: an old index came back"
    assert gens[0] == base["generation"] + 1  # killed at once: the calibration run's index is intact
    after_swap = sum(1 for prev, o in zip([base["generation"] + 1] + gens, outcomes) if o["killed"]
                     and o["generation"] > prev)
    print("\nreindex kill outcomes:", json.dumps({"killed_mid_reindex": len(kills), "survived": len(kills),
                                                  "killed_after_swap_commit": after_swap, "runs": len(outcomes),
                                                  "reindex_s": round(duration, 2), "outcomes": outcomes}))


CHILD_INDEX = textwrap.dedent(
    """
    import sys
    from hybridmem.index import MemoryIndex
    from hybridmem.embeddings.fake import HashEmbedder
    idx = MemoryIndex(sys.argv[1], embedder=HashEmbedder())
    print("ready", flush=True)
    idx.sync()
    print("done", flush=True)
    """
)


def rewrite_all(ws: Path, files: int, version: int) -> None:
    rng = random.Random(version)
    for i in range(files):
        body = "\n".join(" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(60 + version % 7))
        (ws / "memory" / f"topic-{i:04d}.md").write_text(f"version {version} of topic {i}\n{body}")


@pytest.mark.slow
def test_kill_9_during_incremental_index_at_20_moments(tmp_path: Path) -> None:
    """Every file's rows are replaced in one commit: a kill at any moment leaves each file old or new, never a mix,
    and the next index finishes the job."""
    files = 60
    ws = make_workspace(tmp_path / "ws", files=files)
    with MemoryIndex(ws, embedder=HashEmbedder()) as idx:
        idx.sync()
    from hybridmem.chunking import chunk_text

    chunking = Settings().chunking
    known: dict[str, set[tuple]] = {}  # path -> the chunk spans of every version written

    def remember() -> None:
        for p in (ws / "memory").glob("*.md"):
            spans = tuple((c.start_line, c.end_line, c.hash) for c in chunk_text(p.read_text(), chunking))
            known.setdefault(f"memory/{p.name}", set()).add(spans)

    remember()
    killed = 0
    for version in range(1, 41):
        if killed == 20:
            break
        rewrite_all(ws, files, version)
        remember()
        proc = subprocess.Popen([sys.executable, "-c", CHILD_INDEX, str(ws)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=ROOT)
        assert proc.stdout.readline().strip() == "ready"  # type: ignore[union-attr]
        time.sleep(random.Random(version).uniform(0.0, 0.6))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        killed += proc.returncode == -signal.SIGKILL
        with MemoryIndex(ws, embedder=HashEmbedder()) as idx:
            c = idx.store.consistency()  # keyword first: a kill mid-embed leaves chunks pending, never half-written
            assert c["quick_check"] and c["chunks"] == c["fts_rows"] > 0 and c["vec_rows"] == c["embedded"]
            indexed: dict[str, list[tuple]] = {}
            for path, start, end, h in idx.store.chunk_spans():
                indexed.setdefault(path, []).append((start, end, h))
            for path, spans in indexed.items():  # each file's chunks are one whole version of it, never a mix
                if path.startswith("memory/topic-"):
                    assert tuple(spans) in known[path], path
            idx.sync()  # finishes the interrupted work, the pending vectors included
            c = idx.store.consistency()
            assert c["chunks"] == idx.status()["chunks"] == c["embedded"] == c["vec_rows"]
            first = idx.search(f"version {version} of topic 7", min_score=0.0, answer_threshold=0.0, vector_weight=0.0, text_weight=1.0)
            assert first.results[0].path == "memory/topic-0007.md"
            assert first.results[0].text.startswith(f"version {version} of topic 7\n")
    assert killed == 20, f"only {killed} runs were killed before they finished"


CHILD_SEARCH = textwrap.dedent(
    """
    import sys, json, random, time
    from pathlib import Path
    from hybridmem.index import MemoryIndex
    from hybridmem.embeddings.fake import HashEmbedder
    words = sys.argv[3].split()
    idx = MemoryIndex(sys.argv[1], embedder=HashEmbedder())
    idx.settings = idx.settings.override(sync={"sync_on_search": False})
    rng = random.Random(7)
    n = int(sys.argv[2]); errors = []; empty = 0; wrong = []; checked = 0
    ws = Path(sys.argv[1])

    def holds(path, text):
        for _ in range(20):  # the other process may be rewriting the file right now
            try:
                if text in (ws / path).read_text():
                    return True
            except OSError:
                pass
            time.sleep(0.01)
        return False

    print("ready", flush=True)
    t = time.perf_counter()
    for i in range(n):
        k = rng.randrange(30)
        q = f"topicmark{k}" if i % 2 else " ".join(rng.choice(words) for _ in range(3))
        try:
            r = idx.search(q, min_score=0.0, answer_threshold=0.0)
            empty += not r.results
            if i % 2:
                top = [h.path for h in r.results if h.text_rank == 1]
                if top != [f"memory/topic-{k:04d}.md"]:
                    wrong.append(f"{q}: text rank 1 is {top}")
            for h in r.results:  # every answer: the text is its own file's
                checked += 1
                if not holds(h.path, h.text):
                    wrong.append(f"{q}: {h.citation} does not hold {h.text[:60]!r}")
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
    print(json.dumps({"queries": n, "errors": len(errors), "first_errors": errors[:5], "empty": empty,
                      "wrong": len(wrong), "first_wrong": wrong[:5], "hits_checked": checked,
                      "seconds": time.perf_counter() - t}), flush=True)
    """
)


@pytest.mark.slow
def test_search_process_while_another_syncs_has_zero_errors(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws", files=30, lines=40)
    for i in range(30):  # one word only topic i holds, so every answer can be checked
        p = ws / "memory" / f"topic-{i:04d}.md"
        p.write_text(f"topicmark{i}\n" + p.read_text())
    with MemoryIndex(ws, embedder=HashEmbedder()) as idx:
        idx.sync()
    proc = subprocess.Popen([sys.executable, "-c", CHILD_SEARCH, str(ws), "1000", " ".join(WORDS)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout.readline().strip() == "ready"  # type: ignore[union-attr]
    syncs = reindexes = 0
    rng = random.Random(3)
    with MemoryIndex(ws, embedder=HashEmbedder()) as idx:
        while proc.poll() is None:
            i = rng.randrange(30)
            p = ws / "memory" / f"topic-{i:04d}.md"
            p.write_text(p.read_text() + f"\nappended {syncs} " + " ".join(rng.choice(WORDS) for _ in range(8)))
            if syncs % 5 == 4:
                (ws / "memory" / f"new-{syncs}.md").write_text("a new note about payment retry\n")
            if syncs % 10 == 9:
                idx.sync(force=True)  # a full atomic reindex while the other process searches
                reindexes += 1
            else:
                idx.sync()
            syncs += 1
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    print("\nconcurrent search:", json.dumps({**result, "syncs": syncs, "full_reindexes": reindexes}))
    assert result["queries"] >= 1000
    assert syncs >= 5 and reindexes >= 1
    assert result["errors"] == 0, result["first_errors"]
    assert result["empty"] == 0
    assert result["wrong"] == 0, result["first_wrong"]  # new-*.md sort first: every rebuild shifts chunk ids


# -- corrupt index ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("blocked", ["folder is a file", "index is a folder"])
def test_a_file_or_folder_in_the_index_s_way_is_one_sentence(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                             blocked: str) -> None:
    """`.hybridmem` made a file, or `index.sqlite` a folder: every command raised NotADirectoryError or SQLite's
    "unable to open database file" as a traceback (and `status` said `hybridmem index` would build it)."""
    ws = make_workspace(tmp_path / "ws", files=2, lines=3)
    if blocked == "folder is a file":
        (ws / ".hybridmem").write_text("")
        why = f"{ws / '.hybridmem'} is a file, not a folder; move it away, or give --index a path of its own"
    else:
        (ws / ".hybridmem" / "index.sqlite").mkdir(parents=True)
        why = "index.sqlite is a folder, not an index file: move it away, or give --index a file path of its own"
    for argv in (["index", str(ws), "--keyword-only"], ["status", str(ws)], ["search", "x", str(ws), "--no-sync"],
                 ["get", "memory/topic-0000.md", str(ws)]):
        assert cli_main(argv) == 2, argv
        err = capsys.readouterr().err
        assert why in err and err.count("\n") == 1 and "Traceback" not in err, (argv, err)


def test_a_full_disk_is_one_sentence(tmp_path: Path, capsys: pytest.CaptureFixture,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite's SQLITE_FULL (a fake: filling a real disk needs a mount of its own) reaches the user as a sentence."""
    import sqlite3

    from hybridmem.sync.syncer import Syncer

    ws = make_workspace(tmp_path / "ws", files=2, lines=3)

    def full(*args: Any, **kwargs: Any) -> Any:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(Syncer, "sync", full)
    assert cli_main(["index", str(ws), "--keyword-only"]) == 2
    err = capsys.readouterr().err
    assert err == ("hybridmem: error: the disk is full (database or disk is full): the index keeps what it held "
                   "before; free some space and run the command again\n")


def test_corrupt_index_gives_clear_error_and_rebuild_works(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    ws = make_workspace(tmp_path / "ws", files=3, lines=10)
    index = ws / ".hybridmem" / "index.sqlite"
    index.parent.mkdir()
    index.write_bytes(b"this is not a database at all " * 200)
    with pytest.raises(IndexCorruptError, match=r"corrupt .*hybridmem index --rebuild"):
        MemoryIndex(ws, embedder=HashEmbedder())
    assert cli_main(["status", str(ws)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hybridmem: error: the index ") and "hybridmem index --rebuild" in err
    assert cli_main(["index", str(ws), "--rebuild", "--keyword-only"]) == 0
    with MemoryIndex(ws, settings=Settings().override(embedding={"provider": "none"})) as idx:
        assert idx.status()["files"] == 4
        assert idx.search("payment").results
    assert list(index.parent.glob("index.sqlite.corrupt-*")), "the corrupt file is kept aside for inspection"


@pytest.mark.parametrize("offset", [4096, 8192, 12288])
def test_damaged_page_after_open_gives_one_line_and_rebuild_works(tmp_path: Path, offset: int,
                                                                  capsys: pytest.CaptureFixture) -> None:
    """A page past the header and schema overwritten: the index opens, and the damage surfaces at the first read of
    that page (the settings, the meta table, a chunk). Every command says so in one line (exit 2); ``index
    --rebuild`` finds it with ``quick_check``, moves the file aside and rebuilds."""
    ws = make_workspace(tmp_path / "ws", files=3, lines=10)
    (ws / "hybridmem.toml").write_text('[embedding]\nprovider = "none"\n')  # the CLI opens it as it was built
    with MemoryIndex(ws) as idx:
        idx.sync()
        idx.store.checkpoint()
    index = ws / ".hybridmem" / "index.sqlite"
    with open(index, "r+b") as fh:
        fh.seek(offset)
        fh.write(b"\xab" * 4096)
    capsys.readouterr()
    for argv in (["search", "payment", str(ws)], ["get", "MEMORY.md", str(ws)], ["status", str(ws)], ["index", str(ws)]):
        code = cli_main(argv)
        err = capsys.readouterr().err
        if code == 0:  # this command never read the damaged page
            continue
        assert code in (1, 2) and "Traceback" not in err, (argv, err)
        assert err.count("\n") == 1 and "hybridmem index --rebuild" in err or argv[0] == "status", (argv, err)
    assert cli_main(["index", str(ws), "--rebuild"]) == 0
    assert "is damaged" in capsys.readouterr().err
    with MemoryIndex(ws) as idx:
        assert idx.status()["files"] == 4
        assert idx.search("payment").results
        assert not idx.check()
    assert list(index.parent.glob("index.sqlite.corrupt-*")), "the damaged file is kept aside for inspection"


def test_rebuild_moves_aside_the_index_store_path_names(tmp_path: Path) -> None:
    """The CLI resolves the index file as the facade does (``config.resolve_index_path``), so ``--rebuild`` moves
    aside the corrupt file ``store.path`` names, not the default one."""
    ws = make_workspace(tmp_path / "ws", files=3, lines=10)
    (ws / "hybridmem.toml").write_text('[store]\npath = "idx/mem.sqlite"\n')
    with MemoryIndex(ws, embedder=HashEmbedder()) as idx:
        idx.sync()
        idx.store.checkpoint()
    index = ws / "idx" / "mem.sqlite"
    data = index.read_bytes()
    index.write_bytes(data[:100] + b"\xff" * 50 + data[150:4096])  # as in the next test: corrupt
    with pytest.raises(IndexCorruptError):
        MemoryIndex(ws, embedder=HashEmbedder())
    assert cli_main(["index", str(ws), "--rebuild", "--keyword-only"]) == 0
    assert list(index.parent.glob("mem.sqlite.corrupt-*")) and not (ws / ".hybridmem" / "index.sqlite").exists()


def test_truncated_index_file_is_corrupt_not_a_crash(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws", files=3, lines=10)
    with MemoryIndex(ws, embedder=HashEmbedder()) as idx:
        idx.sync()
        idx.store.checkpoint()
    index = ws / ".hybridmem" / "index.sqlite"
    data = index.read_bytes()
    index.write_bytes(data[:100] + b"\xff" * 50 + data[150:4096])
    with pytest.raises(IndexCorruptError):
        MemoryIndex(ws, embedder=HashEmbedder())


# -- memory_get refusals ---------------------------------------------------------------------------------------------


@pytest.fixture()
def small_index(tmp_path: Path):
    ws = make_workspace(tmp_path / "ws", files=2, lines=5)
    (tmp_path / "secret.md").write_text("outside secret\n")
    (ws / "notes.md").write_text("not a memory file\n")
    (ws / "memory" / "link.md").symlink_to(tmp_path / "secret.md")
    (ws / "memory" / "dirlink").symlink_to(tmp_path, target_is_directory=True)
    (ws / "memory" / "data.bin").write_bytes(b"\x00\x01")
    idx = MemoryIndex(ws, embedder=HashEmbedder())
    idx.sync()
    yield idx
    idx.close()


@pytest.mark.parametrize(
    "path, message",
    [
        ("../secret.md", "escapes the memory root"),
        ("memory/../../secret.md", "escapes the memory root"),
        ("/etc/passwd", "absolute paths are refused"),
        ("C:/Windows/win.ini", "absolute paths are refused"),
        ("~/secret.md", "absolute paths are refused"),
        ("memory/link.md", "not an indexed memory file"),
        ("memory/dirlink/secret.md", "not an indexed memory file"),
        ("notes.md", "not an indexed memory file"),
        ("memory/data.bin", "not an indexed memory file"),
        (".hybridmem/index.sqlite", "not an indexed memory file"),
        ("memory/topic-9999.md", "no such memory file: 'memory/topic-9999.md'"),
        ("memory/topic-0000.md\x00.txt", "NUL byte"),
        ("", "path is empty"),
    ],
)
def test_get_refuses(small_index: MemoryIndex, path: str, message: str) -> None:
    with pytest.raises(PathError, match=message):
        small_index.get(path)


def test_get_refuses_file_swapped_for_symlink_after_indexing(small_index: MemoryIndex, tmp_path: Path) -> None:
    target = small_index.workspace / "memory" / "topic-0001.md"  # type: ignore[operator]
    assert small_index.get("memory/topic-0001.md")["lines"] == 5
    target.unlink()
    target.symlink_to(tmp_path / "secret.md")
    with pytest.raises(PathError, match="symlink"):
        small_index.get("memory/topic-0001.md")


# -- bad input -------------------------------------------------------------------------------------------------------


def test_binary_invalid_utf8_and_empty_files(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "binary.md").write_bytes(b"PK\x03\x04\x00\x00binary\x00data" * 50)
    (ws / "memory" / "latin1.md").write_bytes("café crème brûlée payment\n".encode("latin-1"))
    (ws / "memory" / "empty.md").write_bytes(b"")
    (ws / "memory" / "blank.md").write_text("\n\n   \n")
    (ws / "memory" / "utf16.md").write_bytes("payment notes in UTF-16\n".encode("utf-16"))
    with MemoryIndex(ws, embedder=HashEmbedder()) as idx:
        report = idx.sync()
        assert sorted(report.warnings) == ["memory/binary.md: binary file skipped",
                                           "memory/latin1.md: not UTF-8: read as Windows-1252 (Latin-1)"]
        assert sorted(f["path"] for f in idx.files()) == ["memory/blank.md", "memory/empty.md", "memory/latin1.md",
                                                          "memory/utf16.md"]
        hits = idx.search("payment", min_score=0.0, answer_threshold=0.0).results
        assert sorted(h.path for h in hits) == ["memory/latin1.md", "memory/utf16.md"]
        with pytest.raises(PathError, match="memory/binary.md is a binary file, so it is not indexed"):
            idx.get("memory/binary.md")
        assert "café crème brûlée" in {h.path: h for h in hits}["memory/latin1.md"].text
        assert idx.store.consistency()["chunks"] == 2


def test_empty_workspace(tmp_path: Path) -> None:
    ws = tmp_path / "empty"
    ws.mkdir()
    with MemoryIndex(ws, embedder=HashEmbedder()) as idx:
        report = idx.sync()
        assert (report.files, report.chunks, report.warnings) == (0, 0, [])
        resp = idx.search("anything")
        assert resp.results == ()
        assert idx.status()["chunks"] == 0


class NaNEmbedder(HashEmbedder):
    """Returns NaN and inf in every other vector, as a broken model might."""

    def embed_batch(self, texts, is_query=False):  # noqa: ANN001, ANN201
        out = super().embed_batch(texts, is_query)
        out[::2, 0] = np.nan
        out[1::2, 1] = np.inf
        return out


def test_nan_vectors_are_sanitized(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws", files=4, lines=30)
    with MemoryIndex(ws, embedder=NaNEmbedder()) as idx:
        idx.sync()
        ids, mat, _, _ = idx.store.load_vectors("hash", "hash-v1", "")
        assert len(ids) == idx.store.consistency()["chunks"]
        assert np.isfinite(mat).all()
        norms = np.linalg.norm(mat, axis=1)
        assert np.all((np.abs(norms - 1) < 1e-5) | (norms == 0))
        resp = idx.search("payment retry", min_score=0.0, answer_threshold=0.0)
        assert resp.results and all(np.isfinite(h.final_score) for h in resp.results)


def test_model_with_other_dims_triggers_full_reindex(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws", files=3, lines=20)
    with MemoryIndex(ws, embedder=HashEmbedder(dims=64)) as idx:
        first = idx.sync()
        assert idx.status()["dims"] == 64
    e32 = HashEmbedder(dims=32)  # same provider name and model name, other dimensionality
    with MemoryIndex(ws, embedder=e32) as idx:
        report = idx.sync()
        assert report.full_reindex is True
        assert e32.embedded == first.chunks  # cached 64-dim vectors were not reused
        st = idx.status()
        assert st["dims"] == 32 and idx.store.consistency()["vec_rows"] == first.chunks
        assert idx.search("payment retry", min_score=0.0, answer_threshold=0.0).results
    with MemoryIndex(ws, embedder=HashEmbedder(dims=64)) as reader:  # a reader with the old model: keyword-only
        resp = reader.retrieve("payment retry", 10)
        assert resp.keyword and not resp.vector_searched


CHILD_MEMORY = textwrap.dedent(
    """
    import json, resource, sys
    from hybridmem.config import Settings
    from hybridmem.index import MemoryIndex

    def peak_kb():
        # ru_maxrss survives execve (it would report the parent pytest's peak); VmHWM is this process's own.
        try:
            for line in open("/proc/self/status"):
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        except OSError:
            pass
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    # the language identifier a sync reads each chunk with (sync/census.py) maps its tables (about 30 MB of pages for
    # English text): a fixed cost, whatever the file's size, counted in the base
    from hybridmem.ranking.language import text_language
    assert text_language("the payment processor retries with a longer backoff each time") == "en"
    base = peak_kb()
    s = Settings().override(embedding={"provider": "none"}, sources={"max_file_bytes": int(sys.argv[2])})
    with MemoryIndex(sys.argv[1], settings=s) as idx:
        r = idx.sync()
        hit = idx.search("payment retry").results[0].citation
    peak = peak_kb()
    print(json.dumps({"base_mb": base / 1024, "peak_mb": peak / 1024, "chunks": r.chunks, "warnings": r.warnings,
                      "hit": hit}))
    """
)


@pytest.mark.slow
def test_100_mb_markdown_file_keeps_memory_bounded(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    rng = random.Random(5)
    block = "".join(" ".join(rng.choice(WORDS) for _ in range(14)) + "\n" for _ in range(10_000)).encode()
    with open(ws / "memory" / "huge.md", "wb") as fh:
        while fh.tell() < 100 * 1024 * 1024:
            fh.write(block)
    size = (ws / "memory" / "huge.md").stat().st_size
    before = tree_hashes(ws)
    limit = 4 * 1024 * 1024
    out = subprocess.run([sys.executable, "-c", CHILD_MEMORY, str(ws), str(limit)], capture_output=True, text=True,
                         cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    print("\n100 MB file:", json.dumps({"file_mb": round(size / 2**20, 1), **res}))
    assert len(res["warnings"]) == 1
    assert res["warnings"][0].startswith("memory/huge.md: too large: only the first ")
    assert res["warnings"][0].endswith(f"bytes indexed (sources.max_file_bytes = {limit})")
    assert res["peak_mb"] - res["base_mb"] < 8 * limit / 2**20 + 40  # bounded by the setting, not the file
    assert res["hit"].startswith("memory/huge.md#L")
    assert tree_hashes(ws) == before


@pytest.mark.parametrize(
    "section, values, message",
    [
        ("ranking", {"mmr_lambda": 2}, "invalid setting ranking.mmr_lambda=2.0: expected a number from 0 to 1"),
        ("ranking", {"fusion": ""}, "invalid setting ranking.fusion=''"),
        ("chunking", {"overlap": 500}, "invalid setting chunking.overlap=500"),
        ("embedding", {"provider": "cohere"}, "invalid setting embedding.provider='cohere'"),
        ("embedding", {"batch_size": "64"}, "invalid setting embedding.batch_size='64': expected int"),
        ("sync", {"watch_debounce_s": -1}, "invalid setting sync.watch_debounce_s=-1.0"),
        ("sync", {"session_delta_messages": -1}, "invalid setting sync.session_delta_messages=-1"),
        ("sources", {"max_file_bytes": 0}, "invalid setting sources.max_file_bytes=0"),
        ("sources", {"redact_patterns": ["(?P<"]}, "invalid setting sources.redact_patterns: '(?P<'"),
        ("store", {"vector_search": "faiss"}, "invalid setting store.vector_search='faiss'"),
        ("store", {"int8_min_rows": -1}, "invalid setting store.int8_min_rows=-1: expected an integer >= 0"),
        ("serve", {"query_log_max_bytes": -1}, "invalid setting serve.query_log_max_bytes=-1: expected an integer >= 1"),
        ("serve", {"http_port": 70000}, "invalid setting serve.http_port=70000: expected an integer from 0 to 65535"),
        ("serve", {"max_note_chars": 0}, "invalid setting serve.max_note_chars=0"),
        ("tokenizer", {"max_query_chars": 0}, "invalid setting tokenizer.max_query_chars=0: expected an integer >= 1"),
        ("ranking", {"no_such": 1}, "unknown setting ranking.no_such"),
    ],
)
def test_invalid_config_values_name_the_setting(section: str, values: dict, message: str) -> None:
    from hybridmem.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        Settings().override(**{section: values})
    assert str(info.value).startswith(message)


def test_invalid_config_file_via_cli(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "hybridmem.toml").write_text("[ranking]\nmax_results = 0\n")
    assert cli_main(["status", str(ws)]) == 2
    assert capsys.readouterr().err.strip() == (
        "hybridmem: error: invalid setting ranking.max_results=0: expected an integer >= 1")


# -- 10,000 fuzzed queries through the tools ---------------------------------------------------------------------

FUZZ_PIECES = ["\ud83d", "\ude00", "\udfff", "\ud800", "\x00", "\x00\x00", "😀", "支付", "การ", "ﷺ", '"', "*", "(", ")",
               "^", ":", "-", "+", "NEAR", "AND", "OR", "NOT", "NEAR/2", "{", "}", "\\", "'", "\t", "\n", "\r", " ",
               "\u200b", "\ufeff", "\u0301", "%", "_", "..", "/", "payment", "retry", "backoff", "timing", "belt"]


def fuzz_query(rng: random.Random) -> str:
    n = rng.choice([0, 1, 2, 3, 5, 8, 20, 200])
    parts = []
    for _ in range(n):
        r = rng.random()
        if r < 0.6:
            parts.append(rng.choice(FUZZ_PIECES))
        elif r < 0.8:
            parts.append(chr(rng.randrange(0x20, 0x3000)))
        else:
            parts.append(chr(rng.randrange(0xD800, 0xE000)))  # any lone surrogate
    return "".join(parts)


@pytest.mark.slow
def test_10000_fuzzed_queries_through_the_tools_never_fail_nor_change_the_index(tmp_path: Path) -> None:
    from hybridmem.tools import MemoryTools

    ws = make_workspace(tmp_path / "ws", files=6, lines=20)
    with MemoryIndex(ws, embedder=HashEmbedder()) as idx:
        idx.sync()
        before = (idx.status()["embedded_chunks"], idx.store.get_meta("settings_hash"))
        tools = MemoryTools(idx)
        rng = random.Random(18)
        outcomes: dict[str, int] = {}
        for i in range(10_000):
            q = fuzz_query(rng)
            raw = tools.handle("memory_search", {"query": q, "min_score": 0.0} if i % 2 else {"query": q})
            raw.encode("utf-8")  # strict: no lone surrogate reaches the answer
            out = json.loads(raw)
            assert "unavailable" not in out, (q, out)
            if "error" in out:
                assert out.get("bad_arguments") is True, (q, out)
                kind = "bad argument"
            else:
                assert isinstance(out["results"], list)
                kind = "results" if out["results"] else "no results"
            outcomes[kind] = outcomes.get(kind, 0) + 1
        assert idx.embedder is not None and idx.embedder.name == "hash" and not idx.dirty
        idx.sync()
        assert (idx.status()["embedded_chunks"], idx.store.get_meta("settings_hash")) == before
    print("\nfuzzed tool queries:", json.dumps(outcomes))
    assert sum(outcomes.values()) == 10_000 and outcomes["results"] > 1000


# -- memory_write under contention, kills and rebuilds (issue #23) ---------------------------------------------------


def _assert_notes_at_lines(ws: Path, outs: list[dict], notes: list[str]) -> None:
    """Every note reported saved is in its file once, at the lines its reply named, and no two share a line."""
    files: dict[str, list[str]] = {}
    for out, note in zip(outs, notes):
        lines = files.setdefault(out["path"], (ws / out["path"]).read_text(encoding="utf-8").split("\n"))
        assert "\n".join(lines[out["start_line"] - 1 : out["end_line"]]) == note, (out, note)
    body = "".join("\n".join(v) for v in files.values())
    assert all(body.count(n) == 1 for n in notes)
    assert len({(o["path"], o["start_line"]) for o in outs}) == len(outs)


def test_parallel_writes_from_threads_all_land_at_their_lines(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from hybridmem.serve.write import append_note

    ws = make_workspace(tmp_path / "ws", files=1, lines=3)
    notes = [f"thread {t} note {i}: lemur{t}x{i}\nsecond line {t}/{i}" for t in range(8) for i in range(25)]
    with ThreadPoolExecutor(8) as pool:
        outs = list(pool.map(lambda n: append_note(ws, n, "memory/shared.md"), notes))
    print(f"\n8 threads x 25 writes: {sum(n in (ws / 'memory/shared.md').read_text() for n in notes)} of 200 kept")
    _assert_notes_at_lines(ws, outs, notes)


def test_parallel_writes_from_two_server_processes_all_land_at_their_lines(tmp_path: Path) -> None:
    """Two ``hybridmem mcp --allow-write`` servers on one workspace, 4 HTTP clients each, 10 writes per client,
    all into today's file: every note reported saved is where its reply says."""
    pytest.importorskip("mcp")
    import asyncio

    from mcp import Client
    from test_mcp import HttpServer, _workspace

    ws = _workspace(tmp_path)
    servers = [HttpServer(ws, "--allow-write"), HttpServer(ws, "--allow-write")]
    notes = [[f"server {s} client {c} note {i}: tapir{s}{c}{i}" for i in range(10)] for s in range(2) for c in range(4)]

    async def client(url: str, mine: list[str]) -> list[dict]:
        async with Client(url) as cl:
            rs = [await cl.call_tool("memory_write", {"text": n}) for n in mine]
            assert not any(r.is_error for r in rs), [r.content[0].text for r in rs if r.is_error]
            return [r.structured_content for r in rs]

    async def main() -> list[dict]:
        groups = await asyncio.gather(*(client(servers[k // 4].url, notes[k]) for k in range(8)))
        return [o for g in groups for o in g]

    try:
        outs = asyncio.run(main())
    finally:
        for s in servers:
            s.close()
    flat = [n for ns in notes for n in ns]
    text = "".join(p.read_text(encoding="utf-8") for p in (ws / "memory").glob("*.md"))
    print(f"\n2 servers x 4 clients x 10 writes: {sum(n in text for n in flat)} of 80 kept")
    _assert_notes_at_lines(ws, outs, flat)
    # `indexed` is the truth either way: two servers' syncs of one index take turns, and a reply whose server found
    # the other one syncing says so (index_error) rather than claim it; the next sync holds every note.
    assert all(o["indexed"] or o.get("index_error") for o in outs)
    from hybridmem.config import Settings
    from hybridmem.index import MemoryIndex

    with MemoryIndex(ws, settings=Settings().override(embedding={"provider": "none"})) as idx:
        idx.sync()
        for n in flat:
            assert idx.search(n.split(": ")[1], min_score=0.0, answer_threshold=0.0).results, n


CHILD_WRITE_CUT = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from hybridmem.serve.write import append_note
    ws, budget = Path(sys.argv[1]), int(sys.argv[2])
    log, write = ws / "memory" / "log.md", os.write

    def write_part_then_die(fd, data):  # the note's first `budget` bytes reach the file, then the process is killed
        if os.path.samestat(os.fstat(fd), os.stat(log)):
            write(fd, bytes(data[:budget]))
            os.kill(os.getpid(), signal.SIGKILL)
        return write(fd, data)

    os.write = write_part_then_die
    append_note(ws, "the note that never finished: " + "okapi " * 2000, "memory/log.md")
    """
)


def test_a_writer_killed_mid_append_leaves_no_cut_note(tmp_path: Path) -> None:
    """A process killed while its note is half on disk (SIGKILL after its first bytes: the file holds part of the note)
    leaves nothing once the next writer, or a starting server, takes the lock."""
    from hybridmem.serve.write import append_note

    ws = make_workspace(tmp_path / "ws", files=1, lines=3)
    first = append_note(ws, "a whole note about the ibex budget", "memory/log.md")
    whole = (ws / "memory" / "log.md").read_bytes()
    for budget, recover_by in ((700, "next append"), (3000, "server start")):
        proc = subprocess.run([sys.executable, "-c", CHILD_WRITE_CUT, str(ws), str(budget)], cwd=ROOT,
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == -signal.SIGKILL, proc.stderr
        cut = (ws / "memory" / "log.md").read_bytes()
        assert len(cut) == len(whole) + budget and cut.startswith(whole)  # killed with part of the note written
        if recover_by == "next append":
            out = append_note(ws, "the ibex budget was approved", "memory/log.md")
            text = (ws / "memory" / "log.md").read_text(encoding="utf-8")
            assert "never finished" not in text and text == whole.decode() + "\nthe ibex budget was approved\n"
            assert out["start_line"] == first["start_line"] + 2
            whole = text.encode()
        else:
            from hybridmem.serve.notefile import recover

            assert recover(ws / "memory") == [f"log.md: an append cut short was removed ({budget} bytes)"]
            assert (ws / "memory" / "log.md").read_bytes() == whole


def test_a_writer_killed_mid_append_never_cuts_an_edit_made_since(tmp_path: Path) -> None:
    """Recovery cut the file back to its size before the killed append whenever its size lay between that and the
    planned end: a user who had since rewritten the half-written note's place in an editor (same file, in place)
    lost that edit at the next write. Only bytes that are the start of the note are cut now."""
    from hybridmem.serve.notefile import recover
    from hybridmem.serve.write import append_note

    ws = make_workspace(tmp_path / "ws", files=1, lines=3)
    append_note(ws, "a whole note about the ibex budget", "memory/log.md")
    log = ws / "memory" / "log.md"
    whole = log.read_bytes()
    for recover_by in ("next append", "server start"):
        proc = subprocess.run([sys.executable, "-c", CHILD_WRITE_CUT, str(ws), "700"], cwd=ROOT,
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == -signal.SIGKILL, proc.stderr
        assert len(log.read_bytes()) == len(whole) + 700
        with open(log, "r+b") as fh:  # the user replaces the cut note by hand, in place
            fh.seek(len(whole))
            fh.write(b"\nthe user's own line\n")
            fh.truncate()
        edited = log.read_bytes()
        if recover_by == "next append":
            append_note(ws, "the ibex budget was approved", "memory/log.md")
            assert log.read_bytes() == edited + b"\nthe ibex budget was approved\n"
        else:
            assert recover(ws / "memory") == [] and log.read_bytes() == edited
        whole = log.read_bytes()


def _race_workspace(tmp_path: Path) -> Path:
    ws = make_workspace(tmp_path / "ws", files=600, lines=60)
    (ws / "hybridmem.toml").write_text('[embedding]\nprovider = "none"\n', encoding="utf-8")
    (ws / "memory" / "aaa.md").write_text("# The first file a rebuild reads\n", encoding="utf-8")
    with MemoryIndex(ws) as idx:
        idx.sync()
    return ws


async def _write_one(cl: Any, i: int, file: str | None = None) -> tuple[str, dict]:
    r = await cl.call_tool("memory_write", {"text": f"rebuild race note {i}: the marmot{i} quota is {i} units.",
                                            "file": file or f"memory/race-{i % 3}.md"})
    assert not r.is_error, r.content[0].text
    return f"marmot{i} quota", r.structured_content


async def _not_findable(cl: Any, saved: list[tuple[str, dict]]) -> list[str]:
    missing = []
    for query, out in saved:
        r = await cl.call_tool("memory_search", {"query": query, "max_results": 3})
        if not any(h["path"] == out["path"] and h["start_line"] <= out["start_line"] <= h["end_line"]
                   for h in r.structured_content["results"]):
            missing.append(query)
    return missing


def test_writes_racing_index_rebuild_in_another_process_are_all_searchable_afterwards(tmp_path: Path) -> None:
    """Notes written while ``hybridmem index --rebuild`` runs in another process (after it read their file, before
    its swap), and none after: once it is done, every note reported saved is searchable."""
    pytest.importorskip("mcp")
    import asyncio

    from mcp import Client
    from test_mcp import ENV, LAUNCH, HttpServer

    from hybridmem.sync.reindex import TMP_SUFFIX

    ws = _race_workspace(tmp_path)
    server = HttpServer(ws, "--allow-write", "--no-watch")  # no watcher: nothing but the write itself indexes a note
    tmp_index = ws / ".hybridmem" / f"index.sqlite{TMP_SUFFIX}"

    async def main() -> tuple[int, list[str]]:
        async with Client(server.url) as cl:
            rebuild = subprocess.Popen([sys.executable, "-c", LAUNCH, "index", str(ws), "--rebuild"], env=ENV,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            def built() -> int:  # bytes the rebuild has written into its new index so far
                return sum(p.stat().st_size for p in tmp_index.parent.glob(tmp_index.name + "*") if p.exists())

            while built() <= 4096 and rebuild.poll() is None:  # its cache is seeded: it starts reading files
                await asyncio.sleep(0.005)
            await asyncio.sleep(0.15)  # aaa.md is read first; the other 600 files take ~2 s more
            saved = [await _write_one(cl, 0, "memory/aaa.md")]  # read first, so already read
            building = tmp_index.exists()  # at least this note raced the rebuild
            saved += [await _write_one(cl, i, "memory/aaa.md") for i in (1, 2)]
            await asyncio.to_thread(rebuild.wait, 120)
            assert rebuild.returncode == 0, rebuild.stderr.read()  # type: ignore[union-attr]
            assert building, "the rebuild finished before the notes were written: make the workspace larger"
            return len(saved), await _not_findable(cl, saved)

    try:
        n, missing = asyncio.run(main())
    finally:
        server.close()
    print(f"\nwrites racing index --rebuild: {n} saved, {len(missing)} not searchable afterwards")
    assert missing == []


def test_writes_racing_a_settings_change_reindex_are_all_searchable_afterwards(tmp_path: Path) -> None:
    """A settings change that changes what the index holds makes the server re-index in the background; a client
    writes until the new index is in place and no more: then every note reported saved is searchable."""
    pytest.importorskip("mcp")
    import asyncio

    from mcp import Client
    from test_mcp import HttpServer

    ws = _race_workspace(tmp_path)
    server = HttpServer(ws, "--allow-write", "--no-watch")

    async def main() -> tuple[int, list[str]]:
        async with Client(server.url) as cl:
            before = (await cl.call_tool("memory_status", {})).structured_content["settings_hash"]
            (ws / "hybridmem.toml").write_text('[embedding]\nprovider = "none"\n[chunking]\ntokens = 300\n',
                                               encoding="utf-8")
            saved: list[tuple[str, dict]] = []
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                st = (await cl.call_tool("memory_status", {})).structured_content
                if st["settings_hash"] != before:  # the new index is in the file: stop writing
                    break
                saved.append(await _write_one(cl, len(saved)))
            else:
                raise AssertionError("the new settings were never applied")
            for _ in range(200):  # until the server serves the new index (its status reads the same file)
                st = (await cl.call_tool("memory_status", {})).structured_content
                if not st["sync_running"]:
                    break
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.3)
            return len(saved), await _not_findable(cl, saved)

    try:
        n, missing = asyncio.run(main())
    finally:
        server.close()
    print(f"\nwrites racing a settings re-index: {n} saved, {len(missing)} not searchable afterwards")
    assert n >= 2 and missing == []


@pytest.mark.parametrize("path, message", [
    ("memory/topic-0001.md#Lx-Ly", "#Lx-Ly is not a line range; cite lines as memory/topic-0001.md#L3 or"),
    ("memory/topic-0001.md#L4-L2", "the line range ends before it starts; cite lines as memory/topic-0001.md#L2-L4"),
])
def test_a_citation_with_a_bad_line_range_says_so(small_index: MemoryIndex, path: str, message: str) -> None:
    """It read as "no such memory file" for a file that exists, or as a line past the end."""
    from hybridmem.errors import ArgumentError

    with pytest.raises(ArgumentError, match=message.replace(".", r"\.")):
        small_index.get(path)
    assert small_index.get("memory/topic-0001.md#L2-L3")["from"] == 2


@pytest.mark.skipif(sys.platform != "linux", reason="a file name of raw bytes: Linux file systems take any")
def test_a_file_name_that_is_not_utf8_is_skipped_with_a_warning(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    """`memory/bad\\xffname.md` made every sync raise a UnicodeEncodeError (a traceback, exit 1) and left the whole
    workspace unsearchable until the file was renamed."""
    main = cli_main
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "ok.md").write_text("# ok\n\nquokka notes\n", encoding="utf-8")
    bad = os.path.join(os.fsencode(tmp_path / "memory"), b"bad\xffname.md")
    with open(bad, "wb") as fh:
        fh.write(b"# x\n\nquokka_token\n")
    assert main(["index", str(tmp_path), "--keyword-only"]) == 0
    err = capsys.readouterr().err
    assert "memory/bad\\xffname.md: skipped, its file name is not UTF-8 text; rename it to index it" in err, err
    assert main(["search", "quokka", str(tmp_path), "--no-sync", "--json"]) == 0
    assert [r["path"] for r in json.loads(capsys.readouterr().out)["results"]] == ["memory/ok.md"]
    assert open(bad, "rb").read() == b"# x\n\nquokka_token\n"


def test_a_utf8_byte_order_mark_keeps_a_file_utf8_whatever_stray_bytes_follow(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    """A BOM and two stray bytes made the file read as Windows-1252 with the BOM kept: a transcript's first message
    read as malformed and was lost (the capybara was not found), a note's first line began with "ï»¿"."""
    (tmp_path / "memory").mkdir()
    (tmp_path / "sessions").mkdir()
    (tmp_path / "sessions" / "s.jsonl").write_bytes(
        b'\xef\xbb\xbf{"role":"user","content":"the capybara lives by the river"}\n'
        b'{"role":"assistant","content":"noted \xff\xfe"}\n')
    (tmp_path / "memory" / "o.md").write_bytes(b"\xef\xbb\xbf# Otter\n\nThe otter naps \xff at noon.\n")
    assert cli_main(["index", str(tmp_path), "--keyword-only"]) == 0
    assert "invalid UTF-8 replaced" in capsys.readouterr().err
    assert cli_main(["search", "capybara", str(tmp_path), "--no-sync", "--json"]) == 0
    assert [r["path"] for r in json.loads(capsys.readouterr().out)["results"]] == ["sessions/s.jsonl"]
    assert cli_main(["get", "memory/o.md", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["text"].startswith("# Otter\n")


@pytest.mark.parametrize("index", ["/dev/null", "/proc/hybridmem-test.sqlite", "x" * 300 + ".sqlite"])
def test_an_index_path_that_cannot_hold_a_database_is_one_line(tmp_path: Path, capsys, index: str) -> None:  # noqa: ANN001
    """`--index /dev/null` gave a traceback and made /dev/null-journal; /proc and a name too long gave tracebacks."""
    (tmp_path / "MEMORY.md").write_text("# Memory\n\nquokka\n", encoding="utf-8")
    path = index if index.startswith("/") else str(tmp_path / index)
    for argv in (["index", str(tmp_path), "--keyword-only"], ["search", "quokka", str(tmp_path)]):
        capsys.readouterr()
        assert cli_main([*argv, "--index", path]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "give --index a" in err, err
    assert not os.path.exists("/dev/null-journal")
