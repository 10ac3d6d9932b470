"""The warnings a sync prints about a file it read (NUL bytes, cut emoji, malformed transcript lines) count in
words: "1 NUL byte ... on line 4", "2 NUL bytes ... on lines 4, 9", never "byte(s)" or "line(s)"."""

from __future__ import annotations

import json
from pathlib import Path

from hybridmem.sources import SourceFile, load, read_text


def _warning(path: Path) -> str | None:
    return read_text(path, 1 << 20)[1]


def test_nul_bytes_are_counted_in_words(tmp_path: Path) -> None:
    one = tmp_path / "one.md"
    one.write_bytes(b"a\nb\nc\nstray \x00 here\n")
    assert _warning(one) == "1 NUL byte replaced by U+FFFD on line 4"
    two = tmp_path / "two.md"
    two.write_bytes(b"a\nb\nc\n\x00\n" + b"x\n" * 4 + b"\x00 and \x00\n")
    assert _warning(two) == "3 NUL bytes replaced by U+FFFD on lines 4, 9"
    many = tmp_path / "many.md"
    many.write_bytes(b"".join(b"line \x00\n" for _ in range(7)))
    assert _warning(many) == "7 NUL bytes replaced by U+FFFD on lines 1, 2, 3, 4, 5 and later"


def _session(path: Path, lines: list[str]) -> str | None:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    st = path.stat()
    return load(SourceFile(f"sessions/{path.name}", str(path), "sessions", st.st_mtime, st.st_size)).warning


def test_transcript_warnings_are_counted_in_words(tmp_path: Path) -> None:
    ok = json.dumps({"role": "user", "content": "the kafka consumer lag is high"})
    cut = '{"role": "assistant", "content": "cut emoji \\ud83d here"}'
    assert _session(tmp_path / "a.jsonl", [ok, "{not json", ok]) == "1 malformed JSONL line skipped"
    assert _session(tmp_path / "b.jsonl", [ok, "{not json", "nor this", ok]) == "2 malformed JSONL lines skipped"
    assert _session(tmp_path / "c.jsonl", [ok, cut]) == \
        "a lone surrogate (a cut emoji?) replaced by U+FFFD on line 2"
    assert _session(tmp_path / "d.jsonl", [cut, ok, cut]) == \
        "lone surrogates (cut emoji?) replaced by U+FFFD on lines 1, 3"
    assert _session(tmp_path / "e.jsonl", [cut] * 7) == \
        "lone surrogates (cut emoji?) replaced by U+FFFD on lines 1, 2, 3, 4, 5 and 2 more"
