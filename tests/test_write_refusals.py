"""``memory_write``'s refusals beyond the name checks of ``test_serve_write``: what lies beside the note file (its
lock file) and names other systems cannot hold. Each is one sentence, and nothing is written anywhere."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hybridmem.errors import PathError
from hybridmem.serve.notefile import recover
from hybridmem.serve.write import append_note


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
