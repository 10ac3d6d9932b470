"""FTS5's BM25 in SQL over postings of the project's own tokens, so both engines give the same scores.

SQLite's ``fts5Bm25Function`` (``ext/fts5/fts5_aux.c``, k1 = 1.2, b = 0.75, no column weights) computes, per row::

    idf   = log((N - nHit + 0.5) / (nHit + 0.5)), or 1e-6 when that is <= 0     (N rows, nHit rows holding the term)
    score = sum over the query's phrases, in query order, of idf * ((tf * (k1 + 1)) / (tf + k1 * (1 - b + b * D / avgdl)))
    bm25  = -1 * score                                     (lower is better)

with D the row's token count and avgdl the index's tokens per row. The statement below evaluates the same float8
expression in the same order (``sum(... ORDER BY position)`` adds the terms in query order; a term a row lacks adds
0.0 in FTS5, which changes no double), over ``hm_postings`` (term, chunk, tf, dl) built from the same token stream FTS5
indexes (:func:`hybridmem.tokenization.fts_tokens` of the ``tokens`` column). Ties are broken by chunk id, as the
SQLite leg's ``ORDER BY bm25, rowid`` does. ``tests/test_pg_store.py`` checks scores against FTS5 on multilingual text.
"""

from __future__ import annotations

from hybridmem.tokenization import fts_tokens

K1 = 1.2
B = 0.75


def parse_match(match: str) -> tuple[list[str], bool] | None:
    """The terms and AND-mode of a MATCH expression built by :func:`hybridmem.tokenization.fts_query` (quoted terms
    joined by `` OR `` or `` AND ``), mapped to the tokens FTS5 stores. None for an expression holding a phrase (a
    term FTS5 splits into several tokens, which needs positions this table does not keep).

    Example:
        >>> parse_match('"retri" OR "payment"')
        (['retri', 'payment'], False)
    """
    terms: list[str] = []
    i, n, require_all = 0, len(match), False
    while i < n:
        if match[i] != '"':
            raise ValueError(f"not a MATCH expression of the query builder: {match!r}")
        j, buf = i + 1, []
        while True:
            k = match.index('"', j)
            buf.append(match[j:k])
            if k + 1 < n and match[k + 1] == '"':
                buf.append('"')
                j = k + 2
                continue
            i = k + 1
            break
        pieces = fts_tokens("".join(buf))
        if len(pieces) != 1:
            return None
        terms.append(pieces[0])
        if match.startswith(" AND ", i):
            require_all, i = True, i + 5
        elif match.startswith(" OR ", i):
            i += 4
    return terms, require_all


def bm25_sql(gen_sql: str, scoped: bool, require_all: bool) -> str:
    """The keyword statement: params ``ns``, ``gen``, ``terms`` (text[]), ``limit``, and with ``scoped`` also
    ``source`` and ``prefix`` (either may be None)."""
    f = "float8"
    per_term = (f"i.idf * ((p.tf::{f} * ({K1}::{f} + 1.0::{f})) / (p.tf::{f} + {K1}::{f} * "
                f"(1.0::{f} - {B}::{f} + {B}::{f} * p.dl::{f} / st.avgdl)))")
    scope_join = scope_where = ""
    if scoped:
        scope_join = " JOIN hm_chunks c ON c.id = s.chunk"
        scope_where = (" AND (%(source)s::text IS NULL OR c.source = %(source)s)"
                       " AND (%(prefix)s::text IS NULL OR starts_with(c.path, %(prefix)s))")
    having = " HAVING count(*) >= %(nterms)s" if require_all else ""
    return f"""
        WITH g AS MATERIALIZED (SELECT {gen_sql} AS gen),
        st AS MATERIALIZED (SELECT s.n_rows::{f} AS n, s.n_tokens::{f} / s.n_rows::{f} AS avgdl
               FROM hm_stats s, g WHERE s.ns = %(ns)s AND s.gen = g.gen AND s.n_rows > 0),
        i AS MATERIALIZED (
            SELECT t.term, t.pos, CASE WHEN x.v <= 0.0::{f} THEN 1e-6::{f} ELSE x.v END AS idf
            FROM unnest(%(terms)s::text[]) WITH ORDINALITY AS t(term, pos) CROSS JOIN st CROSS JOIN g
            CROSS JOIN LATERAL (SELECT ln((st.n - d.n_hit + 0.5::{f}) / (d.n_hit + 0.5::{f})) AS v
                                FROM (SELECT count(*)::{f} AS n_hit FROM hm_postings p
                                      WHERE p.ns = %(ns)s AND p.gen = g.gen AND p.term = t.term) d) x),
        s AS (SELECT p.chunk, sum({per_term} ORDER BY i.pos) AS score
              FROM i CROSS JOIN st CROSS JOIN g
              CROSS JOIN LATERAL (SELECT p.chunk, p.tf, p.dl FROM hm_postings p
                                  WHERE p.ns = %(ns)s AND p.gen = g.gen AND p.term = i.term) p
              GROUP BY p.chunk{having})
        SELECT s.chunk, -1.0::{f} * s.score AS r FROM s{scope_join}
        WHERE s.score > 0.0::{f}{scope_where} ORDER BY r, s.chunk LIMIT %(limit)s
    """
