"""Reading lines of an indexed memory file for ``memory_get``, and the path checks that keep it inside the workspace.

Refused: absolute paths, a ``..`` leading above the workspace (``memory/../MEMORY.md`` is ``MEMORY.md``), ``~``,
drive letters, NUL bytes, a path that resolves outside the configured memory places (a symlink leading elsewhere;
the indexer's own rule, :func:`hybridmem.sources.within`), and any path that is not an indexed (or indexable) memory
file. Transcripts are read as their redacted ``User:`` / ``Assistant:`` lines, numbered by the line of the ``.jsonl``
each came from.
"""

from __future__ import annotations

import os
import posixpath
import re
import unicodedata
from pathlib import Path, PurePosixPath
from typing import Any, Callable

from hybridmem.chunking import split_lines
from hybridmem.config import SourcesConfig
from hybridmem.errors import ArgumentError, PathError
from hybridmem.sessions import parse_transcript
from hybridmem.sources import (configured_places, discover, read_text, redact_memory_text, session_redactor,
                               source_roots, within)
from hybridmem.textfiles import BINARY
from hybridmem.wording import brief, counted, get_cut


def read_memory(
    path: str, indexed: Callable[[str], dict[str, Any] | None], workspace: Path | None, sources: SourcesConfig,
    from_line: int | None = None, lines: int | None = None,
) -> dict[str, Any]:
    """``memory_get``: ``path`` checked (:func:`validate_relative`), found among the indexed files (``indexed(key)``
    gives its row) or, in a workspace, among those the next sync would index, and its lines read. A citation as
    ``memory_search`` gives it (``memory/x.md#L3-L7``) reads its lines, unless ``from_line`` or ``lines`` say
    otherwise."""
    path, from_line, lines = cited_lines(path, from_line, lines)
    key = validate_relative(path)
    row = indexed(key)
    for form in ("NFC", "NFD"):  # a name typed composed (é) that the file system keeps decomposed (e + ´), or back
        other = unicodedata.normalize(form, key)
        if row is None and other != key:
            row = indexed(other)
            key = other if row is not None else key
    if row is not None and workspace is not None and row.get("abspath") and not within(
            os.path.abspath(row["abspath"]), tuple(configured_places(workspace, sources))):
        row = None  # indexed where the workspace was before it was moved or copied: read the file where it is now
    if row is None and workspace is not None:
        row = next(({"abspath": f.abspath, "source": f.source, "path": f.path}
                    for f in discover(workspace, sources) if f.path == key), None)
    if row is None or not row.get("abspath"):
        if workspace is not None and not any(os.path.lexists(workspace / k) for k in {key, path}):
            raise PathError(f"no such memory file: {brief(path, 200)} (search memory for its path, or check the name)")
        raise PathError(f"not an indexed memory file: {brief(path, 200)} (only MEMORY.md, memory/**/*.md, extra paths and "
                        "session transcripts can be read)")
    return read_lines(Path(row["abspath"]), row["source"], key, workspace, sources, from_line, lines)


_CITATION = re.compile(r"(.+)#L(\d+)(?:-L(\d+))?")
# a citation whose line range is not one (not a file of that name: the part after # ends in no suffix of its own)
_FRAGMENT = re.compile(r"(.+\.(?:md|jsonl))#(?![^/]*\.(?:md|jsonl)$)([^/]*)", re.IGNORECASE)


def cited_lines(path: Any, from_line: int | None, lines: int | None) -> tuple[Any, int | None, int | None]:
    """``path`` without a citation's line range (``#L3`` or ``#L3-L7``, as search results cite), and the lines it
    names where ``from_line`` and ``lines`` are not given.

    Example:
        >>> cited_lines("memory/x.md#L3-L7", None, None), cited_lines("MEMORY.md#L2", None, 5)
        (('memory/x.md', 3, 5), ('MEMORY.md', 2, 5))
        >>> cited_lines("memory/x.md", None, None)
        ('memory/x.md', None, None)
    """
    m = _CITATION.fullmatch(path.strip()) if isinstance(path, str) else None
    if m is None:
        bad = _FRAGMENT.fullmatch(path.strip()) if isinstance(path, str) else None
        if bad:
            raise ArgumentError(f"{path.strip()!r}: #{bad.group(2)} is not a line range; cite lines as "
                                f"{bad.group(1)}#L3 or {bad.group(1)}#L3-L7")
        return path, from_line, lines
    start = int(m.group(2))
    end = int(m.group(3)) if m.group(3) else start
    if end < start:
        raise ArgumentError(f"{path.strip()!r}: the line range ends before it starts; cite lines as "
                            f"{m.group(1)}#L{end}-L{start}")
    if from_line is None:
        from_line = start
        if lines is None:
            lines = max(1, end - start + 1)
    return m.group(1), from_line, lines


def read_lines(
    abspath: Path, source: str, key: str, workspace: Path | None, sources: SourcesConfig,
    from_line: int | None = None, lines: int | None = None,
) -> dict[str, Any]:
    """Lines ``from_line`` .. ``from_line + lines - 1`` of one memory file or transcript (all of them by default)."""
    refuse_escapes(abspath, workspace, sources)
    if from_line is not None and from_line < 1:
        raise ArgumentError(f"the first line to read (from, --from) must be 1 or more, got {from_line}")
    if lines is not None and lines < 1:
        raise ArgumentError(f"the number of lines to read (lines, --lines) must be 1 or more, got {lines}")
    try:
        text, warning = read_text(abspath, sources.max_file_bytes)
    except OSError as exc:  # removed, renamed, made a folder or unreadable since the index saw it
        raise PathError(f"cannot read {key}: {exc.strerror or exc} (it changed since the index was synced; "
                        "search again for where it is now)") from None
    if warning == BINARY:
        raise PathError(f"{key} is a binary file, so it is not indexed and cannot be read")
    if source == "sessions":
        tr = parse_transcript(split_lines(text), session_redactor(sources))
        numbered = list(zip(tr.line_map, split_lines(tr.text)))
    else:
        numbered = list(enumerate(split_lines(redact_memory_text(text, sources)), start=1))
    start = from_line or 1
    if warning and "too large" in warning and start > len(numbered):
        raise ArgumentError(f"{key}: line {start} is past what was read and indexed: the file is larger than "
                            f"sources.max_file_bytes ({sources.max_file_bytes} bytes), so only its first "
                            f"{len(numbered)} lines are readable and searchable")
    last = numbered[-1][0] if numbered else 0
    if from_line is not None and start > last:
        raise ArgumentError(f"{key} has {counted(last, 'line')}: line {start} is past its end")
    selected = [(n, t) for n, t in numbered if n >= start]
    if lines is not None:
        selected = [(n, t) for n, t in selected if n < start + lines]
    shown, note = capped(selected, lines is None, sources, len(numbered))
    out = {
        "path": key, "from": start, "lines": len(shown), "total_lines": len(numbered),
        "text": "\n".join(t for _, t in shown),
        "line_numbers": [n for n, _ in shown] if source == "sessions" else None,
    }
    if note:
        out.update(truncated=True, next_from=selected[len(shown)][0] if len(shown) < len(selected) else None,
                   note=note)
    return out


def capped(selected: list[tuple[int, str]], uncounted: bool, sources: SourcesConfig,
           total: int) -> tuple[list[tuple[int, str]], str | None]:
    """The lines a get returns of ``selected`` (``(number, text)``): at most ``sources.get_max_lines`` when no count
    was asked (``uncounted``), and at most ``sources.get_max_chars`` characters in any case (a single longer line is
    cut); and what the reply says when that left some out (:func:`hybridmem.wording.get_cut`), else None.

    Example:
        >>> cfg = SourcesConfig(get_max_lines=2, get_max_chars=12)
        >>> capped([(1, "abc"), (2, "def"), (3, "ghi")], True, cfg, 3)[0]
        [(1, 'abc'), (2, 'def')]
        >>> capped([(1, "abcdefgh"), (2, "ijklmnop")], False, cfg, 2)[0]
        [(1, 'abcdefgh')]
        >>> rows, note = capped([(1, "x" * 20)], False, cfg, 1)
        >>> rows, note.startswith("line 1 was cut at its first 12 characters")
        ([(1, 'xxxxxxxxxxxx')], True)
    """
    by, limit = "lines", sources.get_max_lines
    shown = selected[:limit] if uncounted else selected
    used = -1  # the first line has no line break before it
    for i, (n, t) in enumerate(shown):
        used += len(t) + 1
        if used > sources.get_max_chars:
            if i == 0:  # one line longer than the cap: its start, and where the next line begins
                nxt = selected[1][0] if len(selected) > 1 else None
                return [(n, t[:sources.get_max_chars])], get_cut(1, total, nxt, "chars", sources.get_max_chars, n)
            shown, by, limit = shown[:i], "chars", sources.get_max_chars
            break
    if len(shown) == len(selected):
        return shown, None
    return shown, get_cut(len(shown), total, selected[len(shown)][0], by, limit)


def validate_relative(path: str) -> str:
    """A clean workspace-relative POSIX path (``..`` folded lexically: ``memory/../MEMORY.md`` is ``MEMORY.md``), or
    PathError for absolute paths, a ``..`` leading above the workspace and odd input. Links are not followed here:
    what the folded path names is checked by :func:`refuse_escapes`.

    Example:
        >>> validate_relative("memory/../MEMORY.md"), validate_relative("./memory//x.md")
        ('MEMORY.md', 'memory/x.md')
    """
    if not isinstance(path, str) or not path.strip():
        raise PathError("path is empty")
    if "\x00" in path:
        raise PathError("path contains a NUL byte")
    p = path.strip().replace("\\", "/")
    if p.startswith("/") or PurePosixPath(p).is_absolute() or (len(p) > 1 and p[1] == ":") or p.startswith("~"):
        raise PathError(f"absolute paths are refused: {brief(path, 200)} (give a path relative to the workspace)")
    parts = [x for x in posixpath.normpath(p).split("/") if x not in ("", ".")]  # memory/../MEMORY.md is MEMORY.md
    if any(x == ".." for x in parts):  # only a ".." that leads above the workspace is left
        raise PathError(f"path escapes the memory root: {brief(path, 200)}")
    clean = "/".join(parts)
    if clean.startswith("~") or (len(clean) > 1 and clean[1] == ":"):  # "./C:/x", "./~/x"
        raise PathError(f"absolute paths are refused: {brief(path, 200)} (give a path relative to the workspace)")
    return clean


def refuse_escapes(abspath: Path, workspace: Path | None, sources: SourcesConfig) -> None:
    """PathError unless ``abspath`` resolves inside what the workspace's settings name as memory (the indexer's rule:
    links the user configured are followed, links leading elsewhere are not)."""
    if workspace is None:
        if abspath.is_symlink():
            raise PathError(f"symlinks are refused: {abspath.name}")
        return
    real = os.path.realpath(abspath)
    if not within(real, source_roots(workspace, sources)):
        raise PathError("path goes through a symlink that leads outside the configured memory folders (add its "
                        "target to sources.extra_paths to make it readable)")
