"""``memory_write`` beside programs that take no lock: a line appended by another program (``echo >> note.md``, a
logger) while a note is appended must not throw off the lines later replies name."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hybridmem.serve.write import append_note


def test_a_line_another_program_appends_right_after_a_note_keeps_later_line_numbers_true(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The append recorded the file's size after its own write and fsync as the size its line count was for; a line
    another program appended in between was in that size but not in the count, so every later reply named the
    line above its note (18 of 144 replies in a run of 3 processes x 4 threads beside a `>>` appender)."""
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    note = ws / "memory" / "log.md"
    note.write_text("# Log\n", encoding="utf-8")
    real_fsync, done = os.fsync, []

    def fsync_then_another_program_appends(fd: int) -> None:
        real_fsync(fd)
        if not done and os.fstat(fd).st_ino == note.stat().st_ino:
            done.append(1)
            with open(note, "a", encoding="utf-8") as fh:
                fh.write("a line a logger appended\n")

    monkeypatch.setattr(os, "fsync", fsync_then_another_program_appends)
    append_note(ws, "The first note.", "memory/log.md")
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert done
    out = append_note(ws, "The second note.", "memory/log.md")
    lines = note.read_text(encoding="utf-8").split("\n")
    assert lines[out["start_line"] - 1] == "The second note.", (out, lines)
