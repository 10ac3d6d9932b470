"""Opening the index database: a driver that can load sqlite-vec, WAL journaling, and corruption detection.

The stdlib ``sqlite3`` of many Python builds cannot load extensions; :func:`driver` picks ``sqlean`` or ``pysqlite3``
first, once per process, and falls back to exact numpy vector search (``vec=False``) when none can load sqlite-vec.
Every connection to an index goes through that one library, and no file this process holds open is opened again
beside it (:func:`held`): POSIX locks belong to the process, and closing a second descriptor of the file drops them.
"""

from __future__ import annotations

import importlib
import os
import sqlite3
import threading
import weakref
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

from hybridmem.config import DEFAULT_STORE, INDEX_DIRNAME
from hybridmem.errors import HybridMemError, IndexCorruptError

DRIVERS = ("sqlean", "pysqlite3", "sqlite3")
SQLITE_HEADER = b"SQLite format 3\x00"
SOURCE_SUFFIXES = (".md", ".markdown", ".jsonl", ".txt", ".toml")


class NotAnIndexError(HybridMemError):
    """The index path names a file that is not a hybridmem index (a memory file, another database): never written."""


def refuse_non_index(path: str | Path, drivers: Sequence[str] = DRIVERS) -> None:
    """Raise :class:`NotAnIndexError` when ``path`` exists and is not an index, so nothing is ever written over it.

    A file is taken for a (possibly corrupt) index when it starts with the SQLite header, or when it lies in our own
    ``.hybridmem`` folder (an index whose header was overwritten). Anything else (``MEMORY.md``, notes, settings) is
    refused, and so is a memory-like name (``.md``, ``.jsonl``...) even when empty or absent. The check opens and
    closes the file, so no other thread of the process opens an index while it runs (see :func:`held`).
    """
    with _OPENING:
        _refuse_non_index(Path(path), drivers)


def _refuse_non_index(p: Path, drivers: Sequence[str]) -> None:
    what = f"{p} is not a hybridmem index"
    if p.suffix.lower() in SOURCE_SUFFIXES:
        raise NotAnIndexError(f"{what} (a {p.suffix} file); refusing to use it as one: give --index a path of its own, "
                              f"such as WORKSPACE/{INDEX_DIRNAME}/index.sqlite")
    try:
        if p.exists() and not p.is_file() and not p.is_dir():  # /dev/null took the index and made /dev/null-journal
            raise NotAnIndexError(f"{p} is not a regular file (a device, a pipe or a socket): give --index a file "
                                  "path of its own")
        if held(p):  # checked when this process opened it; closing a file of our own here drops that one's locks
            return
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
        mod = driver(tuple(drivers))[1]  # the library the index is opened with (see driver)
        try:
            db = mod.connect(f"file:{p.absolute()}?mode=ro", uri=True)
            try:
                version = db.execute("PRAGMA user_version").fetchone()[0]
                names = sorted(r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
            finally:
                db.close()
        except mod.Error:
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
    """Open ``path`` with :func:`driver`'s library: the first that can load sqlite-vec, else the first that imports.

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
    name, mod, vec_error = driver(tuple(drivers))
    uri = str(path).startswith("file:")
    try:
        with _OPENING:  # held before any statement takes a lock, and never while another thread checks the file
            db = mod.connect(str(path), timeout=busy_timeout_ms / 1000, check_same_thread=False,
                             isolation_level=None, uri=uri, factory=_connection_class(mod))
            _hold(str(path)[5:].split("?")[0] if uri else path, db)
    except Exception as exc:  # noqa: BLE001 - each driver's own OperationalError: a folder that takes no file
        if "unable to open database file" not in str(exc):
            raise
        raise NotAnIndexError(f"cannot open or create the index {path}: its folder does not take a database file "
                              "(a system folder, or one without write access); give --index a path of its own"
                              ) from None
    if vec_error is None:
        try:
            _load_vec(db)
        except Exception as exc:  # noqa: BLE001 - loaded into an in-memory database, yet not into this one
            vec_error = f"{name}: {type(exc).__name__}: {exc}"
    _pragmas(db, busy_timeout_ms)
    return Connection(db=db, driver=name, vec=vec_error is None, vec_error=vec_error)


_HELD: dict[tuple[int, int], "weakref.WeakSet[Any]"] = {}  # (device, inode) -> this process's connections to it
_HELD_LOCK = threading.Lock()
# Held while a thread checks a file with descriptors of its own (refuse_non_index) or opens a connection and records
# it (connect): otherwise one thread's check could close a descriptor of a file another thread had just opened.
_OPENING = threading.RLock()


def _identity(path: str | Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def held(path: str | Path) -> bool:
    """Whether this process holds a connection open to the index file at ``path``. POSIX locks belong to a process,
    not to a file descriptor: closing any descriptor of the file (Python's ``open``, another copy of SQLite) drops
    every lock the process's connections hold on it. Another process's connection then takes them for gone, checkpoints
    and deletes the write-ahead log, and this one's later commits go to a deleted file (``tests/test_store.py``)."""
    if (key := _identity(path)) is None:
        return False
    with _HELD_LOCK:  # a connection opened meanwhile by another thread is never forgotten
        if any(_is_open(db) for db in list(_HELD.get(key, ()))):
            return True
        _HELD.pop(key, None)  # every connection to it closed: forget the file
        return False


def _is_open(db: Any) -> bool:
    try:
        db.in_transaction  # noqa: B018 - raises once the connection is closed
        return True
    except Exception:  # noqa: BLE001 - each driver's own ProgrammingError
        return False


def _hold(path: str | Path, db: Any) -> None:
    if (key := _identity(path)) is not None:
        with _HELD_LOCK:
            for gone in [k for k, conns in _HELD.items() if not conns]:  # files whose connections were collected
                del _HELD[gone]
            _HELD.setdefault(key, weakref.WeakSet()).add(db)


@lru_cache(maxsize=None)
def _connection_class(mod: Any) -> type:
    return type("Connection", (mod.Connection,), {})  # the driver's own, with a weak reference (see held)


@lru_cache(maxsize=None)
def driver(drivers: tuple[str, ...] = DRIVERS) -> tuple[str, Any, str | None]:
    """``(name, module, why sqlite-vec is not loaded or None)``: the SQLite library this process opens index files
    with, chosen once: the first of ``drivers`` that loads sqlite-vec (tried on an in-memory database), else the first
    that imports. Every connection to an index goes through it, the check of a file that may not be an index too.
    Two copies of SQLite in one process do not share their record of the file's locks: closing a file through one
    drops the POSIX locks the other holds on it, another process's connection then takes this one's for gone,
    checkpoints and deletes the write-ahead log, and this process's later commits go to a deleted file
    (``tests/test_store.py``).

    Raises:
        IndexCorruptError: no driver of ``drivers`` can be imported.
    """
    errors: list[str] = []
    first: tuple[str, Any] | None = None
    for name in drivers:
        try:
            mod = _load_driver(name)
        except ImportError as exc:
            errors.append(f"{name}: {exc}")
            continue
        first = first or (name, mod)
        db = mod.connect(":memory:")
        try:
            _load_vec(db)
            return name, mod, None
        except Exception as exc:  # AttributeError when the build lacks extension loading
            errors.append(f"{name}: {type(exc).__name__}: {exc}")
        finally:
            db.close()
    if first is None:
        raise IndexCorruptError(f"no SQLite driver could be loaded: {'; '.join(errors)}")
    return first[0], first[1], "; ".join(errors)


def _load_vec(db: Any) -> None:
    db.enable_load_extension(True)
    import sqlite_vec

    sqlite_vec.load(db)
    db.enable_load_extension(False)


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
