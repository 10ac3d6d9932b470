"""The embedding cache table of the index: vectors by provider, model, provider key and text hash."""

from __future__ import annotations

import time
from typing import Any, Iterable, Iterator, Sequence

import numpy as np


class EmbeddingCacheMixin:
    """:class:`~hybridmem.store.Store`'s embedding-cache methods (``_db`` and ``_lock`` come from the store)."""

    _db: Any
    _lock: Any


    def cache_get(self, provider: str, model: str, provider_key: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        uniq = list(dict.fromkeys(hashes))
        with self._lock:
            for i in range(0, len(uniq), 500):
                part = uniq[i : i + 500]
                marks = ",".join("?" * len(part))
                rows = self._db.execute(
                    f"SELECT hash, embedding FROM embedding_cache WHERE provider = ? AND model = ? AND provider_key = ?"
                    f" AND hash IN ({marks})",
                    (provider, model, provider_key, *part),
                ).fetchall()
                for h, blob in rows:
                    out[h] = np.frombuffer(blob, dtype=np.float32)
        return out

    def cache_put(self, provider: str, model: str, provider_key: str, items: dict[str, np.ndarray]) -> None:
        now = time.time()
        with self._lock:
            self._db.executemany(
                "INSERT OR REPLACE INTO embedding_cache(provider, model, provider_key, hash, dims, embedding, "
                "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (provider, model, provider_key, h, int(v.shape[0]), np.asarray(v, np.float32).tobytes(), now)
                    for h, v in items.items()
                ],
            )

    def cache_rows(self) -> Iterator[tuple]:
        """Every cache row, for seeding a rebuilt index."""
        with self._lock:
            rows = self._db.execute(
                "SELECT provider, model, provider_key, hash, dims, embedding, updated_at FROM embedding_cache"
            ).fetchall()
        return iter(rows)

    def cache_insert_rows(self, rows: Iterable[tuple]) -> None:
        with self._lock:
            self._db.executemany(
                "INSERT OR IGNORE INTO embedding_cache(provider, model, provider_key, hash, dims, embedding, "
                "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                rows,
            )

    def cache_count(self) -> int:
        with self._lock:
            return self._db.execute("SELECT count(*) FROM embedding_cache").fetchone()[0]
