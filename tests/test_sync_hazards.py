"""What a second pair of eyes found on the indexing path (2026-12-07): secrets that reached the index, citations that
named the wrong lines or no file, a folder tree that crashed the sync, a watcher that saw nothing, and settings or
files skipped without a word. Each test fails on the code before its fix."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from hybridmem.config import Settings
from hybridmem.errors import ConfigError
from hybridmem.index import MemoryIndex
from hybridmem.sessions import parse_transcript

KEYWORD_ONLY = Settings().override(embedding={"provider": "none"})


def _ws(tmp_path: Path, *parts: str) -> Path:
    ws = tmp_path.joinpath("ws", *parts)
    (ws / "memory").mkdir(parents=True)
    return ws


def _chunks(ws: Path) -> list[tuple[str, int, int, str]]:
    with MemoryIndex(ws, settings=KEYWORD_ONLY) as idx:
        idx.sync()
        return [tuple(r) for r in idx.store._db.execute(
            "SELECT path, start_line, end_line, text FROM chunks ORDER BY path, start_line")]


@pytest.mark.parametrize("secret", ["password: Zq9falsetto#Kp2", "DB_PASSWORD=trueBlue42xQ!",
                                    "my password is Kx8Zp#Null"])
def test_a_secret_holding_true_false_or_null_is_redacted(tmp_path: Path, secret: str) -> None:
    """gitleaks' global allowlist `(?i)^true|false|null$`, meant for a secret that is just one of those words, kept
    every secret that starts with "true", holds "false" or ends in "null"."""
    ws = _ws(tmp_path)
    (ws / "memory" / "a.md").write_text(f"{secret}\nthe flag stays: false\n", encoding="utf-8")
    (ws / "sessions").mkdir()
    (ws / "sessions" / "s.jsonl").write_text(json.dumps({"role": "user", "content": secret}) + "\n", encoding="utf-8")
    texts = "\n".join(c[3] for c in _chunks(ws))
    assert secret.split()[-1].split("=")[-1] not in texts and texts.count("[REDACTED]") == 2
    assert "the flag stays: false" in texts


def test_a_key_and_its_value_on_two_lines_of_a_message_are_redacted(tmp_path: Path) -> None:
    """A transcript's message was redacted as written, then its lines joined into the indexed text, where the redactor
    would have found `password: Hunter2Secret!`."""
    out = parse_transcript([json.dumps({"role": "user", "content": "the db config:\npassword:\n  Hunter2Secret!"})])
    assert out.text == "User: the db config: password: [REDACTED]"


def test_a_secret_over_lines_ending_in_cr_keeps_every_later_line_where_it_is(tmp_path: Path) -> None:
    """Redaction kept only the "\\n" breaks of what it replaced: a private key in a file written with "\\r" breaks
    became one line, and every citation after it named lines 20 too early."""
    ws = _ws(tmp_path)
    key = "-----BEGIN RSA PRIVATE KEY-----\r" + "\r".join(f"MIIEowIBAAKCAQEAx1AbCdEfGhIjKlMnOp{i:02d}"
                                                       for i in range(20)) + "\r-----END RSA PRIVATE KEY-----"
    lines = ["# notes", key] + [f"filler line {i}" for i in range(10)] + ["zebrafinch is the answer"]
    (ws / "memory" / "a.md").write_bytes("\r".join(lines).encode() + b"\r")
    with MemoryIndex(ws, settings=KEYWORD_ONLY) as idx:
        idx.sync()
        hit = idx.search("zebrafinch", min_score=0.0, answer_threshold=0.0).results[0]
        assert "MIIE" not in " ".join(c[3] for c in _chunks(ws))
        got = idx.get(hit.path, hit.end_line, 1)
    assert hit.end_line == 2 + 21 + 10 + 1 and "zebrafinch" in got["text"]


def test_a_folder_tree_too_deep_for_python_s_walk_is_cut_with_a_warning(tmp_path: Path) -> None:
    """os.walk recurses once a folder level: 1,000 nested folders under memory/ crashed every sync with RecursionError,
    and no file of the workspace was indexed."""
    ws = _ws(tmp_path)
    (ws / "memory" / "top.md").write_text("the top note\n", encoding="utf-8")
    deep = ws / "memory"
    for _ in range(1000):
        deep = deep / "d"
        os.mkdir(deep)
    (deep / "deep.md").write_text("a deep note\n", encoding="utf-8")
    try:
        with MemoryIndex(ws, settings=KEYWORD_ONLY) as idx:
            report = idx.sync()
            assert [f["path"] for f in idx.files()] == ["memory/top.md"]
        assert any("folders nested more than 100 deep are not indexed" in w for w in report.warnings)
    finally:  # pytest's own clean-up of old temporary folders recurses too
        (deep / "deep.md").unlink()
        while deep != ws / "memory":
            deep.rmdir()
            deep = deep.parent


@pytest.mark.parametrize("name", ["home\\network.md", "new\nline.md"])
def test_a_file_name_a_citation_cannot_name_is_skipped_with_a_warning(tmp_path: Path, name: str) -> None:
    """A name with a backslash (memory_get reads it as a folder's separator) or a line break was indexed and found, but
    its citation could not be read back."""
    ws = _ws(tmp_path)
    (ws / "memory" / name).write_text("the router password is in the drawer\n", encoding="utf-8")
    (ws / "memory" / "ok.md").write_text("a readable note\n", encoding="utf-8")
    with MemoryIndex(ws, settings=KEYWORD_ONLY) as idx:
        report = idx.sync()
    assert [c[0] for c in _chunks(ws)] == ["memory/ok.md"]
    assert f"{'memory/' + name!r}: skipped, its file name holds a backslash or a control character, which a " \
           "citation cannot name; rename it to index it" in report.warnings


def test_the_watcher_sees_a_workspace_inside_a_folder_it_would_ignore(tmp_path: Path) -> None:
    """`relevant` matched ignore_dirs against every part of the absolute path: a workspace under node_modules/ (an
    agent's tool folder) had every change dropped."""
    from hybridmem.watch import Watcher

    ws = _ws(tmp_path, "node_modules", "agent")
    with MemoryIndex(ws, settings=KEYWORD_ONLY) as idx:
        watcher = Watcher(idx, debounce_s=0.1).start()
        try:
            assert watcher.relevant(str(ws / "memory" / "a.md"))
            assert not watcher.relevant(str(ws / "memory" / "node_modules" / "a.md"))
            (ws / "memory" / "a.md").write_text("the heron came back\n", encoding="utf-8")
            deadline = time.monotonic() + 20
            while not idx.indexed_file("memory/a.md") and time.monotonic() < deadline:
                time.sleep(0.1)
            assert [f["path"] for f in idx.files()] == ["memory/a.md"]
        finally:
            watcher.stop()


def test_an_extra_path_that_is_not_markdown_says_so(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    (ws / "notes.txt").write_text("the boiler code is 4471\n", encoding="utf-8")
    settings = KEYWORD_ONLY.override(sources={"extra_paths": ["notes.txt"]})
    with MemoryIndex(ws, settings=settings) as idx:
        report = idx.sync()
    assert ("sources.extra_paths: notes.txt is not a folder or a .md file, so nothing is indexed from it (only .md "
            "files are)") in report.warnings


@pytest.mark.parametrize("name", ["extra_paths", "session_paths", "ignore_dirs"])
def test_a_nul_in_a_path_setting_is_a_settings_error(name: str) -> None:
    with pytest.raises(ConfigError, match=rf"^invalid setting sources\.{name}: 'notes\\x00' holds a NUL character, "
                                          r"which no path can$"):
        Settings().override(sources={name: ["notes\0"]})


def test_a_note_that_is_a_link_to_nothing_is_named_in_a_warning(tmp_path: Path) -> None:
    """A dangling or looping link named like a note was passed over without a word (a link out of memory's places
    gets a warning)."""
    ws = _ws(tmp_path)
    (ws / "memory" / "real.md").write_text("a note\n", encoding="utf-8")
    os.symlink(ws / "memory" / "gone.md", ws / "memory" / "dangling.md")
    os.symlink(ws / "memory" / "loop2.md", ws / "memory" / "loop1.md")
    os.symlink(ws / "memory" / "loop1.md", ws / "memory" / "loop2.md")
    with MemoryIndex(ws, settings=KEYWORD_ONLY) as idx:
        report = idx.sync()
        assert [f["path"] for f in idx.files()] == ["memory/real.md"]
    for name in ("dangling", "loop1", "loop2"):
        assert f"memory/{name}.md: skipped, it is a link to nothing (or a loop of links)" in report.warnings


def test_a_transcript_s_new_messages_are_counted_by_their_records_not_by_unicode_line_breaks(tmp_path: Path) -> None:
    """`str.splitlines()` also splits on U+2028, U+0085 and form feeds, which a JSON string may hold raw: a message
    holding one counted as no message, and a growing transcript waited longer than `session_delta_messages`."""
    from hybridmem.sessions import appended_delta

    path = tmp_path / "s.jsonl"
    old = json.dumps({"role": "user", "content": "first"}) + "\n"
    new = "".join(json.dumps({"role": "user", "content": f"line\u2028{i}\x0cend"}, ensure_ascii=False) + "\n"
                  for i in range(3))
    path.write_text(old + new, encoding="utf-8")
    assert appended_delta(str(path), len(old.encode()), path.stat().st_size, 10 ** 6)[1] == 3


def test_a_note_cut_at_max_file_bytes_inside_a_character_is_not_called_invalid(tmp_path: Path) -> None:
    """A line longer than `sources.max_file_bytes` was cut at the byte limit, inside a character: the note was said
    to hold invalid UTF-8 and ended in U+FFFD."""
    from hybridmem.sources import read_text

    note = tmp_path / "long.md"
    note.write_text("é" * 1000, encoding="utf-8")  # one line of two-byte characters
    text, warning = read_text(note, 1001)
    assert text == "é" * 500 and warning == "too large: only the first 1000 bytes indexed (sources.max_file_bytes = 1001)"


def test_a_note_reached_also_through_a_link_is_indexed_under_its_own_path(tmp_path: Path) -> None:
    """The first path in name order won: `memory/alias.md`, a link, was indexed instead of `memory/real.md`, which
    `memory_get` then refused as not indexed."""
    ws = _ws(tmp_path)
    (ws / "memory" / "real.md").write_text("the heron nests by the lake\n", encoding="utf-8")
    os.symlink(ws / "memory" / "real.md", ws / "memory" / "alias.md")
    (ws / "memory" / "sub").mkdir()
    (ws / "memory" / "sub" / "s.md").write_text("a note in a folder\n", encoding="utf-8")
    os.symlink(ws / "memory" / "sub", ws / "memory" / "a-link")
    with MemoryIndex(ws, settings=KEYWORD_ONLY) as idx:
        idx.sync()
        assert [f["path"] for f in idx.files()] == ["memory/real.md", "memory/sub/s.md"]
        assert "heron" in idx.get("memory/real.md")["text"]
