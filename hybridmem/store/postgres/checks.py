"""Health of a PostgreSQL namespace: the counts that must agree (chunks = keyword statistics rows, embedded chunks =
vectors), and the SQLite-only checks answered for a server (``quick_check``, file identity)."""

from __future__ import annotations

from typing import Any

from hybridmem.store.postgres.schema import LIVE, TABLES



class PgChecksMixin:
    """:class:`~hybridmem.store.postgres.PostgresStore`'s checks (``_q``, ``_p`` and ``cache_count`` from the store)."""

    _q: Any
    _p: Any
    cache_count: Any

    def file_lost(self) -> str | None:
        return None

    def pragma(self, name: str) -> Any:
        """SQLite's ``quick_check`` has no PostgreSQL peer: a server that answers is 'ok'."""
        if name != "quick_check":
            raise ValueError(f"no PRAGMA {name!r} on the postgres backend")
        return "ok" if self._q("SELECT 1", one=True) else "no answer"

    def consistency(self) -> dict[str, Any]:
        """Counts that must agree: chunks = rows the keyword statistics count; embedded chunks = vectors. One
        statement, so one snapshot: a writer committing between two reads cannot make them disagree."""
        chunks, embedded, vec, fts = self._q(
            f"SELECT count(*), coalesce(sum(embedded), 0), count(embedding), (SELECT coalesce(sum(n_rows), 0) FROM "
            f"hm_stats WHERE ns = %(ns)s AND gen = {LIVE}) FROM hm_chunks WHERE ns = %(ns)s AND gen = {LIVE}",
            self._p(), one=True)
        return {"chunks": int(chunks), "embedded": int(embedded), "fts_rows": int(fts), "vec_rows": int(vec),
                "quick_check": True, "integrity": "ok"}

    def count_rows(self, table: str) -> int:
        if table not in TABLES:
            raise ValueError(f"unknown table {table!r}; valid: {', '.join(TABLES)}")
        if table == "chunks_fts":
            return int(self.consistency()["fts_rows"])
        if table == "chunks_vec":
            return int(self.consistency()["vec_rows"])
        if table == "embedding_cache":
            return self.cache_count()
        return int(self._q(f"SELECT count(*) FROM {TABLES[table]} WHERE ns = %(ns)s AND gen = {LIVE}", self._p(),
                           one=True)[0])
