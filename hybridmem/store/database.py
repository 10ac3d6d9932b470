"""The SQLite index: the only place that writes SQL (with :mod:`.schema`).

Tables: ``meta`` (settings hash, dims, provider), ``files`` (one row per indexed source), ``chunks`` (text, lines,
pre-tokenized text), ``embedding_cache`` (by provider, model, provider_key and text hash), ``chunks_fts`` (FTS5 over the
token stream, rowid = chunk id) and ``chunks_vec`` (sqlite-vec ``vec0``, cosine, rowid = chunk id, with ``source`` and
``path`` metadata columns so scoping filters run inside the KNN).

Connections come from :func:`connect`, which picks a driver that can load sqlite-vec (the stdlib ``sqlite3`` of many
Python builds cannot). Without sqlite-vec the store still works: vectors live in the embedding cache and the vector leg
runs an exact numpy scan (``status()['vector_backend'] == 'numpy'``).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from hybridmem.config import DEFAULT_STORE
from hybridmem.errors import HybridMemError, IndexCorruptError
from hybridmem.store.cache import EmbeddingCacheMixin
from hybridmem.store.connection import (
    DRIVERS,
    connect,
    is_corruption,
    prefix_bound,
    read_only_reason,
    refuse_non_index,
)
from hybridmem.store.file_rows import FileRowsMixin
from hybridmem.store.health import HealthMixin
from hybridmem.store.keyword_stats import KeywordStatsMixin
from hybridmem.store.pending import PendingMixin
from hybridmem.store.schema import MIGRATIONS

def _creatable(path: Path) -> None:
    """Make the index's folder; a read-only place is one sentence, not a traceback."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() and not os.access(path.parent, os.W_OK | os.X_OK):
            raise PermissionError(13, "the folder is read-only")
    except OSError as exc:
        raise HybridMemError(f"cannot create the index {path}: {exc.strerror or exc}; give --index a writable "
                             "path") from None


_TABLES = ("meta", "files", "chunks", "chunks_fts", "chunks_vec", "embedding_cache")


class Store(FileRowsMixin, EmbeddingCacheMixin, HealthMixin, PendingMixin, KeywordStatsMixin):
    """The index database. Thread-safe for one writer and many readers through an internal lock."""

    backend = "sqlite"

    def __init__(self, path: str | Path, busy_timeout_ms: int = DEFAULT_STORE.busy_timeout_ms, drivers: Sequence[str] = DRIVERS) -> None:
        self.path = str(path)
        self.read_only: str | None = None  # why this index cannot be written (searches still work), or None
        self._identity: tuple[int, int] | None = None
        if self.path != ":memory:":
            refuse_non_index(self.path, drivers)
            self.read_only = read_only_reason(self.path)
            if self.read_only is None:
                _creatable(Path(self.path))
        self._lock = threading.RLock()
        self._db = None
        try:
            self._conn = connect(self.path, busy_timeout_ms, drivers, read_only=self.read_only is not None)
            self._db = self._conn.db
            self._migrate()
        except Exception as exc:
            if not is_corruption(exc):
                raise
            if self._db is not None:
                self._db.close()
            raise IndexCorruptError(f"the index {self.path} is corrupt ({exc}); rebuild it with `hybridmem index "
                                    "--rebuild`") from None
        self._identity = self._file_identity()

    # -- connection --------------------------------------------------------------------------------------------
    @property
    def driver(self) -> str:
        return self._conn.driver

    @property
    def vec_available(self) -> bool:
        return self._conn.vec

    @property
    def vec_error(self) -> str | None:
        return self._conn.vec_error

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _migrate(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if self.read_only is not None:
            if version < MIGRATIONS[-1][0]:
                raise IndexCorruptError(f"{self.read_only} and needs building or upgrading first; nothing to search")
            self._db.execute("SELECT count(*) FROM chunks").fetchone()
            return
        for number, script in MIGRATIONS:
            if number > version:
                with self.transaction():
                    for statement in script.split(";"):
                        if statement.strip():
                            self._db.execute(statement)
                    self._db.execute(f"PRAGMA user_version = {number}")
        self._db.execute("SELECT count(*) FROM chunks").fetchone()

    class _Tx:
        def __init__(self, store: "Store") -> None:
            self.store = store

        def __enter__(self) -> None:
            self.store._lock.acquire()
            self.store._db.execute("BEGIN IMMEDIATE")

        def __exit__(self, exc_type, exc, tb) -> None:  # noqa: ANN001
            try:
                self.store._db.execute("COMMIT" if exc_type is None else "ROLLBACK")
            finally:
                self.store._lock.release()

    def transaction(self) -> "_Tx":
        """``with store.transaction(): ...`` runs the block in one write transaction."""
        return Store._Tx(self)

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """``with store.snapshot(): ...``: every read of the block sees one committed state (a read transaction).
        Holds this store's lock throughout; re-entrant (an inner snapshot joins the outer one)."""
        with self._lock:
            if self._db.in_transaction:
                yield
                return
            self._db.execute("BEGIN")
            try:
                yield
            finally:
                self._db.execute("COMMIT")

    def generation(self) -> int:
        """The index generation: a counter every write transaction that changes chunks bumps."""
        return int(self.get_meta("generation", "0") or 0)

    def bump_generation(self) -> None:
        """Count one change of the chunks. Call inside the write transaction that makes it."""
        self._db.execute("INSERT INTO meta(key, value) VALUES ('generation', '1') ON CONFLICT(key) DO UPDATE SET "
                         "value = CAST(value AS INTEGER) + 1")

    # -- meta ----------------------------------------------------------------------------------------------------
    def get_meta(self, key: str, default: str | None = None) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else default

    def set_meta(self, key: str, value: str | int | float) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, str(value)))

    def all_meta(self) -> dict[str, str]:
        with self._lock:
            return dict(self._db.execute("SELECT key, value FROM meta").fetchall())

    # -- vector table --------------------------------------------------------------------------------------------
    def has_vec_table(self) -> bool:
        with self._lock:
            row = self._db.execute("SELECT 1 FROM sqlite_master WHERE name = 'chunks_vec'").fetchone()
        return row is not None

    def ensure_vec_table(self, dims: int) -> bool:
        """Create ``chunks_vec`` for ``dims`` (rebuilding it when dims changed). False when sqlite-vec is missing."""
        if not self.vec_available or dims <= 0:
            return False
        with self._lock:
            current = self.get_meta("vec_dims")
            if current is not None and int(current) == dims and self.has_vec_table():
                return True
            self._db.execute("DROP TABLE IF EXISTS chunks_vec")
            self._db.execute(f"CREATE VIRTUAL TABLE chunks_vec USING vec0(embedding float[{int(dims)}] "
                             "distance_metric=cosine, source text, path text)")
            self.set_meta("vec_dims", dims)
        return True

    # -- files ---------------------------------------------------------------------------------------------------
    def files(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            cur = self._db.execute(
                "SELECT path, abspath, source, hash, mtime, size, date, evergreen FROM files ORDER BY path"
            )
            cols = [d[0] for d in cur.description]
            return {row[0]: dict(zip(cols, row)) for row in cur.fetchall()}

    def file_chunk_counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._db.execute("SELECT path, count(*) FROM chunks GROUP BY path").fetchall())

    def stored_tokens(self, paths: Sequence[str]) -> dict[tuple[str, str], tuple[str | None, str, int]]:
        """``(path, chunk hash) -> (text, tokens, chunks)`` of ``paths``' stored chunks (text None if they differ)."""
        q = ("SELECT path, hash, min(text), max(text) = min(text), min(tokens), count(*) FROM chunks WHERE path IN "
             "(SELECT value FROM json_each(?)) GROUP BY path, hash")
        with self._lock:
            rows = self._db.execute(q, (json.dumps(list(paths)),)).fetchall()
        return {(p, h): (x if same else None, t, n) for p, h, x, same, t, n in rows}

    def touch_file(self, path: str, mtime: float, size: int, abspath: str | None) -> None:
        """Record a file's new mtime, size and place (a workspace moved or copied) when its content hash did not
        change."""
        with self.transaction():
            self._db.execute("UPDATE files SET mtime = ?, size = ?, abspath = ? WHERE path = ?",
                             (mtime, size, abspath, path))

    def clear(self) -> None:
        """Delete every file and chunk (the embedding cache stays). Call inside a transaction."""
        self._db.execute("DELETE FROM chunks")
        self._db.execute("DELETE FROM files")
        self._db.execute("DELETE FROM chunks_fts")
        self._db.execute("DROP TABLE IF EXISTS chunks_vec")
        self._db.execute("DELETE FROM meta WHERE key = 'vec_dims'")

    # -- reads ---------------------------------------------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        with self._lock:
            files = self._db.execute("SELECT count(*) FROM files").fetchone()[0]
            chunks, embedded = self._db.execute("SELECT count(*), coalesce(sum(embedded), 0) FROM chunks").fetchone()
        return {"files": files, "chunks": chunks, "embedded_chunks": int(embedded)}

    @staticmethod
    def _scope_sql(alias: str, source: str | None, path_prefix: str | None) -> tuple[str, list[Any]]:
        clauses, params = [], []
        if source:
            clauses.append(f"{alias}source = ?")
            params.append(source)
        if path_prefix:
            clauses.append(f"{alias}path >= ? AND {alias}path < ?")
            params += [path_prefix, prefix_bound(path_prefix)]
        return "".join(f" AND {c}" for c in clauses), params

    def keyword_search(
        self, match: str, limit: int, source: str | None = None, path_prefix: str | None = None
    ) -> list[tuple[int, float]]:
        """FTS5 BM25 search: ``(chunk_id, bm25)`` best first (bm25 is negative; lower is better)."""
        scope, params = self._scope_sql("c.", source, path_prefix)
        if scope:
            sql = (
                "SELECT f.rowid, bm25(chunks_fts) AS r FROM chunks_fts f JOIN chunks c ON c.id = f.rowid "
                f"WHERE chunks_fts MATCH ?{scope} ORDER BY r LIMIT ?"
            )
        else:
            sql = "SELECT rowid, bm25(chunks_fts) AS r FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY r LIMIT ?"
        with self._lock:
            return [(int(i), float(r)) for i, r in self._db.execute(sql, (match, *params, limit)).fetchall()]

    def vector_knn(
        self, query: np.ndarray, k: int, source: str | None = None, path_prefix: str | None = None
    ) -> list[tuple[int, float]]:
        """sqlite-vec KNN (``MATCH ... AND k = ?``): ``(chunk_id, cosine similarity)`` best first."""
        scope, params = self._scope_sql("", source, path_prefix)
        sql = f"SELECT rowid, distance FROM chunks_vec WHERE embedding MATCH ? AND k = ?{scope} ORDER BY distance"
        blob = np.asarray(query, dtype=np.float32).tobytes()
        with self._lock:
            try:
                rows = self._db.execute(sql, (blob, int(k), *params)).fetchall()
            except Exception as exc:  # noqa: BLE001 - some sqlite-vec builds cannot range-filter text metadata
                if not scope or "metadata" not in str(exc).lower():
                    raise
                rows = self._vector_knn_rowids(blob, k, source, path_prefix)
        return [(int(i), 1.0 - float(d)) for i, d in rows]

    def _vector_knn_rowids(
        self, blob: bytes, k: int, source: str | None, path_prefix: str | None
    ) -> list[tuple[int, float]]:
        """Scoped KNN through sqlite-vec's ``rowid IN (...)`` constraint: the scope is resolved on ``chunks``."""
        scope, params = self._scope_sql("", source, path_prefix)
        ids = [r[0] for r in self._db.execute(f"SELECT id FROM chunks WHERE embedded = 1{scope}", params).fetchall()]
        if not ids:
            return []
        out: list[tuple[int, float]] = []
        for i in range(0, len(ids), 50_000):
            part = ids[i : i + 50_000]
            marks = ",".join("?" * len(part))
            out += self._db.execute(
                f"SELECT rowid, distance FROM chunks_vec WHERE embedding MATCH ? AND k = ? AND rowid IN ({marks})",
                (blob, int(k), *part),
            ).fetchall()
        out.sort(key=lambda r: (r[1], r[0]))
        return out[:k]

    def load_vectors(
        self, provider: str, model: str, provider_key: str
    ) -> tuple[np.ndarray, np.ndarray, list[str], list[str]]:
        """All embedded chunks' vectors: ``(ids, matrix, sources, paths)`` for exact in-memory search."""
        with self._lock:
            rows = self._db.execute(
                "SELECT c.id, e.embedding, c.source, c.path FROM chunks c JOIN embedding_cache e ON e.hash = c.hash "
                "AND e.provider = ? AND e.model = ? AND e.provider_key = ? WHERE c.embedded = 1 ORDER BY c.id",
                (provider, model, provider_key),
            ).fetchall()
        if not rows:
            return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32), [], []
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        mat = np.vstack([np.frombuffer(r[1], dtype=np.float32) for r in rows])
        return ids, mat, [r[2] for r in rows], [r[3] for r in rows]

    def keyword_rows(self) -> tuple[list[int], list[str], list[str], list[str]]:
        """Every chunk's id, FTS5 token string, source and path, for the in-memory keyword index."""
        with self._lock:
            rows = self._db.execute("SELECT id, tokens, source, path FROM chunks ORDER BY id").fetchall()
        return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows]

    def chunk_rows(self, ids: Sequence[int]) -> dict[int, tuple]:
        """``id -> (path, source, start_line, end_line, text, tokens, timestamp, evergreen)``."""
        out: dict[int, tuple] = {}
        uniq = list(dict.fromkeys(int(i) for i in ids))
        with self._lock:
            for i in range(0, len(uniq), 500):
                part = uniq[i : i + 500]
                marks = ",".join("?" * len(part))
                for row in self._db.execute(
                    "SELECT id, path, source, start_line, end_line, text, tokens, timestamp, evergreen FROM chunks "
                    f"WHERE id IN ({marks})",
                    part,
                ).fetchall():
                    out[row[0]] = row[1:]
        return out

    def consistency(self) -> dict[str, Any]:
        """Row counts that must agree (chunks = FTS rows; embedded chunks = vector rows) and ``quick_check`` (True
        when it passed; ``integrity``: its report), all read from one committed state.

        The FTS5 count comes before ``quick_check`` inside that read transaction: FTS5 caches its table's structure
        per connection and reads it afresh when a cursor opens on a new transaction, which ``quick_check``'s own
        check of the table does not do. A long-lived connection that last read the table before another process
        committed would otherwise report a sound index as a "malformed inverted index" (measured: 109 of 294 checks
        of one connection while `hybridmem index` ran in a loop beside it; none with this order).
        """
        with self.snapshot():
            chunks, embedded = self._db.execute("SELECT count(*), coalesce(sum(embedded), 0) FROM chunks").fetchone()
            fts = self._db.execute("SELECT count(*) FROM chunks_fts").fetchone()[0]
            vec = -1
            if self.vec_available and self.has_vec_table():
                vec = self._db.execute("SELECT count(*) FROM chunks_vec").fetchone()[0]
            report = "\n".join(str(r[0]) for r in self._db.execute("PRAGMA quick_check(20)").fetchall())
        return {"chunks": int(chunks), "embedded": int(embedded), "fts_rows": int(fts), "vec_rows": int(vec),
                "quick_check": report == "ok", "integrity": report}

    def copy_into(self, target: "Store") -> None:
        """Replace ``target``'s whole content with this database's, in one write transaction (SQLite backup API).

        Readers of ``target`` (any process) see the old or the new content, never a mix; a crash mid-copy leaves the
        old content (the copy is journaled like any write).
        """
        with self._lock, target._lock:
            self._db.backup(target._db)

    def checkpoint(self) -> None:
        """Fold the write-ahead log into the database file (``wal_checkpoint(TRUNCATE)``), e.g. before a copy."""
        with self._lock:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def count_rows(self, table: str) -> int:
        """Rows of one of the index's tables (``files``, ``chunks``, ``chunks_fts``, ``chunks_vec``...)."""
        if table not in _TABLES:
            raise ValueError(f"unknown table {table!r}; valid: {', '.join(_TABLES)}")
        with self._lock:
            return int(self._db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])

    def chunk_paths(self) -> dict[int, str]:
        """``chunk id -> path`` of every chunk (maps chunk rankings to documents)."""
        with self._lock:
            return dict(self._db.execute("SELECT id, path FROM chunks").fetchall())

    def chunk_spans(self) -> list[tuple[str, int, int, str]]:
        """``(path, start_line, end_line, hash)`` of every chunk, ordered by path and line."""
        with self._lock:
            return self._db.execute(
                "SELECT path, start_line, end_line, hash FROM chunks ORDER BY path, start_line").fetchall()

    def vector_scan(self, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        """Top ``k`` by a full scan ordered by ``vec_distance_cosine`` in SQL (the slow peer the bench reports)."""
        sql = "SELECT rowid, vec_distance_cosine(embedding, ?) AS d FROM chunks_vec ORDER BY d LIMIT ?"
        with self._lock:
            rows = self._db.execute(sql, (np.asarray(query, dtype=np.float32).tobytes(), int(k))).fetchall()
        return [(int(i), 1.0 - float(d)) for i, d in rows]

    def pragma(self, name: str) -> Any:
        """The value of a read-only ``PRAGMA name`` (``journal_mode``, ``user_version``...)."""
        if not name.isidentifier():
            raise ValueError(f"not a pragma name: {name!r}")
        with self._lock:
            return self._db.execute(f"PRAGMA {name}").fetchone()[0]

    def table_names(self) -> set[str]:
        with self._lock:
            return {r[0] for r in self._db.execute("SELECT name FROM sqlite_master")}
