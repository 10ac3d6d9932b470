"""``memory_write`` beside programs that take no lock (a line appended by another program, ``echo >> note.md``, while
a note is appended must not throw off the lines later replies name), and hosts that send what the SDK cannot parse."""

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


def test_a_note_with_a_lone_surrogate_escape_over_stdio_is_answered(tmp_path: Path) -> None:
    r"""A JSON ``\ud83d`` with no low half (a host that cut a string inside an emoji) is refused by the SDK's parser,
    and over stdio a refused message got no reply at all: the client waited for ever and the note was not saved.
    It is saved with U+FFFD in its place, as the Python API does; an escaped backslash before ``ud800`` is text."""
    import select
    import subprocess
    import sys

    from test_mcp import ENV, LAUNCH

    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "hybridmem.toml").write_text('[embedding]\nprovider = "none"\n', encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-c", LAUNCH, "mcp", str(ws), "--keyword-only", "--allow-write",
                             "--no-watch"], env=ENV, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None

    def ask(line: str) -> bytes:
        proc.stdin.write(line.encode() + b"\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        ready, _, _ = select.select([proc.stdout], [], [], 20)
        return proc.stdout.readline() if ready else b"(no reply)"  # type: ignore[union-attr]

    try:
        ask('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
            '"capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}')
        proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        proc.stdin.flush()
        reply = ask('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"memory_write","arguments":'
                    r'{"text":"cut \ud83d emoji, a lone \udfff half, a pair \ud83d\ude00 and \\ud800 text",'
                    '"file":"s.md"}}}')
    finally:
        proc.stdin.close()
        proc.wait(30)
    assert b'"id":2' in reply and b"Saved to memory/s.md#L1-L1." in reply, reply
    assert (ws / "memory" / "s.md").read_text(encoding="utf-8") == \
        "cut \ufffd emoji, a lone \ufffd half, a pair \U0001f600 and \\ud800 text\n"
