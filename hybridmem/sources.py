"""Finding what to index in a workspace and reading it into :class:`~hybridmem.records.Document` objects.

Memory files: ``MEMORY.md``, ``memory.md``, ``memory/**/*.md`` and configured extra paths (files or folders); ``.md``
only; deduplicated by realpath; ``.git``, ``node_modules``, ``.venv`` and the index's own folder ignored. Transcripts:
``*.jsonl`` in the configured session folders.

Symlinks: what the user configured is followed, wherever it points (the workspace's ``memory/`` folder or
``MEMORY.md`` being a link into a synced folder, a linked extra path). Every file found must resolve (realpath) inside
one of those configured places (:func:`source_roots`); a link that leads anywhere else is skipped with a warning
saying how to include it (``sources.extra_paths``). Folders are walked once each by realpath, so link loops end.
``memory_get`` applies the same rule (:func:`within`), so it reads exactly what can be indexed.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator, Mapping

from hybridmem.chunking import split_lines
from hybridmem.config import SourcesConfig
from hybridmem.records import Document
from hybridmem.redaction import Redactor
from hybridmem.sessions import NO_REDACTION, compile_redactions, parse_transcript, replace_surrogates
from hybridmem.textfiles import BINARY, BINARY_HEAD, bom_encoding, skipped_as_binary, text_encoding
from hybridmem.wording import counted, numbered, unreadable_name

_DATED = re.compile(r"(\d{4})-(\d{2})-(\d{2})\.md$")
ROOT_FILES = ("MEMORY.md", "memory.md")
SOURCES = ("memory", "sessions")  # the values of SourceFile.source, a search's ``source`` filter


@dataclass(frozen=True)
class SourceFile:
    """A file found in the workspace. ``path`` is the workspace-relative key used in citations."""

    path: str
    abspath: str
    source: str  # "memory" or "sessions"
    mtime: float
    size: int
    # When the file last changed as the sync compares it: the later of its mtime and its inode's change time, so an
    # edit whose mtime was put back (cp -p, rsync -a, touch -r, unpacking an archive) is still read again. mtime
    # alone stays the document's date.
    stamp: float = 0.0


def date_from_path(path: str) -> float | None:
    """The epoch seconds (UTC midnight) of ``memory/**/YYYY-MM-DD.md``, else None."""
    if not (path.startswith("memory/") or "/memory/" in path):
        return None
    m = _DATED.search(path)
    if not m:
        return None
    try:
        return datetime(int(m[1]), int(m[2]), int(m[3]), tzinfo=timezone.utc).timestamp()
    except ValueError:
        return None


def is_evergreen(path: str) -> bool:
    """``MEMORY.md``/``memory.md`` and undated files under ``memory/`` never decay."""
    return path in ROOT_FILES or (path.startswith("memory/") and date_from_path(path) is None)


def source_roots(workspace: str | Path, config: SourcesConfig | None = None) -> tuple[str, ...]:
    """The real paths of what the user configured as memory: the workspace's ``MEMORY.md``, ``memory.md`` and
    ``memory/``, each extra path and each session folder (each followed when it is a link)."""
    return tuple(dict.fromkeys(os.path.realpath(p) for p in configured_places(workspace, config)))


def configured_places(workspace: str | Path, config: SourcesConfig | None = None) -> list[str]:
    """What the user configured as memory, as absolute paths not followed through links: the workspace's
    ``MEMORY.md``, ``memory.md`` and ``memory/``, each extra path and each session folder."""
    cfg = config or SourcesConfig()
    ws = Path(workspace).absolute()
    places = [ws / name for name in ROOT_FILES] + [ws / "memory"]
    places += [_configured(ws, configured) for configured in (*cfg.extra_paths, *cfg.session_paths)]
    return [str(p) for p in places]


def _configured(ws: Path, configured: str) -> Path:
    """A configured extra path or session folder as an absolute path, ``~`` expanded and ``..`` folded
    (``../notes`` beside the workspace is ``/.../notes``, so its files are cited under ``extra/``, where ``get``
    finds them, not as ``../notes/x.md``, which ``get`` refuses as an escape)."""
    p = Path(configured).expanduser()
    return Path(os.path.abspath(p if p.is_absolute() else ws / p))


def within(real: str, roots: tuple[str, ...]) -> bool:
    """Whether the real path ``real`` is one of ``roots`` or inside one of them."""
    return any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def link_warning(shown: str, target: str) -> str:
    return (f"{shown}: skipped, a symlink to {target}, outside the configured memory folders; to index it, add "
            f"{target} to sources.extra_paths")


MAX_DEPTH = 100  # folders below a root; Python's os.walk recurses once a level (1,000 levels crash it)


def walk_capped(root: Path, cut: Callable[[str], None] | None = None,
                followlinks: bool = False) -> Iterator[tuple[str, list[str], list[str]]]:
    """``os.walk(root)``, no deeper than :data:`MAX_DEPTH` folders below it (Python 3.11's walk recurses once a level:
    about 990 levels crashed it); ``cut(dirpath)`` for each folder whose subfolders are left out. A caller may prune
    ``dirnames`` as with ``os.walk``."""
    base = str(root).rstrip(os.sep).count(os.sep)
    for dirpath, dirnames, filenames in os.walk(root, followlinks=followlinks):
        if dirnames and dirpath.count(os.sep) - base >= MAX_DEPTH:
            if cut is not None:
                cut(dirpath)
            dirnames[:] = []
        yield dirpath, dirnames, filenames


def _walk(ws: Path, root: Path, suffix: str, ignore: set[str], roots: tuple[str, ...], warnings: list[str],
          seen_dirs: set[str]) -> Iterator[Path]:
    """Files under ``root`` ending in ``suffix``; linked folders followed when inside ``roots``, each real folder
    walked once (no loops). Hidden folders and files below ``root`` (a name starting with ``.``: an editor's
    ``.trash`` of deleted notes, ``.obsidian``) are left out, as ``memory_write`` refuses such names; a configured
    root may itself be hidden."""
    real_root = os.path.realpath(root)
    if real_root in seen_dirs:
        return
    seen_dirs.add(real_root)

    def cut(dirpath: str) -> None:
        warnings.append(f"{_key(ws, Path(dirpath), root)}: folders nested more than {MAX_DEPTH} deep are not "
                        "indexed")

    for dirpath, dirnames, filenames in walk_capped(root, cut, followlinks=True):
        kept = []
        # a folder's own name claims it before a link to it beside it does (each real folder is walked once)
        for d in sorted(dirnames, key=lambda d: (os.path.islink(os.path.join(dirpath, d)), d)):
            full = os.path.join(dirpath, d)
            real = os.path.realpath(full)
            if d in ignore or d.startswith(".") or real in seen_dirs:
                continue
            if os.path.islink(full) and not within(real, roots):
                warnings.append(link_warning(_key(ws, Path(full), root), real))
                continue
            seen_dirs.add(real)
            kept.append(d)
        dirnames[:] = kept
        for name in sorted(filenames):
            if name.lower().endswith(suffix) and not name.startswith("."):
                yield Path(dirpath) / name


def _key(workspace: Path, p: Path, extra_root: Path | None) -> str:
    try:
        return p.relative_to(workspace).as_posix()
    except ValueError:
        base = extra_root if extra_root is not None else p.parent
        rel = p.relative_to(base).as_posix() if p != base else p.name
        return f"extra/{base.name}/{rel}" if p != base else f"extra/{p.name}"


def _longer_key(p: Path, root: Path | None, taken: Mapping[str, object]) -> str:
    """``p``'s key under ``extra/`` with as many of its root's folders as it takes to be free: ``extra/b/notes/x.md``
    when ``extra/notes/x.md`` is another configured folder's ``x.md`` (keys follow the configured order, so they stay
    the same from one sync to the next)."""
    base = root if root is not None else p.parent
    rel = p.relative_to(base).as_posix() if p != base else ""
    parts = [part for part in base.parts if part != base.anchor]
    for n in range(2, len(parts) + 1):
        key = "/".join(["extra", *parts[-n:], *([rel] if rel else [])])
        if key not in taken:
            return key
    return "/".join(["extra", *parts, *([rel] if rel else [])]) + f"~{len(taken)}"


def discover(workspace: str | Path, config: SourcesConfig | None = None,
             warnings: list[str] | None = None) -> list[SourceFile]:
    """Every file to index, sorted by path, deduplicated by realpath; links that lead outside the configured places
    are skipped, each with a line added to ``warnings``, as is each extra path that does not exist."""
    cfg = config or SourcesConfig()
    ws = Path(workspace).absolute()
    ignore = set(cfg.ignore_dirs)
    roots = source_roots(ws, cfg)
    notes: list[str] = []
    seen_dirs: set[str] = set()  # folders walked for notes; transcripts' folders are walked apart (another suffix)
    found: list[tuple[Path, str, Path | None]] = []
    for name in ROOT_FILES:
        found.append((ws / name, "memory", None))
    if (ws / "memory").is_dir():
        found += [(p, "memory", None) for p in _walk(ws, ws / "memory", ".md", ignore, roots, notes, seen_dirs)]
    for extra in cfg.extra_paths:
        ep = _configured(ws, extra)
        if ep.is_dir():
            found += [(p, "memory", ep) for p in _walk(ws, ep, ".md", ignore, roots, notes, seen_dirs)]
        elif not ep.exists():  # a typo in the settings must not read as "nothing relevant"
            notes.append(f"sources.extra_paths: {extra} does not exist ({ep}), so nothing is indexed from it")
        elif ep.suffix.lower() == ".md":
            found.append((ep, "memory", None))
        else:
            notes.append(f"sources.extra_paths: {extra} is not a folder or a .md file, so nothing is indexed from it "
                         "(only .md files are)")
    seen_sessions: set[str] = set()
    for folder in cfg.session_paths:
        sp = _configured(ws, folder)
        if sp.is_dir():
            found += [(p, "sessions", sp) for p in _walk(ws, sp, ".jsonl", ignore, roots, notes, seen_sessions)]
    out: dict[str, SourceFile] = {}
    seen_real: set[str] = set()
    # a file reached twice (a note and a link to it) is indexed under the path that reaches it through no link
    resolved = sorted(((p, source, root, os.path.realpath(p)) for p, source, root in found),
                      key=lambda f: f[3] != os.path.abspath(f[0]))
    for p, source, root, real in resolved:
        try:
            if not os.path.isfile(real):
                if os.path.islink(p) and not os.path.exists(p):  # a note's link whose target is gone: say so
                    notes.append(f"{_key(ws, p, root)}: skipped, it is a link to nothing (or a loop of links)")
                continue
            st = os.stat(real)
        except OSError:
            continue
        if not within(real, roots):
            notes.append(link_warning(_key(ws, p, root), real))
            continue
        if real in seen_real:
            continue
        seen_real.add(real)
        key = _key(ws, p, root)
        if why := unreadable_name(key):
            notes.append(why)
            continue
        if key in out:  # two configured folders of one name: the later one's key names more of its path
            key = _longer_key(p, root, out)
        out[key] = SourceFile(key, str(p), source, st.st_mtime, st.st_size, max(st.st_mtime, st.st_ctime))
    if warnings is not None:
        warnings.extend(dict.fromkeys(notes))
    return [out[k] for k in sorted(out)]


def find_session(session: str, workspace: str | Path | None,
                 config: SourcesConfig | None = None) -> tuple[str, bool | None]:
    """``(key, held)`` of a session transcript given its id or file name: its path prefix (citation key) in the first
    configured session folder (``sources.session_paths``) that holds it, else in the first one (a name with a ``/``
    is a key already); and whether a configured folder holds it (None when that cannot be told: no workspace on
    disk, or a name given as a key).

    Example:
        >>> find_session("s2", None), find_session("s2.jsonl", None, SourcesConfig(session_paths=("chats",)))
        (('sessions/s2.jsonl', None), ('chats/s2.jsonl', None))
    """
    cfg = config or SourcesConfig()
    name = session if session.endswith(".jsonl") else f"{session}.jsonl"
    if "/" in name or not cfg.session_paths:
        return name, None
    keys: list[tuple[str, bool]] = []
    for folder in cfg.session_paths:
        sp = Path(folder).expanduser()
        if workspace is None:  # a documents-only index: no transcript on disk to find
            keys.append((f"{sp.as_posix().rstrip('/')}/{name}", False))
            continue
        ws = Path(workspace).absolute()
        sp = _configured(ws, folder)
        try:
            held = (sp / name).is_file()
        except OSError:  # a name the file system cannot hold (too long): no such transcript
            held = False
        keys.append((_key(ws, sp / name, sp), held))
    if workspace is None:
        return keys[0][0], None
    return next(((key, True) for key, held in keys if held), (keys[0][0], False))


def unindexed_reason(rel: str, config: SourcesConfig | None = None) -> str | None:
    """Why :func:`discover` would not index the workspace-relative file ``rel`` under ``memory/`` (None: it would).

    Example:
        >>> unindexed_reason("memory/node_modules/x.md")
        "its folder 'node_modules' is ignored (sources.ignore_dirs)"
    """
    cfg = config or SourcesConfig()
    parts = rel.split("/")
    if parts[0] != "memory" or len(parts) < 2:
        return "only files under memory/ are written"
    if not parts[-1].lower().endswith(".md"):
        return "only .md files are indexed"
    ignored = next((p for p in parts[1:-1] if p in set(cfg.ignore_dirs)), None)
    if ignored is not None:
        return f"its folder {ignored!r} is ignored (sources.ignore_dirs)"
    return None


def describe_sources(workspace: str | Path, config: SourcesConfig | None = None) -> str:
    """One sentence saying where :func:`discover` looks, for a workspace where it found nothing.

    Example:
        >>> describe_sources("/notes")
        'no memory files found in /notes: looked for MEMORY.md, memory.md, memory/**/*.md and sessions/**/*.jsonl'
    """
    cfg = config or SourcesConfig()
    places = [*ROOT_FILES, "memory/**/*.md"]
    places += [f"{p} (extra path)" for p in cfg.extra_paths]
    places += [f"{p.rstrip('/')}/**/*.jsonl" for p in cfg.session_paths]
    listed = ", ".join(places[:-1]) + f" and {places[-1]}" if len(places) > 1 else places[0]
    return f"no memory files found in {workspace}: looked for {listed}"


@dataclass(frozen=True)
class LoadResult:
    document: Document | None
    warning: str | None = None
    malformed_lines: int = 0


_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # as chunking.split_lines counts lines


def _nul_warning(text: str) -> str:
    """The warning for NULs in ``text``, naming the lines of the first five (one pass over the text)."""
    lines: list[int] = []
    line, last, pos = 1, 0, text.find("\x00")
    while pos >= 0 and len(lines) < 5:
        line += len(_LINE_BREAK.findall(text, last, pos))
        last = pos
        if line not in lines:
            lines.append(line)
        pos = text.find("\x00", pos + 1)
    more = "" if pos < 0 else " and later"
    return f"{counted(text.count(chr(0)), 'NUL byte')} replaced by U+FFFD on {numbered('line', lines, more)}"


def _partial_char(data: bytes) -> int:
    """How many bytes at the end of ``data`` begin a UTF-8 character that is cut short (0 to 3).

    Example:
        >>> _partial_char("café".encode()[:-1]), _partial_char("café".encode()), _partial_char("日".encode()[:2])
        (1, 0, 2)
    """
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:  # not a continuation byte: the character's first byte, or ASCII
            need = 2 if byte >> 5 == 0b110 else 3 if byte >> 4 == 0b1110 else 4 if byte >> 3 == 0b11110 else 1
            return back if need > back else 0
    return 0


def read_text(path: str | Path, max_bytes: int) -> tuple[str, str | None]:
    """Decode a file as UTF-8 (invalid bytes and NULs replaced by U+FFFD); a warning when it was binary (then ``""``),
    held NULs or invalid UTF-8, or was too large. The encoding is :func:`text_encoding`'s: a UTF-16 or UTF-32 byte order
    mark (Windows PowerShell writes UTF-16), else UTF-8, or Windows-1252 (with a warning, so ``café`` stays findable)
    when most non-ASCII bytes are in no UTF-8 character.

    At most ``max_bytes`` are read (``sources.max_file_bytes``), cut at the last line break before the limit, so
    memory stays bounded whatever the file's size (indexing holds about 4.5x the text at its peak).
    """
    with open(path, "rb") as fh:
        head = fh.read(BINARY_HEAD)
        if skipped_as_binary(head):
            return "", BINARY
        wide = bom_encoding(head)
        data = head + fh.read(max(0, max_bytes + 1 - len(head)))
    warnings = []
    if len(data) > max_bytes:
        cut = data.rfind(b"\n", 0, max_bytes)
        data = data[: cut + 1 if cut > 0 else max_bytes]
        if wide:  # whole code units
            data = data[: len(data) - len(data) % (4 if wide == "utf-32" else 2)]
        elif cut <= 0:  # cut inside a line: not inside a UTF-8 character too (it would read as invalid UTF-8)
            data = data[: len(data) - _partial_char(data)]
        warnings.append(f"too large: only the first {len(data)} bytes indexed (sources.max_file_bytes = {max_bytes})")
    encoding = wide or text_encoding(data)
    text = data.decode(encoding, errors="replace")
    if encoding == "cp1252":
        warnings.append("not UTF-8: read as Windows-1252 (Latin-1)")
    elif "\ufffd" in text and text.count("\ufffd") > data.count(b"\xef\xbf\xbd"):
        warnings.append(f"invalid {encoding.upper()} replaced")
    del data
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\x00" in text:  # SQLite and the tokenizers take NUL as the end of the text
        warnings.insert(0, _nul_warning(text))
        text = text.replace("\x00", "\ufffd")
    return text, "; ".join(warnings) or None


def session_redactor(config: SourcesConfig | None = None) -> Redactor:
    """How transcripts are redacted: the built-in rules plus ``sources.redact_patterns``, or not at all when
    ``sources.redact_sessions`` is off. Indexing and ``memory_get`` both use it."""
    cfg = config or SourcesConfig()
    return compile_redactions(cfg.redact_patterns) if cfg.redact_sessions else NO_REDACTION


_DATA_URI = re.compile(r"(data:[\w.+-]+/[\w.+-]+(?:;[\w.+-]+=[\w.+-]+)*;base64,[A-Za-z0-9+/]{16})([A-Za-z0-9+/=]{240,})")


def redact_memory_text(text: str, config: SourcesConfig | None = None) -> str:
    """A memory file's text as it is indexed: secrets redacted when ``sources.redact_memory`` is on (the default),
    an inline base64 data URI (a pasted image) cut to its head, ``data:image/png;base64,iVBORw0KGgoAAAANSUhE…[40,944
    characters of base64 left out]`` (its pieces filled every result with one line and took seconds to embed), line
    breaks kept so line numbers stay right. ``memory_get`` returns the same."""
    cfg = config or SourcesConfig()
    if "base64," in text:
        text = _DATA_URI.sub(lambda m: f"{m.group(1)}…[{len(m.group(2)):,} characters of base64 left out]", text)
    return compile_redactions(cfg.redact_patterns).redact(text) if cfg.redact_memory else text


def _join(first: str, rest: str | None) -> str:
    return first + (f"; {rest}" if rest else "")


def _surrogate_warning(lines: tuple[int, ...]) -> str:  # counted by line: the transcript keeps no count per line
    more = f" and {len(lines) - 5} more" if len(lines) > 5 else ""
    what = "a lone surrogate (a cut emoji?)" if len(lines) == 1 else "lone surrogates (cut emoji?)"
    return f"{what} replaced by U+FFFD on {numbered('line', lines[:5], more)}"


def load(sf: SourceFile, config: SourcesConfig | None = None, max_bytes: int | None = None) -> LoadResult:
    """Read one discovered file into a Document (None for a binary file); ``max_bytes``: at most that many bytes
    (cut at a line break, as ``sources.max_file_bytes``, the default, cuts)."""
    cfg = config or SourcesConfig()
    text, warning = read_text(sf.abspath, cfg.max_file_bytes if max_bytes is None else max_bytes)
    if warning == BINARY:
        return LoadResult(None, warning)
    if sf.source == "sessions":
        tr = parse_transcript(split_lines(text), session_redactor(cfg))
        if tr.malformed:
            warning = f"{counted(tr.malformed, 'malformed JSONL line')} skipped" + (f"; {warning}" if warning else "")
        if tr.surrogate_lines:
            warning = _join(_surrogate_warning(tr.surrogate_lines), warning)
        doc = Document(
            path=sf.path, text=tr.text, source="sessions", mtime=sf.mtime, date=tr.last_timestamp,
            evergreen=False, line_map=tr.line_map,
        )
        return LoadResult(doc, warning, tr.malformed)
    text, bad = replace_surrogates(text)  # a decoded file holds none; kept for text handed in another way
    if bad:
        warning = _join(f"{counted(bad, 'lone surrogate')} replaced by U+FFFD", warning)
    text = redact_memory_text(text, cfg)
    doc = Document(
        path=sf.path, text=text, source="memory", mtime=sf.mtime, date=date_from_path(sf.path),
        evergreen=is_evergreen(sf.path),
    )
    return LoadResult(doc, warning)
