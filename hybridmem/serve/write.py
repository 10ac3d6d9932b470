"""``memory_write`` (served only with ``--allow-write``) and the pre-compaction flush prompt.

A note is appended to today's ``memory/YYYY-MM-DD.md`` (UTC date), or to a named Markdown file under ``memory/``,
atomically: the new content is written to a temporary file in the same folder and renamed over the old one, so a
reader (the watcher's sync, ``memory_get``) sees the old file or the new one, never half of it. Nothing is ever
written outside ``memory/``: absolute paths, ``..``, symlinked folders or files, and non-``.md`` names are refused.

Example:
    >>> append_note(Path("ws"), "Decided: retries use exponential backoff.")   # doctest: +SKIP
    {'path': 'memory/2026-06-12.md', 'start_line': 3, 'end_line': 3, 'bytes': 44}
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from hybridmem.errors import PathError
from hybridmem.reader import validate_relative
from hybridmem.tools import Arg

MAX_NOTE_CHARS = 20_000

WRITE_DESCRIPTION = (
    "Save a note to long-term memory: appended to today's memory/YYYY-MM-DD.md, or to the named file under memory/. "
    "Use it for decisions, facts, preferences and todos worth remembering in later sessions."
)
WRITE_ARGS: tuple[Arg, ...] = (
    Arg("text", "string", "The note, in Markdown.", required=True),
    Arg("file", "string", "A .md file under memory/, e.g. memory/projects/api.md (default: today's file)."),
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


def target(workspace: Path, file: str | None, now: float | None = None) -> tuple[Path, str]:
    """``(absolute path, workspace-relative path)`` of the file a note goes to; PathError when it is not allowed."""
    if file is None:
        rel = "memory/" + time.strftime("%Y-%m-%d", time.gmtime(now if now is not None else time.time())) + ".md"
    else:
        rel = validate_relative(file)
        if not rel.startswith("memory/"):
            rel = "memory/" + rel
    if not rel.lower().endswith(".md"):
        raise PathError(f"only .md files under memory/ can be written, not {file!r}")
    root = (workspace / "memory").absolute()
    path = workspace.absolute() / rel
    for p in [path, *path.parents]:  # no symlink on the way (memory/ itself included)
        if p == workspace.absolute():
            break
        if p.is_symlink():
            raise PathError(f"symlinks are refused: {p.relative_to(workspace.absolute())}")
    if root.exists() and not path.resolve().is_relative_to(root.resolve()):
        raise PathError(f"path escapes memory/: {file!r}")
    return path, rel


def append_note(workspace: Path, text: str, file: str | None = None, now: float | None = None) -> dict[str, Any]:
    """Append ``text`` (a paragraph) to the note file atomically; returns where it landed (1-based lines)."""
    text = text.strip("\n")
    if not text.strip():
        raise PathError("text is empty")
    if len(text) > MAX_NOTE_CHARS:
        raise PathError(f"text is longer than {MAX_NOTE_CHARS} characters")
    path, rel = target(workspace, file, now)
    path.parent.mkdir(parents=True, exist_ok=True)
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    sep = "" if not old else ("\n" if old.endswith("\n\n") else ("\n\n" if not old.endswith("\n") else "\n"))
    if not old and file is None:
        old = f"# {rel[len('memory/'):-3]}\n\n"
    new = old + sep + text + "\n"
    start = new[: len(new) - len(text) - 1].count("\n") + 1
    fd, tmp = tempfile.mkstemp(prefix=".write-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(new)
            f.flush()
            os.fsync(f.fileno())
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return {"path": rel, "start_line": start, "end_line": start + text.count("\n"), "bytes": len(text.encode())}
