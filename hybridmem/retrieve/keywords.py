"""Exact FTS5 BM25 from memory: the hot copy of the keyword index, as :mod:`hybridmem.retrieve.vectors` is for vectors.

FTS5 scores an OR query by calling ``bm25()`` on every row that matches any term; on SciFact a typical claim matches
a third of all chunks, so most of a query's time is that per-row call (profiled: ~90% of the keyword leg). Here the
same postings live in numpy arrays (term -> rows, term frequencies; row lengths) and a query is one vectorised
update per term, computing **the same double-precision expression in the same order** as FTS5's ``fts5Bm25Function``
(SQLite ``ext/fts5/fts5_aux.c``; k1 = 1.2, b = 0.75)::

    idf   = log((N - nHit + 0.5) / (nHit + 0.5)), or 1e-6 when that is <= 0
    score = sum over query terms, in query order, of idf * ((tf * (k1 + 1)) / (tf + k1 * (1 - b + b * D / avgdl)))
    bm25  = -1 * score                                   (lower is better, as FTS5 returns it)

so scores are bit-identical and the top-k equals ``Store.keyword_search`` (ties broken by chunk id). Rows come from
the ``tokens`` column FTS5 indexes (tokens joined by single spaces), so both see the same tokens. SQLite stays the
persistent copy; :class:`~hybridmem.index.MemoryIndex` builds this from it per index generation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from hybridmem.retrieve.vectors import ScopedRows
from hybridmem.tokenization import bm25_idf, fts_tokens

K1 = 1.2  # FTS5's bm25() defaults (fts5_aux.c); not settings: they must match what FTS5 computes
B = 0.75


@dataclass
class KeywordIndex(ScopedRows):
    """Postings by term (CSR: ``offsets[t]:offsets[t + 1]`` index ``rows`` and ``tf``), row lengths, scope columns.

    Example:
        >>> ki = KeywordIndex.build([7, 8], ["payment retri", "retri retri"], ["memory"] * 2, ["a.md", "b.md"])
        >>> [cid for cid, _ in ki.search(["retri"], 10)]
        [8, 7]
    """

    ids: np.ndarray
    vocab: dict[str, int]
    offsets: np.ndarray
    rows: np.ndarray
    tf: np.ndarray  # float64, as FTS5's double aFreq
    lengths: np.ndarray
    sources: list[str]
    paths: list[str]
    _source_arr: np.ndarray | None = field(default=None, repr=False)
    avgdl: float = field(default=0.0, init=False)
    # per row, K1 * (1 - B + B * D / avgdl): FTS5's length term, the same double it computes for every posting
    length_norm: np.ndarray = field(default_factory=lambda: np.zeros(0), init=False, repr=False)
    # per posting, (tf * (K1 + 1)) / (tf + length_norm[row]): everything of FTS5's per-row term but the IDF, computed
    # once here with the same double operations in the same order, so a query only multiplies it by each term's IDF
    impact: np.ndarray = field(default_factory=lambda: np.zeros(0), init=False, repr=False)

    def __post_init__(self) -> None:
        n = self.ids.shape[0]
        self.tf = np.asarray(self.tf, dtype=np.float64)
        self.avgdl = float(self.lengths.sum()) / float(n) if n else 0.0
        self.length_norm = K1 * (1 - B + B * self.lengths / self.avgdl) if n and self.avgdl else np.zeros(n)
        self.impact = self.tf * (K1 + 1.0)
        if self.impact.shape[0]:
            self.impact /= self.tf + self.length_norm[self.rows]

    @classmethod
    def build(cls, ids: Sequence[int], tokens: Sequence[str], sources: Sequence[str], paths: Sequence[str]
              ) -> "KeywordIndex":
        """From chunk ids and their space-joined token strings (the FTS5 ``tokens`` column)."""
        n = len(ids)
        vocab: dict[str, int] = {}
        get = vocab.setdefault
        lengths = np.zeros(n, dtype=np.float64)
        term_of: list[int] = []
        row_of: list[int] = []
        for r, text in enumerate(tokens):
            toks = [p for t in text.split() for p in fts_tokens(t)]
            lengths[r] = len(toks)
            term_of.extend([get(t, len(vocab)) for t in toks])
            row_of.extend([r] * len(toks))
        if term_of:
            key = np.asarray(term_of, dtype=np.int64) * max(n, 1) + np.asarray(row_of, dtype=np.int64)
            uniq, counts = np.unique(key, return_counts=True)  # sorted by term, then row
            terms = uniq // max(n, 1)
            rows = (uniq % max(n, 1)).astype(np.int32)
            offsets = np.searchsorted(terms, np.arange(len(vocab) + 1)).astype(np.int64)
            tf = counts.astype(np.float64)
        else:
            rows, tf, offsets = np.zeros(0, np.int32), np.zeros(0, np.float64), np.zeros(len(vocab) + 1, np.int64)
        return cls(np.asarray(ids, dtype=np.int64), vocab, offsets, rows, tf, lengths, list(sources), list(paths))

    def __len__(self) -> int:
        return int(self.ids.shape[0])


    def keyword_doc_counts(self, tokens: Sequence[str]) -> tuple[int, dict[str, int]]:
        """``(N, {token: nHit})`` as :meth:`search`'s IDF reads them, the same as ``Store.keyword_doc_counts``: the
        rows, and for each of ``tokens`` that some row holds, how many hold it."""
        out: dict[str, int] = {}
        for t in dict.fromkeys(tokens):
            j = self.vocab.get(t)
            if j is not None:
                out[t] = int(self.offsets[j + 1] - self.offsets[j])
        return len(self), out

    def search(
        self,
        terms: Sequence[str],
        limit: int,
        source: str | None = None,
        path_prefix: str | None = None,
        require_all: bool = False,
    ) -> list[tuple[int, float]] | None:
        """``(chunk_id, bm25)`` best first (bm25 negative, lower is better), like ``Store.keyword_search`` for the
        OR (or, with ``require_all``, AND) of ``terms``. IDF and average length are over all rows, as in FTS5.

        Returns None for a query FTS5 would read as a phrase (a term it splits into several tokens): the caller
        asks FTS5 itself, which has the positions phrases need.
        """
        n = len(self)
        if n == 0 or limit <= 0 or not terms:
            return []
        mapped = []
        for t in terms:
            pieces = fts_tokens(t)
            if len(pieces) != 1:
                return None
            mapped.append(pieces[0])
        terms = mapped
        score = np.zeros(n, dtype=np.float64)
        hits = np.zeros(n, dtype=np.int32) if require_all else None
        for t in terms:
            j = self.vocab.get(t)
            if j is None:
                if require_all:
                    return []
                continue  # FTS5 gives it an IDF but no row has it: it adds 0.0 to every score
            a, b = int(self.offsets[j]), int(self.offsets[j + 1])
            rows = self.rows[a:b]
            n_hit = b - a
            score[rows] += self.impact[a:b] * bm25_idf(n, n_hit)
            if hits is not None:
                hits[rows] += 1
        # every term's contribution to a row holding it is > 0 (idf >= 1e-6, tf >= 1), so OR matches are score > 0
        matched = hits >= len(terms) if hits is not None else score > 0.0
        mask = self._mask(source, path_prefix)
        if mask is not None:
            matched &= mask
        cand = np.flatnonzero(matched)
        if cand.shape[0] == 0:
            return []
        raw = -1.0 * score[cand]
        if limit < cand.shape[0]:
            part = np.argpartition(raw, limit - 1)[:limit]
            # keep every row tied with the limit-th score so the id tie-break below is exact
            cut = raw[part].max()
            part = np.flatnonzero(raw <= cut)
            cand, raw = cand[part], raw[part]
        ids = self.ids[cand]
        order = np.lexsort((ids, raw))[:limit]
        return [(int(ids[i]), float(raw[i])) for i in order]
