"""Plain data passed between layers: documents, chunks, candidates and ranked hits.

``retrieve()`` produces :class:`Candidates`; the pure ``rank()`` turns them into a :class:`Ranking` of :class:`Hit`.
Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Iterator, Set
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from hybridmem.config import RankConfig


@dataclass(frozen=True)
class Document:
    """One unit of source text to index: a memory file, a transcript, or an evaluation corpus document.

    Attributes:
        path: workspace-relative path (``memory/2026-05-01.md``) or any stable id for virtual documents.
        text: the text to chunk (for transcripts, the formatted ``User:``/``Assistant:`` lines).
        source: ``memory``, ``sessions`` or a corpus name; scoping filters on it.
        mtime: modification time, seconds since the epoch.
        date: the document's own date (epoch seconds), e.g. from ``memory/2026-05-01.md``; wins over mtime for decay.
        evergreen: exempt from temporal decay (``MEMORY.md``, undated topic files).
        line_map: for derived text (transcripts), the source line number of each text line (1-based), so citations
            point at the original file.
    """

    path: str
    text: str
    source: str = "memory"
    mtime: float = 0.0
    date: float | None = None
    evergreen: bool = False
    line_map: tuple[int, ...] | None = None

    @property
    def timestamp(self) -> float:
        return self.date if self.date is not None else self.mtime


@dataclass(frozen=True)
class Chunk:
    """A span of a document's lines, 1-based and inclusive."""

    start_line: int
    end_line: int
    text: str
    hash: str


class TokenSet(Set[str]):
    """The distinct tokens of a chunk's space-separated ``tokens`` column, split when first needed.

    Only MMR's Jaccard (for the candidates it compares) and centred snippets (for the kept hits) read a chunk's
    tokens; splitting all ~50 candidates' ~100 tokens up front was 1.1 ms of a search's 1.9 ms chunk loading at 100k
    chunks.
    """

    __slots__ = ("_text", "_set", "_hashes")

    def __init__(self, text: str) -> None:
        self._text = text
        self._set: frozenset[str] | None = None
        self._hashes: np.ndarray | None = None

    def hashes(self) -> np.ndarray:
        """Each distinct token's 64-bit hash (MMR's bit matrix numbers tokens by it), computed once per chunk."""
        h = self._hashes
        if h is None:
            tokens = self._tokens()
            h = self._hashes = np.fromiter(map(hash, tokens), dtype=np.int64, count=len(tokens))
        return h

    def _tokens(self) -> frozenset[str]:
        s = self._set
        if s is None:
            s = self._set = frozenset(self._text.split())
        return s

    def __contains__(self, token: object) -> bool:
        return token in self._tokens()

    def frozen(self) -> frozenset[str]:
        """The tokens as a frozenset (split now if they were not yet): set operations with it run at C speed."""
        return self._tokens()

    def __iter__(self) -> Iterator[str]:
        return iter(self._tokens())

    def __len__(self) -> int:
        return len(self._tokens())

    def __bool__(self) -> bool:  # without splitting: a chunk holds a token when its column holds more than spaces
        return bool(self._text.strip())

    def __hash__(self) -> int:
        return hash(self._tokens())

    def __repr__(self) -> str:
        return f"TokenSet({self._text!r})"


def frozen_tokens(tokens: Set[str]) -> Set[str]:
    """A chunk's ``tokens`` in a form the set operations of the builtins take directly: a :class:`TokenSet`'s
    frozenset, any other set as it is."""
    return tokens.frozen() if isinstance(tokens, TokenSet) else tokens


@dataclass(frozen=True)
class ChunkInfo:
    """What ranking needs to know about one candidate chunk."""

    id: int
    path: str
    source: str
    start_line: int
    end_line: int
    text: str
    timestamp: float
    evergreen: bool
    tokens: Set[str]  # a frozenset, or a TokenSet that splits the stored column on first use
    vector: np.ndarray | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class LegHit:
    """One entry of a retrieval leg, in rank order.

    ``raw`` is the backend's own score: cosine similarity for the vector leg, FTS5 ``bm25()`` (negative, lower is
    better) for the keyword leg. ``rank`` is 1-based.
    """

    chunk_id: int
    raw: float
    rank: int


@dataclass(frozen=True)
class Candidates:
    """Everything retrieved for one query, ready for any number of ``rank()`` calls.

    Each leg holds up to ``pool`` entries; a smaller pool is a prefix of each list.
    """

    query: str
    query_tokens: tuple[str, ...]
    keyword: tuple[LegHit, ...]
    vector: tuple[LegHit, ...]
    chunks: Mapping[int, ChunkInfo]
    pool: int
    keyword_searched: bool = True
    vector_searched: bool = True
    vector_model: str = ""  # the embedding model of the vector leg's cosines (which calibration reads them)
    # The query embedder's coverage as Unicode scripts (``Embedder.scripts``: all-MiniLM-L6-v2 {"LATIN"}); None when
    # it claims every script or is unknown. Read by the adaptive fusion (ranking/adaptive.py).
    vector_scripts: frozenset[str] | None = None
    # The index generation both legs and the chunks were read at ("" when unknown), so a caller need not read it again.
    generation: str = ""
    # BM25's IDF counts for the answer gate: the keyword index's rows and, per ``query_tokens`` entry, how many rows
    # hold it (0 and () when the keyword leg did not run: the gate then weighs every term alike).
    doc_count: int = 0
    term_docs: tuple[int, ...] = ()
    # The query's token alignment with its top passages, (mean, lower quartile, surprisal-weighted mean, weighted
    # share of exact pieces, centred mean) (hybridmem.retrieve.alignment), for the answer gate; None when the embedder
    # gives no token states.
    alignment: tuple[float, float, float, float, float] | None = None
    # Each read passage's own alignment mean (chunk id -> mean; the order's ``align_lift``, hybridmem.ranking.joint);
    # None without an alignment.
    passage_alignment: Mapping[int, float] | None = None


@dataclass(frozen=True)
class Hit:
    """A candidate after ranking, with every stage's score.

    Scores of a leg that did not find the chunk are ``None`` (and count as 0 in fusion). ``kept`` is False for
    candidates that were cut; ``cut_reason`` says why (``min_score``, ``max_results``, ``char_budget``, ``pool``,
    ``same_lines``: another piece of lines a kept hit cites, or ``no_answer``: the answer gate judged that the query has no answer in memory, so nothing was returned).
    ``final_score`` is the score after decay, times the gate's answer probability when the config has a gate (under
    the default, the probability that the hit is relevant).
    ``vector_part`` and ``text_part`` are each leg's term of ``fused_score`` for fusions that add one term per leg
    (weighted sum, RRF; 0.0 from a leg that did not find the chunk, and the two add up to ``fused_score``); ``None``
    under other fusions.
    """

    chunk_id: int
    path: str
    source: str
    start_line: int
    end_line: int
    text: str
    citation: str
    snippet: str
    vector_raw: float | None
    vector_score: float | None
    vector_rank: int | None
    text_raw: float | None
    text_score: float | None
    text_rank: int | None
    fused_score: float
    decay_factor: float
    decayed_score: float
    mmr_score: float | None
    mmr_position: int | None
    final_score: float
    position: int | None
    kept: bool
    cut_reason: str | None = None
    rescued: bool = False
    vector_part: float | None = None
    text_part: float | None = None


_HIT_FIELDS = tuple(Hit.__dataclass_fields__)
_new = object.__new__


def hit_of(values: Sequence[Any]) -> Hit:
    """``Hit(*values)`` (values in field order), built without the frozen dataclass's ``__setattr__`` per field:
    the same object (equal, hashed and shown the same, still frozen) in 1.9 us instead of 5.3. ``rank()`` builds one
    per returned hit, 300,000 in a 100-config sweep."""
    hit = _new(Hit)
    hit.__dict__.update(zip(_HIT_FIELDS, values))
    return hit


@dataclass(frozen=True)
class Ranking:
    """The output of ``rank()``: the results returned, and every candidate for explanation."""

    hits: tuple[Hit, ...]
    candidates: tuple[Hit, ...]
    rescued: bool = False
    # The answer gate (ranking/gate.py): the probability that the query has an answer in memory (None: no gate), and
    # whether it was below RankConfig.answer_threshold, so nothing was returned.
    answer_probability: float | None = None
    abstained: bool = False
    # How the question was read as asked across languages (RankMemo.across): "top", in another script or language
    # than each of its top passages; "nearest", than its nearest one alone (a memory in two languages: the
    # cross-lingual gate is read against a higher bar); "" neither. Where it is, the cross-lingual gate may answer too
    # and the hits take the cross-lingual fit's probabilities. Read only for a model that has either ("" otherwise).
    routed_across: str = ""
    # The question's language and the bar the gate read it against (LANGUAGE_BARS) where one did; else None.
    language_bar: tuple[str, float] | None = None


@dataclass(frozen=True)
class SearchResponse:
    """Results of one search, with the provider used and per-stage timings in milliseconds."""

    query: str
    results: tuple[Hit, ...]
    ranking: Ranking
    provider: str
    model: str
    fallback: bool
    fallback_reason: str | None
    timings: dict[str, float]
    config: "RankConfig"
    candidates: Candidates | None = field(default=None, repr=False)
    notice: str | None = None  # what the search changed in the query (cut to tokenizer.max_query_chars)
    vectors: dict[str, int] | None = None  # {"embedded": N, "total": M} chunks (None: a keyword-only index)
    vectors_note: str | None = None  # "vectors for N of M chunks ..." while embedding has not caught up
    ask_in: tuple[str, ...] = ()  # where the gate refused: languages the memory's notes are in, not the question's

    def to_dict(self, citations: bool = True) -> dict[str, Any]:
        results = []
        for h in self.results:
            item = {
                "path": h.path, "start_line": h.start_line, "end_line": h.end_line, "score": round(h.final_score, 6),
                "snippet": h.snippet, "source": h.source,
                "vector_score": None if h.vector_score is None else round(h.vector_score, 6),
                "text_score": None if h.text_score is None else round(h.text_score, 6),
                "vector_rank": h.vector_rank, "text_rank": h.text_rank, "fused_score": round(h.fused_score, 6),
                "decay_factor": round(h.decay_factor, 6),
            }
            if citations:
                item["citation"] = h.citation
            results.append(item)
        out = {
            "query": self.query, "results": results, "provider": self.provider, "model": self.model,
            "fallback": self.fallback, "fallback_reason": self.fallback_reason, "rescued": self.ranking.rescued,
            "answer_probability": (None if self.ranking.answer_probability is None
                                   else round(self.ranking.answer_probability, 6)),
            "abstained": self.ranking.abstained,
            "timings_ms": {k: round(v, 3) for k, v in self.timings.items()},
        }
        if self.notice:
            out["notice"] = self.notice
        if self.vectors is not None:
            out["vectors"] = dict(self.vectors)
        if self.vectors_note:
            out["vectors_note"] = self.vectors_note
        if self.ask_in:
            out["ask_in"] = list(self.ask_in)
        return out
