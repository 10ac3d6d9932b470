"""Chunks stored without a vector yet ("pending"): listing them and attaching their vectors later.

Sync stores chunks and their FTS rows first (the keyword leg answers at once), then embeds the pending chunks in
batches; each batch's vectors land in one transaction with a generation bump, so a reader sees a chunk with its
vector or without it, never half, and a sync killed mid-embed resumes from the first chunk still pending.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np


class PendingMixin:
    """:class:`~hybridmem.store.Store`'s pending-vector methods (``_db``, ``_lock`` and the vec table come from it)."""

    _db: Any
    _lock: Any

    def pending_count(self) -> int:
        """Chunks stored without a vector."""
        with self._lock:
            return int(self._db.execute("SELECT count(*) FROM chunks WHERE embedded = 0").fetchone()[0])

    def pending_chunks(self, limit: int, after_id: int = 0) -> list[tuple[int, str, str]]:
        """Up to ``limit`` pending chunks with an id above ``after_id``: ``(id, hash, text)`` in id order."""
        with self._lock:
            return self._db.execute(
                "SELECT id, hash, text FROM chunks WHERE embedded = 0 AND id > ? ORDER BY id LIMIT ?",
                (int(after_id), int(limit))).fetchall()

    def set_vectors(self, items: Sequence[tuple[int, str, np.ndarray]]) -> int:
        """Attach vectors to pending chunks ``(id, text hash, vector)``; a chunk deleted or embedded meanwhile is
        skipped, and so is one whose id now holds other text (a sync that stored a file meanwhile can be given a
        deleted chunk's id: SQLite reuses the largest). Returns how many were attached. Call inside a transaction."""
        has_vec = self.vec_available and self.has_vec_table()  # type: ignore[attr-defined]
        done = 0
        for cid, digest, vec in items:
            row = self._db.execute("SELECT source, path FROM chunks WHERE id = ? AND embedded = 0 AND hash = ?",
                                   (int(cid), digest)).fetchone()
            if row is None:
                continue
            self._db.execute("UPDATE chunks SET embedded = 1 WHERE id = ?", (int(cid),))
            if has_vec:
                self._db.execute("INSERT INTO chunks_vec(rowid, embedding, source, path) VALUES (?, ?, ?, ?)",
                                 (int(cid), np.asarray(vec, dtype=np.float32).tobytes(), row[0], row[1]))
            done += 1
        return done
