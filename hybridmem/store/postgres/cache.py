"""The embedding cache in PostgreSQL: vectors by provider, model, provider key and text hash, shared by every namespace
(it is content-addressed, so two workspaces embedding the same text embed it once)."""

from __future__ import annotations

import time
from typing import Any, Iterable, Iterator, Sequence

import numpy as np


class PgCacheMixin:
    """:class:`~hybridmem.store.postgres.PostgresStore`'s cache methods (``_q`` and ``link`` come from the store)."""

    _q: Any
    link: Any

    def cache_get(self, provider: str, model: str, provider_key: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        uniq = list(dict.fromkeys(hashes))
        if not uniq:
            return {}
        rows = self._q("SELECT hash, embedding FROM hm_cache WHERE provider = %s AND model = %s AND provider_key = %s "
                       "AND hash = ANY(%s)", (provider, model, provider_key, uniq))
        return {h: np.frombuffer(blob, dtype=np.float32) for h, blob in rows}

    def cache_put(self, provider: str, model: str, provider_key: str, items: dict[str, np.ndarray]) -> None:
        now = time.time()
        self.cache_insert_rows(((provider, model, provider_key, h, int(v.shape[0]),
                                 np.asarray(v, np.float32).tobytes(), now) for h, v in items.items()), replace=True)

    def cache_rows(self) -> Iterator[tuple]:
        return iter(self._q("SELECT provider, model, provider_key, hash, dims, embedding, updated_at FROM hm_cache"))

    def cache_insert_rows(self, rows: Iterable[tuple], replace: bool = False) -> None:
        rows = list(rows)
        if not rows:
            return
        action = ("DO UPDATE SET dims = EXCLUDED.dims, embedding = EXCLUDED.embedding, updated_at = EXCLUDED.updated_at"
                  if replace else "DO NOTHING")

        def write(conn: Any) -> None:
            with conn.cursor() as cur:
                cur.executemany("INSERT INTO hm_cache(provider, model, provider_key, hash, dims, embedding, updated_at) "
                                f"VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (provider, model, provider_key, hash) "
                                f"{action}", rows)
        self.link.read(write)

    def cache_count(self) -> int:
        return int(self._q("SELECT count(*) FROM hm_cache", one=True)[0])

