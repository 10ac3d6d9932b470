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


def loaded(hits: list[LegHit], chunks: dict[int, ChunkInfo], readable: bool = False) -> list[LegHit]:
    """A leg's hits whose chunks were loaded (one deleted since the leg ran is gone), ranked 1, 2, ... again, as
    ranking reads a hit's calibrated probability by its rank. ``readable``: also drop a chunk with nothing the
    tokenizer reads ("---", "...", a lone quote, emoji): no answer, which the vector leg alone finds near any short
    question.

    Example:
        >>> from hybridmem.records import TokenSet
        >>> chunk = lambda i, tokens: ChunkInfo(id=i, path="m.md", source="memory", start_line=1, end_line=1,
        ...                                     text=tokens or "---", timestamp=0.0, evergreen=False,
        ...                                     tokens=TokenSet(tokens))
        >>> chunks = {1: chunk(1, "brake garag"), 2: chunk(2, ""), 4: chunk(4, "tea")}
        >>> hits = [LegHit(1, 0.9, 1), LegHit(2, 0.8, 2), LegHit(3, 0.7, 3), LegHit(4, 0.6, 4)]
        >>> [(h.chunk_id, h.rank) for h in loaded(hits, chunks, readable=True)]
        [(1, 1), (4, 2)]
    """
    kept = [h for h in hits if h.chunk_id in chunks and (not readable or chunks[h.chunk_id].tokens)]
    return [h if h.rank == i else LegHit(h.chunk_id, h.raw, i) for i, h in enumerate(kept, 1)]


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
