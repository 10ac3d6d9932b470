"""Opening the index database: a driver that can load sqlite-vec, WAL journaling, and corruption detection.

The stdlib ``sqlite3`` of many Python builds cannot load extensions; :func:`connect` tries ``sqlean`` and
``pysqlite3`` first and falls back to exact numpy vector search (``vec=False``) when none can load sqlite-vec.
"""

from __future__ import annotations

import importlib
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from hybridmem.config import DEFAULT_STORE, INDEX_DIRNAME
from hybridmem.errors import HybridMemError, IndexCorruptError

DRIVERS = ("sqlean", "pysqlite3", "sqlite3")
SQLITE_HEADER = b"SQLite format 3\x00"
SOURCE_SUFFIXES = (".md", ".markdown", ".jsonl", ".txt", ".toml")


class NotAnIndexError(HybridMemError):
    """The index path names a file that is not a hybridmem index (a memory file, another database): never written."""


def refuse_non_index(path: str | Path) -> None:
    """Raise :class:`NotAnIndexError` when ``path`` exists and is not an index, so nothing is ever written over it.

    A file is taken for a (possibly corrupt) index when it starts with the SQLite header, or when it lies in our own
    ``.hybridmem`` folder (an index whose header was overwritten). Anything else (``MEMORY.md``, notes, settings) is
    refused, and so is a memory-like name (``.md``, ``.jsonl``...) even when empty or absent.
    """
    p = Path(path)
    what = f"{p} is not a hybridmem index"
    if p.suffix.lower() in SOURCE_SUFFIXES:
        raise NotAnIndexError(f"{what} (a {p.suffix} file); refusing to use it as one: give --index a path of its own, "
                              f"such as WORKSPACE/{INDEX_DIRNAME}/index.sqlite")
    try:
        if p.exists() and not p.is_file() and not p.is_dir():  # /dev/null took the index and made /dev/null-journal
            raise NotAnIndexError(f"{p} is not a regular file (a device, a pipe or a socket): give --index a file "
                                  "path of its own")
        with open(p, "rb") as fh:
            head = fh.read(len(SQLITE_HEADER))
    except IsADirectoryError:
        raise NotAnIndexError(f"{p} is a folder, not an index file: move it away, or give --index a file path of its "
                              "own") from None
    except NotADirectoryError:
        blocker = next((a for a in p.parents if a.is_file()), p.parent)
        raise NotAnIndexError(f"cannot use the index {p}: {blocker} is a file, not a folder; move it away, or give "
                              "--index a path of its own") from None
    except (FileNotFoundError, PermissionError):
        return
    except OSError as exc:  # a name too long for the file system, and the like
        raise NotAnIndexError(f"cannot use the index {p}: {exc.strerror or exc}; give --index a path of its own") from None
    if head and head != SQLITE_HEADER[: len(head)] and p.parent.name != INDEX_DIRNAME:
        raise NotAnIndexError(f"{what} (not an SQLite database); refusing to open or overwrite it: give --index a path "
                              "of its own")
    if head == SQLITE_HEADER:  # a database: ours has a meta table (or is still empty); read without writing a byte
        try:
            db = sqlite3.connect(f"file:{p.absolute()}?mode=ro", uri=True)
            try:
                version = db.execute("PRAGMA user_version").fetchone()[0]
                names = sorted(r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
            finally:
                db.close()
        except sqlite3.Error:
            return  # unreadable: a corrupt index, for the caller to report
        if version == 0 and names and "meta" not in names:
            raise NotAnIndexError(f"{what}: it is an SQLite database but not a hybridmem index (tables "
                                  f"{', '.join(names[:5])}); refusing to write into it: give --index a path of its own")


def read_only_reason(path: str | Path) -> str | None:
    """Why the index at ``path`` cannot be written (a read-only file, folder or mount), or None."""
    p = Path(path)
    if p.exists() and not os.access(p, os.W_OK):
        return f"the index file {p} is read-only"
    if p.exists() and not os.access(p.parent, os.W_OK | os.X_OK):
        return f"the folder {p.parent} is read-only"
    return None


@dataclass(frozen=True)
class Connection:
    """A DB-API connection plus what it can do."""

    db: Any
    driver: str
    vec: bool
    vec_error: str | None


def _load_driver(name: str) -> Any:
    if name == "pysqlite3":
        return importlib.import_module("pysqlite3.dbapi2")
    if name == "sqlean":
        return importlib.import_module("sqlean.dbapi2")
    return sqlite3


def connect(path: str | Path, busy_timeout_ms: int = DEFAULT_STORE.busy_timeout_ms, drivers: Sequence[str] = DRIVERS,
            read_only: bool = False) -> Connection:
    """Open ``path`` with the first driver that can load sqlite-vec; else the first that opens it at all.

    WAL journaling and a busy timeout are set, so readers keep working while a writer syncs. ``read_only`` opens with
    ``mode=ro`` (``immutable=1`` when even the write-ahead log's shared memory cannot be created, as on a read-only
    mount).
    """
    if read_only:
        for query in ("mode=ro", "immutable=1"):
            conn = connect(f"file:{Path(path).absolute()}?{query}", busy_timeout_ms, drivers)
            try:
                conn.db.execute("SELECT count(*) FROM sqlite_master").fetchone()
                return conn
            except Exception as exc:  # noqa: BLE001 - "unable to open database file": the -shm cannot be made
                conn.db.close()
                if query == "immutable=1" or is_corruption(exc):
                    raise
        raise AssertionError("unreachable")
    errors: list[str] = []
    fallback: tuple[Any, str] | None = None
    for name in drivers:
        try:
            mod = _load_driver(name)
        except ImportError as exc:
            errors.append(f"{name}: {exc}")
            continue
        try:
            db = mod.connect(str(path), timeout=busy_timeout_ms / 1000, check_same_thread=False, isolation_level=None,
                             uri=str(path).startswith("file:"))
        except Exception as exc:  # noqa: BLE001 - each driver's own OperationalError: a folder that takes no file
            if "unable to open database file" not in str(exc):
                raise
            raise NotAnIndexError(f"cannot open or create the index {path}: its folder does not take a database file "
                                  "(a system folder, or one without write access); give --index a path of its own"
                                  ) from None
        try:
            db.enable_load_extension(True)
            import sqlite_vec

            sqlite_vec.load(db)
            db.enable_load_extension(False)
        except Exception as exc:  # AttributeError when the build lacks extension loading
            errors.append(f"{name}: {type(exc).__name__}: {exc}")
            if fallback is None:
                fallback = (db, name)
            else:
                db.close()
            continue
        if fallback is not None:
            fallback[0].close()
        _pragmas(db, busy_timeout_ms)
        return Connection(db=db, driver=name, vec=True, vec_error=None)
    if fallback is None:
        raise IndexCorruptError(f"no SQLite driver could open {path}: {'; '.join(errors)}")
    _pragmas(fallback[0], busy_timeout_ms)
    return Connection(db=fallback[0], driver=fallback[1], vec=False, vec_error="; ".join(errors))


def _pragmas(db: Any, busy_timeout_ms: int) -> None:
    db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    try:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
    except Exception:  # noqa: BLE001 - in-memory databases and read-only media keep their journal mode
        pass
    db.execute("PRAGMA foreign_keys = ON")


def is_corruption(exc: BaseException) -> bool:
    msg = str(exc)
    return any(m in msg for m in ("not a database", "malformed", "file is encrypted", "database disk image"))


def prefix_bound(prefix: str) -> str:
    return prefix + "\U0010ffff"
