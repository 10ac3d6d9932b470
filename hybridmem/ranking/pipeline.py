"""``rank()``: the one ranking function. Candidates in, every stage's score out; no I/O.

Stages, in the reference system's order, each a function below:

1. :func:`normalize`: each leg is cut to its first ``config.pool`` entries and normalized (``bm25_norm``,
   ``vector_norm``; see :mod:`hybridmem.ranking.normalize`, and :mod:`hybridmem.ranking.calibrate` for
   ``calibrated``, a probability of relevance that means the same in every query); a leg whose weight is 0 (or that
   was not searched) is dropped entirely. A calibrated keyword leg that was searched and found nothing stays, empty:
   its weight still counts, so the other leg's probabilities are not renormalized to look surer than they are. An
   empty vector leg is dropped (there was no vector to search).
2. :func:`fuse` (``fusion``; see :mod:`hybridmem.ranking.fusion`): weighted sum, RRF (Cormack et al. 2009) or a
   ranx method, over the *earlier order*: the legs interleaved rank by rank (rank 1 of the heavier leg, rank 1 of
   the other, rank 2 ..., the vector leg first on equal weights).
3. :func:`decay` (``decay``): ``fused * 0.5 ** (age_days / half_life_days)``; evergreen chunks keep 1.
4. **Sort** by decayed score, ties in the earlier order.
5. :func:`diversify` (``mmr``; Carbonell & Goldstein 1998) over the decayed scores min-max normalized to [0, 1].
6. :func:`cut`: walk that order, drop scores below ``min_score``, keep ``max_results``; when nothing passes and
   ``rescue_keyword`` is on, return the keyword leg's hits in its order instead (the reference's rescue; off by
   default, where nothing passing means nothing is returned).
7. :func:`snippets`: added while their total stays within ``max_injected_chars`` (0: no cap), each hit reserving
   ``min(len(text), snippet_chars)``; one that would overrun is shortened to the chars left when at least
   :data:`MIN_TRUNCATED_SNIPPET` remain, else it and the rest are cut.

A :class:`RankMemo` keeps what these stages derive from the candidates alone (each leg cut and normalized per pool,
the earlier order, MMR's token bitsets, snippets); a caller ranking one query under many configs creates one and
passes it to every call.

Example:
    >>> from hybridmem.config import RankConfig
    >>> from hybridmem.records import Candidates, ChunkInfo, LegHit
    >>> chunk = ChunkInfo(1, "MEMORY.md", "memory", 3, 3, "car repair notes", 0.0, True, frozenset({"car"}))
    >>> cands = Candidates("car", ("car",), keyword=(LegHit(1, -2.0, 1),), vector=(LegHit(1, 0.4, 1),),
    ...                    chunks={1: chunk}, pool=24)
    >>> r = rank(cands, RankConfig(), now=0.0)
    >>> [(h.citation, round(h.final_score, 2)) for h in r.hits]
    [('MEMORY.md#L3', 0.7)]
    >>> memo = RankMemo(cands)  # one query ranked under several configs
    >>> [round(rank(cands, RankConfig(fusion=f), now=0.0, memo=memo).hits[0].fused_score, 4) for f in ("weighted", "rrf")]
    [0.1377, 0.0164]
"""

from __future__ import annotations

import time
from typing import Callable, Iterator, Mapping, NamedTuple, Sequence

import numpy as np

from hybridmem.config import RankConfig
from hybridmem.errors import HybridMemError
from hybridmem.records import Candidates, ChunkInfo, Hit, Ranking, hit_of

from hybridmem.ranking.adaptive import adapt
from hybridmem.ranking.joint import JOINT
from hybridmem.ranking.decay import decay_factor
from hybridmem.ranking.fusion import LEG_TERMS, ScoredLeg, get_fusion
from hybridmem.ranking.memo import Leg, RankMemo
from hybridmem.ranking.mmr import TokenBits, chunk_similarity, mmr_select
from hybridmem.ranking.normalize import Normalizer, get_normalizer, minmax
from hybridmem.ranking.snippet import citation, truncate_snippet

__all__ = ["MIN_TRUNCATED_SNIPPET", "RankMemo", "decision_features", "rank"]

CALIBRATED = "calibrated"  # the normalization name that reads raw scores through the fitted calibrations

# A snippet that would overrun max_injected_chars is shortened to the budget left when at least this many chars
# remain; below that, it and every later hit are cut ("char_budget").
MIN_TRUNCATED_SNIPPET = 50


def rank(
    candidates: Candidates,
    config: RankConfig,
    now: float | None = None,
    *,
    memo: RankMemo | None = None,
    explain: bool = True,
    full_mmr: bool = False,
    centred_snippets: bool = True,
) -> Ranking:
    """Rank one query's candidates under ``config``.

    Args:
        candidates: both retrieval legs (rank order) and the chunks they name.
        config: every ranking setting; ``config.pool`` entries of each leg are used.
        now: reference time for decay, epoch seconds (None: the wall clock). Evaluations pass the dataset's time.
        memo: a :class:`RankMemo` of these very ``candidates``, to share their config-independent work with other
            calls (a sweep); None works alone. The result is the same either way.
        explain: True (default) fills ``Ranking.candidates`` with every pooled candidate. False puts only the
            returned hits there, skipping one ``Hit`` per cut candidate: the hits are identical, and an evaluation
            sweep with large pools runs several times faster.
        full_mmr: MMR normally stops as soon as the cut is settled (``max_results`` hits above ``min_score``
            picked), so candidates it never reached carry ``mmr_position=None``. True orders every candidate
            (quadratic in the pool; for ``--explain`` tables).
        centred_snippets: True (default) centres each kept hit's snippet on the query's matches. False gives kept
            hits the cheap lead of their text instead: the same hits in the same order (the char budget reserves
            ``min(len(text), snippet_chars)`` per hit whichever snippet is made), for evaluations that never read
            snippets.

    Returns:
        A :class:`Ranking`: ``hits`` are the results in order (``position`` 1, 2, ...); ``candidates`` are every
        pooled candidate with all stage scores, the kept ones first, then the cut ones by decayed score. Cut
        candidates have an empty ``snippet``: nothing of them is injected (their ``text`` is there to show).

    Raises:
        ConfigError: ``config.fusion`` (or a normalization) names nothing known; the message lists valid names.
        HybridMemError: a leg names a chunk id missing from ``candidates.chunks``, or ``memo`` was made for other
            candidates.

    Weights: a leg that was not searched (``vector_searched=False``, e.g. no embedding provider) counts as weight 0,
    so the weighted sum renormalizes onto the other leg instead of capping every score at its weight.
    """
    fusion = None if config.fusion == JOINT else get_fusion(config.fusion)
    if memo is None:
        memo = RankMemo(candidates)
    elif memo.candidates is not candidates:
        raise HybridMemError("rank() was given a RankMemo of other candidates: create one RankMemo per Candidates")
    normalizers = (memo.calibrated("vector") if config.vector_norm == CALIBRATED
                   else get_normalizer("vector", config.vector_norm),
                   memo.calibrated("keyword") if config.bm25_norm == CALIBRATED
                   else get_normalizer("keyword", config.bm25_norm))
    chunks = candidates.chunks

    legs = normalize(candidates, config, memo, *normalizers)
    searched = {leg.scored.name for leg in legs}
    if config.adaptive:  # part of fusion: each leg's weight for this query (ranking/adaptive.py)
        legs, config = adapt(legs, candidates, config)
    if not legs:
        return Ranking(hits=(), candidates=(), rescued=False)
    blind = "vector" in searched and all(leg.scored.name != "vector" for leg in legs)  # dropped by the adaptive step
    order, no_decay = memo.earlier_order(legs, config.pool)
    fused = memo.joint(legs, config) if fusion is None else fuse(fusion, legs, order, config.rrf_k)
    factor, decayed = decay(fused, order, chunks, config, time.time() if now is None else now, no_decay)
    answer = memo.answer(legs, config.pool, blind) if config.answer_threshold > 0.0 else None
    # The gate's probability scales every hit alike (the order stays): final = P(relevant | an answer) * P(answer).
    final: Mapping[int, float] = decayed if answer is None else _Scaled(decayed, answer)
    # stable: ties keep the earlier order; a positive factor leaves the order of the decayed scores as it is
    ordered = sorted(order, key=(decayed if answer is None or answer > 0.0 else final).__getitem__, reverse=True)
    ordered, repeated = distinct_spans(ordered, memo.shared_spans())
    abstained = answer is not None and answer < config.answer_threshold
    # an abstained query returns nothing: its MMR order is only worth working out to show it (explain)
    mmr = (Diversified(ordered, {}, {}) if abstained and not explain
           else diversify(ordered, final, chunks, config, memo.token_bits, full_mmr))
    kept, rescued = ([], False) if abstained else cut(mmr.walk, ordered, final, legs, config, memo.shared_spans())
    kept, made, over_budget = snippets(kept, chunks, config, memo, centred_snippets)
    rescued = rescued and bool(kept)

    n_kept = len(kept)
    kept_set = set(kept)
    display = kept + [cid for cid in ordered if cid not in kept_set] + repeated if explain else kept
    make = _HitMaker(legs, config, fused, factor, decayed, final, mmr, over_budget, abstained, repeated)
    out: list[Hit] = []
    for pos, cid in enumerate(display, 1):
        if pos <= n_kept:
            out.append(make(chunks[cid], pos, made[cid], rescued))
        else:  # cut: nothing of it is injected
            out.append(make(chunks[cid], None, "", False))
    hits = tuple(out[:n_kept])
    return Ranking(hits=hits, candidates=tuple(out) if explain else hits, rescued=rescued,
                   answer_probability=answer, abstained=abstained, routed_across=memo.routed_across(),
                   language_bar=memo.answer_bar(legs, config.pool, blind) if answer is not None else None)


def check_config(config: RankConfig) -> None:
    """ConfigError, listing the valid names, when ``config`` names a fusion or normalization :func:`rank` does not
    know: what a settings file says is checked when an index opens, not at its first search."""
    if config.fusion != JOINT:
        get_fusion(config.fusion)
    for leg, name in (("keyword", config.bm25_norm), ("vector", config.vector_norm)):
        if name != CALIBRATED:
            get_normalizer(leg, name)


def decision_features(candidates: Candidates, config: RankConfig) -> tuple[dict[int, list[float]], dict[str, float]]:
    """The two decisions' inputs exactly as :func:`rank` reads them under ``config``: each candidate's features for
    the joint model (:func:`~hybridmem.ranking.joint.joint_features`, scaled by nothing) and the query's features for
    the answer gate (:func:`~hybridmem.ranking.gate.query_features`). Empty when no leg takes part. What
    :mod:`hybridmem.eval.decisions` fits the two models on.
    """
    from hybridmem.ranking.joint import joint_features

    memo = RankMemo(candidates)
    legs = normalize(candidates, config, memo, get_normalizer("vector", "minmax"), get_normalizer("keyword", "minmax"))
    if config.adaptive:
        legs, config = adapt(legs, candidates, config)
    if not legs:
        return {}, {}
    return joint_features(memo.joint_legs(legs, config), candidates.passage_alignment), memo.query_features(legs)


# -- stages ---------------------------------------------------------------------------------------------------------
def normalize(candidates: Candidates, config: RankConfig, memo: RankMemo, norm_vector: Normalizer,
              norm_keyword: Normalizer) -> list[Leg]:
    """The legs that take part: weight > 0 (a leg not searched weighs 0) and not empty (a calibrated keyword leg takes
    part empty: it was searched and found nothing, p = 0 for every chunk), each cut to the pool and normalized, the
    heavier first (vector first on equal weights). An empty vector leg never takes part: a nearest-neighbour search
    finds something whenever a vector exists in scope, so an empty one means there was none to search (a search while
    another process is still embedding the notes), not that nothing is near, and the keyword leg decides alone."""
    vw = float(config.vector_weight) if candidates.vector_searched else 0.0
    tw = float(config.text_weight) if candidates.keyword_searched else 0.0
    specs = [("vector", vw, candidates.vector, norm_vector, config.vector_norm == CALIBRATED),
             ("keyword", tw, candidates.keyword, norm_keyword, config.bm25_norm == CALIBRATED)]
    if tw > vw:
        specs.reverse()
    legs = [memo.leg(name, weight, hits, config.pool, normalizer)
            for name, weight, hits, normalizer, calibrated in specs
            if weight > 0.0 and (hits or (calibrated and name == "keyword"))]
    return legs if any(leg.scored.ids for leg in legs) else []


def fuse(fusion: Callable[[Sequence[ScoredLeg], int], dict[int, float]], legs: Sequence[Leg], order: list[int],
         rrf_k: int) -> dict[int, float]:
    """Each chunk's fused score; one a ranx method leaves out scores 0."""
    fused = fusion([leg.scored for leg in legs], rrf_k)
    if len(fused) != len(order):
        fused = {cid: fused.get(cid, 0.0) for cid in order}
    return fused


def decay(fused: dict[int, float], order: list[int], chunks: Mapping[int, ChunkInfo], config: RankConfig,
          now: float, no_decay: dict[int, float]) -> tuple[dict[int, float], dict[int, float]]:
    """Each chunk's decay factor and score after decay (``no_decay`` and ``fused`` themselves when decay is off)."""
    if not config.decay:
        return no_decay, fused
    half_life = config.half_life_days
    factor: dict[int, float] = {}
    for cid in order:
        ch = chunks[cid]
        factor[cid] = decay_factor(ch.timestamp, now, half_life, ch.evergreen)
    return factor, {cid: fused[cid] * factor[cid] for cid in order}


class Diversified(NamedTuple):
    """MMR's order of the candidates it reached (``walk``; the score order without MMR) and their MMR scores."""

    walk: list[int]
    scores: dict[int, float]
    positions: dict[int, int]


def diversify(ordered: list[int], decayed: Mapping[int, float], chunks: Mapping[int, ChunkInfo],
              config: RankConfig, token_bits: TokenBits, full_mmr: bool) -> Diversified:
    """MMR over the sorted candidates when ``config.mmr`` is on and something passes ``min_score`` (or ``full_mmr``).

    Unless ``full_mmr``, MMR stops once ``max_results`` passing candidates were picked: the rest are cut anyway.
    ``token_bits`` is the :class:`RankMemo`'s, whose universe holds every candidate chunk's tokens by chunk id.
    """
    none = Diversified(ordered, {}, {})
    if not config.mmr:
        return none
    values = (decayed.values_of(ordered) if isinstance(decayed, _Scaled)
              else np.fromiter(map(decayed.__getitem__, ordered), dtype=np.float64, count=len(ordered)))
    # ``ordered`` is by score, best first: the passing candidates are a prefix
    below = np.flatnonzero(values < config.min_score)
    passing = range(int(below[0]) if len(below) else len(values))
    if not passing and not full_mmr:
        return none
    relevance = minmax(values)
    similarity = (token_bits.similarity_of(ordered) if config.mmr_similarity == "jaccard"
                  else chunk_similarity([chunks[cid] for cid in ordered], config.mmr_similarity, token_bits))
    if full_mmr:
        picked, scores = mmr_select(relevance, similarity, config.mmr_lambda)
    else:
        picked, scores = mmr_select(relevance, similarity, config.mmr_lambda,
                                    k=min(config.max_results, len(passing)), counts=passing)
    walk = [ordered[i] for i in picked]
    return Diversified(walk, dict(zip(walk, scores)), dict(zip(walk, range(1, len(walk) + 1))))


def distinct_spans(ordered: list[int], shared: Mapping[int, tuple[str, int, int]]) -> tuple[list[int], list[int]]:
    """``ordered`` without the chunks that cite the same lines as one before them, and those chunks (``shared``:
    :meth:`RankMemo.shared_spans`). A very long line (a one-line abstract, a pasted blob) is cut into pieces that all
    cite it: the best piece stands for it, and the others would cite it again and take results' places (MMR's walk
    and the cut then see distinct citations only)."""
    if not shared:
        return ordered, []
    seen: set[tuple[str, int, int]] = set()
    kept: list[int] = []
    repeated: list[int] = []
    for cid in ordered:
        span = shared.get(cid)
        if span is None:
            kept.append(cid)
        elif span in seen:
            repeated.append(cid)
        else:
            seen.add(span)
            kept.append(cid)
    return (kept, repeated) if repeated else (ordered, repeated)


def cut(walk: list[int], ordered: list[int], decayed: Mapping[int, float], legs: Sequence[Leg],
        config: RankConfig, shared: Mapping[int, tuple[str, int, int]]) -> tuple[list[int], bool]:
    """The kept chunk ids and whether they are the keyword rescue.

    Walk the order: below ``min_score`` is cut, the first ``max_results`` others are kept. Without MMR the order is
    by score, so the walk stops at the first score below ``min_score``. The rescue (the keyword leg's order when
    nothing passed) keeps one chunk per citation too.
    """
    min_score = config.min_score
    max_results = config.max_results
    kept: list[int] = []
    for cid in walk:
        if decayed[cid] < min_score:
            if walk is ordered:
                break
        elif len(kept) < max_results:
            kept.append(cid)
        else:
            break
    if not kept and config.rescue_keyword:
        keyword = [leg.scored.ids for leg in legs if leg.scored.name == "keyword"]
        if keyword:
            return distinct_spans(list(keyword[0]), shared)[0][:max_results], True
    return kept, False


def snippets(kept: list[int], chunks: Mapping[int, ChunkInfo], config: RankConfig, memo: RankMemo,
             centred: bool) -> tuple[list[int], dict[int, str], set[int]]:
    """The kept ids within the char budget, their snippets, and the ids cut by the budget.

    Each hit reserves ``min(len(text), snippet_chars)`` of the budget: its snippet is never longer, and which hits
    survive then does not depend on where a snippet is centred (so ``centred=False`` keeps the same hits).
    """
    made: dict[int, str] = {}
    cap = config.max_injected_chars
    snippet_chars = config.snippet_chars
    total = 0
    for i, cid in enumerate(kept):
        ch = chunks[cid]
        snip = memo.snippet(ch, snippet_chars, centred)
        reserve = min(len(ch.text), snippet_chars)
        if cap and total + reserve > cap:
            left = cap - total
            end = i
            if left >= MIN_TRUNCATED_SNIPPET:  # shorten this one to what is left; the budget is then spent
                made[cid] = truncate_snippet(snip, left)
                end = i + 1
            return kept[:end], made, set(kept[end:])
        made[cid] = snip
        total += reserve
    return kept, made, set()


class _Scaled(Mapping[int, float]):
    """``{cid: decayed[cid] * factor}``, each value computed when read (most candidates' final score never is)."""

    __slots__ = ("_scores", "_factor")

    def __init__(self, scores: dict[int, float], factor: float) -> None:
        self._scores, self._factor = scores, factor

    def __getitem__(self, cid: int) -> float:
        return self._scores[cid] * self._factor

    def values_of(self, ids: Sequence[int]) -> np.ndarray:
        """``[self[cid] for cid in ids]`` as an array, the same products, in one pass."""
        return np.fromiter(map(self._scores.__getitem__, ids), dtype=np.float64, count=len(ids)) * self._factor

    def __iter__(self) -> Iterator[int]:
        return iter(self._scores)

    def __len__(self) -> int:
        return len(self._scores)


class _HitMaker:
    """Builds each candidate's :class:`Hit` from the stages' outputs."""

    def __init__(self, legs: Sequence[Leg], config: RankConfig, fused: dict[int, float], factor: dict[int, float],
                 decayed: dict[int, float], final: Mapping[int, float], mmr: Diversified, over_budget: set[int],
                 abstained: bool = False, repeated: Sequence[int] = ()) -> None:
        by_name = {leg.scored.name: leg for leg in legs}
        terms = LEG_TERMS.get(config.fusion)
        parts = None if terms is None else dict(zip(by_name, terms([leg.scored for leg in legs], config.rrf_k)))
        # per leg: its position of a chunk id, its columns and its fused term (None: the fusion has no terms)
        self.vector = _leg_columns(by_name.get("vector"), None if parts is None else parts.get("vector"))
        self.keyword = _leg_columns(by_name.get("keyword"), None if parts is None else parts.get("keyword"))
        self.has_terms = parts is not None
        self.fused, self.factor, self.decayed, self.final = fused, factor, decayed, final
        self.mmr = mmr if config.mmr else None
        self.min_score = config.min_score
        self.over_budget = over_budget
        self.abstained = abstained
        self.repeated = set(repeated)

    def __call__(self, ch: ChunkInfo, position: int | None, snippet: str, rescued: bool) -> Hit:
        cid = ch.id
        final = self.final[cid]
        if position is not None:
            cut_reason = None
        elif self.abstained:
            cut_reason = "no_answer"
        elif cid in self.over_budget:
            cut_reason = "char_budget"
        elif cid in self.repeated:
            cut_reason = "same_lines"
        else:
            cut_reason = "min_score" if final < self.min_score else "max_results"
        absent = 0.0 if self.has_terms else None  # a leg that did not find the chunk: no columns, a 0 term
        index, raws, scores, ranks, part = self.vector
        i = index.get(cid)
        v = ((None, None, None, absent) if i is None
             else (raws[i], scores[i], ranks[i], None if part is None else part(i)))
        index, raws, scores, ranks, part = self.keyword
        i = index.get(cid)
        t = ((None, None, None, absent) if i is None
             else (raws[i], scores[i], ranks[i], None if part is None else part(i)))
        mmr = self.mmr
        # Positional, in Hit's field order (records.hit_of: 1.9 against 5.3 us a Hit through the frozen dataclass's
        # __init__), and rank() builds one Hit per returned (or, explained, pooled) candidate. Tests pin every field.
        return hit_of((
            cid, ch.path, ch.source, ch.start_line, ch.end_line, ch.text,
            citation(ch.path, ch.start_line, ch.end_line), snippet,
            v[0], v[1], v[2],
            t[0], t[1], t[2],
            self.fused[cid], self.factor[cid], self.decayed[cid],
            None if mmr is None else mmr.scores.get(cid), None if mmr is None else mmr.positions.get(cid),
            final, position, position is not None, cut_reason, rescued,
            v[3], t[3],
        ))


def _leg_columns(leg: Leg | None, part: Callable[[int], float] | None
                 ) -> tuple[Mapping[int, int], Sequence[float], Sequence[float], Sequence[int], Callable | None]:
    """What :class:`_HitMaker` reads of one leg: chunk id -> position, raw scores, normalized scores, ranks, and
    the fused term of a position (None: the fusion has no terms); a leg that does not take part finds nothing."""
    if leg is None:
        return {}, (), (), (), part
    return leg.index, leg.raws, leg.scored.scores, leg.scored.ranks, part
