"""``memory_write`` over MCP (the real server as a subprocess, the SDK's own client over stdio and Streamable HTTP):
parallel writes, what a note may hold, where it may go, how large a file may grow, and secrets (issue #23)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
from mcp import Client  # noqa: E402

from test_mcp import HttpServer, _stdio, _workspace  # noqa: E402


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    return _workspace(tmp_path)


def assert_at_their_lines(ws: Path, replies: list[Any], notes: list[str]) -> dict[str, int]:
    """Every note reported saved is in its file, once, at the lines the reply named; returns notes per file."""
    per_file: dict[str, int] = {}
    texts: dict[str, list[str]] = {}
    for r, note in zip(replies, notes):
        assert not r.is_error, r.content[0].text
        out = r.structured_content
        lines = texts.setdefault(out["path"], (ws / out["path"]).read_text(encoding="utf-8").split("\n"))
        assert "\n".join(lines[out["start_line"] - 1 : out["end_line"]]) == note, (out, note)
        per_file[out["path"]] = per_file.get(out["path"], 0) + 1
    for path, lines in texts.items():
        body = "\n".join(lines)
        for note in notes:
            assert body.count(note) <= 1, f"{note!r} written twice to {path}"
    spans = [(r.structured_content["path"], r.structured_content["start_line"]) for r in replies]
    assert len(set(spans)) == len(spans), "two notes were given the same line"
    return per_file


def kept(ws: Path, notes: list[str]) -> int:
    text = "".join(p.read_text(encoding="utf-8") for p in (ws / "memory").rglob("*.md"))
    return sum(note in text for note in notes)


def test_ten_parallel_writes_in_one_stdio_session_all_land_at_their_lines(ws: Path) -> None:
    notes = [f"Parallel note {i}: the quokka{i} budget is {i * 7} euros.\nSecond line of note {i}." for i in range(10)]

    async def main() -> tuple[list[Any], list[Any]]:
        async with _stdio(ws, "--allow-write") as client:
            replies = await asyncio.gather(*(client.call_tool("memory_write", {"text": n}) for n in notes))
            found = [await client.call_tool("memory_search", {"query": f"quokka{i} budget"}) for i in range(10)]
            return list(replies), found

    replies, found = asyncio.run(main())
    print(f"\n10 parallel writes over stdio: {sum(not r.is_error for r in replies)} reported saved, "
          f"{kept(ws, notes)} of 10 kept")
    assert kept(ws, notes) == 10
    assert_at_their_lines(ws, replies, notes)
    for r, f in zip(replies, found):  # each findable, where the write said it is
        out, top = r.structured_content, f.structured_content["results"][0]
        assert out["indexed"] is True and top["path"] == out["path"]
        assert top["start_line"] <= out["start_line"] <= out["end_line"] <= top["end_line"]


def test_eight_http_clients_ten_writes_each_all_land_at_their_lines(ws: Path) -> None:
    server = HttpServer(ws, "--allow-write")
    notes = [[f"client {c} note {i}: wombat{c}x{i} ships on the {i + 1}th." for i in range(10)] for c in range(8)]

    async def client(c: int) -> list[Any]:
        async with Client(server.url) as cl:
            return list(await asyncio.gather(*(cl.call_tool("memory_write", {"text": n}) for n in notes[c])))

    async def main() -> list[Any]:
        return [r for rs in await asyncio.gather(*(client(c) for c in range(8))) for r in rs]

    try:
        replies = asyncio.run(main())
    finally:
        server.close()
    flat = [n for ns in notes for n in ns]
    print(f"\n8 HTTP clients x 10 writes: {kept(ws, flat)} of 80 kept")
    assert kept(ws, flat) == 80
    assert_at_their_lines(ws, replies, flat)


def _call(ws: Path, calls: list[tuple[str, dict[str, Any]]], *extra: str) -> list[Any]:
    async def main() -> list[Any]:
        async with _stdio(ws, "--allow-write", *extra) as client:
            return [await client.call_tool(name, args) for name, args in calls]

    return asyncio.run(main())


def test_a_nul_in_a_note_is_removed_and_the_file_stays_searchable(ws: Path) -> None:
    f = "memory/projects/nul-byte.md"
    r = _call(ws, [
        ("memory_write", {"text": "The ocelot launch is on Friday.", "file": f}),
        ("memory_write", {"text": "bad\u0000byte and a bell\u0007 in the capybara note", "file": f}),
        ("memory_search", {"query": "ocelot launch"}),
        ("memory_search", {"query": "capybara note"}),
        ("memory_get", {"path": f}),
    ])
    assert not r[1].is_error and r[1].structured_content["removed_characters"] == 2, r[1].content[0].text
    assert "2 control character(s) were removed" in r[1].content[0].text
    data = (ws / f).read_bytes()
    assert b"\x00" not in data and b"\x07" not in data and b"badbyte and a bell in the capybara note" in data
    assert r[2].structured_content["results"][0]["path"] == f, "the earlier note vanished from the index"
    assert r[3].structured_content["results"][0]["path"] == f
    assert r[4].structured_content["text"] == data.decode().rstrip("\n")


def test_a_stray_nul_on_disk_keeps_the_file_indexed_with_a_warning(ws: Path) -> None:
    (ws / "memory" / "stray.md").write_bytes(b"# Stray\n\nThe narwhal budget is fine.\nbroken\x00line here\n")
    from hybridmem.cli import main as cli_main

    import contextlib
    import io
    import json

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert cli_main(["index", str(ws), "--keyword-only", "--json"]) == 0
    warnings = json.loads(buf.getvalue())["warnings"]
    assert "memory/stray.md: 1 NUL byte replaced by U+FFFD on line 4" in warnings
    r = _call(ws, [("memory_search", {"query": "narwhal budget"}), ("memory_get", {"path": "memory/stray.md"})])
    assert r[0].structured_content["results"][0]["path"] == "memory/stray.md"
    assert r[1].structured_content["text"].endswith("broken\ufffdline here")


@pytest.mark.parametrize("file, reason", [
    ("memory/node_modules/x.md", "its folder 'node_modules' is ignored (sources.ignore_dirs)"),
    ("memory/.git/x.md", "a hidden, empty or extension-only name is refused"),
    ("memory/.hybridmem/x.md", "a hidden, empty or extension-only name is refused"),
    ("memory/__pycache__/x.md", "its folder '__pycache__' is ignored"),
    (".md", "a hidden, empty or extension-only name is refused: '.md'"),
    ("memory/.md", "a hidden, empty or extension-only name is refused"),
    ("memory/.secret.md", "a hidden, empty or extension-only name is refused"),
    ("memory/ .md", "a hidden, empty or extension-only name is refused"),
    ("", "path is empty"),
    ("memory/folder.md", "memory/folder.md is a folder, not a note file"),
    ("memory/2026-10-02.md/x.md", "memory/2026-10-02.md is a file, so memory/2026-10-02.md/x.md cannot be created"),
    ("memory/" + "n" * 300 + ".md", "a file or folder name longer than 240 bytes is refused"),
    ("memory/notes.txt", "only .md files are indexed"),
    ("MEMORY.md", "the workspace's MEMORY.md is not written by memory_write"),  # not a look-alike memory/MEMORY.md
    ("./memory.md", "the workspace's MEMORY.md is not written by memory_write"),
    ("memory/", "'memory/' names a folder: name a .md file in it"),  # read as a file memory/memory
    ("memory", "'memory' names a folder: name a .md file in it"),
])
def test_writes_that_would_never_be_found_are_refused_with_the_reason(ws: Path, file: str, reason: str) -> None:
    (ws / "memory" / "folder.md").mkdir()
    before = sorted(p.relative_to(ws).as_posix() for p in ws.rglob("*") if ".hybridmem" not in p.parts)
    (r,) = _call(ws, [("memory_write", {"text": "a note no search would find", "file": file})])
    assert r.is_error and reason in r.content[0].text, r.content[0].text
    assert "unavailable" not in r.content[0].text and r.content[0].text.replace("e.g. ", "").count(". ") == 0
    assert sorted(p.relative_to(ws).as_posix() for p in ws.rglob("*") if ".hybridmem" not in p.parts) == before


def test_an_append_that_would_cross_max_file_bytes_is_refused_and_says_what_to_do(ws: Path) -> None:
    (ws / "hybridmem.toml").write_text("[sources]\nmax_file_bytes = 400\n", encoding="utf-8")
    f = "memory/log.md"
    notes = [f"Entry {i}: the pangolin{i} shipment left the warehouse on time." for i in range(8)]
    r = _call(ws, [*(("memory_write", {"text": n, "file": f}) for n in notes),
                   ("memory_write", {"text": notes[-1], "file": "memory/log-2.md"}),
                   *(("memory_search", {"query": f"pangolin{i} shipment"}) for i in range(8))])
    saved = [x for x in r[:8] if not x.is_error]
    refused = [x for x in r[:8] if x.is_error]
    assert 4 <= len(saved) < 8 and refused and (ws / f).stat().st_size <= 400
    assert all(x.structured_content["indexed"] for x in saved)
    msg = refused[0].content[0].text
    assert "memory/log.md would grow past sources.max_file_bytes (400 bytes" in msg and "another file" in msg
    assert not r[8].is_error and r[8].structured_content["indexed"]
    for i, x in enumerate(r[9:]):  # every note reported saved is found
        if i < len(saved):
            assert x.structured_content["results"][0]["path"] == f, i


SECRETS = ("sk-proj-AbCdEf0123456789AbCdEf0123456789AbCdEf01", "AKIAIOSFODNN7EXAMPLF", "Hunter2!xyz")


def test_secrets_are_redacted_before_the_note_reaches_the_file(ws: Path) -> None:
    note = f"Deploy key {SECRETS[0]}, aws {SECRETS[1]}, db password: {SECRETS[2]} for the walrus service."
    (r,) = _call(ws, [("memory_write", {"text": note, "file": "memory/keys.md"})])
    text = (ws / "memory" / "keys.md").read_text(encoding="utf-8")
    assert not any(s in text for s in SECRETS) and "[REDACTED]" in text and "walrus service" in text
    out = r.structured_content
    assert {"prefixed-key", "aws-key-id", "key-assignment"} <= set(out["redacted"]), out
    assert "Secrets were replaced by [REDACTED] (rules: " in r.content[0].text
    assert not any(s in r.content[0].text for s in SECRETS)


def test_redact_writes_false_keeps_the_raw_text(ws: Path) -> None:
    (ws / "hybridmem.toml").write_text("[serve]\nredact_writes = false\n", encoding="utf-8")
    note = f"The walrus deploy key is {SECRETS[0]}."
    (r,) = _call(ws, [("memory_write", {"text": note, "file": "memory/keys.md"})])
    assert (ws / "memory" / "keys.md").read_text(encoding="utf-8") == note + "\n"
    assert "redacted" not in r.structured_content


def test_memory_status_argument_error_names_no_empty_list(ws: Path) -> None:
    (r,) = _call(ws, [("memory_status", {"verbose": True})])
    assert r.is_error and r.content[0].text == "unknown argument(s): verbose; this tool takes no arguments."


def test_a_note_saved_but_not_indexed_says_so_and_is_not_an_error(ws: Path) -> None:
    """The index file is replaced by garbage under the running server: the note is saved, and the reply says it is
    not searchable and why (before: 'indexed: true' whatever happened, or a tool error for a note that was saved).
    An index file deleted under it is made anew, and the note indexed there."""

    async def main() -> Any:
        async with _stdio(ws, "--allow-write", "--no-watch") as client:
            await client.call_tool("memory_status", {})
            for p in (ws / ".hybridmem").glob("index.sqlite*"):
                p.unlink()
            made_anew = await client.call_tool("memory_write", {"text": "The walrus tusks arrive Friday.",
                                                                "file": "memory/walrus.md"})
            found = await client.call_tool("memory_search", {"query": "walrus tusks", "min_score": 0})
            for p in (ws / ".hybridmem").glob("index.sqlite*"):
                p.unlink()
            (ws / ".hybridmem" / "index.sqlite").write_bytes(b"not a database at all " * 200)
            broken = await client.call_tool("memory_write", {"text": "The yak shears arrive Monday.",
                                                             "file": "memory/yak.md"})
            return made_anew, found, broken

    made_anew, found, r = asyncio.run(main())
    assert made_anew.structured_content["indexed"] is True, made_anew.content[0].text
    assert found.structured_content["results"][0]["path"] == "memory/walrus.md"
    assert not r.is_error, r.content[0].text
    out = r.structured_content
    assert out["indexed"] is False and "is corrupt" in out["index_error"]
    assert (ws / "memory" / "yak.md").read_text(encoding="utf-8") == "The yak shears arrive Monday.\n"
    # the index's sentence is about the index: the agent is told the note itself is saved (PostgreSQL's 'nothing was
    # written: run it again' made an agent write it twice)
    assert out["index_error"].startswith("the note is saved in memory/yak.md, but indexing it failed (")
    assert out["index_error"].endswith("do not write the note again: the next sync indexes it (this server does not "
                                       "watch: the next memory_write or `hybridmem index`)")  # --no-watch
    assert "Not searchable yet: " in r.content[0].text
    assert (ws / "memory" / "yak.md").read_text(encoding="utf-8") == "The yak shears arrive Monday.\n"


def test_a_file_replaced_while_a_note_is_appended_gets_the_note_again(ws: Path) -> None:
    """A rename-based save by another program (sed -i, an editor's safe save, a sync tool) right after the append
    took the note away with the old copy, and the reply still said saved and indexed at lines the file no longer
    had. The note is looked for after indexing and appended again to the new file; lines an edit above it moved are
    reported where they are now."""
    import os

    from hybridmem.serve.service import MemoryService
    from hybridmem.serve.write import write_note

    target = ws / "memory" / "shared.md"
    target.write_text("# Shared\n\nEDITMARK user line\n", encoding="utf-8")
    with MemoryService(ws, keyword_only=True, watch=False, preload=False) as svc:
        real_sync, edits = svc.index.sync, []

        def sync_after_an_editor(*a: Any, **kw: Any) -> Any:
            if len(edits) < 1:  # the editor read the file before the append, and renames its copy over it now
                edits.append(1)
                tmp = target.with_name("shared.md.tmp")
                tmp.write_text("# Shared\n\nEDITMARK edited line\n", encoding="utf-8")
                os.replace(tmp, target)
            return real_sync(*a, **kw)

        svc.index.sync = sync_after_an_editor  # type: ignore[method-assign]
        out = write_note(svc, "The okapi fund closes in May.", "memory/shared.md")
        lines = target.read_text(encoding="utf-8").splitlines()
        assert lines.count("The okapi fund closes in May.") == 1 and "EDITMARK edited line" in lines
        assert lines[out["start_line"] - 1] == "The okapi fund closes in May." and out["indexed"] is True

        def sync_after_an_edit_on_top(*a: Any, **kw: Any) -> Any:
            target.write_text("# Added on top\n\n" + target.read_text(encoding="utf-8"), encoding="utf-8")
            return real_sync(*a, **kw)

        svc.index.sync = sync_after_an_edit_on_top  # type: ignore[method-assign]
        out = write_note(svc, "The ibex grant is due in June.", "memory/shared.md")
        lines = target.read_text(encoding="utf-8").splitlines()
        assert lines.count("The ibex grant is due in June.") == 1  # there already: not appended again
        assert lines[out["start_line"] - 1] == "The ibex grant is due in June."


@pytest.mark.parametrize("name,why", [
    ("memory/a\x1bb.md", "control, format or invisible characters"),
    ("memory/a\nb.md", "control, format or invisible characters"),
    ("memory/bidi\u202etxt.md", "control, format or invisible characters"),
    ("memory/zw\u200b.md", "control, format or invisible characters"),
    ("memory/" + "/".join(["d" * 200] * 25) + "/x.md", "cannot write"),
])
def test_hostile_file_names_are_refused_in_one_sentence(ws: Path, name: str, why: str) -> None:
    from hybridmem.errors import PathError
    from hybridmem.serve.write import append_note

    before = sorted(p.name for p in (ws / "memory").rglob("*"))
    with pytest.raises(PathError, match=why):
        append_note(ws, "a note", name)
    assert sorted(p.name for p in (ws / "memory").rglob("*")) == before


def test_a_name_in_either_unicode_form_writes_the_file_that_exists(ws: Path) -> None:
    import unicodedata

    from hybridmem.serve.write import append_note

    nfd = unicodedata.normalize("NFD", "memory/café.md")
    (ws / nfd).write_text("# Café\n", encoding="utf-8")
    out = append_note(ws, "The espresso machine was descaled.", unicodedata.normalize("NFC", nfd))
    assert out["path"] == nfd and len([p for p in (ws / "memory").glob("caf*")]) == 1
    out = append_note(ws, "A new note.", "memory/thé.md")
    assert out["path"] == unicodedata.normalize("NFC", "memory/thé.md")


def _with_sync_hook(svc: Any, hook: Any) -> None:
    real = svc.index.sync

    def sync(*a: Any, **kw: Any) -> Any:
        hook()
        return real(*a, **kw)

    svc.index.sync = sync


def test_the_note_check_reads_whole_lines_and_never_writes_twice(ws: Path) -> None:
    """The check after indexing: a note that is the tail of another line is not taken for it; a file re-saved with
    CRLF line ends still holds the note (not appended twice); a file moved away after the append is not made
    again with the note in it."""
    import os

    from hybridmem.serve.service import MemoryService
    from hybridmem.serve.write import write_note

    target = ws / "memory" / "budget.md"
    target.write_text("# Budget\n\nBudget: approved\n", encoding="utf-8")
    with MemoryService(ws, keyword_only=True, watch=False, preload=False) as svc:
        _with_sync_hook(svc, lambda: target.write_text("# On top\n\n" + target.read_text(encoding="utf-8"),
                                                       encoding="utf-8"))
        out = write_note(svc, "approved", "memory/budget.md")
        lines = target.read_text(encoding="utf-8").splitlines()
        assert lines.count("approved") == 1 and lines[out["start_line"] - 1] == "approved"

    crlf = ws / "memory" / "crlf.md"
    crlf.write_text("# CRLF\n", encoding="utf-8")
    with MemoryService(ws, keyword_only=True, watch=False, preload=False) as svc:
        def resave() -> None:
            data = crlf.read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
            tmp = crlf.with_name("crlf.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, crlf)

        _with_sync_hook(svc, resave)
        out = write_note(svc, "The okapi fund closes in May.  ", "memory/crlf.md")
        assert crlf.read_bytes().count(b"The okapi fund closes in May.") == 1
        assert crlf.read_bytes().splitlines()[out["start_line"] - 1].rstrip() == b"The okapi fund closes in May."

    moved = ws / "memory" / "moved.md"
    moved.write_text("# Moved\n", encoding="utf-8")
    with MemoryService(ws, keyword_only=True, watch=False, preload=False) as svc:
        _with_sync_hook(svc, lambda: moved.exists() and os.replace(moved, ws / "memory" / "elsewhere.md"))
        write_note(svc, "The ibex grant is due in June.", "memory/moved.md")
        assert not moved.exists() and "ibex" in (ws / "memory" / "elsewhere.md").read_text(encoding="utf-8")


def test_a_note_is_not_appended_to_a_file_in_another_encoding(ws: Path) -> None:
    """UTF-8 bytes appended to a UTF-16 or Windows-1252 note garbled it for every reader (the index now reads both);
    a binary file is refused as binary, in memory_get's words."""
    import random

    from hybridmem.config import SourcesConfig
    from hybridmem.errors import PathError
    from hybridmem.reader import read_memory
    from hybridmem.serve.write import append_note

    (ws / "memory" / "win16.md").write_bytes("# Notizen\r\nDer Zähler\r\n".encode("utf-16"))
    (ws / "memory" / "win1252.md").write_bytes("# Réunion\n« déjà » vu\n".encode("cp1252"))
    for name, enc in (("win16.md", "UTF-16"), ("win1252.md", "Windows-1252")):
        before = (ws / "memory" / name).read_bytes()
        with pytest.raises(PathError, match=f"memory/{name} is not UTF-8 \\({enc}\\)"):
            append_note(ws, "Réunion déplacée", f"memory/{name}")
        assert (ws / "memory" / name).read_bytes() == before
    noise = bytes(random.Random(7).randrange(256) for _ in range(4096))  # what memory_get calls binary, so do we
    (ws / "memory" / "noise.md").write_bytes(noise)
    with pytest.raises(PathError, match="^memory/noise.md is a binary file, so it is not indexed"):
        append_note(ws, "Réunion déplacée", "memory/noise.md")
    with pytest.raises(PathError, match="^memory/noise.md is a binary file, so it is not indexed"):
        read_memory("memory/noise.md", lambda key: None, ws, SourcesConfig())
    assert (ws / "memory" / "noise.md").read_bytes() == noise


def test_a_new_note_goes_into_the_folder_that_exists_in_the_other_unicode_form(ws: Path) -> None:
    import unicodedata

    from hybridmem.serve.write import append_note

    folder = unicodedata.normalize("NFD", "café")
    (ws / "memory" / folder).mkdir()
    out = append_note(ws, "A note.", unicodedata.normalize("NFC", "memory/café/menu.md"))
    assert out["path"] == f"memory/{folder}/menu.md" and len(list((ws / "memory").glob("caf*"))) == 1


@pytest.mark.parametrize("name", ["memory/notes\u2800.md", "memory/\u3164notes.md", "memory/no\u00a0tes.md",
                                  "memory/no\ue000tes.md"])
def test_names_that_draw_nothing_are_refused(ws: Path, name: str) -> None:
    from hybridmem.errors import PathError
    from hybridmem.serve.write import append_note

    with pytest.raises(PathError, match="control, format or invisible characters"):
        append_note(ws, "a note", name)
