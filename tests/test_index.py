from __future__ import annotations

import os
from pathlib import Path

import pytest

from hybridmem.config import Settings
from hybridmem.embeddings.fake import HashEmbedder
from hybridmem.errors import PathError, WorkspaceError
from hybridmem.index import MemoryIndex
from hybridmem.records import Document
from hybridmem.sources import discover
from tests.conftest import write


def test_discovery_rules(workspace: Path, tmp_path: Path):
    write(workspace, "memory/.git/x.md", "no")
    write(workspace, "memory/notes.txt", "no")
    write(workspace, "memory/node_modules/y.md", "no")
    outside = write(tmp_path, "outside/secret.md", "secret")
    os.symlink(outside, workspace / "memory" / "link.md")
    os.symlink(workspace / "MEMORY.md", workspace / "memory.md")  # same realpath: deduped (and a symlink)
    paths = [f.path for f in discover(workspace)]
    assert paths == ["MEMORY.md", "memory/2026-05-01.md", "memory/2026-06-01.md", "memory/topics/cars.md"]


def test_extra_paths_files_and_folders(workspace: Path, tmp_path: Path):
    write(tmp_path, "extra/a.md", "alpha")
    write(tmp_path, "extra/sub/b.md", "beta")
    write(workspace, "notes/c.md", "gamma")
    s = Settings().override(sources={"extra_paths": [str(tmp_path / "extra"), "notes/c.md"]})
    paths = [f.path for f in discover(workspace, s.sources)]
    assert "extra/extra/a.md" in paths and "extra/extra/sub/b.md" in paths and "notes/c.md" in paths


def test_extra_folders_of_one_name_and_paths_through_dotdot(workspace: Path, tmp_path: Path):
    """Two configured folders named alike keep every file (the later one's keys name more of its path, the same
    from one sync to the next), and ``../`` in a configured path is cited under ``extra/``, where ``get`` reads it."""
    write(tmp_path, "a/notes/x.md", "# a\nalpha_unicorn\n")
    write(tmp_path, "b/notes/x.md", "# b\nbeta_griffin\n")
    write(tmp_path, "c/b/notes/x.md", "# c\ngamma_sphinx\n")
    beside = write(tmp_path, "outside.md", "# out\ndelta_kraken\n")
    rel = os.path.relpath(beside, workspace)
    assert rel.startswith("..")
    extras = [str(tmp_path / "a/notes"), str(tmp_path / "b/notes"), str(tmp_path / "c/b/notes"), rel]
    s = Settings().override(sources={"extra_paths": extras})
    paths = [f.path for f in discover(workspace, s.sources)]
    assert {"extra/notes/x.md", "extra/b/notes/x.md", "extra/c/b/notes/x.md"} <= set(paths)
    assert not [p for p in paths if p.startswith("..")] and f"extra/{tmp_path.name}/outside.md" in paths
    assert paths == [f.path for f in discover(workspace, s.sources)]
    with MemoryIndex(workspace, embedder=HashEmbedder(), settings=s) as idx:
        idx.sync()
        for word, key in (("alpha_unicorn", "extra/notes/x.md"), ("beta_griffin", "extra/b/notes/x.md"),
                          ("gamma_sphinx", "extra/c/b/notes/x.md"), ("delta_kraken", f"extra/{tmp_path.name}/outside.md")):
            assert idx.search(word).results[0].path == key, word
            assert word in idx.get(key)["text"]


def test_incremental_sync_embeds_only_changes(workspace: Path):
    emb = HashEmbedder()
    idx = MemoryIndex(workspace, embedder=emb)
    r1 = idx.sync()
    assert (r1.files, r1.added, r1.embedded) == (4, 4, r1.chunks) and r1.chunks >= 4
    assert idx.sync().embedded == 0 and emb.embedded == r1.chunks  # second sync: nothing embedded
    write(workspace, "memory/2026-07-01.md", "# new\n\nA brand new note about kayaks.\n")
    p = workspace / "memory/topics/cars.md"
    p.write_text(p.read_text() + "\nAlso replaced the brake pads.\n")
    (workspace / "memory/2026-06-01.md").unlink()
    r3 = idx.sync()
    assert (r3.added, r3.changed, r3.deleted, r3.embedded) == (1, 1, 1, 2)
    assert idx.sync().embedded == 0
    st = idx.status()
    assert st["files"] == 4 and st["chunks"] == idx.store.count_rows("chunks_fts")
    # an edit that restores already-seen text is served from the cache
    p.write_text(p.read_text().replace("\nAlso replaced the brake pads.\n", ""))
    r5 = idx.sync()
    assert r5.changed == 1 and r5.embedded == 0 and r5.cache_hits == 1


def test_a_file_stored_again_takes_its_unchanged_chunks_tokens_from_the_index(workspace: Path, tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch):
    """A grown transcript or a long note edited in one place is mostly chunks the index holds: their tokens are read
    back, not computed again, and the index is what a rebuild writes."""
    from hybridmem.sync import documents

    lines = "".join(f"- note {i}: the staging Redis port moved to {6000 + i} on host h{i % 7}.\n" for i in range(400))
    write(workspace, "memory/long.md", "# Long\n\n" + lines)
    idx = MemoryIndex(workspace, embedder=HashEmbedder())
    idx.sync()
    chunks = idx.status()["chunks"]
    tokenized: list[str] = []
    real = documents.tokenize
    monkeypatch.setattr(documents, "tokenize", lambda text, cfg=None: tokenized.append(text) or real(text, cfg))
    with (workspace / "memory/long.md").open("a") as fh:
        fh.write("- note 400: the kayak is stored at the marina.\n")
    assert idx.sync().changed == 1
    assert 1 <= len(tokenized) <= 2 < chunks  # the last chunk, which grew (and a new one)
    rebuilt = MemoryIndex(workspace, index_path=tmp_path / "rebuilt.sqlite", embedder=HashEmbedder())
    rebuilt.sync()
    query = "SELECT path, start_line, end_line, hash, tokens FROM chunks ORDER BY path, start_line"
    assert idx.store._db.execute(query).fetchall() == rebuilt.store._db.execute(query).fetchall()
    (hit,) = idx.store.keyword_search('"kayak"', 5)
    assert "kayak is stored at the marina" in idx.store.chunk_rows([hit[0]])[hit[0]][4]
    # the same text saved decomposed (its chunks' hashes are of the NFC form, so alike) is tokenized again: Korean
    # syllables decomposed give the same tokens in another order
    import unicodedata

    korean = workspace / "memory/ko.md"
    korean.write_text("# 메모\n\n- 결제 서비스의 재시도 간격은 지수 백오프.\n", encoding="utf-8")
    idx.sync()
    korean.write_text(unicodedata.normalize("NFD", korean.read_text(encoding="utf-8")), encoding="utf-8")
    assert idx.sync().changed == 1
    rebuilt.sync()
    assert idx.store._db.execute(query).fetchall() == rebuilt.store._db.execute(query).fetchall()


def test_a_transcript_stored_again_keeps_the_rows_of_the_chunks_it_still_holds(workspace: Path, tmp_path: Path):
    """Storing a grown transcript deleted and inserted every chunk's row and FTS5 row again, most of what it cost. The
    rows of chunks the file still holds are kept (their vectors too); their timestamp, the transcript's last
    message's, is updated. The index is what a rebuild writes, and every FTS5 row holds its chunk's tokens."""
    import json
    from datetime import datetime, timezone

    def message(i: int) -> str:
        return json.dumps({"role": ("user", "assistant")[i % 2], "timestamp": f"2026-11-{1 + i // 100:02d}T10:00:00Z",
                           "content": f"step {i}: the staging Redis port moved to {6000 + i} on host h{i % 7}."})

    transcript = workspace / "sessions" / "s.jsonl"
    transcript.parent.mkdir(parents=True, exist_ok=True)
    transcript.write_text("".join(message(i) + "\n" for i in range(300)))
    settings = Settings().override(sync={"session_delta_messages": 1})
    idx = MemoryIndex(workspace, embedder=HashEmbedder(), settings=settings)
    idx.sync()
    write(workspace, "memory/later.md", "# Later\n\n- the kayak is stored at the marina.\n")
    idx.sync()  # a note stored after the transcript: a row inserted again would take an id above its
    rows = "SELECT id, start_line, end_line, hash, tokens, timestamp, embedded FROM chunks WHERE path = ? ORDER BY id"
    before = idx.store._db.execute(rows, ("sessions/s.jsonl",)).fetchall()
    with transcript.open("a") as fh:
        fh.write("".join(message(i) + "\n" for i in range(300, 310)) + "not json\n")
    assert idx.sync().changed == 1
    after = idx.store._db.execute(rows, ("sessions/s.jsonl",)).fetchall()
    kept = {r[:4] for r in before} & {r[:4] for r in after}  # the same id, lines and hash
    assert len(before) - 2 <= len(kept) < len(before)  # all but the last chunk or two, which grew
    last = datetime(2026, 11, 4, 10, tzinfo=timezone.utc).timestamp()  # the last message's, on every chunk
    assert {r[5] for r in before} != {last} == {r[5] for r in after}
    assert all(r[6] == 1 for r in after)  # every chunk has its vector, the kept ones theirs
    rebuilt = MemoryIndex(workspace, index_path=tmp_path / "rebuilt.sqlite", embedder=HashEmbedder(), settings=settings)
    rebuilt.sync()
    query = "SELECT path, start_line, end_line, hash, tokens, timestamp, evergreen FROM chunks ORDER BY 1, 2"
    assert idx.store._db.execute(query).fetchall() == rebuilt.store._db.execute(query).fetchall()
    fts = "SELECT count(*), sum(f.tokens = c.tokens) FROM chunks c JOIN chunks_fts f ON f.rowid = c.id"
    chunks = idx.status()["chunks"]
    assert idx.store._db.execute(fts).fetchone() == (chunks, chunks)
    assert idx.store._db.execute("SELECT count(*) FROM chunks_vec").fetchone()[0] == chunks
    assert [r.path for r in idx.search("6305", min_score=0.0, answer_threshold=0.0).results][:1] == ["sessions/s.jsonl"]


def test_status_counts_the_files_changed_on_disk_since_the_last_sync(workspace: Path):
    """A one-shot ``hybridmem status`` has no watcher: ``dirty`` read False while a note had changed on disk. With
    ``disk`` it counts what the next sync would read or drop (new, changed, deleted; not a binary file it skips)."""
    idx = MemoryIndex(workspace, embedder=HashEmbedder())
    idx.sync()
    assert (idx.status(disk=True)["changed_on_disk"], idx.status(disk=True)["dirty"]) == (0, False)
    assert "changed_on_disk" not in idx.status()
    p = workspace / "memory/topics/cars.md"
    p.write_text(p.read_text() + "\nAlso replaced the brake pads.\n")
    write(workspace, "memory/2026-07-01.md", "# new\n\nA note about kayaks.\n")
    (workspace / "memory/blob.md").write_bytes(bytes(range(256)) * 4)
    (workspace / "memory/2026-06-01.md").unlink()
    st = idx.status(disk=True)
    assert (st["changed_on_disk"], st["dirty"]) == (3, True)
    report = idx.sync()
    assert (report.added, report.changed, report.deleted) == (1, 1, 1)
    assert idx.status(disk=True)["changed_on_disk"] == 0


def test_settings_change_triggers_full_reindex(workspace: Path):
    idx = MemoryIndex(workspace, embedder=HashEmbedder())
    idx.sync()
    idx.close()
    idx2 = MemoryIndex(workspace, settings=Settings().override(chunking={"tokens": 100}), embedder=HashEmbedder())
    r = idx2.sync()
    assert r.full_reindex and r.added == 4


def test_dims_change_rebuilds_vectors(workspace: Path):
    MemoryIndex(workspace, embedder=HashEmbedder(dims=32)).sync()
    idx = MemoryIndex(workspace, embedder=HashEmbedder(dims=48))
    r = idx.sync()
    assert r.full_reindex and idx.status()["dims"] == 48
    assert idx.store.count_rows("chunks_vec") == r.chunks
    assert idx.search("timing belt", vector_weight=1.0, text_weight=0.0, min_score=0.0, answer_threshold=0.0).results


def test_keyword_only_without_provider(workspace: Path):
    idx = MemoryIndex(workspace, embedder=None)
    r = idx.sync()
    assert r.embedded == 0 and r.chunks >= 4
    resp = idx.search("timing belt")
    assert resp.results and resp.results[0].path == "memory/topics/cars.md"
    assert resp.fallback and idx.status()["provider"] == "none"


def test_documents_index_through_the_same_pipeline(tmp_path: Path):
    emb = HashEmbedder()
    idx = MemoryIndex(index_path=tmp_path / "i.sqlite", embedder=emb)
    docs = [Document(f"d{i}", f"document number {i} about topic{i % 3}", source="corpus") for i in range(10)]
    r = idx.index_documents(docs)
    assert (r.files, r.embedded) == (10, 10)
    assert idx.index_documents(docs).embedded == 0
    assert idx.index_documents(docs[:5]).deleted == 5
    with pytest.raises(WorkspaceError):
        idx.sync()


def test_numpy_fallback_matches_sqlite_vec(workspace: Path):
    emb = HashEmbedder()
    mem = MemoryIndex(workspace, embedder=emb)
    mem.sync()
    knn = MemoryIndex(workspace, settings=Settings().override(store={"vector_search": "sqlite-vec"}), embedder=emb)
    for q in ["timing belt civic", "payment retries", "thanh toán", "dark mode"]:
        a = mem.retrieve(q, 10, keyword=False).vector
        b = knn.retrieve(q, 10, keyword=False).vector
        # same neighbours with the same scores; exact ties may come in either order
        key = lambda hits: sorted((round(-h.raw, 5), h.chunk_id) for h in hits)  # noqa: E731
        assert key(a) == key(b)
        assert [round(h.raw, 5) for h in a] == [round(h.raw, 5) for h in b]


def test_every_vector_search_mode_serves_the_same_neighbours(workspace: Path):
    """memory (float32, and the int8-bounded scan forced on this small index), quantized (int8 PCA pre-filter whose
    default 800-row rescoring covers this whole index) and sqlite-vec agree; status() names the mode."""
    emb = HashEmbedder()
    MemoryIndex(workspace, embedder=emb).sync()
    modes = {"memory": {}, "int8": {"int8_min_rows": 1}, "quantized": {"vector_search": "quantized"},
             "sqlite-vec": {"vector_search": "sqlite-vec"}}
    results = {}
    for name, store in modes.items():
        idx = MemoryIndex(workspace, settings=Settings().override(store=store), embedder=emb)
        for _ in range(3):  # the int8 copy is built from the second search on
            hits = idx.retrieve("payment retries thanh toán", 10, keyword=False).vector
        if name == "int8":
            idx.retriever.matrix().int8  # noqa: B018 - rather than wait for the background build, build it now
            hits = idx.retrieve("payment retries thanh toán", 10, keyword=False).vector
        expected = {"int8": "memory (int8-bounded exact)",
                    "sqlite-vec": "sqlite-vec" if idx.store.vec_available else "memory"}.get(name, name)
        assert idx.status()["vector_search"] == expected
        results[name] = sorted((round(-h.raw, 5), h.chunk_id) for h in hits)
        idx.close()
    assert len({tuple(r) for r in results.values()}) == 1, results


def test_scoping_applies_to_both_legs(workspace: Path):
    idx = MemoryIndex(workspace, embedder=HashEmbedder())
    idx.sync()
    from hybridmem.retrieve import Scope

    c = idx.retrieve("payment thanh toán timing", 20, scope=Scope(path_prefix="memory/topics/"))
    paths = {c.chunks[h.chunk_id].path for h in (*c.keyword, *c.vector)}
    assert paths == {"memory/topics/cars.md"}
    for prefix in ("memory/topics/", "./memory/topics", ".//memory/topics/"):  # ./ as a shell completes it
        hits = idx.search("timing belt", path_prefix=prefix, vector_weight=0.0, min_score=0.0).results
        assert [h.path for h in hits] == ["memory/topics/cars.md"], prefix


def test_get_reads_lines_and_refuses_escapes(workspace: Path, tmp_path: Path):
    idx = MemoryIndex(workspace, embedder=None)
    idx.sync()
    out = idx.get("memory/topics/cars.md", from_line=3, lines=1)
    assert out["text"] == "The mechanic swapped the timing belt on the Civic in March."
    assert idx.get("MEMORY.md")["total_lines"] == 4
    outside = write(tmp_path, "outside.md", "secret")
    os.symlink(outside, workspace / "memory" / "evil.md")
    for bad in ["../outside.md", "/etc/passwd", str(outside), "memory/../../outside.md", "", "memory/evil.md",
                "notes/ignored.md", "C:\\x.md", "~/x.md", "memory/\x00.md"]:
        with pytest.raises(PathError):
            idx.get(bad)


def test_missing_workspace_is_a_clear_error(tmp_path: Path):
    with pytest.raises(WorkspaceError, match="not found"):
        MemoryIndex(tmp_path / "nope")


def test_get_of_a_file_gone_since_the_sync_is_one_clear_error(workspace: Path):
    """An agent's search, then the file is removed (or a folder takes its name) before its get: a PathError naming
    it, which the tools report as a bad call, not as memory being unavailable (it was a FileNotFoundError)."""
    import json

    from hybridmem.tools import MemoryTools

    with MemoryIndex(workspace, embedder=HashEmbedder()) as idx:
        idx.sync()
        (workspace / "memory/topics/cars.md").unlink()
        with pytest.raises(PathError, match="cannot read memory/topics/cars.md: No such file"):
            idx.get("memory/topics/cars.md")
        (workspace / "memory/topics/cars.md").mkdir()
        with pytest.raises(PathError, match="cannot read memory/topics/cars.md: Is a directory"):
            idx.get("memory/topics/cars.md")
        out = json.loads(MemoryTools(idx).handle("memory_get", {"path": "memory/topics/cars.md"}))
        assert "cannot read memory/topics/cars.md" in out["error"] and not out.get("unavailable")


def test_a_moved_or_copied_workspace_reads_its_own_files(workspace: Path, tmp_path: Path):
    """The index inside a workspace records where each file was; a workspace copied elsewhere (mtimes kept) reads
    the copy's files with ``get`` before and after its next sync, and that sync records the new place instead of
    re-reading every file on every sync."""
    import shutil

    with MemoryIndex(workspace, embedder=HashEmbedder()) as idx:
        idx.sync()
    copy = tmp_path / "elsewhere" / "ws"
    shutil.copytree(workspace, copy)  # copy2: mtimes kept, as cp -a and a synced folder keep them
    write(workspace, "memory/topics/cars.md", "# Cars\n\nThe original, changed after the copy.\n")
    with MemoryIndex(copy, embedder=HashEmbedder()) as idx:
        assert "timing belt" in idx.get("memory/topics/cars.md")["text"]  # not synced yet: the copy's file
        first = idx.sync()
        assert (first.added, first.changed, first.deleted) == (0, 0, 0)
        assert idx.indexed_file("memory/topics/cars.md")["abspath"] == str(copy / "memory/topics/cars.md")
        second = idx.sync()
        assert second.unchanged == second.files == 4  # the place was recorded: nothing read again
        assert "timing belt" in idx.get("memory/topics/cars.md")["text"]
    shutil.rmtree(workspace)  # moved: the old place is gone
    with MemoryIndex(copy, embedder=HashEmbedder()) as idx:
        assert idx.get("MEMORY.md")["total_lines"] == 4


def test_hidden_folders_and_files_below_memory_are_not_indexed(workspace: Path, tmp_path: Path):
    """An editor's trash of deleted notes (Obsidian's ``.trash``) must not come back in search; a hidden folder
    configured as an extra path is indexed (the user named it)."""
    write(workspace, "memory/.trash/old.md", "deleted note")
    write(workspace, "memory/.draft.md", "a hidden draft")
    write(workspace, "sessions/.old/s.jsonl", '{"role": "user", "content": "hi"}\n')
    write(tmp_path, ".notes/kept.md", "kept")
    s = Settings().override(sources={"extra_paths": [str(tmp_path / ".notes")]})
    paths = [f.path for f in discover(workspace, s.sources)]
    assert not [p for p in paths if "/." in p and not p.startswith("extra/")] and "extra/.notes/kept.md" in paths
    with MemoryIndex(workspace, embedder=HashEmbedder(), settings=s) as idx:
        idx.sync()
        with pytest.raises(PathError, match="not an indexed memory file"):
            idx.get("memory/.trash/old.md")


def test_an_edit_whose_mtime_was_put_back_is_read_again(workspace: Path):
    """cp -p, rsync -a, touch -r and unpacking an archive keep a file's mtime; an edit of the same size with its
    mtime put back was never read again. The inode's change time moves whatever the mtime says."""
    path = workspace / "memory/topics/cars.md"
    emb = HashEmbedder()
    with MemoryIndex(workspace, embedder=emb) as idx:
        idx.sync()
        before = path.stat()
        path.write_text(path.read_text().replace("timing belt", "water pumps"), encoding="utf-8")
        assert path.stat().st_size == before.st_size
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert idx.sync().changed == 1
        assert idx.search("water pumps", vector_weight=0.0, min_score=0.0).results[0].path == "memory/topics/cars.md"
        embedded = emb.embedded
        os.utime(path)  # touched, not changed: read and hashed again, nothing embedded
        report = idx.sync()
        assert (report.changed, emb.embedded) == (0, embedded)
        assert idx.sync().unchanged == report.files  # the new stamp was recorded


def test_utf16_and_latin1_notes_are_searchable_and_readable(workspace: Path):
    """A note saved as UTF-16 with a byte order mark (Windows PowerShell's default) was skipped as binary; one in
    Latin-1 lost its accents to U+FFFD, so 'café' found nothing. A UTF-8 note with one stray byte keeps its UTF-8."""
    (workspace / "memory/win.md").write_bytes("# Zähler\r\nDer Wärmezähler läuft über.\r\n".encode("utf-16"))
    (workspace / "memory/old.md").write_bytes("# Café\nLe café est à côté.\n".encode("latin-1"))
    (workspace / "memory/odd.md").write_bytes("# Phở bò\nmột byte \xff lạc\n".encode("utf-8").replace(b"\xc3\xbf", b"\xff"))
    with MemoryIndex(workspace, embedder=HashEmbedder()) as idx:
        report = idx.sync()
        assert not [w for w in report.warnings if "win.md" in w]
        assert any("old.md: not UTF-8: read as Windows-1252" in w for w in report.warnings)
        for query, path in (("Wärmezähler", "memory/win.md"), ("café", "memory/old.md"), ("phở", "memory/odd.md")):
            assert idx.search(query, vector_weight=0.0, min_score=0.0).results[0].path == path, query
        assert idx.get("memory/win.md", from_line=2, lines=1)["text"] == "Der Wärmezähler läuft über."
        assert idx.get("memory/old.md")["text"].endswith("Le café est à côté.")


def test_get_finds_a_name_typed_in_the_other_unicode_form(workspace: Path):
    """macOS keeps 'café' decomposed (e + combining accent); an agent retypes the citation composed. Both read it."""
    import unicodedata

    nfd = unicodedata.normalize("NFD", "memory/café-notes.md")
    write(workspace, nfd, "# Café\n\nThe espresso machine needs descaling.\n")
    with MemoryIndex(workspace, embedder=HashEmbedder()) as idx:
        idx.sync()
        for typed in (unicodedata.normalize("NFC", nfd), nfd):
            assert "descaling" in idx.get(typed)["text"]


def test_a_pasted_data_uri_is_indexed_and_read_as_its_head(workspace: Path):
    """A note with a pasted 40 KB base64 image: its line was 26 chunks of base64 that took seconds to embed and
    filled the results; it is one chunk now, the words around it found, and get shows the same short line."""
    import base64

    blob = base64.b64encode(bytes(range(256)) * 120).decode()
    write(workspace, "memory/2026-11-20.md", "# Architecture meeting\n\nThe ingestion pipeline diagram: "
          f"![diagram](data:image/png;base64,{blob}) drawn by Linh.\n")
    with MemoryIndex(workspace, embedder=HashEmbedder()) as idx:
        idx.sync()
        hits = idx.search("ingestion pipeline diagram", vector_weight=0.0, min_score=0.0).results
        assert hits[0].path == "memory/2026-11-20.md" and len(hits[0].text) < 400
        assert [h.path for h in hits].count("memory/2026-11-20.md") == 1
        line = idx.get("memory/2026-11-20.md", from_line=3, lines=1)["text"]
        assert line.startswith("The ingestion pipeline diagram: ![diagram](data:image/png;base64,")
        assert f"…[{len(blob) - 16:,} characters of base64 left out]) drawn by Linh." in line


def test_a_sync_from_another_folder_that_deletes_most_files_warns(tmp_path: Path) -> None:
    """Two folders given one index (one PostgreSQL namespace, or one --index) replace each other's files at every
    sync; the report said only "deleted 3". It now warns, naming the folder that synced it last; the same folder
    syncing again, or a sync that deletes few files, does not."""
    a, b = tmp_path / "a", tmp_path / "b"
    for ws, n in ((a, 3), (b, 1)):
        (ws / "memory").mkdir(parents=True)
        for i in range(n):
            (ws / "memory" / f"n{i}-{ws.name}.md").write_text(f"note {i} of {ws.name}\n")
    shared = tmp_path / "shared.sqlite"
    with MemoryIndex(a, index_path=shared, embedder=HashEmbedder()) as idx:
        assert idx.sync().warnings == []
        (a / "memory" / "n0-a.md").unlink()
        assert idx.sync().warnings == []  # its own folder: a deletion it made on disk
    with MemoryIndex(b, index_path=shared, embedder=HashEmbedder()) as idx:
        report = idx.sync()
    assert report.deleted == 2
    assert len(report.warnings) == 1 and "deleted 2 of its 2 files, last synced from" in report.warnings[0]
    assert str(a.resolve()) in report.warnings[0] and "give each its own [store] namespace" in report.warnings[0]
    with MemoryIndex(b, index_path=shared, embedder=HashEmbedder()) as idx:
        (b / "memory" / "n0-b.md").write_text("note 0 of b, edited\n")
        assert idx.sync().warnings == []  # the same folder again


def test_a_sync_says_which_chunks_are_in_scripts_the_model_does_not_read(tmp_path: Path):
    """all-MiniLM-L6-v2 reads Latin alone (``Embedder.scripts``): a memory with Thai and Arabic notes gets vectors
    close to random for them, which the search copes with query by query (the adaptive step drops the blind leg) but
    the user was never told. The sync that stores them says how many, in which scripts, and what reads them, also
    when their vectors come from a cache; a sync with nothing new, and a model that reads every script, say
    nothing. ``status`` (``hybridmem status``, ``memory_status``) says it over the whole index for as long as such
    chunks are in it."""
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "# Memory\n\n- The staging Redis listens on port 6380 (ステージング).\n")
    write(ws, "memory/th.md", "# 2026-03-01\n\n- คุณยายไปตรวจความดันโลหิตที่โรงพยาบาลศิริราชเมื่อวันจันทร์\n")
    write(ws, "memory/ar.md", "# 2026-03-02\n\n- زرعنا أشجار الزيتون والليمون في الحديقة الخلفية يوم السبت.\n")
    latin = HashEmbedder(dims=32, model="latin-only")
    latin.scripts = frozenset({"LATIN"})
    with MemoryIndex(ws, index_path=tmp_path / "i.sqlite", embedder=latin) as idx:
        report = idx.sync()
        assert report.embedded == 3
        said = [w for w in report.warnings if "does not read" in w]
        assert said == ["2 of 3 chunks indexed are written mostly in scripts latin-only does not read (Arabic 1, "
                        "Thai 1): its vectors of them are close to random, so only the keyword leg finds them; "
                        'multilingual-e5-small, the default model, reads them ([embedding] provider = "e5").']
        assert idx.sync().warnings == []  # nothing new to index
        assert idx.status()["unread_note"] == said[0]  # status says it after that sync too
        again = idx.sync(force=True)  # a full reindex: every vector from the index's own cache
        assert again.embedded == 0 and again.cache_hits == 3 and again.warnings == said
        write(ws, "memory/th.md", "# 2026-03-01\n\n- Grandma had her blood pressure checked at Siriraj on Monday.\n")
        assert [w for w in idx.sync().warnings if "does not read" in w] == []  # the edit stores Latin text only
        assert idx.status()["unread_note"].startswith("1 of 3 chunks indexed is written mostly in scripts latin-only "
                                                      "does not read (Arabic 1):")
    with MemoryIndex(ws, index_path=tmp_path / "i.sqlite", embedder=latin) as idx:  # read back from the index file
        assert "(Arabic 1)" in idx.status()["unread_note"]
        (ws / "memory" / "ar.md").unlink()
        idx.sync()
        assert "unread_note" not in idx.status()  # every chunk left is Latin
    write(ws, "memory/ar.md", "# 2026-03-02\n\n- زرعنا أشجار الزيتون والليمون في الحديقة الخلفية يوم السبت.\n")
    with MemoryIndex(ws, index_path=":memory:", embedder=latin) as idx:  # a full reindex in place: the store cleared
        idx.sync()
        assert "(Arabic 1)" in idx.status()["unread_note"]
        (ws / "memory" / "ar.md").unlink()
        idx.sync(force=True)
        assert "unread_note" not in idx.status()  # not kept from before the store was cleared
    with MemoryIndex(ws, index_path=tmp_path / "j.sqlite", embedder=HashEmbedder(dims=32)) as idx:
        write(ws, "memory/ar.md", "# 2026-03-02\n\n- زرعنا أشجار الزيتون والليمون في الحديقة الخلفية يوم السبت.\n")
        assert idx.sync().warnings == []  # a model that claims every script (scripts None)
        assert "unread_note" not in idx.status()
