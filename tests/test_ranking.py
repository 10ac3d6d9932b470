"""Tests for hybridmem.ranking: exact hand-computed scores, ranx agreement, and properties of rank()."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from hybridmem.config import REFERENCE_RANKING, RankConfig
from hybridmem.errors import ConfigError, HybridMemError
from hybridmem.records import Candidates, ChunkInfo, Hit, LegHit
from hybridmem.ranking import (
    RankMemo,
    ScoredLeg,
    citation,
    decay_factor,
    get_fusion,
    get_normalizer,
    jaccard,
    make_snippet,
    match_spans,
    minmax,
    mmr_select,
    rank,
    rrf_fusion,
)
from hybridmem.ranking.mmr import TokenBits, chunk_similarity
from hybridmem.tokenization import token_spans, tokenize

DAY = 86400.0
NOW = 1_000 * DAY


def chunk(cid: int, text: str | None = None, *, tokens=None, age_days: float = 0.0, evergreen: bool = False,
          vector=None, start: int = 1, end: int = 2) -> ChunkInfo:
    text = f"chunk {cid}" if text is None else text
    toks = frozenset(tokenize(text)) if tokens is None else frozenset(tokens)
    return ChunkInfo(cid, f"memory/{cid}.md", "memory", start, end, text, NOW - age_days * DAY, evergreen, toks, vector)


def make(vector=(), keyword=(), chunks=(), query="", **kw) -> Candidates:
    """Candidates from ``[(chunk_id, raw), ...]`` per leg (rank = position); chunks default to ``chunk(id)``."""
    vec = tuple(LegHit(c, float(r), i) for i, (c, r) in enumerate(vector, 1))
    key = tuple(LegHit(c, float(r), i) for i, (c, r) in enumerate(keyword, 1))
    by_id = {c.id: c for c in chunks}
    for h in vec + key:
        by_id.setdefault(h.chunk_id, chunk(h.chunk_id))
    return Candidates(query, tuple(tokenize(query)), key, vec, by_id, max(len(vec), len(key), 1), **kw)


def cfg(**changes) -> RankConfig:
    # weights pinned to 0.7/0.3 (the reference's) and min-max normalization (the default before calibration, #16) so
    # the hand-computed values below never follow the default
    base = {"min_score": 0.0, "max_results": 10, "candidate_multiplier": 20, "vector_weight": 0.7, "text_weight": 0.3,
            "bm25_norm": "minmax", "vector_norm": "minmax", "rescue_keyword": True, "fusion": "weighted",
            "answer_threshold": 0.0}
    base.update(changes)
    return RankConfig(**base)


def scores(ranking, field: str = "fused_score") -> dict[int, float]:
    return {h.chunk_id: getattr(h, field) for h in ranking.candidates}


# One fixture for the fusion tests: vector leg 1, 2, 3 and keyword leg 2, 4, 1 (FTS5 bm25 is negative).
VEC = [(1, 0.9), (2, 0.5), (3, 0.1)]
KEY = [(2, -6.0), (4, -4.0), (1, -2.0)]


# --- normalization and fusion: exact values ------------------------------------------------------------------------


def test_weighted_minmax_exact():
    r = rank(make(VEC, KEY), cfg())
    # vector min-max: 1 -> 1.0, 2 -> 0.5, 3 -> 0.0; keyword min-max of -bm25 (6, 4, 2): 2 -> 1.0, 4 -> 0.5, 1 -> 0.0
    assert scores(r, "vector_score") == {1: 1.0, 2: 0.5, 3: 0.0, 4: None}
    assert scores(r, "text_score") == {1: 0.0, 2: 1.0, 3: None, 4: 0.5}
    expected = {1: 0.7 * 1.0 + 0.3 * 0.0, 2: 0.7 * 0.5 + 0.3 * 1.0, 3: 0.0, 4: 0.3 * 0.5}
    assert scores(r) == pytest.approx(expected, rel=1e-12, abs=1e-15)
    assert [h.chunk_id for h in r.hits] == [1, 2, 4, 3]
    assert [h.position for h in r.hits] == [1, 2, 3, 4]


def test_weighted_renormalizes_weights():
    r = rank(make(VEC, KEY), cfg(vector_weight=0.6, text_weight=0.2))  # -> 0.75 / 0.25
    assert scores(r) == pytest.approx({1: 0.75, 2: 0.75 * 0.5 + 0.25, 3: 0.0, 4: 0.25 * 0.5}, rel=1e-12)


def test_reference_preset_exact():
    c = make([(1, 0.42), (2, 0.30)], [(2, -3.0), (3, -1.0)])
    r = rank(c, REFERENCE_RANKING)
    # raw cosine; keyword r / (1 + r): 3 / 4 and 1 / 2
    assert scores(r) == pytest.approx({1: 0.7 * 0.42, 2: 0.7 * 0.30 + 0.3 * 0.75, 3: 0.3 * 0.5}, rel=1e-12)
    assert [h.chunk_id for h in r.hits] == [2]  # only 0.435 passes min_score 0.35
    assert {h.chunk_id: h.cut_reason for h in r.candidates if not h.kept} == {1: "min_score", 3: "min_score"}


def test_normalizers_exact():
    assert get_normalizer("keyword", "reference")([-3.0, -1.0, 0.5], [1, 2, 3]) == [0.75, 0.5, 0.0]
    assert get_normalizer("keyword", "minmax")([-6.0, -4.0, -2.0], [1, 2, 3]) == [1.0, 0.5, 0.0]
    assert get_normalizer("keyword", "rank")([-6.0, -4.0], [1, 2]) == [1.0, 0.5]
    assert get_normalizer("vector", "raw")([0.3, 0.2], [1, 2]) == [0.3, 0.2]
    assert get_normalizer("vector", "minmax")([0.3, 0.3], [1, 2]) == [1.0, 1.0]
    assert minmax([5.0]) == [1.0] and minmax([]) == []


def test_rrf_exact():
    r = rank(make(VEC, KEY), cfg(fusion="rrf"))
    expected = {
        1: 0.7 / (60 + 1) + 0.3 / (60 + 3),
        2: 0.7 / (60 + 2) + 0.3 / (60 + 1),
        3: 0.7 / (60 + 3),
        4: 0.3 / (60 + 2),
    }
    assert scores(r) == pytest.approx(expected, rel=1e-12)
    r10 = rank(make(VEC, KEY), cfg(fusion="rrf", rrf_k=10, vector_weight=1.0, text_weight=1.0))
    assert scores(r10)[1] == pytest.approx(1 / 11 + 1 / 13, rel=1e-12)


def test_rrf_fusion_building_block():
    legs = [ScoredLeg("a", 1.0, (1, 2), (0.0, 0.0), (1, 2)), ScoredLeg("b", 1.0, (2, 3), (0.0, 0.0), (1, 3))]
    assert rrf_fusion(legs, 60) == pytest.approx({1: 1 / 61, 2: 1 / 62 + 1 / 61, 3: 1 / 63}, rel=1e-12)


# --- agreement with ranx (numba compiles on first use: keep these few) ------------------------------------------


@pytest.fixture(scope="module")
def ranx_runs():
    ranx = pytest.importorskip("ranx")
    vector = ranx.Run({"q": {str(c): s for c, s in VEC}})
    keyword = ranx.Run({"q": {str(c): -s for c, s in KEY}})  # ranx wants higher = better
    return ranx, vector, keyword


def _as_ids(run) -> dict[int, float]:
    return {int(d): s for d, s in run.to_dict()["q"].items()}


def test_rrf_matches_ranx(ranx_runs):
    ranx, vector, keyword = ranx_runs
    theirs = _as_ids(ranx.fuse(runs=[vector, keyword], norm=None, method="rrf"))
    ours = scores(rank(make(VEC, KEY), cfg(fusion="rrf", vector_weight=1.0, text_weight=1.0)))
    assert ours == pytest.approx(theirs, rel=1e-9)


def test_weighted_minmax_matches_ranx_wsum(ranx_runs):
    ranx, vector, keyword = ranx_runs
    theirs = _as_ids(ranx.fuse(runs=[vector, keyword], norm="min-max", method="wsum", params={"weights": [0.7, 0.3]}))
    ours = scores(rank(make(VEC, KEY), cfg()))
    assert ours == pytest.approx(theirs, rel=1e-9, abs=1e-12)
    # the same method reached through rank()'s ranx path, on rank()'s own min-max scores
    via_ranx = scores(rank(make(VEC, KEY), cfg(fusion="wsum")))
    assert via_ranx == pytest.approx(ours, rel=1e-9, abs=1e-12)


def test_ranx_combmnz_through_rank():
    pytest.importorskip("ranx")
    r = rank(make(VEC, KEY), cfg(fusion="combmnz"))
    # CombMNZ: sum of min-max scores times the number of legs that found the chunk
    assert scores(r) == pytest.approx({1: (1.0 + 0.0) * 2, 2: (0.5 + 1.0) * 2, 3: 0.0, 4: 0.5}, rel=1e-9, abs=1e-12)
    assert all(h.vector_part is None and h.text_part is None for h in r.candidates)  # not a sum of leg terms


@pytest.mark.parametrize("method", ["combsum", "combmnz", "max", "wsum", "mixed", "isr", "bordafuse"])
def test_ranx_fusion_ids_of_different_lengths(method, recwarn):
    """ranx's score-combining methods read ids of different lengths as different documents (a phantom '7\\Uffffffff'
    beside '7'); rank() hands them ids of one width, so every chunk comes back once, and numba's warnings stay out."""
    pytest.importorskip("ranx")
    r = rank(make([(7, 0.9), (12, 0.5), (123, 0.1)], [(7, -6.0), (1000, -2.0)]), cfg(fusion=method))
    assert sorted(h.chunk_id for h in r.candidates) == [7, 12, 123, 1000]
    assert r.hits[0].chunk_id == 7  # first in both legs
    assert not [w for w in recwarn if "numba" in type(w.message).__module__]


# --- legs, pool, weights ----------------------------------------------------------------------------------------


def test_weight_zero_excludes_leg():
    r = rank(make(VEC, KEY), cfg(text_weight=0.0))
    assert {h.chunk_id for h in r.candidates} == {1, 2, 3}  # 4 was found only by the keyword leg
    assert all(h.text_rank is None and h.text_score is None for h in r.candidates)
    assert scores(r) == {1: 1.0, 2: 0.5, 3: 0.0}
    r = rank(make(VEC, KEY), cfg(fusion="rrf", vector_weight=0.0))
    assert {h.chunk_id for h in r.candidates} == {1, 2, 4}
    assert scores(r) == pytest.approx({2: 0.3 / 61, 4: 0.3 / 62, 1: 0.3 / 63}, rel=1e-12)


def test_unsearched_leg_counts_as_weight_zero():
    c = make((), KEY, vector_searched=False)
    r = rank(c, cfg())
    assert scores(r) == {2: 1.0, 4: 0.5, 1: 0.0}  # keyword weight renormalized to 1, not capped at 0.3


def test_pool_truncation():
    c = make([(1, 0.9), (2, 0.5), (3, 0.1)], [(4, -5.0), (5, -4.0), (6, -1.0)])
    r = rank(c, RankConfig(fusion="weighted", answer_threshold=0.0, max_results=1, candidate_multiplier=2,
                           min_score=0.0, bm25_norm="minmax", vector_norm="minmax"))  # pool 2
    assert {h.chunk_id for h in r.candidates} == {1, 2, 4, 5}
    # min-max over the pool prefix only: 0.5 is the minimum of (0.9, 0.5), so chunk 2 scores 0, not 0.5
    assert scores(r, "vector_score")[2] == 0.0
    assert scores(r, "text_score")[5] == 0.0


def test_empty_candidates():
    r = rank(make(), cfg())
    assert r.hits == () and r.candidates == () and not r.rescued


# --- decay ------------------------------------------------------------------------------------------------------


def test_decay_half_life_and_evergreen():
    c = make([(1, 0.9), (2, 0.8), (3, 0.7)], chunks=[
        chunk(1, age_days=30.0), chunk(2, age_days=30.0, evergreen=True), chunk(3, age_days=60.0)])
    r = rank(c, cfg(decay=True, vector_norm="raw"), now=NOW)
    factors = scores(r, "decay_factor")
    assert factors == {1: 0.5, 2: 1.0, 3: 0.25}
    assert scores(r, "decayed_score") == {1: 0.9 * 0.5, 2: 0.8, 3: 0.7 * 0.25}
    assert [h.chunk_id for h in r.hits] == [2, 1, 3]
    assert decay_factor(0.0, 30 * DAY, 30.0) == 0.5
    assert decay_factor(10 * DAY, 0.0, 30.0) == 1.0  # from the future: no decay
    off = rank(c, cfg(decay=False, vector_norm="raw"), now=NOW)
    assert set(scores(off, "decay_factor").values()) == {1.0}


@given(st.floats(0, 5000), st.floats(0, 5000), st.floats(0.1, 1000))
def test_decay_monotonic(a, b, half_life):
    lo, hi = sorted((a, b))
    f_lo = decay_factor(0.0, lo * DAY, half_life)
    f_hi = decay_factor(0.0, hi * DAY, half_life)
    assert 0.0 <= f_hi <= f_lo <= 1.0
    assert f_lo == pytest.approx(math.exp(-math.log(2) / half_life * lo), rel=1e-9, abs=1e-300)


# --- MMR --------------------------------------------------------------------------------------------------------


def _naive_mmr(rel, sim, lam):
    remaining = sorted(range(len(rel)), key=lambda i: -rel[i])
    order, out_scores = [], []
    while remaining:
        best, best_i = -math.inf, None
        for i in remaining:
            m = max((sim[i][s] for s in order), default=0.0)
            score = lam * rel[i] - (1 - lam) * m
            if score > best:
                best, best_i = score, i
        remaining.remove(best_i)
        order.append(best_i)
        out_scores.append(best)
    return order, out_scores


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 70), st.sampled_from([0.0, 0.3, 0.5, 0.7, 0.9, 1.0]), st.integers(0, 2**32 - 1), st.booleans())
def test_lazy_mmr_equals_naive_greedy(n, lam, seed, coarse):
    # up to 70 candidates: past the first prefix of 16 that a step scores, so the prefix grows
    rng = np.random.default_rng(seed)
    # coarse values make exact ties in relevance, similarity and MMR score common
    draw = (lambda size: rng.choice([0.0, 0.25, 0.5, 1.0], size=size)) if coarse else rng.random
    rel = draw(n).tolist()
    upper = np.triu(draw((n, n)), 1)
    sim = (upper + upper.T).tolist()
    order, got = mmr_select(rel, lambda i, j: sim[i][j], lam)
    want_order, want = _naive_mmr(rel, sim, lam)
    assert order == want_order
    assert got == want


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 80), st.sampled_from([0.0, 0.5, 0.7, 0.9]), st.integers(0, 2**32 - 1), st.integers(1, 12))
def test_mmr_over_token_bits_equals_naive_greedy_on_jaccard(n, lam, seed, k):
    # the bit matrix's columns (any row order) and the early stop at k give the naive greedy's first k picks
    rng = np.random.default_rng(seed)
    vocab = [f"t{i}" for i in range(60)]
    sets = [frozenset(rng.choice(vocab, size=int(rng.integers(0, 12)))) for _ in range(n)]
    sets[rng.integers(n)] = sets[0]  # one set at two positions
    rel = rng.choice([0.0, 0.2, 0.5, 0.9, 1.0], size=n).tolist()
    sim = [[jaccard(a, b) for b in sets] for a in sets]
    order, got = mmr_select(rel, TokenBits().similarity(sets), lam, k=k)
    want_order, want = _naive_mmr(rel, sim, lam)
    assert order == want_order[:k]
    assert got == want[:k]


candidate_lists = st.lists(st.floats(0.0, 1.0), min_size=1, max_size=25)


@settings(max_examples=60, deadline=None)
@given(candidate_lists, st.integers(1, 8))
def test_mmr_lambda_one_is_relevance_order(raw, max_results):
    raw = sorted(raw, reverse=True)
    texts = [chunk(i, "same words here" if i % 2 else "other text entirely") for i in range(len(raw))]
    c = make([(i, s) for i, s in enumerate(raw)], chunks=texts)
    base = cfg(max_results=max_results, vector_norm="raw")
    plain = rank(c, base)
    mmr = rank(c, base.replace(mmr=True, mmr_lambda=1.0), full_mmr=True)
    assert [h.chunk_id for h in mmr.hits] == [h.chunk_id for h in plain.hits]
    by_pos = sorted((h for h in mmr.candidates), key=lambda h: h.mmr_position)
    assert [h.chunk_id for h in by_pos] == [h.chunk_id for h in plain.candidates]


def test_mmr_separates_near_duplicates():
    same = {"timing", "belt", "replac"}
    c = make([(1, 0.9), (2, 0.89), (3, 0.7)],
             chunks=[chunk(1, tokens=same), chunk(2, tokens=same), chunk(3, tokens={"car", "repair"})])
    plain = rank(c, cfg(vector_norm="raw"))
    assert [h.chunk_id for h in plain.hits] == [1, 2, 3]
    r = rank(c, cfg(vector_norm="raw", mmr=True, mmr_lambda=0.5))
    assert [h.chunk_id for h in r.hits] == [1, 3, 2]
    assert [h.mmr_position for h in r.hits] == [1, 2, 3]
    # relevance min-max: 1 -> 1, 2 -> 0.95, 3 -> 0; chunk 2 is identical to chunk 1 (Jaccard 1)
    assert r.hits[0].mmr_score == pytest.approx(0.5)
    assert r.hits[1].mmr_score == pytest.approx(0.0)
    assert r.hits[2].mmr_score == pytest.approx(0.5 * (0.19 / 0.2) - 0.5, abs=1e-9)
    assert r.hits[1].final_score == 0.7  # the MMR score orders; the final score stays the decayed score


def test_mmr_cosine_and_fallback():
    v = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    c = make([(1, 0.9), (2, 0.89), (3, 0.7), (4, 0.6)], chunks=[
        chunk(1, tokens={"a"}, vector=v), chunk(2, tokens={"b"}, vector=v * 2),
        chunk(3, tokens={"c"}, vector=np.array([0.0, 1.0, 0.0])), chunk(4, tokens={"a"}, vector=None)])
    r = rank(c, cfg(vector_norm="raw", mmr=True, mmr_lambda=0.5, mmr_similarity="cosine"), full_mmr=True)
    # 2 is a scaled copy of 1 (cosine 1); 4 has no vector and shares all its tokens with 1 (Jaccard fallback 1)
    assert [h.chunk_id for h in r.hits] == [1, 3, 2, 4]
    assert jaccard(frozenset(), frozenset()) == 0.0


def test_partial_mmr_gives_same_hits_as_full():
    texts = ["alpha beta", "alpha beta gamma", "delta", "alpha", "beta gamma", "epsilon", "alpha delta"] * 3
    c = make([(i, 1.0 - i / 40) for i in range(len(texts))], chunks=[chunk(i, t) for i, t in enumerate(texts)])
    for lam in (0.0, 0.3, 0.7):
        config = cfg(mmr=True, mmr_lambda=lam, max_results=4, min_score=0.3)
        full, part = rank(c, config, full_mmr=True), rank(c, config)
        assert [h.chunk_id for h in part.hits] == [h.chunk_id for h in full.hits]
        assert all(h.mmr_position is not None for h in full.candidates)


def _set_jaccard(a, b) -> float:
    """The plain definition: |a & b| / |a | b|, 0 when either set is empty."""
    return len(a & b) / len(a | b) if a and b else 0.0


# Tokens drawn from up to 400 names, so bitsets span several machine words and pools share tokens often.
token_sets = st.frozensets(st.integers(0, 400).map(str), max_size=60) | st.frozensets(st.sampled_from("abcdef"))


@settings(max_examples=300, deadline=None)
@given(st.lists(token_sets, min_size=1, max_size=12), st.booleans())
def test_token_bits_jaccard_equals_set_jaccard(sets, plain_sets):
    sets = [set(s) for s in sets] if plain_sets else sets  # plain sets are encoded, not remembered
    bits = TokenBits()
    sim = bits.similarity(sets)
    for i, a in enumerate(sets):
        for j, b in enumerate(sets):
            want = _set_jaccard(a, b)
            assert sim(i, j) == want  # exactly: same counts, same division
            assert bits.jaccard(a, b) == want
            assert jaccard(frozenset(a), frozenset(b)) == want


def test_token_bits_jaccard_on_many_random_sets():
    # chunk-sized sets over a wide vocabulary: bitsets thousands of bits wide, overlaps from none to all
    rng = np.random.default_rng(7)
    vocab = np.array([f"t{i}" for i in range(3000)])
    sets = [frozenset(vocab[rng.choice(3000 if i % 3 else 120, size=int(rng.integers(0, 250)))]) for i in range(150)]
    sets += [sets[0] | sets[1], sets[2] & sets[3], frozenset()]
    bits = TokenBits()
    sim = bits.similarity(sets)
    for i, a in enumerate(sets):
        for j, b in enumerate(sets):
            assert sim(i, j) == _set_jaccard(a, b)


@settings(max_examples=100, deadline=None)
@given(st.lists(token_sets, min_size=1, max_size=10), st.lists(token_sets, min_size=1, max_size=10))
def test_token_bits_shared_across_pools(first, second):
    # one TokenBits serves every ranking of a query's candidates: later pools add tokens, earlier codes stay valid
    bits = TokenBits()
    for sets in (first, second, first + second):
        chunks = [chunk(i, tokens=s) for i, s in enumerate(sets)]
        shared, fresh = chunk_similarity(chunks, bits=bits), chunk_similarity(chunks)
        for i, a in enumerate(sets):
            for j, b in enumerate(sets):
                assert shared(i, j) == fresh(i, j) == _set_jaccard(a, b)


def test_rank_memo_is_invisible():
    # a RankMemo shares one candidates object's config-independent work across rank() calls (a sweep's many
    # configs); results must equal ranking without one, in any order of configs and options
    words = ["alpha beta", "alpha beta gamma", "delta", "alpha", "beta gamma", "epsilon", "alpha delta"] * 4
    texts = [f"intro words {i} " * 3 + w + " closing words" * 3 for i, w in enumerate(words)]  # longer than snippets
    chunks = [chunk(i, t, age_days=i) for i, t in enumerate(texts)]
    c = make([(i, 1.0 - i / 40) for i in range(0, len(texts), 2)], [(i, -1.0 - i / 9) for i in range(1, len(texts), 3)],
             chunks=chunks, query="alpha delta")
    configs = [cfg(mmr=True, mmr_lambda=lam, max_results=m, candidate_multiplier=2)
               for lam in (0.3, 0.7) for m in (3, 6)]
    configs += [cfg(fusion="rrf", max_results=5), cfg(decay=True, half_life_days=3.0), cfg(vector_weight=0.0),
                cfg(bm25_norm="zscore", max_injected_chars=200, snippet_chars=40), cfg(snippet_chars=30)]
    # the joint order: configs that differ only past fusion share its probabilities, other weights do not
    configs += [RankConfig(**changes) for changes in ({}, {"mmr": True, "mmr_lambda": 0.5}, {"decay": True},
                                                      {"vector_weight": 0.6, "text_weight": 0.4})]
    calls = [(config, options) for config in configs + configs[::-1]
             for options in ({}, {"explain": False, "centred_snippets": False}, {"full_mmr": True})]
    memo = RankMemo(c)
    remembered = [rank(c, config, NOW, memo=memo, **options) for config, options in calls]
    assert remembered == [rank(c, config, NOW, **options) for config, options in calls]
    assert memo._legs and memo._orders and memo._snippets  # noqa: SLF001 - the memo was used, not bypassed
    # the joint order's probabilities: one entry per weighting over the same features (0.5/0.5 and 0.6/0.4)
    assert any(isinstance(fused, dict) and len(fused) == 2 for _, fused in memo._joint.values())  # noqa: SLF001


@settings(max_examples=100, deadline=None)
@given(st.lists(token_sets, min_size=1, max_size=10), st.data())
def test_token_bits_by_key_equals_by_set(sets, data):
    # rank() names its candidates by chunk id (the universe's keys): the same Jaccard as naming the sets
    universe = {100 + i: s for i, s in enumerate(sets)}
    bits = TokenBits(lambda: universe)
    keys = data.draw(st.lists(st.sampled_from(sorted(universe)), min_size=1, max_size=15))
    by_key = bits.similarity_of(keys)
    by_set = TokenBits().similarity([universe[k] for k in keys])
    for i, a in enumerate(keys):
        for j, b in enumerate(keys):
            assert by_key(i, j) == by_set(i, j) == _set_jaccard(universe[a], universe[b])
    with pytest.raises(KeyError):
        bits.similarity_of([99])


def test_rank_memo_belongs_to_one_candidates_object():
    c = make(VEC, KEY)
    with pytest.raises(HybridMemError, match="RankMemo of other candidates"):
        rank(dataclasses.replace(c), cfg(), memo=RankMemo(c))  # equal, but another object


# --- cut, rescue, budget ----------------------------------------------------------------------------------------


def test_rescue_returns_keyword_hits():
    c = make([(1, 0.2), (2, 0.1)], [(3, -0.3), (2, -0.2), (4, -0.1)])
    config = REFERENCE_RANKING.replace(max_results=2)  # nothing reaches min score 0.35
    r = rank(c, config)
    assert r.rescued
    assert [h.chunk_id for h in r.hits] == [3, 2]
    assert all(h.rescued and h.kept for h in r.hits)
    assert [h.position for h in r.hits] == [1, 2]
    assert not any(h.rescued for h in r.candidates if not h.kept)
    off = rank(c, config.replace(rescue_keyword=False))
    assert off.hits == () and not off.rescued
    assert {h.cut_reason for h in off.candidates} == {"min_score"}


def test_max_results_cut_and_candidate_order():
    r = rank(make(VEC, KEY), cfg(max_results=2, min_score=0.1))
    assert [h.chunk_id for h in r.hits] == [1, 2]
    assert [(h.chunk_id, h.kept, h.position, h.cut_reason) for h in r.candidates] == [
        (1, True, 1, None), (2, True, 2, None), (4, False, None, "max_results"), (3, False, None, "min_score")]


def test_injected_chars_cap():
    long = "word " * 300
    c = make([(i, 1.0 - i / 10) for i in range(4)], chunks=[chunk(i, long) for i in range(4)])
    r = rank(c, cfg(max_injected_chars=1000))
    assert [len(h.snippet) for h in r.hits] == [700, 300]  # the second is shortened to the 300 chars left
    assert r.hits[1].snippet.endswith("…")
    assert [h.cut_reason for h in r.candidates[2:]] == ["char_budget", "char_budget"]
    r = rank(c, cfg(max_injected_chars=720))  # 20 chars left: too few to be useful
    assert [len(h.snippet) for h in r.hits] == [700]
    assert rank(c, cfg(max_injected_chars=0)).hits[3].snippet  # 0 means no cap


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 5000), st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 400)), min_size=1, max_size=8),
       st.integers(16, 900))
def test_injected_chars_never_exceed_cap(cap, shapes, snippet_chars):
    texts = [("abc " * (at // 4) + "the timing belt " + "abc " * 500)[:n] for n, at in shapes]
    c = make([(i, 1.0 - i / 100) for i in range(len(texts))], chunks=[chunk(i, t) for i, t in enumerate(texts)],
             query="timing belt")
    config = cfg(max_injected_chars=cap, snippet_chars=snippet_chars)
    r = rank(c, config)
    assert sum(len(h.snippet) for h in r.hits) <= cap
    assert all(len(h.snippet) <= snippet_chars for h in r.hits)
    # which hits survive the budget does not depend on how snippets are made
    lean = rank(c, config, centred_snippets=False, explain=False)
    assert [(h.chunk_id, h.position) for h in lean.hits] == [(h.chunk_id, h.position) for h in r.hits]
    assert sum(len(h.snippet) for h in lean.hits) <= cap


# --- properties of rank() ---------------------------------------------------------------------------------------

sorted_scores = st.lists(st.floats(0.0, 1.0), min_size=1, max_size=30).map(lambda xs: sorted(xs, reverse=True))


@settings(max_examples=80, deadline=None)
@given(sorted_scores, st.sampled_from(["vector", "keyword"]), st.sampled_from(["weighted", "rrf"]),
       st.sampled_from(["minmax", "rank"]))
def test_single_leg_order_is_kept(raw, leg, fusion, norm):
    ids = [(i * 7919) % 1009 for i in range(len(raw))]  # ids unrelated to rank
    if leg == "vector":
        c = make([(i, s) for i, s in zip(ids, raw)], [(5000 + i, -s) for i, s in enumerate(raw)])
        config = cfg(fusion=fusion, text_weight=0.0, vector_norm=norm, min_score=-1.0, max_results=30)
    else:
        c = make([(5000 + i, s) for i, s in enumerate(raw)], [(i, -s) for i, s in zip(ids, raw)])
        config = cfg(fusion=fusion, vector_weight=0.0, bm25_norm=norm, min_score=-1.0, max_results=30)
    assert [h.chunk_id for h in rank(c, config).hits] == ids


legs = st.lists(st.integers(0, 40), min_size=0, max_size=15, unique=True)


@settings(max_examples=80, deadline=None)
@given(legs, legs, st.floats(0.0, 3.0), st.floats(0.0, 3.0), st.integers(0, 100))
def test_rrf_independent_of_leg_order_and_ids(a, b, wa, wb, k):
    assume(wa + wb > 0)
    config = cfg(fusion="rrf", rrf_k=k, vector_weight=wa, text_weight=wb)
    swapped = config.replace(vector_weight=wb, text_weight=wa)
    r1 = rank(make([(c, 0.5) for c in a], [(c, -1.0) for c in b]), config)
    r2 = rank(make([(c, 0.5) for c in b], [(c, -1.0) for c in a]), swapped)
    assert scores(r1) == scores(r2)
    assert [h.fused_score for h in r1.candidates] == [h.fused_score for h in r2.candidates]
    relabel = {c: 1000 - 3 * c for c in set(a) | set(b)}
    r3 = rank(make([(relabel[c], 0.5) for c in a], [(relabel[c], -1.0) for c in b]), config)
    assert {relabel[c]: s for c, s in scores(r1).items()} == scores(r3)
    ranked = [(h.chunk_id, h.fused_score) for h in r1.candidates]
    assert [(relabel[c], s) for c, s in ranked] == [(h.chunk_id, h.fused_score) for h in r3.candidates]
    three = [ScoredLeg("x", 1.0, tuple(a), (0.0,) * len(a), tuple(range(1, len(a) + 1))),
             ScoredLeg("y", wa, tuple(b), (0.0,) * len(b), tuple(range(1, len(b) + 1))),
             ScoredLeg("z", wb, tuple(b[::-1]), (0.0,) * len(b), tuple(range(1, len(b) + 1)))]
    assert rrf_fusion(three, k) == pytest.approx(rrf_fusion(three[::-1], k), rel=1e-12)


def test_explain_false_returns_same_hits():
    c = make(VEC, KEY)
    full, lean = rank(c, cfg(max_results=2)), rank(c, cfg(max_results=2), explain=False)
    assert full.hits == lean.hits and lean.candidates == lean.hits


def test_leg_parts_add_up_to_the_fused_score():
    r = rank(make(VEC, KEY, query="chunk"), cfg(decay=True))
    # weighted 0.7/0.3 over the min-max scores of test_weighted_minmax_exact; 0.0 from a leg that missed the chunk
    assert {h.chunk_id: (h.vector_part, h.text_part) for h in r.candidates} == {
        1: (0.7 * 1.0, 0.3 * 0.0), 2: (0.7 * 0.5, 0.3 * 1.0), 3: (0.7 * 0.0, 0.0), 4: (0.0, 0.3 * 0.5)}
    assert all(h.vector_part + h.text_part == h.fused_score for h in r.candidates)  # exactly
    assert r.hits[0].citation == "memory/1.md#L1-L2"
    r = rank(make(VEC, KEY), cfg(fusion="rrf", vector_weight=1.0, text_weight=2.0))
    assert {h.chunk_id: (h.vector_part, h.text_part) for h in r.candidates} == {
        1: (1.0 / 61, 2.0 / 63), 2: (1.0 / 62, 2.0 / 61), 3: (1.0 / 63, 0.0), 4: (0.0, 2.0 / 62)}
    assert all(h.vector_part + h.text_part == h.fused_score for h in r.candidates)
    r = rank(make(VEC, KEY), cfg(text_weight=0.0))  # a leg that takes no part adds 0.0
    assert {h.chunk_id: (h.vector_part, h.text_part) for h in r.candidates} == {
        1: (1.0, 0.0), 2: (0.5, 0.0), 3: (0.0, 0.0)}


# --- names ------------------------------------------------------------------------------------------------------


def test_unknown_names_raise_config_error():
    with pytest.raises(ConfigError, match="weighted, rrf.*combmnz"):
        rank(make(VEC, KEY), cfg(fusion="nope"))
    with pytest.raises(ConfigError, match="trained"):
        get_fusion("probfuse")
    with pytest.raises(ConfigError, match="reference, minmax, zscore, rank"):
        get_normalizer("keyword", "bogus")
    with pytest.raises(ConfigError, match="raw, minmax, zscore, rank"):
        get_normalizer("vector", "bogus")
    with pytest.raises(ConfigError, match="bm25_norm"):
        RankConfig(bm25_norm="bogus")


def test_import_does_not_load_ranx():
    code = "import sys, hybridmem.ranking; assert 'ranx' not in sys.modules and 'numba' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


# --- snippets and citations -------------------------------------------------------------------------------------


def test_snippet_centres_on_late_match():
    filler = "Notes about the weekly planning meeting and other topics. " * 20  # ~1160 chars
    text = filler + "The mechanic replaced the timing belt on the car. " + filler
    c = make([(1, 0.9)], chunks=[chunk(1, text)], query="timing belt")
    hit = rank(c, cfg()).hits[0]
    assert "timing belt" in hit.snippet
    assert len(hit.snippet) <= 700
    assert hit.snippet.startswith("…") and hit.snippet.endswith("…")
    assert not hit.snippet[1].isspace()


def test_snippet_without_match_is_the_lead():
    text = "First words of the note. " + "more text " * 200
    assert make_snippet(text, ("zebra",), 100).startswith("First words")
    assert make_snippet("short", ("zebra",), 100) == "short"
    assert len(make_snippet(text, (), 100)) <= 100


def test_citation_format():
    assert citation("memory/a.md", 5, 20) == "memory/a.md#L5-L20"
    assert citation("MEMORY.md", 5, 5) == "MEMORY.md#L5"


words = st.sampled_from([
    "retry", "retries", "Retrying", "payment_processor", "paymentProcessor", "skies", "sky", "car's", "cars",
    "HTTPServer", "timing", "times", "the", "a", "x2", "2024", "happily", "possibility", "generously", "Über",
])


@settings(max_examples=100, deadline=None)
@given(st.lists(words, min_size=1, max_size=30), st.lists(words, min_size=1, max_size=4))
def test_fast_match_spans_equal_full_tokenization(text_words, query_words):
    text = " ".join(text_words)
    assume(text.isascii())
    query = tuple(tokenize(" ".join(query_words)))
    wanted = set(query)
    expected = sorted((s, e, t) for t, s, e in token_spans(text) if t in wanted)
    assert match_spans(text, query) == expected


unicode_words = st.sampled_from([
    "Đã", "thay", "nhớt", "xe", "máy", "thanh", "toán", "東京の宿", "ホテル", "ปิดบัญชีธนาคาร", "Übergröße", "naïve",
    "payment_processor", "Retrying", "α-synuclein", "ﷺ", "x²", "café", "sky", "2024",
])


@settings(max_examples=150, deadline=None)
@given(st.lists(unicode_words, min_size=1, max_size=30), st.lists(unicode_words, min_size=1, max_size=4),
       st.sampled_from([" ", ", ", "\n", "—", ""]))
def test_match_spans_on_any_text_equal_full_tokenization(text_words, query_words, sep):
    # non-ASCII text is matched run by run, each run's tokens cached: the same spans as tokenizing the whole text
    text = sep.join(text_words)
    query = tuple(tokenize(" ".join(query_words)))
    wanted = set(query)
    expected = [(s, e, t) for t, s, e in token_spans(text) if t in wanted]
    got = match_spans(text, query)
    assert (sorted(got) if text.isascii() else got) == (sorted(expected) if text.isascii() else expected)


def test_zscore_normalization_exact():
    from hybridmem.ranking.normalize import bm25_zscore, zscore

    # values 1, 2, 3: mean 2, population std sqrt(2/3); shifted so the weakest is 0
    std = (2 / 3) ** 0.5
    assert zscore([3.0, 1.0, 2.0]) == pytest.approx([2 / std, 0.0, 1 / std])
    assert zscore([0.4, 0.4]) == [1.0, 1.0] and zscore([]) == []
    assert bm25_zscore([-6.0, -4.0, -2.0]) == pytest.approx([4 / (8 / 3) ** 0.5, 2 / (8 / 3) ** 0.5, 0.0])
    r = rank(make(VEC, KEY), cfg(bm25_norm="zscore", vector_norm="zscore"))
    vs = zscore([0.9, 0.5, 0.1])
    assert scores(r, "vector_score") == pytest.approx({1: vs[0], 2: vs[1], 3: vs[2], 4: None})


def test_token_set_splits_on_first_use_and_behaves_as_the_frozenset():
    """Chunk loading keeps the stored token column unsplit; MMR's Jaccard, equality and hashing see the same set the
    eager ``frozenset(tokens.split())`` gave."""
    from hybridmem.records import TokenSet
    from hybridmem.ranking.mmr import TokenBits, jaccard

    lazy = TokenSet("payment retry payment backoff")
    assert lazy._set is None  # noqa: SLF001 - nothing split yet
    eager = frozenset({"payment", "retry", "backoff"})
    assert lazy == eager and hash(lazy) == hash(eager) and len(lazy) == 3 and "retry" in lazy
    other = TokenSet("retry backoff queue")
    assert TokenBits().jaccard(lazy, other) == jaccard(eager, frozenset({"retry", "backoff", "queue"})) == 0.5


def test_needs_vectors_only_for_cosine_mmr():
    assert RankConfig(mmr=True, mmr_similarity="cosine").needs_vectors
    assert not RankConfig(mmr=False, mmr_similarity="cosine").needs_vectors
    assert not RankConfig(mmr=True, mmr_similarity="jaccard").needs_vectors


def test_hit_of_is_the_frozen_hit_the_constructor_builds():
    from hybridmem.records import hit_of

    values = (3, "memory/a.md", "memory", 1, 4, "text", "memory/a.md#L1-L4", "snip", 0.8, 0.5, 1, -2.5, 0.4, 2,
              0.7, 1.0, 0.7, None, None, 0.6, 1, True, None, False, None, None)
    fast, slow = hit_of(values), Hit(*values)
    assert fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow)
    assert dataclasses.astuple(fast) == values
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.final_score = 1.0  # type: ignore[misc]


def test_hit_fields_in_the_order_rank_builds_them():
    # rank() builds each Hit positionally (a third faster than keywords): a field added or moved in Hit must be
    # added or moved in pipeline._HitMaker too
    assert [f.name for f in dataclasses.fields(Hit)] == [
        "chunk_id", "path", "source", "start_line", "end_line", "text", "citation", "snippet",
        "vector_raw", "vector_score", "vector_rank", "text_raw", "text_score", "text_rank",
        "fused_score", "decay_factor", "decayed_score", "mmr_score", "mmr_position",
        "final_score", "position", "kept", "cut_reason", "rescued", "vector_part", "text_part"]


def test_pieces_of_one_long_line_are_one_result():
    """A very long line (a pasted data URI, a one-line abstract) is cut into chunks that all cite it; the best piece
    is returned once, and the next results are other lines, not the same citation again."""
    def piece(cid: int, path: str) -> ChunkInfo:
        return ChunkInfo(cid, path, "memory", 5, 5, f"piece {cid}", NOW, False, frozenset(), None)

    chunks = [piece(1, "memory/long.md"), piece(2, "memory/long.md"), piece(3, "memory/long.md"),
              chunk(4), piece(5, "memory/other.md")]
    c = make(vector=[(1, 0.9), (2, 0.8), (3, 0.7), (4, 0.6), (5, 0.5)], chunks=chunks)
    want = ["memory/long.md#L5", "memory/4.md#L1-L2", "memory/other.md#L5"]
    for mmr in (False, True):  # MMR's walk stops at max_results picks: it must see distinct citations only
        r = rank(c, cfg(max_results=3, mmr=mmr), now=NOW, explain=True)
        assert sorted(h.citation for h in r.hits) == sorted(want), mmr
        assert {h.chunk_id: h.cut_reason for h in r.candidates if not h.kept} == {2: "same_lines", 3: "same_lines"}
    # the keyword rescue (nothing passed the min score) keeps one chunk per citation too
    c = make(keyword=[(1, -9.0), (2, -8.0), (3, -7.0), (4, -6.0)], chunks=chunks)
    r = rank(c, cfg(max_results=3, min_score=2.0, vector_weight=0.0, text_weight=1.0), now=NOW)
    assert r.rescued and [h.citation for h in r.hits] == ["memory/long.md#L5", "memory/4.md#L1-L2"]
