"""Writing one file's rows: its ``files`` row, its chunks, their FTS5 rows and their vectors.

A file stored again keeps the rows of the chunks it still holds as they were (the same lines and text, and a vector
if and only if it has one now): only their timestamp and evergreen flag are updated. The chunks that went are
deleted and the new ones inserted. A transcript grown by a few messages is mostly chunks it held before, and deleting
and inserting their FTS5 rows again was most of what storing it cost (``docs/sources.md``).
"""

from __future__ import annotations

import time
from typing import Any, Iterable, Sequence

import numpy as np


# A file's stored chunks, as match_rows reads them (each store names its table, scope and placeholder)
HELD_SQL = ("SELECT id, source, start_line, end_line, hash, text, embedded, timestamp, evergreen FROM {table}chunks "
            "WHERE {where}path = {path} ORDER BY id")


def match_rows(held: Iterable[Sequence[Any]], source: str, chunks: Sequence[dict[str, Any]],
               vectors: Sequence[np.ndarray | None]
               ) -> tuple[list[int], list[tuple[float, int, int]], list[tuple[dict[str, Any], np.ndarray | None]]]:
    """What storing ``chunks`` (with ``vectors``) of a file whose stored rows are ``held`` (:data:`HELD_SQL`'s, in id
    order) writes: the ids of the rows to delete, ``(timestamp, evergreen, id)`` of the rows kept whose timestamp or
    flag changed, and the chunks to insert with their vectors. A row is kept for a chunk of the same source, lines,
    hash and text (its tokens are its text's: the tokenizer's settings are the index's), with a vector if and only if
    the chunk has one now.

    Example:
        >>> held = [(7, "memory", 1, 2, "h1", "a", 1, 0.0, 0), (8, "memory", 3, 4, "h2", "b", 1, 0.0, 0)]
        >>> chunks = [{"start_line": 1, "end_line": 2, "hash": "h1", "text": "a", "timestamp": 5.0, "evergreen": False},
        ...           {"start_line": 3, "end_line": 5, "hash": "h3", "text": "c", "timestamp": 5.0, "evergreen": False}]
        >>> gone, kept, new = match_rows(held, "memory", chunks, [np.ones(2), None])
        >>> gone, kept, [c["hash"] for c, _ in new]
        ([8], [(5.0, 0, 7)], ['h3'])
    """
    rows: dict[tuple, list[tuple[int, float, int]]] = {}
    for cid, *key, stamp, evergreen in held:
        rows.setdefault(tuple(key), []).append((cid, stamp, evergreen))
    kept: list[tuple[float, int, int]] = []
    new: list[tuple[dict[str, Any], np.ndarray | None]] = []
    for chunk, vec in zip(chunks, vectors):
        key = (source, chunk["start_line"], chunk["end_line"], chunk["hash"], chunk["text"], int(vec is not None))
        if rows.get(key):
            cid, stamp, evergreen = rows[key].pop(0)
            if (stamp, evergreen) != (chunk["timestamp"], int(chunk["evergreen"])):
                kept.append((chunk["timestamp"], int(chunk["evergreen"]), cid))
        else:
            new.append((chunk, vec))
    return [cid for left in rows.values() for cid, _, _ in left], kept, new


class FileRowsMixin:
    """:class:`~hybridmem.store.Store`'s writes of a file's rows (``_db`` and the vec table come from it)."""

    _db: Any

    def delete_file(self, path: str) -> None:
        """Remove a file and its chunks from every table. Call inside a transaction."""
        ids = [r[0] for r in self._db.execute("SELECT id FROM chunks WHERE path = ?", (path,)).fetchall()]
        self._delete_chunk_ids(ids)
        self._db.execute("DELETE FROM files WHERE path = ?", (path,))

    def _delete_chunk_ids(self, ids: Sequence[int]) -> None:
        """Delete chunks ``ids``: their rows, FTS5 rows and vectors."""
        has_vec = self.vec_available and self.has_vec_table()  # type: ignore[attr-defined]
        tables = ["chunks_fts"] + (["chunks_vec"] if has_vec else [])
        for i in range(0, len(ids), 500):
            part = list(ids[i : i + 500])
            marks = ",".join("?" * len(part))
            for table in tables:
                self._db.execute(f"DELETE FROM {table} WHERE rowid IN ({marks})", part)
            self._db.execute(f"DELETE FROM chunks WHERE id IN ({marks})", part)

    def upsert_file(
        self,
        file: dict[str, Any],
        chunks: Sequence[dict[str, Any]],
        vectors: Sequence[np.ndarray | None],
    ) -> None:
        """Replace a file's rows. ``chunks`` are dicts with start_line, end_line, hash, text, tokens, timestamp,
        evergreen; ``vectors`` parallel to them (None when not embedded). The rows of chunks the file still holds
        are kept (see the module's doc). Call inside a transaction."""
        held = self._db.execute(HELD_SQL.format(table="", where="", path="?"), (file["path"],))
        gone, kept, new = match_rows(held, file["source"], chunks, vectors)
        self._delete_chunk_ids(gone)
        self._db.executemany("UPDATE chunks SET timestamp = ?, evergreen = ? WHERE id = ?", kept)
        self._db.execute(  # updated in place: deleting the row would take its chunks along (ON DELETE CASCADE)
            "INSERT INTO files(path, abspath, source, hash, mtime, size, date, evergreen, indexed_at) "
            "VALUES (:path, :abspath, :source, :hash, :mtime, :size, :date, :evergreen, :indexed_at) "
            "ON CONFLICT(path) DO UPDATE SET abspath = excluded.abspath, source = excluded.source, "
            "hash = excluded.hash, mtime = excluded.mtime, size = excluded.size, date = excluded.date, "
            "evergreen = excluded.evergreen, indexed_at = excluded.indexed_at",
            {**file, "indexed_at": time.time()},
        )
        has_vec = self.vec_available and self.has_vec_table()  # type: ignore[attr-defined]
        for chunk, vec in new:
            cur = self._db.execute(
                "INSERT INTO chunks(path, source, start_line, end_line, hash, text, tokens, timestamp, evergreen, "
                "embedded) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    file["path"], file["source"], chunk["start_line"], chunk["end_line"], chunk["hash"], chunk["text"],
                    chunk["tokens"], chunk["timestamp"], int(chunk["evergreen"]), int(vec is not None),
                ),
            )
            cid = cur.lastrowid
            self._db.execute("INSERT INTO chunks_fts(rowid, tokens) VALUES (?, ?)", (cid, chunk["tokens"]))
            if vec is not None and has_vec:
                self._db.execute(
                    "INSERT INTO chunks_vec(rowid, embedding, source, path) VALUES (?, ?, ?, ?)",
                    (cid, np.asarray(vec, dtype=np.float32).tobytes(), file["source"], file["path"]),
                )
