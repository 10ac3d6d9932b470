"""How many rows FTS5 holds and how many hold each token: the two counts of ``bm25()``'s IDF.

The answer gate weighs the query's terms by their IDF (``ranking/gate.py``: ``idf_coverage_top``), so it needs the
same ``N`` and ``nHit`` the keyword leg's BM25 used. ``nHit`` comes from an ``fts5vocab`` table of type ``row`` (one
row per token: the rows holding it), created in the connection's TEMP schema (it works on a read-only index and
changes nothing in the file). ``N`` is read from FTS5's averages record (``chunks_fts_data`` id 1: a varint row
count, then each column's token total; ``fts5_index.c``), which is what ``bm25()`` reads: ``count(*)`` on the FTS5
table scans every row (5 ms at 734 chunks), the record is one lookup.
"""

from __future__ import annotations

from typing import Any, Sequence

_VOCAB = "CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunks_fts_rows USING fts5vocab(main, 'chunks_fts', 'row')"


def read_varint(buf: bytes) -> int:
    """SQLite's varint (big-endian, seven bits a byte with the high bit set on all but the last; the ninth byte
    holds eight bits), as FTS5 writes its averages record.

    Example:
        >>> read_varint(bytes([0x41])), read_varint(bytes([0x81, 0x00]))
        (65, 128)
    """
    value = 0
    for i, byte in enumerate(buf[:9]):
        if i == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            return value
    return value


class KeywordStatsMixin:
    """:class:`~hybridmem.store.Store`'s BM25 statistics (``_db`` and ``_lock`` come from it)."""

    _db: Any
    _lock: Any

    def keyword_doc_counts(self, tokens: Sequence[str]) -> tuple[int, dict[str, int]]:
        """``(N, {token: nHit})``: the rows of the keyword index and, for each of ``tokens`` (FTS5 tokens) that some
        row holds, how many rows hold it (a token no row holds is left out: its ``nHit`` is 0)."""
        uniq = list(dict.fromkeys(tokens))
        with self._lock:
            row = self._db.execute("SELECT block FROM chunks_fts_data WHERE id = 1").fetchone()
            n = read_varint(bytes(row[0])) if row and row[0] else 0
            if not uniq or n == 0:
                return n, {}
            self._db.execute(_VOCAB)
            marks = ",".join("?" * len(uniq))
            hits = self._db.execute(f"SELECT term, doc FROM temp.chunks_fts_rows WHERE term IN ({marks})",
                                    uniq).fetchall()
        return n, {str(t): int(d) for t, d in hits}
