"""Retrieval: the two legs (FTS5 BM25 and vector KNN) for one query, returned as plain-data :class:`Candidates`.

The expensive half of search. ``rank()`` does all scoring afterwards; retrieve once at the largest pool any ranking
config asks for, and rank as often as you like.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from hybridmem.config import TokenizerConfig
from hybridmem.retrieve.keywords import KeywordIndex
from hybridmem.records import Candidates, ChunkInfo, LegHit, TokenSet
from hybridmem.store import IndexStore
from hybridmem.tokenization import fts_match, fts_terms, fts_tokens, query_terms


@dataclass(frozen=True)
class Scope:
    """Restricts both legs alike: a source (``memory``/``sessions``) and/or a path prefix."""

    source: str | None = None
    path_prefix: str | None = None


def keyword_leg(
    store: IndexStore, query: str, pool: int, tokenizer: TokenizerConfig, scope: Scope, memory: KeywordIndex | None = None
) -> list[LegHit]:
    """FTS5 BM25 through the safe query builder; ``raw`` is FTS5's ``bm25()`` (negative, lower is better).

    ``memory``, an in-memory copy of the FTS5 postings, computes the same scores bit for bit about 10x faster
    (see :mod:`hybridmem.retrieve.keywords`); queries it cannot answer exactly (FTS5 phrases) go to FTS5.
    """
    terms = fts_terms(query, tokenizer)
    match = fts_match(terms, tokenizer)
    if match is None or pool <= 0:
        return []
    rows = None
    if memory is not None:
        rows = memory.search(terms, pool, scope.source, scope.path_prefix,
                             require_all=tokenizer.query_mode == "and")
    if rows is None:
        rows = store.keyword_search(match, pool, scope.source, scope.path_prefix)
    return [LegHit(cid, raw, i + 1) for i, (cid, raw) in enumerate(rows)]


def term_doc_counts(store: IndexStore, query_tokens: Sequence[str], memory: KeywordIndex | None = None
                    ) -> tuple[int, tuple[int, ...]]:
    """The rows of the keyword index and, per query token, how many rows hold it: the counts of BM25's IDF, which the
    answer gate weighs query terms by. A token FTS5 splits into pieces counts as its rarest piece. From the in-memory
    copy when there is one (the same counts), else the store."""
    pieces = [fts_tokens(t) for t in query_tokens]
    n, hits = (memory if memory is not None else store).keyword_doc_counts([p for ps in pieces for p in ps])
    return n, tuple(min((hits.get(p, 0) for p in ps), default=0) for ps in pieces)


def vector_leg(
    search: Callable[[np.ndarray, int, str | None, str | None], list[tuple[int, float]]],
    query_vector: np.ndarray,
    pool: int,
    scope: Scope,
) -> list[LegHit]:
    """Vector KNN through ``search`` (in-memory matrix or sqlite-vec); ``raw`` is the cosine similarity."""
    if pool <= 0:
        return []
    rows = search(query_vector, pool, scope.source, scope.path_prefix)
    return [LegHit(cid, sim, i + 1) for i, (cid, sim) in enumerate(rows)]


def chunk_infos(
    store: IndexStore, ids: list[int], vector_of: Callable[[int], np.ndarray | None] | None = None
) -> dict[int, ChunkInfo]:
    """What ranking needs per chunk; ``vector_of`` adds vectors for cosine MMR."""
    rows = store.chunk_rows(ids)
    out: dict[int, ChunkInfo] = {}
    for cid, (path, source, start, end, text, tokens, ts, evergreen) in rows.items():
        out[cid] = ChunkInfo(
            id=cid, path=path, source=source, start_line=start, end_line=end, text=text, timestamp=ts,
            evergreen=bool(evergreen), tokens=TokenSet(tokens),
            vector=vector_of(cid) if vector_of is not None else None,
        )
    return out


def build_candidates(
    query: str,
    tokenizer: TokenizerConfig,
    keyword: list[LegHit],
    vector: list[LegHit],
    chunks: dict[int, ChunkInfo],
    pool: int,
    keyword_searched: bool,
    vector_searched: bool,
) -> Candidates:
    return Candidates(
        query=query, query_tokens=tuple(query_terms(query, tokenizer)), keyword=tuple(keyword), vector=tuple(vector),
        chunks=chunks, pool=pool, keyword_searched=keyword_searched, vector_searched=vector_searched,
    )
