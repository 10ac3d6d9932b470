"""``rank()``: the one ranking function. Candidates in, every stage's score out; no I/O.

Stages, in the reference system's order:

1. **Pool**: each leg is cut to its first ``config.pool`` entries; a leg whose weight is 0 (or that was not
   searched) is dropped entirely.
2. **Normalize** each leg (``bm25_norm``, ``vector_norm``; see :mod:`hybridmem.ranking.normalize`).
3. **Fuse** (``fusion``; see :mod:`hybridmem.ranking.fusion`): weighted sum, RRF (Cormack et al. 2009) or a ranx method.
4. **Decay** (``decay``): ``fused * 0.5 ** (age_days / half_life_days)``; evergreen chunks keep 1.
5. **Sort** by decayed score, ties in the *earlier order*: the legs interleaved rank by rank (rank 1 of the
   heavier leg, rank 1 of the other, rank 2 ..., the vector leg first on equal weights).
6. **MMR** (``mmr``; Carbonell & Goldstein 1998) over the decayed scores min-max normalized to [0, 1].
7. **Cut**: walk that order, drop scores below ``min_score``, keep ``max_results``; when nothing passes and
   ``rescue_keyword`` is on, return the keyword leg's hits in its order instead (the reference's rescue). Then
   snippets are added while their total stays within ``max_injected_chars`` (0: no cap), each hit reserving
   ``min(len(text), snippet_chars)``; one that would overrun is shortened to the chars left when at least
   :data:`MIN_TRUNCATED_SNIPPET` remain, else it and the rest are cut.

Example:
    >>> from hybridmem.config import RankConfig
    >>> from hybridmem.records import Candidates, ChunkInfo, LegHit
    >>> chunk = ChunkInfo(1, "MEMORY.md", "memory", 3, 3, "car repair notes", 0.0, True, frozenset({"car"}))
    >>> cands = Candidates("car", ("car",), keyword=(LegHit(1, -2.0, 1),), vector=(LegHit(1, 0.4, 1),),
    ...                    chunks={1: chunk}, pool=24)
    >>> r = rank(cands, RankConfig(), now=0.0)
    >>> [(h.citation, h.final_score) for h in r.hits]
    [('MEMORY.md#L3', 1.0)]
"""

from __future__ import annotations

import time
from itertools import chain, zip_longest

from hybridmem.config import RankConfig
from hybridmem.errors import HybridMemError
from hybridmem.records import Candidates, Hit, LegHit, Ranking

from hybridmem.ranking.decay import decay_factor
from hybridmem.ranking.fusion import ScoredLeg, get_fusion
from hybridmem.ranking.mmr import TokenBits, chunk_similarity, mmr_select
from hybridmem.ranking.normalize import Normalizer, get_normalizer, minmax
from hybridmem.ranking.snippet import citation, lead_snippet, make_snippet, truncate_snippet

__all__ = ["MIN_TRUNCATED_SNIPPET", "rank"]

# A snippet that would overrun max_injected_chars is shortened to the budget left when at least this many chars
# remain; below that, it and every later hit are cut ("char_budget").
MIN_TRUNCATED_SNIPPET = 50

# Hit is a frozen dataclass whose generated __init__ sets its 24 fields one object.__setattr__ at a time (~9 us a Hit
# on a slow core); filling a fresh instance's __dict__ builds the identical object in ~1 us. rank() builds one Hit per
# pooled candidate, so this is most of its cost (tests check the result equals Hit(**fields)).
_new = object.__new__
_NO_COLUMNS: tuple[list[float], tuple[float, ...], tuple[int, ...]] = ([], (), ())
# one leg cut to a pool and normalized: ids, raw scores, normalized scores, ranks, chunk id -> index
_PreparedLeg = tuple[tuple[int, ...], list[float], tuple[float, ...], tuple[int, ...], dict[int, int]]


def _leg_columns(hits: tuple[LegHit, ...], pool: int) -> tuple[list[int], list[float], list[int]]:
    """ids, raw scores and ranks of the leg's first ``pool`` entries; a chunk listed twice keeps its first entry."""
    hits = hits[:pool]
    ids = [h.chunk_id for h in hits]
    if len(set(ids)) != len(ids):
        first: dict[int, LegHit] = {}
        for h in hits:
            first.setdefault(h.chunk_id, h)
        hits = tuple(first.values())
        ids = [h.chunk_id for h in hits]
    return ids, [h.raw for h in hits], [h.rank for h in hits]


class _QueryMemo:
    """What ``rank()`` derives from one :class:`Candidates` whatever else the config says, kept for its next call.

    An evaluation sweep ranks one query's candidates under many configs in turn (``Evaluator.rank_runs_many``), and
    most of each call used to redo the same work: each leg's columns and normalized scores for a pool, the interleaved
    earlier order, every chunk's tokens for MMR's Jaccard, the kept hits' snippets. Candidates are immutable (frozen,
    and never changed in place once built), so these are functions of the candidates and a few config values, and
    remembering them changes no result. Only the last candidates' memo is kept (see :func:`_memo`).
    """

    __slots__ = ("candidates", "legs", "orders", "snippets", "token_bits")

    def __init__(self, candidates: Candidates) -> None:
        self.candidates = candidates  # held, so its id() cannot be reused while this memo is current
        self.legs: dict[tuple[str, int, Normalizer], _PreparedLeg] = {}
        self.orders: dict[tuple, tuple[list[int], dict[int, float]]] = {}  # leg names + pool -> (order, all 1.0)
        self.snippets: dict[tuple[int, int, bool], str] = {}  # (chunk id, snippet_chars, centred) -> snippet
        self.token_bits = TokenBits()

    def leg(self, name: str, hits: tuple[LegHit, ...], pool: int, normalizer: Normalizer) -> _PreparedLeg:
        """Leg ``name`` (whose entries are ``hits``) cut to ``pool`` and normalized."""
        key = (name, pool, normalizer)
        got = self.legs.get(key)
        if got is None:
            ids, raws, ranks = _leg_columns(hits, pool)
            got = self.legs[key] = (tuple(ids), raws, tuple(normalizer(raws, ranks)), tuple(ranks),
                                    dict(zip(ids, range(len(ids)))))
        return got


_last_memo: _QueryMemo | None = None


def _memo(candidates: Candidates) -> _QueryMemo:
    """The memo of ``candidates``: the last one when ``rank()`` was last called with this very object, else new.

    Callers rank one query's candidates under every config before the next query's (a search ranks once), so one
    memo is enough, and memory stays that of one query. Threads ranking other candidates at once only replace it.
    """
    global _last_memo
    memo = _last_memo
    if memo is None or memo.candidates is not candidates:
        memo = _last_memo = _QueryMemo(candidates)
    return memo


def rank(
    candidates: Candidates,
    config: RankConfig,
    now: float | None = None,
    *,
    explain: bool = True,
    full_mmr: bool = False,
    centred_snippets: bool = True,
) -> Ranking:
    """Rank one query's candidates under ``config``.

    Args:
        candidates: both retrieval legs (rank order) and the chunks they name.
        config: every ranking setting; ``config.pool`` entries of each leg are used.
        now: reference time for decay, epoch seconds (None: the wall clock). Evaluations pass the dataset's time.
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
        HybridMemError: a leg names a chunk id missing from ``candidates.chunks``.

    Weights: a leg that was not searched (``vector_searched=False``, e.g. no embedding provider) counts as weight 0,
    so the weighted sum renormalizes onto the other leg instead of capping every score at its weight.
    """
    fuse = get_fusion(config.fusion)
    norm_vector = get_normalizer("vector", config.vector_norm)
    norm_keyword = get_normalizer("keyword", config.bm25_norm)
    if now is None:
        now = time.time()
    pool = config.pool
    chunks = candidates.chunks
    memo = _memo(candidates)

    vw = float(config.vector_weight) if candidates.vector_searched else 0.0
    tw = float(config.text_weight) if candidates.keyword_searched else 0.0
    specs = [("vector", vw, candidates.vector, norm_vector), ("keyword", tw, candidates.keyword, norm_keyword)]
    if tw > vw:
        specs.reverse()
    legs: list[ScoredLeg] = []
    columns: dict[str, tuple[list[float], tuple[float, ...], tuple[int, ...]]] = {}  # raw, score, rank per leg
    where: dict[str, dict[int, int]] = {"vector": {}, "keyword": {}}  # chunk id -> index in the leg
    for name, weight, hits, normalizer in specs:
        if weight <= 0.0 or not hits:
            continue
        ids, raws, scores, ranks, index = memo.leg(name, hits, pool, normalizer)
        legs.append(ScoredLeg(name, weight, ids, scores, ranks))
        columns[name] = (raws, scores, ranks)
        where[name] = index
    if not legs:
        return Ranking(hits=(), candidates=(), rescued=False)

    # The earlier order: legs interleaved rank by rank, heavier leg first.
    order_key = (*(leg.name for leg in legs), pool)
    remembered = memo.orders.get(order_key)
    if remembered is None:
        interleaved = dict.fromkeys(chain.from_iterable(zip_longest(*(leg.ids for leg in legs))))
        interleaved.pop(None, None)  # zip_longest's filler
        if not interleaved.keys() <= chunks.keys():
            missing = [cid for cid in interleaved if cid not in chunks]
            raise HybridMemError(f"candidates name chunk ids with no ChunkInfo: {missing[:10]}; rebuild the Candidates")
        remembered = memo.orders[order_key] = (list(interleaved), dict.fromkeys(interleaved, 1.0))
    order, no_decay = remembered

    fused = fuse(legs, config.rrf_k)
    if len(fused) != len(order):  # a ranx method may leave a chunk out: it scores 0
        fused = {cid: fused.get(cid, 0.0) for cid in order}
    if config.decay:
        half_life = config.half_life_days
        factor: dict[int, float] = {}
        for cid in order:
            ch = chunks[cid]
            factor[cid] = decay_factor(ch.timestamp, now, half_life, ch.evergreen)
        decayed = {cid: fused[cid] * factor[cid] for cid in order}
    else:
        factor = no_decay
        decayed = fused
    ordered = sorted(order, key=decayed.__getitem__, reverse=True)  # stable: ties keep the earlier order

    min_score = config.min_score
    max_results = config.max_results
    mmr_position: dict[int, int] = {}
    mmr_score: dict[int, float] = {}
    walk = ordered
    if config.mmr:
        passing = [i for i, cid in enumerate(ordered) if decayed[cid] >= min_score]
        if passing or full_mmr:
            relevance = minmax([decayed[cid] for cid in ordered])
            similarity = chunk_similarity([chunks[cid] for cid in ordered], config.mmr_similarity, memo.token_bits)
            if full_mmr:
                picked, scores = mmr_select(relevance, similarity, config.mmr_lambda)
            else:
                picked, scores = mmr_select(
                    relevance, similarity, config.mmr_lambda,
                    k=min(max_results, len(passing)), counts=frozenset(passing),
                )
            # Unless full_mmr, MMR stopped once max_results passing candidates were picked: the rest are cut anyway.
            walk = [ordered[i] for i in picked]
            for pos, (cid, score) in enumerate(zip(walk, scores), 1):
                mmr_position[cid] = pos
                mmr_score[cid] = score

    # Walk the order: below min_score is cut, the first max_results others are kept. Without MMR the order is by
    # score, so the walk stops at the first score below min_score; cut reasons are read off the scores later.
    kept: list[int] = []
    for cid in walk:
        if decayed[cid] < min_score:
            if walk is ordered:
                break
        elif len(kept) < max_results:
            kept.append(cid)
        else:
            break
    rescued = False
    if not kept and config.rescue_keyword and where["keyword"]:
        keyword_ids = [leg.ids for leg in legs if leg.name == "keyword"][0]
        kept = list(keyword_ids[:max_results])
        rescued = True

    snippets: dict[int, str] = {}
    cap = config.max_injected_chars
    snippet_chars = config.snippet_chars
    query_tokens = candidates.query_tokens
    # Each hit reserves min(len(text), snippet_chars) of the budget: its snippet is never longer, and which hits
    # survive then does not depend on where a snippet is centred (so centred_snippets=False keeps the same hits).
    total = 0
    budget_end: int | None = None
    made = memo.snippets
    for i, cid in enumerate(kept):
        ch = chunks[cid]
        snip = made.get((cid, snippet_chars, centred_snippets))
        if snip is None:
            snip = made[cid, snippet_chars, centred_snippets] = (
                make_snippet(ch.text, query_tokens, snippet_chars, ch.tokens) if centred_snippets
                else lead_snippet(ch.text, snippet_chars))
        reserve = min(len(ch.text), snippet_chars)
        if cap and total + reserve > cap:
            left = cap - total
            if left >= MIN_TRUNCATED_SNIPPET:  # shorten this one to what is left; the budget is then spent
                snippets[cid] = truncate_snippet(snip, left)
                budget_end = i + 1
            else:
                budget_end = i
            break
        snippets[cid] = snip
        total += reserve
    over_budget: set[int] = set()
    if budget_end is not None:
        over_budget.update(kept[budget_end:])
        kept = kept[:budget_end]
    rescued = rescued and bool(kept)

    v_index = where["vector"].get
    t_index = where["keyword"].get
    v_raws, v_scores, v_ranks = columns.get("vector", _NO_COLUMNS)
    t_raws, t_scores, t_ranks = columns.get("keyword", _NO_COLUMNS)
    use_mmr = config.mmr
    n_kept = len(kept)
    kept_set = set(kept)
    display = kept + [cid for cid in ordered if cid not in kept_set] if explain else kept
    out: list[Hit] = []
    for pos, cid in enumerate(display, 1):
        ch = chunks[cid]
        is_kept = pos <= n_kept
        vi = v_index(cid)
        ti = t_index(cid)
        score = decayed[cid]
        if is_kept:
            cut_reason = None
        elif cid in over_budget:
            cut_reason = "char_budget"
        else:
            cut_reason = "min_score" if score < min_score else "max_results"
        hit = _new(Hit)  # see _new
        hit.__dict__.update({
            "chunk_id": cid,
            "path": ch.path,
            "source": ch.source,
            "start_line": ch.start_line,
            "end_line": ch.end_line,
            "text": ch.text,
            "citation": citation(ch.path, ch.start_line, ch.end_line),
            "snippet": snippets[cid] if is_kept else "",
            "vector_raw": None if vi is None else v_raws[vi],
            "vector_score": None if vi is None else v_scores[vi],
            "vector_rank": None if vi is None else v_ranks[vi],
            "text_raw": None if ti is None else t_raws[ti],
            "text_score": None if ti is None else t_scores[ti],
            "text_rank": None if ti is None else t_ranks[ti],
            "fused_score": fused[cid],
            "decay_factor": factor[cid],
            "decayed_score": score,
            "mmr_score": mmr_score.get(cid) if use_mmr else None,
            "mmr_position": mmr_position.get(cid) if use_mmr else None,
            "final_score": score,
            "position": pos if is_kept else None,
            "kept": is_kept,
            "cut_reason": cut_reason,
            "rescued": rescued and is_kept,
        })
        out.append(hit)
    hits = tuple(out[:n_kept])
    return Ranking(hits=hits, candidates=tuple(out) if explain else hits, rescued=rescued)
