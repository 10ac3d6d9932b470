"""Opening the index database: a driver that can load sqlite-vec, WAL journaling, and corruption detection.

The stdlib ``sqlite3`` of many Python builds cannot load extensions; :func:`connect` tries ``sqlean`` and
``pysqlite3`` first and falls back to exact numpy vector search (``vec=False``) when none can load sqlite-vec.
"""

from __future__ import annotations

import importlib
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from hybridmem.config import DEFAULT_STORE
from hybridmem.errors import IndexCorruptError

DRIVERS = ("sqlean", "pysqlite3", "sqlite3")


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


def connect(path: str | Path, busy_timeout_ms: int = DEFAULT_STORE.busy_timeout_ms, drivers: Sequence[str] = DRIVERS) -> Connection:
    """Open ``path`` with the first driver that can load sqlite-vec; else the first that opens it at all.

    WAL journaling and a busy timeout are set, so readers keep working while a writer syncs.
    """
    errors: list[str] = []
    fallback: tuple[Any, str] | None = None
    for name in drivers:
        try:
            mod = _load_driver(name)
        except ImportError as exc:
            errors.append(f"{name}: {exc}")
            continue
        db = mod.connect(str(path), timeout=busy_timeout_ms / 1000, check_same_thread=False, isolation_level=None)
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
    except Exception:  # noqa: BLE001 - in-memory databases and read-only media keep their journal mode
        pass
    db.execute("PRAGMA synchronous = NORMAL")
    db.execute("PRAGMA foreign_keys = ON")


def is_corruption(exc: BaseException) -> bool:
    msg = str(exc)
    return any(m in msg for m in ("not a database", "malformed", "file is encrypted", "database disk image"))


def prefix_bound(prefix: str) -> str:
    return prefix + "\U0010ffff"
