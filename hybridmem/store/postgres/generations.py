"""Generations of a PostgreSQL namespace: a full reindex builds one beside the live one and swaps it in with one
transaction (:meth:`GenerationsMixin.publish`); a generation its writer never published is removed by the next."""

from __future__ import annotations

from typing import Any


class GenerationsMixin:
    """:class:`~hybridmem.store.postgres.PostgresStore`'s generation methods."""

    ns: int
    url: str
    namespace: str
    hnsw_min_rows: int
    ef_search: int
    link: Any
    _gen: int | None
    _tx_gen: int | None
    _q: Any
    _p: Any
    transaction: Any
    generation: Any
    _drop_generation: Any
    _maybe_hnsw: Any

    def new_generation(self) -> Any:
        """An empty generation of this namespace to build a full reindex into; :meth:`publish` makes it live.
        Generations a dead writer left unpublished are removed first."""
        with self.transaction():
            self._q("DELETE FROM hm_postings WHERE ns = %(ns)s AND gen <> %(gen)s", self._p())
            for table in ("hm_chunks", "hm_files", "hm_stats", "hm_meta"):
                self._q(f"DELETE FROM {table} WHERE ns = %(ns)s AND gen <> %(gen)s", self._p())
            gen = int(self._q("UPDATE hm_ns SET next_gen = next_gen + 1 WHERE id = %(ns)s RETURNING next_gen - 1",
                              self._p(), one=True)[0])
        return type(self)(self.url, self.namespace, self.hnsw_min_rows, self.ef_search, gen=gen,  # type: ignore[call-arg]
                          reconnect_s=self.link.reconnect_s)

    def publish(self, built: Any) -> None:
        """Make ``built``'s generation the live one and delete the old one, in one transaction: a search sees the
        old index or the new one, never a mix. Its generation counter continues above the old one's."""
        with self.transaction():
            old = self._tx_gen
            counter = max(self.generation(), built.generation()) + 1
            self._q("INSERT INTO hm_meta(ns, gen, key, value) VALUES (%(ns)s, %(g)s, 'generation', %(v)s) ON CONFLICT "
                    "(ns, gen, key) DO UPDATE SET value = EXCLUDED.value", {"ns": self.ns, "g": built._gen,
                                                                             "v": str(counter)})
            self._q("UPDATE hm_ns SET live_gen = %(g)s WHERE id = %(ns)s", {"ns": self.ns, "g": built._gen})
            self._drop_generation(old, meta=True)
            self._tx_gen = built._gen
            self._maybe_hnsw()
        self.analyze()

    def analyze(self) -> None:
        """Refresh the planner's statistics and visibility maps after a bulk write (autovacuum does it later)."""
        for table in ("hm_postings", "hm_chunks", "hm_files", "hm_stats"):
            self._q(f"VACUUM (ANALYZE) {table}")

    def live_generation(self) -> int:
        return int(self._q("SELECT live_gen FROM hm_ns WHERE id = %(ns)s", self._p(), one=True)[0])

    def generations(self) -> list[int]:
        """Every generation holding rows of this namespace (the live one, and any a dead writer left)."""
        return [int(r[0]) for r in self._q("SELECT DISTINCT gen FROM hm_chunks WHERE ns = %(ns)s UNION SELECT DISTINCT "
                                           "gen FROM hm_meta WHERE ns = %(ns)s ORDER BY 1", self._p())]

