"""The vector leg of a PostgreSQL namespace: pgvector cosine distance, an exact scan below ``hnsw_min_rows`` vectors
and an HNSW graph (over half-precision copies, its hits re-scored with the stored float vectors) above it."""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from hybridmem.store.postgres.schema import LIVE

# the ordered HNSW scan, not a scan and sort (what the planner picks on small or freshly written tables)
_ANN_ONLY = ("SET LOCAL enable_seqscan = off", "SET LOCAL enable_bitmapscan = off", "SET LOCAL enable_sort = off")


class PgVectorsMixin:
    """:class:`~hybridmem.store.postgres.PostgresStore`'s vector methods (``_q``, ``_p``, ``link``, ``ns``,
    ``get_meta``, ``set_meta``, ``hnsw_min_rows`` and ``_hnsw`` from the store)."""

    _q: Any
    _p: Any
    link: Any
    ns: int
    get_meta: Any
    set_meta: Any
    hnsw_min_rows: int
    _hnsw: set[int]

    # -- vectors -------------------------------------------------------------------------------------------------
    def has_vec_table(self) -> bool:
        return self.get_meta("vec_dims") is not None

    def ensure_vec_table(self, dims: int) -> bool:
        if dims <= 0:
            return False
        self.set_meta("vec_dims", int(dims))
        return True

    def _hnsw_name(self, dims: int) -> str:
        return f"hm_chunks_hnswh_{self.ns}_{int(dims)}"  # over halfvec; hm_chunks_hnsw_<ns>_<dims> was over vector

    def _maybe_hnsw(self) -> None:
        dims = int(self.get_meta("vec_dims", "0") or 0)
        if dims <= 0 or dims in self._hnsw:
            return
        rows = self._vector_rows()
        if rows < self.hnsw_min_rows:
            return
        # pgvector builds far faster while the graph fits in maintenance_work_mem (64 MB by default: ~25k x 384);
        # a halfvec element with its neighbour lists takes about 2 x dims + 600 bytes
        self._q(f"SET LOCAL maintenance_work_mem = '{min(8192, max(1024, rows * (2 * dims + 600) * 5 // 4 >> 20))}MB'")
        # the graph over half-precision copies: half the pages per hop (at 100k x 384 the float index, 195 MB, does
        # not fit the default 128 MB shared_buffers; the halfvec one, 112 MB, does), and the hits are re-scored
        # with the stored float vectors, so the cosines are exact
        self._q(f"CREATE INDEX IF NOT EXISTS {self._hnsw_name(dims)} ON hm_chunks USING hnsw "
                f"((embedding::halfvec({dims})) halfvec_cosine_ops) WHERE ns = {self.ns} AND embedding IS NOT NULL")
        self._q(f"DROP INDEX IF EXISTS hm_chunks_hnsw_{self.ns}_{int(dims)}")
        self._hnsw.add(dims)

    def _vector_rows(self) -> int:
        return int(self._q(f"SELECT count(*) FROM hm_chunks WHERE ns = %(ns)s AND gen = {LIVE} AND embedding IS NOT "
                           "NULL", self._p(), one=True)[0])

    def ann_ready(self, dims: int) -> bool:
        """True when the namespace has its HNSW index for ``dims`` (and so is at least ``hnsw_min_rows`` big)."""
        if dims not in self._hnsw and self._q("SELECT 1 FROM pg_class WHERE relname = %(n)s",
                                              {"n": self._hnsw_name(dims)}, one=True):
            self._hnsw.add(dims)
        return dims in self._hnsw

    def vector_knn(self, query: np.ndarray, k: int, source: str | None = None, path_prefix: str | None = None,
                   exact: bool | None = None) -> list[tuple[int, float]]:
        """``(chunk_id, cosine similarity)`` best first: HNSW once the namespace has its index, else an exact scan
        (``exact`` forces either)."""
        q = np.asarray(query, dtype=np.float32)
        dims = int(q.shape[0])
        scope = (" AND (%(source)s::text IS NULL OR source = %(source)s)"
                 " AND (%(prefix)s::text IS NULL OR starts_with(path, %(prefix)s))")
        p = self._p(q=q, k=int(k), source=source, prefix=path_prefix)
        use_ann = (not exact) if exact is not None else self.ann_ready(dims)
        if use_ann:
            e = f"embedding::halfvec({dims}) <=> %(q)s::halfvec({dims})"
            sql = (f"WITH hits AS MATERIALIZED (SELECT id, embedding FROM hm_chunks WHERE ns = {self.ns} AND embedding "
                   f"IS NOT NULL AND gen = {LIVE}{scope} ORDER BY {e} LIMIT %(k)s) "
                   "SELECT id, embedding <=> %(q)s::vector AS d FROM hits ORDER BY d, id")
        else:
            sql = (f"SELECT id, embedding <=> %(q)s AS d FROM hm_chunks WHERE ns = %(ns)s AND gen = {LIVE} AND "
                   f"embedding IS NOT NULL{scope} ORDER BY d, id LIMIT %(k)s")
        if not use_ann:
            return [(int(i), 1.0 - float(d)) for i, d in self._q(sql, p)]

        def ann(conn: Any) -> list:
            # the planner prefers a scan on small or freshly written tables: the caller asked for the index. The
            # settings, the query and the transaction around them go out as one pipeline: one round trip, not six
            own = not self.link.in_tx
            try:
                with conn.pipeline():
                    if own:
                        conn.execute("BEGIN")
                    for setting in _ANN_ONLY:
                        conn.execute(setting)
                    cur = conn.execute(sql, p)
                    if own:
                        conn.execute("COMMIT")
            except Exception:
                if own and not (conn.closed or conn.broken):
                    with contextlib.suppress(Exception):
                        conn.execute("ROLLBACK")
                raise
            return cur.fetchall()
        return [(int(i), 1.0 - float(d)) for i, d in self.link.read(ann)]

    def explain_vector(self, query: np.ndarray, k: int = 10) -> str:
        """The plan of the ANN query (tests check that the HNSW index serves it)."""
        dims = int(np.asarray(query).shape[0])
        e = f"embedding::halfvec({dims}) <=> %(q)s::halfvec({dims})"

        def run(conn: Any) -> str:
            conn.execute("BEGIN")
            try:
                conn.execute("; ".join(_ANN_ONLY))
                rows = conn.execute(f"EXPLAIN SELECT id FROM hm_chunks WHERE ns = {self.ns} AND embedding IS NOT NULL "
                                    f"ORDER BY {e} LIMIT %(k)s", {"q": np.asarray(query, np.float32), "k": k}).fetchall()
            finally:
                conn.execute("COMMIT")
            return "\n".join(r[0] for r in rows)
        return self.link.read(run)

    def vector_scan(self, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        """Top ``k`` by an exact scan (the reference the HNSW recall is measured against)."""
        return self.vector_knn(query, k, exact=True)

    def load_vectors(self, provider: str, model: str, provider_key: str
                     ) -> tuple[np.ndarray, np.ndarray, list[str], list[str]]:
        """All embedded chunks' vectors: ``(ids, matrix, sources, paths)`` (the vectors live on the chunk rows)."""
        rows = self._q(f"SELECT id, embedding, source, path FROM hm_chunks WHERE ns = %(ns)s AND gen = {LIVE} AND "
                       "embedding IS NOT NULL ORDER BY id", self._p())
        if not rows:
            return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32), [], []
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        mat = np.vstack([np.asarray(r[1], dtype=np.float32) for r in rows])
        return ids, mat, [r[2] for r in rows], [r[3] for r in rows]
