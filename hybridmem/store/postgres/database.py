"""The PostgreSQL index: the same contract as the SQLite :class:`~hybridmem.store.Store`, for many writers on many hosts.

* **Namespaces.** One database holds many indexes (one per workspace or agent, ``[store] namespace``); every row
  carries its namespace id and every statement filters on it, on both legs.
* **Writers.** :meth:`PostgresStore.transaction` takes a transaction-scoped advisory lock on the namespace, so
  syncers, watchers and ``--allow-write`` MCP servers on any host write one at a time per namespace: no lost update,
  no duplicate chunks (a file's rows are replaced inside the lock). A writer killed mid-transaction holds nothing:
  the server rolls its transaction back and releases the lock when the connection dies.
* **Generations.** A full reindex writes a new generation beside the live one (:meth:`new_generation`) and
  :meth:`publish` swaps ``hm_ns.live_gen`` and deletes the old rows in one transaction; searches answer from the old
  generation until that commit. An unpublished generation (its writer died) is never read and is removed by the next
  reindex of the namespace.
* **Keyword leg.** BM25 exactly as FTS5 computes it, in SQL over ``hm_postings`` (:mod:`.bm25`).
* **Vector leg.** pgvector cosine distance: an exact scan below ``hnsw_min_rows`` vectors, an HNSW index (built in
  the write transaction that first reaches that size) above it.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from typing import Any, Iterator, Sequence

import numpy as np

from hybridmem.errors import HybridMemError
from hybridmem.store.file_rows import HELD_SQL, match_rows
from hybridmem.store.health import HealthMixin
from hybridmem.store.postgres.cache import PgCacheMixin
from hybridmem.store.postgres.generations import GenerationsMixin
from hybridmem.store.postgres.checks import PgChecksMixin
from hybridmem.store.postgres.bm25 import bm25_sql, parse_match
from hybridmem.store.postgres.connection import PgLink, StoreConnectionError
from hybridmem.store.postgres.schema import LIVE, LOCK_CLASS, MIGRATIONS
from hybridmem.store.postgres.vectors import PgVectorsMixin
from hybridmem.tokenization import fts_tokens

_CHUNK_COLS = "id, path, source, start_line, end_line, text, tokens, timestamp, evergreen"


def indexed_namespaces(url: str, reconnect_s: float = 20.0) -> list[str]:
    """The namespaces of the database at ``url`` that a sync has written (opening one creates its row: a namespace a
    ``status`` or ``search --no-sync`` opened under a mistyped name is not listed), sorted; [] before any index."""
    link = PgLink(url, reconnect_s)
    try:
        def run(conn: Any) -> list[str]:
            if conn.execute("SELECT to_regclass('hm_meta') IS NOT NULL AND to_regclass('hm_ns') IS NOT NULL"
                            ).fetchone()[0] is not True:
                return []
            return [r[0] for r in conn.execute(
                "SELECT n.name FROM hm_ns n WHERE EXISTS (SELECT 1 FROM hm_meta m WHERE m.ns = n.id AND m.key IN "
                "('last_sync', 'sync_started')) ORDER BY n.name").fetchall()]
        return link.read(run)
    finally:
        link.close()


class PostgresStore(PgVectorsMixin, GenerationsMixin, PgCacheMixin, PgChecksMixin, HealthMixin):
    """One namespace of a PostgreSQL index (``gen`` pins a generation being built; None reads the live one)."""

    backend = "postgres"

    def __init__(self, url: str, namespace: str, hnsw_min_rows: int = 10_000, ef_search: int = 100,
                 gen: int | None = None, reconnect_s: float = 20.0) -> None:
        self.url, self.namespace = url, namespace
        self.path = f"postgres:{namespace}"
        self.read_only: str | None = None
        self._identity = None
        self.hnsw_min_rows, self.ef_search = hnsw_min_rows, ef_search
        self._gen = gen
        self._tx_gen: int | None = None
        self._hnsw: set[int] = set()
        self.link = PgLink(url, reconnect_s, on_connect=self._session)
        if self._q("SELECT pg_is_in_recovery()", one=True)[0]:
            self.read_only = f"{self.path} is served by a read replica (searches only; write on the primary)"
            row = self._q("SELECT id FROM hm_ns WHERE name = %(name)s", {"name": namespace}, one=True)
            if row is None:
                raise HybridMemError(f"the namespace {namespace!r} is not on this replica yet; index it on the "
                                     "primary first")
            self.ns = int(row[0])
        else:
            self._migrate()
            self.ns = int(self._q("INSERT INTO hm_ns(name) VALUES (%(name)s) ON CONFLICT (name) DO UPDATE SET name = "
                                  "EXCLUDED.name RETURNING id", {"name": namespace}, one=True)[0])
        self._session(self.link.conn)

    def _session(self, conn: Any) -> None:
        """Per-connection settings (again after every reconnect): numpy adaptation, HNSW search breadth."""
        if conn.execute("SELECT 1 FROM pg_type WHERE typname = 'vector'").fetchone() is None:
            return
        from pgvector.psycopg import register_vector

        register_vector(conn)
        conn.execute(f"SET hnsw.ef_search = {int(self.ef_search)}")
        conn.execute("SET hnsw.iterative_scan = relaxed_order")

    # -- connection --------------------------------------------------------------------------------------------
    @property
    def driver(self) -> str:
        return f"psycopg {self.link.psycopg.__version__}"

    @property
    def vec_available(self) -> bool:
        return True

    @property
    def vec_error(self) -> str | None:
        return None

    def close(self) -> None:
        self.link.close()

    def _p(self, **kw: Any) -> dict[str, Any]:
        return {"ns": getattr(self, "ns", None), "gen": self._tx_gen if self._tx_gen is not None else self._gen, **kw}

    def _q(self, sql: str, params: dict[str, Any] | Sequence[Any] | None = None, one: bool = False) -> Any:
        def run(conn: Any) -> Any:
            cur = conn.execute(sql, params)
            if cur.description is None:
                return None
            return cur.fetchone() if one else cur.fetchall()
        return self.link.read(run)

    def _migrate(self) -> None:
        with self.link.lock:
            conn = self.link.conn
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s, 0)", (LOCK_CLASS,))
                conn.execute("CREATE TABLE IF NOT EXISTS hm_version (version int NOT NULL)")
                row = conn.execute("SELECT max(version) FROM hm_version").fetchone()
                version = row[0] or 0
                for number, script in MIGRATIONS:
                    if number > version:
                        conn.execute(script)
                        conn.execute("INSERT INTO hm_version VALUES (%s)", (number,))

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """``with store.transaction(): ...``: one write transaction holding the namespace's advisory lock."""
        link = self.link
        with link.lock:
            if link.in_tx:
                yield
                return
            try:
                link.conn.execute("BEGIN")
                link.in_tx = True
                link.conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_CLASS, self.ns))
                self._tx_gen = self._gen if self._gen is not None else int(link.conn.execute(
                    "SELECT live_gen FROM hm_ns WHERE id = %s", (self.ns,)).fetchone()[0])
            except link.psycopg.OperationalError as exc:
                link.in_tx = False
                if link.broken(exc):
                    link.reconnect()
                    raise StoreConnectionError(f"lost the connection to PostgreSQL before a write began ({exc}); "
                                               "nothing was written: run it again") from None
                raise
            try:
                yield
            except BaseException as exc:
                self._end("ROLLBACK", exc)
                raise
            else:
                self._end("COMMIT", None)

    def _end(self, verb: str, pending: BaseException | None) -> None:
        link = self.link
        link.in_tx, self._tx_gen = False, None
        try:
            link.conn.execute(verb)
        except link.psycopg.OperationalError as exc:
            if not link.broken(exc):
                raise
            link.reconnect()
            if pending is None:
                raise link.lost(exc) from None

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """Every read of the block sees one committed state (a REPEATABLE READ, READ ONLY transaction)."""
        link = self.link
        with link.lock:
            if link.in_tx:
                yield
                return
            self._q("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            link.in_tx = True
            try:
                yield
            finally:
                self._end("COMMIT", None)

    # -- generation and meta -----------------------------------------------------------------------------------
    def generation(self) -> int:
        return int(self.get_meta("generation", "0") or 0)

    def bump_generation(self) -> None:
        """Count one change of the chunks (inside the write transaction); builds the HNSW index once the namespace
        reaches ``hnsw_min_rows`` vectors."""
        self._q(f"INSERT INTO hm_meta(ns, gen, key, value) SELECT %(ns)s, {LIVE}, 'generation', '1' "
                "ON CONFLICT (ns, gen, key) DO UPDATE SET value = (hm_meta.value::bigint + 1)::text", self._p())
        self._maybe_hnsw()

    def get_meta(self, key: str, default: str | None = None) -> str | None:
        row = self._q(f"SELECT value FROM hm_meta WHERE ns = %(ns)s AND gen = {LIVE} AND key = %(key)s",
                      self._p(key=key), one=True)
        return row[0] if row else default

    def set_meta(self, key: str, value: str | int | float) -> None:
        self._q(f"INSERT INTO hm_meta(ns, gen, key, value) SELECT %(ns)s, {LIVE}, %(key)s, %(value)s "
                "ON CONFLICT (ns, gen, key) DO UPDATE SET value = EXCLUDED.value", self._p(key=key, value=str(value)))

    def all_meta(self) -> dict[str, str]:
        return dict(self._q(f"SELECT key, value FROM hm_meta WHERE ns = %(ns)s AND gen = {LIVE}", self._p()))

    # -- files and writes ----------------------------------------------------------------------------------------
    def files(self) -> dict[str, dict[str, Any]]:
        cols = ("path", "abspath", "source", "hash", "mtime", "size", "date", "evergreen")
        rows = self._q(f"SELECT {', '.join(cols)} FROM hm_files WHERE ns = %(ns)s AND gen = {LIVE} ORDER BY path",
                       self._p())
        return {r[0]: dict(zip(cols, r)) for r in rows}

    def file_chunk_counts(self) -> dict[str, int]:
        return dict(self._q(f"SELECT path, count(*) FROM hm_chunks WHERE ns = %(ns)s AND gen = {LIVE} GROUP BY path",
                            self._p()))

    def stored_tokens(self, paths: Sequence[str]) -> dict[tuple[str, str], tuple[str | None, str, int]]:
        """``(path, chunk hash) -> (text, tokens, chunks)`` of the stored chunks of ``paths`` in the generation being
        written (text None when chunks of one hash differ in their text)."""
        if not paths:
            return {}
        rows = self._q("SELECT path, hash, min(text), max(text) = min(text), min(tokens), count(*) FROM hm_chunks "
                       f"WHERE ns = %(ns)s AND gen = {LIVE} AND path = ANY(%(paths)s) GROUP BY path, hash",
                       self._p(paths=list(paths)))
        return {(p, h): (x if same else None, t, n) for p, h, x, same, t, n in rows}

    def _require_tx(self) -> None:
        if not self.link.in_tx:
            raise RuntimeError("call inside store.transaction()")

    def delete_file(self, path: str) -> None:
        """Remove a file, its chunks and their postings. Call inside a transaction."""
        self._require_tx()
        gone = self._q("DELETE FROM hm_chunks WHERE ns = %(ns)s AND gen = %(gen)s AND path = %(path)s "
                       "RETURNING id, length", self._p(path=path))
        if gone:
            self._q("DELETE FROM hm_postings WHERE chunk = ANY(%(ids)s)", {"ids": [r[0] for r in gone]})
            self._stats(-len(gone), -sum(r[1] for r in gone))
        self._q("DELETE FROM hm_files WHERE ns = %(ns)s AND gen = %(gen)s AND path = %(path)s", self._p(path=path))

    def _stats(self, rows: int, tokens: int) -> None:
        self._q("INSERT INTO hm_stats(ns, gen, n_rows, n_tokens) VALUES (%(ns)s, %(gen)s, %(r)s, %(t)s) ON CONFLICT "
                "(ns, gen) DO UPDATE SET n_rows = hm_stats.n_rows + EXCLUDED.n_rows, n_tokens = hm_stats.n_tokens + "
                "EXCLUDED.n_tokens", self._p(r=rows, t=tokens))

    def touch_file(self, path: str, mtime: float, size: int, abspath: str | None) -> None:
        with self.transaction():
            self._q("UPDATE hm_files SET mtime = %(m)s, size = %(s)s, abspath = %(a)s WHERE ns = %(ns)s AND "
                    "gen = %(gen)s AND path = %(path)s", self._p(m=mtime, s=size, a=abspath, path=path))

    def upsert_file(self, file: dict[str, Any], chunks: Sequence[dict[str, Any]],
                    vectors: Sequence[np.ndarray | None]) -> None:
        """Replace a file's rows (file, chunks with their vectors, postings); the rows of the chunks it still holds
        are kept (``store/file_rows.py``). Call inside a transaction."""
        self._require_tx()
        held = self._q(HELD_SQL.format(table="hm_", where="ns = %(ns)s AND gen = %(gen)s AND ", path="%(path)s"),
                       self._p(path=file["path"]))
        gone, kept, fresh = match_rows(held or [], file["source"], chunks, vectors)
        if gone:
            rows = self._q("DELETE FROM hm_chunks WHERE id = ANY(%(ids)s) RETURNING length", {"ids": gone})
            self._q("DELETE FROM hm_postings WHERE chunk = ANY(%(ids)s)", {"ids": gone})
            self._stats(-len(rows), -sum(r[0] for r in rows))
        if kept:
            def stamp(conn: Any) -> None:
                with conn.cursor() as cur:
                    cur.executemany("UPDATE hm_chunks SET timestamp = %s, evergreen = %s WHERE id = %s", kept)
            self.link.read(stamp)
        self._q("INSERT INTO hm_files(ns, gen, path, abspath, source, hash, mtime, size, date, evergreen, indexed_at) "
                "VALUES (%(ns)s, %(gen)s, %(path)s, %(abspath)s, %(source)s, %(hash)s, %(mtime)s, %(size)s, %(date)s, "
                "%(evergreen)s, %(at)s) ON CONFLICT (ns, gen, path) DO UPDATE SET abspath = EXCLUDED.abspath, "
                "source = EXCLUDED.source, hash = EXCLUDED.hash, mtime = EXCLUDED.mtime, size = EXCLUDED.size, "
                "date = EXCLUDED.date, evergreen = EXCLUDED.evergreen, indexed_at = EXCLUDED.indexed_at",
                self._p(**{**file, "evergreen": int(file["evergreen"]), "at": time.time()}))
        if not fresh:
            return
        chunks, vectors = [c for c, _ in fresh], [v for _, v in fresh]
        ids = [r[0] for r in self._q("SELECT nextval('hm_chunks_id_seq') FROM generate_series(1, %(n)s)",
                                     {"n": len(chunks)})]
        ns, gen = self.ns, self._tx_gen
        chunk_rows, postings, tokens_total = [], [], 0
        for cid, chunk, vec in zip(ids, chunks, vectors):
            toks = [p for t in chunk["tokens"].split() for p in fts_tokens(t)]
            tokens_total += len(toks)
            postings += [(ns, gen, term, cid, tf, len(toks)) for term, tf in Counter(toks).items()]
            chunk_rows.append((cid, ns, gen, file["path"], file["source"], chunk["start_line"], chunk["end_line"],
                               chunk["hash"], chunk["text"], chunk["tokens"], chunk["timestamp"],
                               int(chunk["evergreen"]), int(vec is not None), len(toks),
                               None if vec is None else np.asarray(vec, dtype=np.float32)))

        def write(conn: Any) -> None:
            with conn.cursor() as cur:
                cur.executemany("INSERT INTO hm_chunks(id, ns, gen, path, source, start_line, end_line, hash, text, "
                                "tokens, timestamp, evergreen, embedded, length, embedding) VALUES (%s, %s, %s, %s, "
                                "%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", chunk_rows)
                with cur.copy("COPY hm_postings (ns, gen, term, chunk, tf, dl) FROM STDIN") as cp:
                    for row in postings:
                        cp.write_row(row)
        self.link.read(write)
        self._stats(len(chunk_rows), tokens_total)

    # -- keyword first: chunks stored without a vector yet (hybridmem/store/pending.py's contract) -------------------
    def pending_count(self) -> int:
        """Chunks stored without a vector."""
        return int(self._q(f"SELECT count(*) FROM hm_chunks WHERE ns = %(ns)s AND gen = {LIVE} AND embedded = 0",
                           self._p(), one=True)[0])

    def pending_chunks(self, limit: int, after_id: int = 0) -> list[tuple[int, str, str]]:
        """Up to ``limit`` pending chunks with an id above ``after_id``: ``(id, hash, text)`` in id order."""
        return [tuple(r) for r in self._q(
            f"SELECT id, hash, text FROM hm_chunks WHERE ns = %(ns)s AND gen = {LIVE} AND embedded = 0 AND "
            "id > %(after)s ORDER BY id LIMIT %(limit)s", self._p(after=int(after_id), limit=int(limit)))]

    def set_vectors(self, items: Sequence[tuple[int, str, np.ndarray]]) -> int:
        """Attach vectors to pending chunks ``(id, text hash, vector)``; a chunk deleted or embedded meanwhile
        (another host's writer), or whose id holds other text, is skipped. Returns how many were attached. Call inside
        a transaction."""
        self._require_tx()
        done = 0
        for cid, digest, vec in items:
            row = self._q("UPDATE hm_chunks SET embedded = 1, embedding = %(v)s WHERE ns = %(ns)s AND gen = %(gen)s "
                          "AND id = %(id)s AND embedded = 0 AND hash = %(h)s RETURNING id",
                          self._p(v=np.asarray(vec, dtype=np.float32), id=int(cid), h=digest), one=True)
            done += row is not None
        return done

    def clear(self) -> None:
        """Delete every file, chunk and posting of this generation (the embedding cache stays). In a transaction."""
        self._require_tx()
        self._drop_generation(self._tx_gen)
        self._q("DELETE FROM hm_meta WHERE ns = %(ns)s AND gen = %(gen)s AND key = 'vec_dims'", self._p())

    def _drop_generation(self, gen: int | None, meta: bool = False) -> None:
        p = {"ns": self.ns, "g": gen}
        tables = ("hm_postings", "hm_chunks", "hm_files", "hm_stats") + (("hm_meta",) if meta else ())
        for table in tables:
            self._q(f"DELETE FROM {table} WHERE ns = %(ns)s AND gen = %(g)s", p)

    # -- reads ---------------------------------------------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        files = self._q(f"SELECT count(*) FROM hm_files WHERE ns = %(ns)s AND gen = {LIVE}", self._p(), one=True)[0]
        chunks, embedded = self._q(f"SELECT count(*), coalesce(sum(embedded), 0) FROM hm_chunks WHERE ns = %(ns)s "
                                   f"AND gen = {LIVE}", self._p(), one=True)
        return {"files": int(files), "chunks": int(chunks), "embedded_chunks": int(embedded)}

    def keyword_search(self, match: str, limit: int, source: str | None = None, path_prefix: str | None = None
                       ) -> list[tuple[int, float]]:
        """BM25 as FTS5 scores it: ``(chunk_id, bm25)`` best first (negative; lower is better)."""
        parsed = parse_match(match)
        if parsed is None:  # a phrase: its pieces as separate terms (FTS5 would require them adjacent)
            parsed = ([p for part in match.split('"') for p in fts_tokens(part) if part.strip() not in ("", "OR",
                                                                                                        "AND")], False)
        terms, require_all = parsed
        if not terms or limit <= 0:
            return []
        scoped = source is not None or path_prefix is not None
        sql = bm25_sql(LIVE, scoped, require_all)
        rows = self._q(sql, self._p(terms=terms, limit=int(limit), nterms=len(terms), source=source,
                                    prefix=path_prefix))
        return [(int(i), float(r)) for i, r in rows]

    def keyword_doc_counts(self, tokens: Sequence[str]) -> tuple[int, dict[str, int]]:
        """``(N, {token: nHit})`` as the keyword statement's IDF reads them (``hm_stats``, ``hm_postings``, one
        generation, one round trip); a token no row holds is left out."""
        uniq = list(dict.fromkeys(tokens))
        rows = self._q(f"""
            WITH g AS MATERIALIZED (SELECT {LIVE} AS gen)
            SELECT NULL::text, s.n_rows::bigint FROM hm_stats s, g WHERE s.ns = %(ns)s AND s.gen = g.gen
            UNION ALL
            SELECT p.term, count(*) FROM hm_postings p, g
            WHERE p.ns = %(ns)s AND p.gen = g.gen AND p.term = ANY(%(terms)s) GROUP BY p.term""",
                       self._p(terms=uniq))
        n = next((int(c) for t, c in rows if t is None), 0)
        return n, {str(t): int(c) for t, c in rows if t is not None}

    def keyword_rows(self) -> tuple[list[int], list[str], list[str], list[str]]:
        rows = self._q(f"SELECT id, tokens, source, path FROM hm_chunks WHERE ns = %(ns)s AND gen = {LIVE} ORDER BY id",
                       self._p())
        return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows]

    def chunk_rows(self, ids: Sequence[int]) -> dict[int, tuple]:
        """``id -> (path, source, start_line, end_line, text, tokens, timestamp, evergreen)``."""
        uniq = list(dict.fromkeys(int(i) for i in ids))
        if not uniq:
            return {}
        rows = self._q(f"SELECT {_CHUNK_COLS} FROM hm_chunks WHERE id = ANY(%(ids)s) AND ns = %(ns)s",
                       self._p(ids=uniq))
        return {r[0]: tuple(r[1:]) for r in rows}

    def chunk_paths(self) -> dict[int, str]:
        return dict(self._q(f"SELECT id, path FROM hm_chunks WHERE ns = %(ns)s AND gen = {LIVE}", self._p()))

    def chunk_spans(self) -> list[tuple[str, int, int, str]]:
        return [tuple(r) for r in self._q(f"SELECT path, start_line, end_line, hash FROM hm_chunks WHERE ns = %(ns)s "
                                          f"AND gen = {LIVE} ORDER BY path, start_line", self._p())]
