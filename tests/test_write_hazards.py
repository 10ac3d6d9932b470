"""What a second pair of eyes found on the write path (2026-12-07): files planted or changed under ``memory/`` that
made ``memory_write`` write outside it, hang, crash or misname lines, a recovery the index did not see, and settings
saves that lost each other. Each test fails on the code before its fix."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import tomllib
from pathlib import Path

import pytest

from hybridmem.errors import PathError
from hybridmem.serve.notefile import recover
from hybridmem.serve.write import append_note

ROOT = Path(__file__).resolve().parents[1]


def _ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "hybridmem.toml").write_text('[embedding]\nprovider = "none"\n', encoding="utf-8")
    return ws


def test_a_note_or_lock_file_that_is_a_hard_link_is_refused_and_the_linked_file_kept(tmp_path: Path) -> None:
    """O_NOFOLLOW stops symlinks, not hard links: the note was appended to, and the journal written over (the user's
    data replaced by JSON), a file outside memory/ linked into it."""
    ws, outside = _ws(tmp_path), tmp_path / "outside"
    outside.mkdir()
    (outside / "config.md").write_text("# outside note\n", encoding="utf-8")
    (outside / "precious.txt").write_text("precious data outside memory/\n", encoding="utf-8")
    os.link(outside / "config.md", ws / "memory" / "linked.md")
    os.link(outside / "precious.txt", ws / "memory" / ".victim.md.lock")
    with pytest.raises(PathError, match=r"^memory/linked\.md has other hard links, and a note appended to it would "):
        append_note(ws, "a note", "linked.md")
    with pytest.raises(PathError, match=r"^\.victim\.md\.lock, the lock file of victim\.md, is a hard link or not a "
                                        r"regular file, so it is not written: remove it and write the note again$"):
        append_note(ws, "a note", "victim.md")
    assert recover(ws / "memory") == []
    assert (outside / "config.md").read_text(encoding="utf-8") == "# outside note\n"
    assert (outside / "precious.txt").read_text(encoding="utf-8") == "precious data outside memory/\n"
    assert not (ws / "memory" / "victim.md").exists()


def test_a_fifo_named_like_a_note_is_refused_at_once(tmp_path: Path) -> None:
    """Reading a FIFO blocks until a writer opens it: the MCP worker thread hung for good."""
    ws = _ws(tmp_path)
    os.mkfifo(ws / "memory" / "pipe.md")
    got: list[BaseException | None] = []
    t = threading.Thread(target=lambda: got.append(_refusal(ws, "pipe.md")), daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "memory_write blocked on a FIFO"
    assert isinstance(got[0], PathError)
    assert str(got[0]) == "memory/pipe.md is not a regular file (a FIFO, socket or device), so no note is written to it"


def _refusal(ws: Path, file: str) -> BaseException | None:
    try:
        append_note(ws, "a note", file)
    except BaseException as exc:  # noqa: BLE001 - handed to the test thread
        return exc
    return None


@pytest.mark.parametrize("kind", ["pending, nothing else", "done, without its line count", "pending, size -1",
                                  "pending, data not base64", "pending, without the note's bytes"])
def test_a_lock_file_holding_some_other_json_is_read_as_no_journal(tmp_path: Path, kind: str) -> None:
    """A journal this module never wrote (edited by hand, another version's) made server start raise KeyError and
    every write to the note fail with it."""
    ws = _ws(tmp_path)
    note = ws / "memory" / "a.md"
    note.write_text("# A\n", encoding="utf-8")
    st = note.stat()
    pending = {"state": "pending", "id": [st.st_ino], "size": 0, "after": 4, "sha256": "0" * 64, "data": "IyBBCg=="}
    journal = {"pending, nothing else": {"state": "pending"},
               "done, without its line count": {"state": "done", "id": [st.st_dev, st.st_ino], "size": st.st_size,
                                                "mtime_ns": st.st_mtime_ns},
               "pending, size -1": {**pending, "size": -1},
               "pending, data not base64": {**pending, "data": "not base64!"},
               "pending, without the note's bytes": {k: v for k, v in pending.items() if k != "data"}}[kind]
    (ws / "memory" / ".a.md.lock").write_text(json.dumps(journal), encoding="utf-8")
    assert recover(ws / "memory") == []
    out = append_note(ws, "the note", "a.md")
    assert note.read_text(encoding="utf-8") == "# A\n\nthe note\n" and out["start_line"] == 3


def test_an_edit_in_place_that_puts_the_mtime_back_is_counted_again(tmp_path: Path) -> None:
    """The journal's cached line count was trusted while inode, size and mtime matched: an edit of the same size with
    its mtime put back (rsync -t --inplace, touch -r) made this and every later reply name the wrong line."""
    ws = _ws(tmp_path)
    log = ws / "memory" / "log.md"
    log.write_text("# Log\n\nalpha beta\n", encoding="utf-8")
    append_note(ws, "first note", "log.md")
    st = log.stat()
    with open(log, "r+b") as fh:  # the same size, one line more, the same inode
        fh.write(log.read_bytes().replace(b"alpha beta", b"alpha\nbeta"))
    os.utime(log, ns=(st.st_atime_ns, st.st_mtime_ns))
    for note in ("second note", "third note"):
        out = append_note(ws, note, "log.md")
        lines = log.read_text(encoding="utf-8").split("\n")
        assert lines[out["start_line"] - 1] == note


CHILD_CUT_ON_ANOTHER_HOST = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from hybridmem.serve import notefile
    from hybridmem.serve.write import append_note
    ws = Path(sys.argv[1])
    log, write, fstat = ws / "memory" / "log.md", os.write, os.fstat

    class OnHostA:  # what host A's stat says of a file on an NFS mount: its own device number, the server's inode
        def __init__(self, st): self._st = st
        def __getattr__(self, name): return self._st.st_dev + 7 if name == "st_dev" else getattr(self._st, name)

    def write_part_then_die(fd, data):
        if os.path.samestat(fstat(fd), os.stat(log)):
            write(fd, bytes(data[:40]))
            os.kill(os.getpid(), signal.SIGKILL)
        return write(fd, data)

    os.fstat = lambda fd: OnHostA(fstat(fd))
    os.write = write_part_then_die
    append_note(ws, "host A's note that never finished: " + "okapi " * 50, "memory/log.md")
    """
)


def test_a_note_cut_short_on_another_host_is_removed_by_the_next_writer(tmp_path: Path) -> None:
    """The journal named the file by device and inode; each NFS client numbers the mount its own way, so host B read
    host A's half-written note as "changed in another way" and appended after it, leaving the fragment for good."""
    ws = _ws(tmp_path)
    log = ws / "memory" / "log.md"
    log.write_text("# Log\n\nexisting line\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-c", CHILD_CUT_ON_ANOTHER_HOST, str(ws)], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert b"never finished" in log.read_bytes()
    append_note(ws, "host B's note", "log.md")
    assert log.read_text(encoding="utf-8") == "# Log\n\nexisting line\n\nhost B's note\n"


def test_a_server_that_cuts_a_note_back_at_start_indexes_the_file_again(tmp_path: Path) -> None:
    """The service indexed the files, then build_server's recovery cut a killed writer's fragment away: without a
    watcher, search served the fragment until the next write."""
    from hybridmem.serve.notefile import lock_path
    from hybridmem.serve.server import build_server
    from hybridmem.serve.service import MemoryService

    ws = _ws(tmp_path)
    log = ws / "memory" / "log.md"
    whole = b"# Log\n\nexisting line\n"
    note = b"\nzanzibar quokka fragment here\n"
    log.write_bytes(whole + note[:20])  # as a writer killed 20 bytes into its note leaves it
    st = log.stat()
    lock_path(log).write_text(json.dumps({"state": "pending", "id": [st.st_ino], "size": len(whole),
                                          "after": len(whole) + len(note), "sha256": "0" * 64,
                                          "data": __import__("base64").b64encode(note).decode()}), encoding="utf-8")
    svc = MemoryService(ws, keyword_only=True, watch=False, preload=False)
    try:
        assert svc.search("zanzibar quokka")["results"]  # indexed before the recovery
        build_server(svc, allow_write=True)
        assert log.read_bytes() == whole
        assert svc.search("zanzibar quokka")["results"] == []
    finally:
        svc.close()


def test_two_settings_saves_at_once_both_land(tmp_path: Path) -> None:
    """Two workbench sessions are two threads of one process: they shared one temporary file and read, changed and
    wrote the file unlocked, leaving unparseable TOML, a lost save or a FileNotFoundError."""
    from hybridmem.config.write import write_ranking

    ws = _ws(tmp_path)
    settings = ws / "hybridmem.toml"
    for _ in range(20):
        settings.write_text('[embedding]\nprovider = "none"\n', encoding="utf-8")
        barrier, errors = threading.Barrier(2), []

        def save(changes: dict[str, object]) -> None:
            barrier.wait()
            try:
                write_ranking(ws, changes)
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=save, args=(c,)) for c in ({"min_score": 0.25}, {"fusion": "rrf"})]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        ranking = tomllib.loads(settings.read_text(encoding="utf-8"))["ranking"]
        assert ranking == {"min_score": 0.25, "fusion": "rrf"}
    assert sorted(p.name for p in ws.iterdir()) == [".hybridmem.toml.lock", "hybridmem.toml", "memory"]


def test_a_settings_file_that_is_a_symlink_keeps_its_link(tmp_path: Path) -> None:
    from hybridmem.config.write import write_ranking

    ws = _ws(tmp_path)
    real = tmp_path / "dotfiles" / "hybridmem.toml"
    real.parent.mkdir()
    real.write_text('# mine\n[embedding]\nprovider = "none"\n', encoding="utf-8")
    os.chmod(real, 0o640)
    (ws / "hybridmem.toml").unlink()
    (ws / "hybridmem.toml").symlink_to(real)
    write_ranking(ws, {"min_score": 0.3})
    assert (ws / "hybridmem.toml").is_symlink()
    assert real.read_text(encoding="utf-8").startswith("# mine\n") and "min_score = 0.3" in real.read_text()
    assert real.stat().st_mode & 0o777 == 0o640


def test_the_folders_a_first_note_creates_are_synced_with_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the note's own folder was synced: a new memory/projects/api/ could lose its name in a power cut after the
    reply said the note was saved."""
    from hybridmem.serve import notefile

    ws = _ws(tmp_path)
    synced: list[Path] = []
    monkeypatch.setattr(notefile, "fsync_dir", synced.append)
    append_note(ws, "a note", "memory/projects/api/notes.md")
    memory = ws / "memory"
    assert set(synced) == {memory / "projects" / "api", memory / "projects", memory}
    synced.clear()
    append_note(ws, "another note", "memory/projects/api/notes.md")
    assert synced == []


def test_recovery_at_start_walks_no_deeper_than_the_index_does(tmp_path: Path) -> None:
    """os.walk recursed into a RecursionError on 1,500 nested folders: `hybridmem mcp --allow-write` died at start."""
    ws = _ws(tmp_path)
    deep = ws / "memory"
    for _ in range(1500):
        deep = deep / "d"
        os.mkdir(deep)
    try:
        assert recover(ws / "memory") == []
    finally:  # pytest's own clean-up of old temporary folders recurses too
        while deep != ws / "memory":
            deep.rmdir()
            deep = deep.parent
