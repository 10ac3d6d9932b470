"""Write ranking settings into a workspace's ``hybridmem.toml``, keeping every other setting and comment.

A round trip through ``tomlkit`` (not string editing): only the changed keys of ``[ranking]`` are set, anything else
in the file stays byte for byte. The CLI reads the file on every call and a running MCP server reloads it when it
changes, so what is written here is used from their next call.

Example:
    >>> old, new = ranking_update("ws/hybridmem.toml", {"fusion": "rrf", "min_score": 0.0})   # doctest: +SKIP
    >>> print(unified_diff(old, new, "hybridmem.toml"))                                   # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import os
import tempfile
import threading
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: the threads of one process are still kept apart
    fcntl = None  # type: ignore[assignment]

from hybridmem.config.ranking import RankConfig
from hybridmem.durable import fsync_dir
from hybridmem.config.settings import load_settings, settings_from_dict
from hybridmem.errors import ConfigError

CONFIG_FILENAME = "hybridmem.toml"
_SAVING = threading.Lock()  # the threads of one process (two workbench sessions)


def ranking_changes(wanted: RankConfig, workspace: str | Path, fields: Iterable[str] | None = None) -> dict[str, Any]:
    """The ranking fields (of ``fields``, default all) where ``wanted`` differs from what the workspace uses now."""
    current = load_settings(workspace=workspace).ranking
    names = list(fields) if fields is not None else [f.name for f in dataclasses.fields(RankConfig)]
    return {n: getattr(wanted, n) for n in names if getattr(wanted, n) != getattr(current, n)}


def ranking_update(path: str | Path, changes: Mapping[str, Any]) -> tuple[str, str]:
    """``(old text, new text)`` of the settings file with ``[ranking]`` keys set to ``changes``.

    Raises:
        ConfigError: the file is not valid TOML, or the result is not valid settings.
    """
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    p = Path(path)
    old = p.read_text(encoding="utf-8") if p.is_file() else ""
    try:
        doc = tomlkit.parse(old)
    except TOMLKitError as exc:
        raise ConfigError(f"cannot parse settings file {p}: {exc}") from None
    if "ranking" not in doc:
        doc["ranking"] = tomlkit.table()
    table = doc["ranking"]
    for k, v in changes.items():
        table[k] = list(v) if isinstance(v, tuple) else v
    new = tomlkit.dumps(doc)
    settings_from_dict(tomlkit.parse(new).unwrap())  # refuse to write a file the engine would not load
    return old, new


def unified_diff(old: str, new: str, name: str = CONFIG_FILENAME) -> str:
    return "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{name}", f"b/{name}"))


def write_ranking(workspace: str | Path, changes: Mapping[str, Any]) -> str:
    """Set ``changes`` in ``<workspace>/hybridmem.toml`` (created when missing); the diff.

    One save at a time reads, changes and writes the file (the threads of one process, and other processes through
    an ``flock`` on ``.hybridmem.toml.lock`` beside it), so two saves at once both land. Each writes a temporary file
    of its own, syncs it and renames it over the file (a crash leaves the old file or the new one, never a mix). A
    settings file that is a symlink keeps its link; the file it points to gets the change.

    Raises:
        ConfigError: the file is not valid TOML, the result is not valid settings, or the file cannot be written.
    """
    real = Path(os.path.realpath(Path(workspace) / CONFIG_FILENAME))
    try:
        with _SAVING, _flocked(real.with_name(f".{real.name}.lock")):
            old, new = ranking_update(real, changes)
            _replace(real, new)
    except OSError as exc:
        raise ConfigError(f"cannot save the settings to {real}: {exc.strerror or exc}") from None
    return unified_diff(old, new)


@contextlib.contextmanager
def _flocked(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the flock


def _replace(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a synced temporary file renamed over it, keeping the file's mode."""
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)  # the rename itself, durable where the file system allows


__all__ = ["CONFIG_FILENAME", "ranking_changes", "ranking_update", "unified_diff", "write_ranking"]
