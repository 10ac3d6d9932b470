"""``memory_write`` (served only with ``--allow-write``) and the pre-compaction flush prompt.

A note is appended to today's ``memory/YYYY-MM-DD.md`` (UTC date), or to a named Markdown file under ``memory/``,
then indexed before the call returns. What the reply says is true when it is given:

* **Parallel writes** (threads of one server, two servers on one workspace, hosts sharing the folder) each land
  whole, at the lines their reply names: appends hold a per-file lock (:mod:`hybridmem.serve.notefile`: an in-process
  lock plus ``flock`` on ``memory/.<name>.lock``) while they read the file's end, count its lines and append in place
  with ``fsync``; a writer killed in mid-append leaves nothing (the next append, or a server start, cuts it back).
  A write the file system refuses (a full disk, a quota, a read-only folder) is cut back and reported unsaved.
* **Text**: control characters other than line breaks and tabs are removed (a NUL would end the text for SQLite),
  ``\\r\\n`` becomes ``\\n``, lone surrogates become U+FFFD; the reply counts what was removed. Secrets the redaction
  rules find (:mod:`hybridmem.redaction`, plus ``sources.redact_patterns``) are replaced by ``[REDACTED]`` before the
  note reaches the file, unless ``serve.redact_writes = false``; the reply names the rules, never the secret.
* **Where**: nothing is written outside ``memory/``: absolute paths, ``..``, symlinks below ``memory/`` (a lock file
  included; the folder itself may be a link, as the indexer allows), non-``.md`` names, hidden or empty names, names
  Windows cannot hold (``CON.md``, ``a?.md``), names longer than 240 bytes, folders, and folders the index ignores
  (``sources.ignore_dirs``: ``node_modules``, ``.git``, ``.hybridmem``...) are refused with the reason.
* **Size**: an append that would take the file past ``sources.max_file_bytes`` (beyond which nothing is indexed) is
  refused, saying to write to another file.
* ``indexed`` is what the index holds after the call: False, with ``index_error``, when the sync failed (the note is
  saved all the same; do not write it again).
* **A file another program replaces** while the note is appended (a rename-based save: ``sed -i``, an editor's safe
  save, a sync tool) would take the note away with the old copy; after indexing, the note is looked for where it was
  appended, else as whole lines anywhere in the file (lines above it changed, or the file was re-saved with other
  line endings), and a note not found is appended again, up to three times, before the call fails saying so.

Example:
    >>> append_note(Path("ws"), "Decided: retries use exponential backoff.")   # doctest: +SKIP
    {'path': 'memory/2026-06-12.md', 'start_line': 3, 'end_line': 3, 'bytes': 42}
"""

from __future__ import annotations

import errno
import os
import re
import time
import unicodedata
from pathlib import Path
from typing import Any

from hybridmem.config import Settings
from hybridmem.errors import ArgumentError, HybridMemError, PathError
from hybridmem.reader import refuse_escapes, validate_relative
from hybridmem.serve import notefile
from hybridmem.sessions import compile_redactions, replace_surrogates
from hybridmem.sources import unindexed_reason, within
from hybridmem.textfiles import skipped_as_binary, text_encoding
from hybridmem.tools import MAX_PATH_CHARS, Arg

MAX_NAME_BYTES = 240  # NAME_MAX (255) less the lock file's ".<name>.lock"

WRITE_DESCRIPTION = (
    "Save a note to long-term memory: appended to today's memory/YYYY-MM-DD.md, or to the named file under memory/. "
    "Use it for decisions, facts, preferences and todos worth remembering in later sessions."
)
WRITE_ARGS: tuple[Arg, ...] = (
    Arg("text", "string", "The note, in Markdown.", required=True),
    Arg("file", "string", "A .md file under memory/, e.g. memory/projects/api.md; a name without a folder goes in "
                          "memory/ (default: today's file).", max_length=MAX_PATH_CHARS),
)

FLUSH_PROMPT_NAME = "memory_flush"
FLUSH_PROMPT_DESCRIPTION = "Before the context is compacted: save what matters to memory."
FLUSH_PROMPT = (
    "The conversation is about to be compacted and its details will be lost. Before that, save what matters to "
    "long-term memory with memory_write: decisions made and why, facts learned about the user, the project or the "
    "environment, preferences stated, open questions and todos, and anything you were asked to remember. Write short, "
    "self-contained Markdown notes (one topic each, with dates and names spelled out) so that a later memory_search "
    "finds them. Do not save secrets, and do not repeat what memory already holds."
)

_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")  # C0 and C1 controls but \t \n \r
_TRAILING_BREAKS = re.compile(rb"(?:\r\n|\r|\n)*\Z")
_PATH_ERRNOS = {errno.ENAMETOOLONG, errno.EISDIR, errno.ENOTDIR, errno.EEXIST, errno.ELOOP}


def clean_note(text: str) -> tuple[str, int]:
    """``(text, characters removed or replaced)``: control characters but ``\\n`` and ``\\t`` removed, ``\\r\\n`` and
    ``\\r`` made ``\\n``, lone surrogates made U+FFFD, blank lines around it dropped.

    Example:
        >>> clean_note("a\\x00b\\r\\nc\\n")
        ('ab\\nc', 1)
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text, removed = _CONTROL.subn("", text)
    text, replaced = replace_surrogates(text)
    return text.strip("\n"), removed + replaced


def redact_note(text: str, settings: Settings) -> tuple[str, list[str]]:
    """``(text with secrets replaced, the ids of the rules that found them)``; the same rules the index uses."""
    redactor = compile_redactions(settings.sources.redact_patterns)
    rules = sorted({rule for _, _, rule, _ in redactor.findings(text)})
    return (redactor.redact(text), rules) if rules else (text, [])


# Characters a file name must not hold: controls, format characters (a right-to-left override, a zero-width space),
# line and paragraph separators, private-use and unassigned code points, spaces other than the ASCII one, and the
# default-ignorable letters and marks that draw nothing (Hangul fillers, the braille blank, the grapheme joiner).
_UNSEEN_CATEGORIES = {"Cc", "Cf", "Zl", "Zp", "Co", "Cn", "Cs", "Zs"}
_UNSEEN = set("\u034f\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u180e\u180f\u2800\u3164\uffa0")


def _unseen(ch: str) -> bool:
    return ch != " " and (unicodedata.category(ch) in _UNSEEN_CATEGORIES or ch in _UNSEEN)


_WINDOWS_RESERVED = {"CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"} | {
    f"{dev}{n}" for dev in ("COM", "LPT") for n in "0123456789\u00b9\u00b2\u00b3"}


def _windows_refuses(part: str) -> bool:
    """A device name (``CON``, ``nul.txt``), a character Windows forbids, or a trailing dot or space (stripped there,
    so another name): a memory folder synced to Windows or checked out there could not hold it."""
    return (part.split(".", 1)[0].rstrip(" ").upper() in _WINDOWS_RESERVED or any(ch in '<>:"|?*' for ch in part)
            or part.endswith((".", " ")))


def _as_on_disk(workspace: Path, rel: str) -> str:
    """``rel`` with each part spelled as the entry that exists on disk under another Unicode normal form (a name a
    Mac keeps decomposed, é as e + accent), else composed (NFC): a note never makes a second, look-alike file or
    folder, and its path is the index's key for it."""
    parts, here = [], workspace
    for part in rel.split("/"):
        name = unicodedata.normalize("NFC", part)
        try:
            entries = os.listdir(here) if here.is_dir() else []
        except OSError:
            entries = []
        if part not in entries:
            name = next((e for e in entries if unicodedata.normalize("NFC", e) == name), name)
        else:
            name = part
        parts.append(name)
        here = here / name
    return "/".join(parts)


def target(workspace: Path, file: str | None, now: float | None = None,
           settings: Settings | None = None) -> tuple[Path, str]:
    """``(absolute path, workspace-relative path)`` of the file a note goes to; PathError saying why when refused."""
    if file is None:
        rel = "memory/" + time.strftime("%Y-%m-%d", time.gmtime(now if now is not None else time.time())) + ".md"
    else:
        rel = validate_relative(file)
        if rel in ("memory", "") or file.rstrip().endswith(("/", "\\")):
            raise PathError(f"{file!r} names a folder: name a .md file in it (e.g. memory/notes.md), or leave file out "
                            "for today's memory/YYYY-MM-DD.md")
        if rel.lower() == "memory.md":
            # the workspace root's MEMORY.md is the user's own; a bare name would land in memory/MEMORY.md, a look-alike
            raise PathError(f"{file!r}: the workspace's MEMORY.md is not written by memory_write; name a file under "
                            "memory/ (e.g. memory/notes.md), or leave file out for today's memory/YYYY-MM-DD.md")
        if not rel.startswith("memory/"):
            rel = "memory/" + rel
        if any(_unseen(ch) for ch in rel):
            raise PathError(f"a file name with control, format or invisible characters is refused: {file!r} (they "
                            "reach terminals and hide or reorder what the name shows)")
    for part in rel.split("/")[1:]:
        if part.startswith(".") or not part.strip() or not part.rsplit(".", 1)[0].strip():
            raise PathError(f"a hidden, empty or extension-only name is refused: {file!r} (name the file, e.g. "
                            "memory/projects/api.md)")
        if _windows_refuses(part):
            raise PathError(f"{part!r} is a name a memory folder cannot hold on Windows (a device name such as CON or "
                            'NUL, one of <>:"|?*, or a trailing dot or space): choose another name')
        if len(part.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
            raise PathError(f"a file or folder name longer than {MAX_NAME_BYTES} bytes is refused: {part[:40]!r}…")
    rel = _as_on_disk(workspace, rel)
    sources = (settings or Settings()).sources
    reason = unindexed_reason(rel, sources)
    if reason:
        raise PathError(f"{rel} would never be found by memory_search: {reason}; write under memory/ elsewhere")
    ws = workspace.absolute()
    path = ws / rel
    refuse_escapes(path, ws, sources)  # the indexer's rule: memory/ itself may be a link the user made
    for p in [*reversed(path.relative_to(ws).parents[:-2]), path.relative_to(ws)]:  # below memory/
        if (ws / p).is_symlink():
            raise PathError(f"a note is never written through a symlink: {p.as_posix()} is one")
        if p != path.relative_to(ws) and (ws / p).exists() and not (ws / p).is_dir():
            raise PathError(f"{p.as_posix()} is a file, so {rel} cannot be created")
    if not within(os.path.realpath(path), (os.path.realpath(ws / "memory"),)):
        raise PathError(f"path escapes memory/: {file!r}")
    if path.is_dir():
        raise PathError(f"{rel} is a folder, not a note file")
    try:
        notefile.refuse_odd(os.lstat(path), rel)  # a FIFO, a device, a hard link (see notefile)
    except FileNotFoundError:
        pass
    return path, rel


def append_note(workspace: Path, text: str, file: str | None = None, now: float | None = None,
                settings: Settings | None = None) -> dict[str, Any]:
    """Append ``text`` (a paragraph) to the note file under its lock; where it landed (1-based lines) and what was
    changed in it (``redacted`` rule ids, ``removed_characters``), and for :func:`write_note`, which checks the note
    is still there, ``start_offset``, ``end_offset``, ``note`` (its bytes) and ``abspath``. See the module
    docstring."""
    settings = settings or Settings()
    text, removed = clean_note(text)
    if not text.strip():
        raise ArgumentError("text is empty")
    cap = settings.serve.max_note_chars
    if len(text) > cap:
        raise ArgumentError(f"text is longer than {cap} characters (serve.max_note_chars); split it into notes")
    redacted: list[str] = []
    if settings.serve.redact_writes:
        text, redacted = redact_note(text, settings)
    try:
        path, rel = target(workspace, file, now, settings)
    except OSError as exc:
        if exc.errno in _PATH_ERRNOS:
            raise PathError(f"cannot write {file!r}: {exc.strerror}") from None
        raise
    limit = settings.sources.max_file_bytes
    try:
        with os.fdopen(notefile.open_note(path, os.O_RDONLY), "rb") as fh:
            held = fh.read(limit)
    except FileNotFoundError:
        held = b""
    except OSError as exc:
        raise PathError(f"cannot read {rel}: {exc.strerror}") from None
    if skipped_as_binary(held):  # as memory_get calls it
        raise PathError(f"{rel} is a binary file, so it is not indexed and a note appended to it would never be "
                        "found: write it to another file (the file argument)")
    encoding = text_encoding(held)
    del held
    if encoding != "utf-8":  # appending UTF-8 would garble the file for every reader
        raise PathError(f"{rel} is not UTF-8 ({'Windows-1252' if encoding == 'cp1252' else encoding.upper()}); a note "
                        "appended in UTF-8 would garble it: write it to another file (the file argument)")

    def compose(tail: notefile.Tail) -> tuple[bytes, dict[str, Any]]:
        header = f"# {rel[len('memory/'):-3]}\n\n" if file is None and tail.size == 0 else ""
        sep = b""
        if tail.size:
            need = max(0, 2 - notefile.breaks_in(_TRAILING_BREAKS.search(tail.last).group()))  # a blank line between
            sep = b"\n" * (need + (1 if need and tail.last.endswith(b"\r") else 0))  # "\r" + "\n" is one break
        prefix = header.encode() + sep
        data = prefix + (text + "\n").encode("utf-8")
        if tail.size + len(data) > limit:
            raise ArgumentError(f"{rel} would grow past sources.max_file_bytes ({limit} bytes; it holds {tail.size}) "
                                "and nothing past that is indexed: write this note to another file (the file "
                                "argument)")
        start = tail.breaks + notefile.breaks_in(tail.last[-1:] + prefix) - notefile.breaks_in(tail.last[-1:]) + 1
        return data, {"path": rel, "start_line": start, "end_line": start + text.count("\n"),
                      "bytes": len(text.encode("utf-8")), "end_offset": tail.size + len(data),
                      "start_offset": tail.size + len(prefix), "note": (text + "\n").encode("utf-8"),
                      "abspath": str(path)}

    try:
        out = notefile.append(path, compose)
    except OSError as exc:
        if exc.errno in _PATH_ERRNOS:
            raise PathError(f"cannot write {rel}: {exc.strerror}") from None
        raise HybridMemError(_unsaved(rel, exc)) from None
    if redacted:
        out["redacted"] = redacted
    if removed:
        out["removed_characters"] = removed
    return out


_NO_ROOM = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}
_NOT_WRITABLE = {errno.EACCES, errno.EPERM, errno.EROFS}


def _unsaved(rel: str, exc: OSError) -> str:
    """One sentence for an append the file system refused: the note is not saved, and the file is as it was (the
    append is cut back, :func:`notefile.append`)."""
    why = exc.strerror or type(exc).__name__
    if exc.errno in _NO_ROOM:
        then = "free some space (or raise the quota) and write it again"
    elif exc.errno == errno.EFBIG:  # the file system's largest file, or this process's file-size limit
        then = "write it to another file (the file argument)"
    elif exc.errno in _NOT_WRITABLE:
        then = "memory/ is not writable by this server; make it writable and write the note again"
    else:
        then = "write it again, or to another file (the file argument)"
    return f"the note was not saved: writing {rel} failed ({why}) and the file is as it was; {then}"


def write_note(service: Any, text: str, file: str | None = None) -> dict[str, Any]:
    """``memory_write`` on a :class:`~hybridmem.serve.service.MemoryService`: append, then index; ``indexed`` says
    whether the index now holds the note (a failed sync is reported, never raised: the note is saved)."""
    service.refresh()
    for _ in range(3):
        out = append_note(service.workspace, text, file, settings=service.settings)
        end, start, note, path = (out.pop(k) for k in ("end_offset", "start_offset", "note", "abspath"))
        try:
            for _ in range(3):  # a settings change may swap the served index during the sync: sync the new one too
                index = service.index
                index.sync()
                if service.index is index:
                    break
            row = service.index.indexed_file(out["path"])
            out["indexed"] = row is not None and row["size"] >= end
            if not out["indexed"]:
                out["index_error"] = ("the index does not hold the note yet; " + (
                    "the watcher will add it" if service.watcher is not None else
                    "the next sync adds it (this server does not watch: the next memory_write or `hybridmem index`)"))
        except Exception as exc:  # noqa: BLE001 - the note is saved: say why it is not searchable yet
            out["indexed"] = False
            why = str(exc) if isinstance(exc, HybridMemError) else f"{type(exc).__name__}: {exc}"
            watcher = service.watcher
            if watcher is not None:  # its syncs are tried again until the store answers (watch.SyncCoordinator)
                watcher.notify()
            later = ("this server indexes it as soon as the index can be written again" if watcher is not None
                     else "the next sync indexes it (this server does not watch: the next memory_write or "
                          "`hybridmem index`)")
            out["index_error"] = (f"the note is saved in {out['path']}, but indexing it failed ({why}); do not write "
                                  f"the note again: {later}")
        found = _where_saved(Path(path), start, note, out["start_line"])
        if found is not None:  # as appended, or on other lines when the file was edited above it meanwhile
            out["start_line"], out["end_line"] = found, found + out["end_line"] - out["start_line"]
            return out
        # another program replaced the file while the note was appended (a rename-based save: sed -i, an editor's
        # safe save, a sync tool): the note went into the old copy, so it is appended again to the new one
    raise HybridMemError(f"{out['path']} was replaced by another program each time the note was appended (an editor "
                         "or a sync tool rewriting it), so the note is not in it: write it again when that stops")


_BREAK = re.compile(rb"\r\n|\r|\n")  # the line breaks notefile counts


def _where_saved(path: Path, start: int, note: bytes, line: int) -> int | None:
    """The line the note starts on in the file now: ``line`` while its bytes still begin a line at ``start`` (one
    read of its length), else the last place its lines are whole lines of the file, compared without line-ending and
    trailing-space differences (an editor re-saved the file); None when the file no longer holds it. A file that
    is gone gives ``line``: another program moved or removed it with the note, and a new file would hold it twice."""
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, start - 1))
            here = fh.read(len(note) + (start > 0))
            if here == (b"\n" if start else b"") + note or (start and here == b"\r" + note):
                return line  # as appended, at the start of its line
            fh.seek(0)
            data = fh.read()
    except OSError:
        return line
    want = [x.rstrip() for x in _BREAK.split(note.rstrip(b"\r\n"))]
    have = [x.rstrip() for x in _BREAK.split(data)]
    for i in range(len(have) - len(want), -1, -1):
        if have[i] == want[0] and have[i:i + len(want)] == want:
            return i + 1
    return None
