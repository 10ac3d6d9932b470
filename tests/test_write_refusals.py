"""``memory_write``'s refusals beyond the name checks of ``test_serve_write``: what lies beside the note file (its
lock file) and names other systems cannot hold. Each is one sentence, and nothing is written anywhere."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hybridmem.errors import HybridMemError, PathError
from hybridmem.serve import notefile
from hybridmem.serve.notefile import recover
from hybridmem.serve.write import append_note

ROOT = Path(__file__).resolve().parents[1]


def _tree(root: Path) -> dict[str, bytes | str]:
    return {str(p.relative_to(root)): os.readlink(p) if p.is_symlink() else p.read_bytes() if p.is_file() else "dir"
            for p in sorted(root.rglob("*"))}


def test_a_lock_file_that_is_a_symlink_is_never_written_through(tmp_path: Path) -> None:
    """A ``.notes.md.lock`` planted as a link (a cloned or synced memory folder) made the append truncate and
    rewrite the file it pointed to with its journal, or create a missing one, outside memory/."""
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    (ws / "memory").mkdir(parents=True)
    outside.mkdir()
    (outside / "victim.md").write_text("the user's own file\n", encoding="utf-8")
    os.symlink(outside / "victim.md", ws / "memory" / ".notes.md.lock")
    os.symlink(outside / "missing.txt", ws / "memory" / ".dangling.md.lock")
    before = _tree(tmp_path)
    for name in ("notes.md", "dangling.md"):
        with pytest.raises(PathError, match=r"^a note is never written through a symlink: its lock file "
                                            r"\.\w+\.md\.lock is one$"):
            append_note(ws, "a note", name)
    assert recover(ws / "memory") == []
    assert _tree(tmp_path) == before


def test_recovery_never_cuts_a_file_through_a_symlinked_note(tmp_path: Path) -> None:
    """A pending journal beside a note that is a link (a folder synced from elsewhere) cut the file it pointed to."""
    import json

    ws, victim = tmp_path / "ws", tmp_path / "victim.md"
    (ws / "memory").mkdir(parents=True)
    victim.write_text("0123456789" * 10, encoding="utf-8")
    st = victim.stat()
    os.symlink(victim, ws / "memory" / "x.md")
    (ws / "memory" / ".x.md.lock").write_text(json.dumps({
        "state": "pending", "id": [st.st_dev, st.st_ino], "size": 10, "after": 200, "sha256": "0" * 64}))
    assert recover(ws / "memory") == []
    assert victim.read_text(encoding="utf-8") == "0123456789" * 10


@pytest.mark.parametrize("name", ["CON.md", "nul.md", "memory/aux.md", "com1.md", "LPT9.md", "con.txt.md", "CON .md",
                                  "memory/prn/x.md", "memory/a*b.md", "what?.md", 'say "hi".md', "a<b>.md", "a|b.md",
                                  "memory/ab:c.md", "memory/folder./x.md", "memory/folder /x.md"])
def test_names_windows_cannot_hold_are_refused(tmp_path: Path, name: str) -> None:
    """A memory folder synced to, or checked out on, Windows: ``CON.md`` or ``what?.md`` cannot exist there (a sync
    tool stops, git fails the checkout), and a folder named with a trailing dot or space is another folder there."""
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    with pytest.raises(PathError, match=r"^[^\n]* cannot hold on Windows[^\n]*$"):
        append_note(ws, "a note", name)
    assert _tree(ws) == {"memory": "dir"}


CHILD_NO_ROOM = textwrap.dedent(
    """
    import resource, signal, sys
    from pathlib import Path
    from hybridmem.errors import HybridMemError
    from hybridmem.serve import notefile
    from hybridmem.serve.write import append_note
    cut = notefile.os.ftruncate
    def spy(fd, size):  # how far the note got before it was cut back
        print(notefile.os.fstat(fd).st_size, size, flush=True)
        cut(fd, size)
    notefile.os.ftruncate = spy
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, as one past a full disk
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), resource.RLIM_INFINITY))
    try:
        append_note(Path(sys.argv[1]), "x" * 1000, "n.md")
    except HybridMemError as exc:
        sys.stderr.write(str(exc))
        sys.exit(3)
    """
)


@pytest.mark.parametrize("where", ["journal", "note"])
def test_a_note_the_file_system_refuses_is_reported_unsaved_and_the_file_is_left_as_it_was(tmp_path: Path,
                                                                                            where: str) -> None:
    """A write the file system refuses part-way (a full disk, a quota, a file-size limit: here the real kernel's,
    ``RLIMIT_FSIZE``) before the journal is down or in the middle of the note: the reply says in one sentence that the
    note is not saved, the file keeps its bytes, nothing stays pending, and the next note lands on the right line."""
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    note = ws / "memory" / "n.md"
    before = b"# n\n\n" + b"".join(b"line %d\n" % i for i in range(400))
    note.write_bytes(before)
    # the pending journal holds the note (~1.5 KB): under it the journal fails; above it the note fails part-way
    limit = 1000 if where == "journal" else len(before) + 500
    proc = subprocess.run([sys.executable, "-c", CHILD_NO_ROOM, str(ws), str(limit)], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert proc.returncode == 3, proc.stderr
    got = {tuple(map(int, line.split())) for line in proc.stdout.splitlines()}
    assert (len(before), len(before)) in got if where == "journal" else (limit, len(before)) in got
    assert proc.stderr.startswith("the note was not saved: writing memory/n.md failed (File too large) and the file "
                                  "is as it was;") and "\n" not in proc.stderr
    assert note.read_bytes() == before
    assert (ws / "memory" / ".n.md.lock").read_bytes() in (b"", b"{}")
    out = append_note(ws, "after", "n.md")
    assert out["start_line"] == 404 and note.read_bytes() == before + b"\nafter\n"


def test_a_full_disk_mid_note_is_cut_back_and_one_after_it_saved_still_counts(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """ENOSPC (a fake: no test can fill this machine's disk) after half the note is on disk: cut back and reported.
    ENOSPC on the journal written after the note is saved: the note is saved and reported so (an agent told
    otherwise would write it again), and the next append counts the lines itself."""
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    note = ws / "memory" / "n.md"
    note.write_bytes(b"# n\n\nfirst\n")
    real_write, real_journal = os.write, notefile._set_journal

    def half_then_full(fd: int, data: bytes) -> int:
        if len(data) > 100:
            real_write(fd, bytes(data[: len(data) // 2]))
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    monkeypatch.setattr(notefile.os, "write", half_then_full)
    with pytest.raises(HybridMemError, match=r"^the note was not saved: writing memory/n.md failed \(No space left on "
                                             r"device\) and the file is as it was; free some space"):
        append_note(ws, "y" * 300, "n.md")
    assert note.read_bytes() == b"# n\n\nfirst\n"
    monkeypatch.setattr(notefile.os, "write", real_write)

    def no_room_once_saved(fd: int, data: dict, durable: bool) -> None:
        if data.get("state") == "done":
            os.ftruncate(fd, 0)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_journal(fd, data, durable)

    monkeypatch.setattr(notefile, "_set_journal", no_room_once_saved)
    assert append_note(ws, "saved", "n.md")["start_line"] == 5
    monkeypatch.setattr(notefile, "_set_journal", real_journal)
    assert append_note(ws, "next", "n.md")["start_line"] == 7
    assert note.read_bytes() == b"# n\n\nfirst\n\nsaved\n\nnext\n"
