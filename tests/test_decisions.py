"""The two decisions (#22): the joint order (ranking/joint.py), the answer gate (ranking/gate.py), their fitting
(eval/decisions.py), and the XQuAD-R no-answer sets (eval/abstention.py)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridmem.config import DEFAULT_RANKING, PRESETS, RankConfig
from hybridmem.config.calibration import GATE_MODELS, JOINT_FEATURES, JOINT_MODEL, JOINT_MODELS, Calibration, joint_model
from hybridmem.errors import ConfigError
from hybridmem.eval.decisions import DecisionRows
from hybridmem.ranking import rank
from hybridmem.ranking.gate import GATE_FEATURES, answer_probability, logit, query_features
from hybridmem.ranking.pipeline import decision_features
from hybridmem.ranking.joint import NORM_DEPTH, RANK_K, JointLeg, feature_matrix, joint_features, joint_fusion
from hybridmem.records import Candidates, ChunkInfo, LegHit
from hybridmem.tokenization import bm25_idf


def _sig(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


def test_joint_features_by_hand() -> None:
    legs = [JointLeg("vector", 1.0, (1, 2, 3), (0.9, 0.7, 0.5), (0.3, 0.1, 0.05), (1, 2, 3)),
            JointLeg("keyword", 1.0, (3, 4), (-6.0, -2.0), (0.5, 0.2), (1, 2))]
    f = joint_features(legs)
    assert f[1] == [1.0, 0.0, 0.3, 0.0, RANK_K / (RANK_K + 1), 0.0, 0.0, 0.0]
    assert f[2] == [pytest.approx(0.5), 0.0, 0.1, 0.0, RANK_K / (RANK_K + 2), 0.0, 0.0, 0.0]
    # chunk 3: last of the vector pool (min-max 0), first of the keyword pool (min-max 1), found by both
    assert f[3] == [0.0, 1.0, 0.05, 0.5, RANK_K / (RANK_K + 3), RANK_K / (RANK_K + 1), 1.0, 0.0]
    assert f[4] == [0.0, 0.0, 0.0, 0.2, 0.0, RANK_K / (RANK_K + 2), 0.0, 0.0]
    # the read passages' alignment means, each less the lowest of them; a chunk not read (or not pooled) gets 0
    lifted = joint_features(legs, {3: 0.9, 1: 0.75, 2: 0.8, 99: 0.1})
    assert [lifted[c][7] for c in (1, 2, 3, 4)] == [0.0, pytest.approx(0.05), pytest.approx(0.15), 0.0]
    assert all(lifted[c][:7] == f[c][:7] for c in f)


def test_joint_fusion_is_the_logistic_of_the_weighted_features() -> None:
    model = Calibration(JOINT_FEATURES, (1.0, 2.0, 3.0, 4.0, 0.5, 0.25, 1.5, 10.0), -2.0)
    legs = [JointLeg("vector", 1.0, (1, 3), (0.9, 0.5), (0.3, 0.05), (1, 2)),
            JointLeg("keyword", 1.0, (3,), (-6.0,), (0.5,), (1,))]
    got = joint_fusion(legs, model)
    x3 = [0.0, 1.0, 0.05, 0.5, RANK_K / (RANK_K + 2), RANK_K / (RANK_K + 1), 1.0, 0.0]
    assert got[3] == pytest.approx(_sig(-2.0 + sum(c * x for c, x in zip(model.coef, x3))))
    x1 = [1.0, 0.0, 0.3, 0.0, RANK_K / (RANK_K + 1), 0.0, 0.0, 0.0]
    assert got[1] == pytest.approx(_sig(-2.0 + sum(c * x for c, x in zip(model.coef, x1))))
    # a leg's factor scales its terms; "both" counts only while both legs take part
    half = joint_fusion([legs[0]._replace(factor=0.5), legs[1]], model)
    assert half[1] == pytest.approx(_sig(-2.0 + 0.5 * sum(c * x for c, x in zip(model.coef, x1))))
    alone = joint_fusion([legs[1]], model)
    assert alone[3] == pytest.approx(_sig(-2.0 + 2.0 * 1.0 + 4.0 * 0.5 + 0.25 * RANK_K / (RANK_K + 1)))
    with pytest.raises(ConfigError, match="expected"):
        joint_fusion(legs, Calibration(("cosine",), (1.0,), 0.0))
    # the alignment lift is the vector leg's reading: scaled by its factor, gone with it
    feats = feature_matrix(legs, {1: 0.7, 3: 0.8})
    lifted = joint_fusion(legs, model, feats)
    assert lifted[3] == pytest.approx(_sig(-2.0 + sum(c * x for c, x in zip(model.coef, x3)) + 10.0 * 0.1))
    assert lifted[1] == pytest.approx(got[1])
    assert joint_fusion([legs[1]], model, feature_matrix([legs[1]], {3: 0.8}))[3] == pytest.approx(alone[3])
    # scored by another model: that model's probabilities, handed out down this model's order
    plain = model.__class__(JOINT_FEATURES, (*model.coef[:7], 0.0), -2.0)
    lift = feature_matrix(legs, {1: 0.95, 3: 0.4})  # lifts chunk 1 past chunk 3
    ordered = joint_fusion(legs, model, lift)
    assert list(ordered) == [1, 3] and ordered[1] > ordered[3]
    handed = joint_fusion(legs, model, lift, scored_by=plain)
    assert list(handed) == [1, 3] and handed[1] > handed[3]
    by_plain = joint_fusion(legs, plain, lift)
    assert by_plain[3] > by_plain[1] and handed[1] == pytest.approx(by_plain[3])  # chunk 3's probability, on top
    with pytest.raises(ConfigError, match="expected"):
        joint_fusion(legs, model, scored_by=Calibration(("cosine",), (1.0,), 0.0))


def test_joint_features_do_not_move_with_the_pool() -> None:
    """An evaluation to depth 100 draws a pool of 200 per leg; a live search 24: the min-max features of the top
    NORM_DEPTH are those the model was fitted on (pool 40) whatever the pool, and the tail reads 0."""
    rng = np.random.default_rng(3)
    cos = sorted(rng.uniform(0.7, 0.95, 200), reverse=True)
    bm = sorted(rng.uniform(-12.0, -0.5, 200))  # bm25(): lower is better
    def legs(n: int) -> list[JointLeg]:
        ids = tuple(range(n))
        return [JointLeg("vector", 1.0, ids, cos[:n], [0.1] * n, tuple(range(1, n + 1))),
                JointLeg("keyword", 1.0, tuple(1000 + i for i in ids), bm[:n], [0.1] * n, tuple(range(1, n + 1)))]
    short, long = joint_features(legs(NORM_DEPTH)), joint_features(legs(200))
    assert all(long[cid] == short[cid] for cid in short)
    assert all(long[cid][0] == 0.0 for cid in range(NORM_DEPTH, 200))
    assert all(long[1000 + i][1] == 0.0 for i in range(NORM_DEPTH, 200))


def test_each_embedding_model_orders_with_its_own_fit() -> None:
    assert set(JOINT_MODELS) >= {"multilingual-e5-small", "all-MiniLM-L6-v2"}
    assert joint_model("multilingual-e5-small") is JOINT_MODELS["multilingual-e5-small"]
    assert joint_model("text-embedding-3-small") is JOINT_MODEL  # a model never fitted: the pooled fit
    assert joint_model("multilingual-e5-small", aligned=True) is JOINT_MODELS["multilingual-e5-small|aligned"]
    assert joint_model("all-MiniLM-L6-v2", aligned=True) is JOINT_MODELS["all-MiniLM-L6-v2"]  # no lift of its own
    c = _cands([(1, 0.9), (2, 0.8)], [(2, -5.0), (1, -1.0)])
    e5 = rank(c, RankConfig(answer_threshold=0.0), now=0.0)
    minilm = rank(dataclasses.replace(c, vector_model="all-MiniLM-L6-v2"), RankConfig(answer_threshold=0.0), now=0.0)
    assert [h.final_score for h in e5.hits] != [h.final_score for h in minilm.hits]


def test_the_token_alignment_orders_the_passages_it_read() -> None:
    """e5's order weighs each read passage's alignment (``align_lift``): of two passages the legs rank alike, the one
    that says more of the question comes first; without an alignment, or with the vector leg weighed 0, the legs
    decide as before."""
    assert JOINT_MODELS["multilingual-e5-small|aligned"].coef[JOINT_FEATURES.index("align_lift")] > 0
    c = _cands([(1, 0.90), (2, 0.89), (3, 0.7)], [(1, -5.0), (2, -4.9), (3, -1.0)])
    config = RankConfig(answer_threshold=0.0)
    assert [h.chunk_id for h in rank(c, config, now=0.0).hits][:2] == [1, 2]
    read = dataclasses.replace(c, passage_alignment={1: 0.80, 2: 0.88, 3: 0.70})
    assert [h.chunk_id for h in rank(read, config, now=0.0).hits] == [2, 1, 3]
    keyword = config.replace(vector_weight=0.0)
    alone = [h.chunk_id for h in rank(c, keyword, now=0.0).hits]
    assert [h.chunk_id for h in rank(read, keyword, now=0.0).hits] == alone
    joint, _ = decision_features(read, config)
    assert [round(joint[i][-1], 6) for i in (1, 2, 3)] == [0.1, 0.18, 0.0]


def test_without_the_alignment_the_hits_keep_the_probabilities_of_the_order_fitted_without_it() -> None:
    """e5's order that weighs the alignment is the plain fit plus the lift; its hits take the plain fit's
    probabilities down its order. Candidates without an alignment (the model still loading in a fresh server,
    ``token_alignment = false``) are scored by the plain fit alone: the same probabilities either way."""
    plain, aligned = JOINT_MODELS["multilingual-e5-small"], JOINT_MODELS["multilingual-e5-small|aligned"]
    lift = JOINT_FEATURES.index("align_lift")
    assert plain.coef[lift] == 0.0 and aligned.coef[lift] > 0
    assert aligned.coef[:lift] == plain.coef[:lift] and aligned.intercept == plain.intercept
    c = _cands([(1, 0.93), (2, 0.92), (3, 0.8)], [(1, -9.0), (2, -8.8), (3, -1.0)])
    config = RankConfig(answer_threshold=0.0)
    bare = rank(c, config, now=0.0)
    joint, _ = decision_features(c, config)
    z = np.array(joint[1]) @ np.array(plain.coef) + plain.intercept
    assert bare.hits[0].chunk_id == 1 and bare.hits[0].final_score == pytest.approx(1 / (1 + np.exp(-z)))
    read = rank(dataclasses.replace(c, passage_alignment={1: 0.80, 2: 0.90, 3: 0.70}), config, now=0.0)
    assert [h.chunk_id for h in read.hits] == [2, 1, 3]  # the alignment moved chunk 2 up
    assert [h.final_score for h in read.hits] == pytest.approx([h.final_score for h in bare.hits])


def test_a_refit_order_replaces_every_order_of_its_model() -> None:
    """`calibrate --decisions --write` keeps the orders of models not refitted; a model refitted without a lift loses
    the aligned order it had (it would be read with a Platt map of another fit)."""
    from hybridmem.eval.calibrate import render
    from hybridmem.config import calibration as current

    plain = dataclasses.replace(JOINT_MODELS["multilingual-e5-small"], fitted_on="refit")
    namespace: dict[str, object] = {"Calibration": Calibration}
    exec(render(dict(current.VECTOR_CALIBRATIONS), current.KEYWORD_CALIBRATION,  # noqa: S102 - our own constants
                joints={"multilingual-e5-small": plain}), namespace)
    got = namespace["JOINT_MODELS"]
    assert isinstance(got, dict) and got["multilingual-e5-small"] == plain
    assert "multilingual-e5-small|aligned" not in got and got["all-MiniLM-L6-v2"] == JOINT_MODELS["all-MiniLM-L6-v2"]


def test_fitted_models_keep_the_order_monotone() -> None:
    for model in (JOINT_MODEL, *JOINT_MODELS.values()):
        assert model.features == JOINT_FEATURES and all(c >= 0 for c in model.coef)
    for gate in GATE_MODELS.values():
        for half in gate if isinstance(gate, tuple) else (gate,):
            assert set(half.features) <= set(GATE_FEATURES)


def _cands(vec: list[tuple[int, float]], kw: list[tuple[int, float]], query: str = "car repair") -> Candidates:
    ids = {c for c, _ in vec} | {c for c, _ in kw}
    chunks = {c: ChunkInfo(c, f"memory/n{c}.md", "memory", 1, 2, f"note {c} car repair", 0.0, True,
                           frozenset({"car", "repair", "note"})) for c in ids}
    return Candidates(query, ("car", "repair"), keyword=tuple(LegHit(c, s, i) for i, (c, s) in enumerate(kw, 1)),
                      vector=tuple(LegHit(c, s, i) for i, (c, s) in enumerate(vec, 1)), chunks=chunks, pool=40,
                      vector_model="multilingual-e5-small")


@settings(max_examples=60, deadline=None)
@given(cos=st.lists(st.floats(0.5, 0.99), min_size=3, max_size=8, unique=True),
       bm=st.lists(st.floats(0.5, 20.0), min_size=2, max_size=8, unique=True),
       bump=st.floats(0.001, 0.2))
def test_raising_one_legs_raw_score_never_lowers_a_chunk(cos: list[float], bm: list[float], bump: float) -> None:
    """Monotone in each leg's raw score: a chunk whose cosine rises (others fixed) never falls in fused score."""
    cos, bm = sorted(cos, reverse=True), sorted(bm, reverse=True)
    vec = [(i + 1, c) for i, c in enumerate(cos)]
    kw = [(i + 1, -b) for i, b in enumerate(bm)]
    cfg = PRESETS["joint"].replace(max_results=10)
    before = {h.chunk_id: h.fused_score for h in rank(_cands(vec, kw), cfg, now=0.0).candidates}
    target = len(vec)  # the last vector hit rises
    raised = sorted([(c, s + bump if c == target else s) for c, s in vec], key=lambda t: -t[1])
    after = {h.chunk_id: h.fused_score for h in rank(_cands(raised, kw), cfg, now=0.0).candidates}
    assert after[target] >= before[target] - 1e-12


@settings(max_examples=60, deadline=None)
@given(cos=st.lists(st.floats(0.5, 0.99), min_size=4, max_size=8, unique=True),
       bm=st.lists(st.floats(0.5, 20.0), min_size=2, max_size=8, unique=True),
       means=st.lists(st.floats(0.5, 0.95), min_size=4, max_size=4), bump=st.floats(0.001, 0.2))
def test_under_the_aligned_order_raising_a_raw_score_never_moves_a_chunk_down(
        cos: list[float], bm: list[float], means: list[float], bump: float) -> None:
    """With the alignment, a hit's score is its position's (the plain fit's k-th highest probability), so what stays
    monotone in each leg's raw score is the position: a chunk whose cosine rises never falls in the order, and
    scores fall down the order."""
    cos, bm = sorted(cos, reverse=True), sorted(bm, reverse=True)
    vec = [(i + 1, c) for i, c in enumerate(cos)]
    kw = [(i + 1, -b) for i, b in enumerate(bm)]
    read = {cid: m for cid, m in zip((1, 2, len(vec), 2 + len(vec)), means)}  # the last vector hit is read
    cfg = PRESETS["joint"].replace(max_results=10)

    def order(v: list[tuple[int, float]]) -> list[int]:
        r = rank(dataclasses.replace(_cands(v, kw), passage_alignment=read), cfg, now=0.0)
        scores = [h.fused_score for h in r.candidates]
        assert all(a > b for a, b in zip(scores, scores[1:]))
        return [h.chunk_id for h in r.candidates]
    target = len(vec)
    before = order(vec)
    after = order(sorted([(c, s + bump if c == target else s) for c, s in vec], key=lambda t: -t[1]))
    assert after.index(target) <= before.index(target)


def test_handed_out_scores_are_strictly_lower_down_the_order_even_on_ties() -> None:
    """Two candidates with the same features tie under the plain fit; the second down the order still gets a lower
    score, so a stable sort by score keeps the order."""
    plain = JOINT_MODELS["multilingual-e5-small"]
    aligned = JOINT_MODELS["multilingual-e5-small|aligned"]
    legs = [JointLeg("vector", 1.0, (1, 2, 3), (0.9, 0.9, 0.5), (0.2, 0.2, 0.01), (1, 1, 3)),
            JointLeg("keyword", 1.0, (1, 2), (-4.0, -4.0), (0.3, 0.3), (1, 1))]
    feats = feature_matrix(legs, {1: 0.7, 2: 0.8, 3: 0.6})  # the alignment puts chunk 2 first
    got = joint_fusion(legs, aligned, feats, scored_by=plain)
    assert list(got)[:2] == [2, 1] and got[2] > got[1] > got[3]
    assert got[2] == pytest.approx(got[1], abs=1e-12)  # one step apart: the same probability, in the order


def test_gate_features_and_probability_by_hand() -> None:
    f = query_features([1, 2, 3, 4], [0.9, 0.8, 0.7, 0.6], [0.5, 0.1, 0.05, 0.01], [3, 9], [0.2, 0.1], [0.5, 1.0],
                       n_terms=4, found_terms=3)
    assert f["keyword_top"] == pytest.approx(math.log(0.2 / 0.8))
    assert f["vector_top"] == pytest.approx(0.0)
    assert f["agreement"] == pytest.approx(1 / 5)
    assert f["vector_gap"] == pytest.approx(0.9 - 0.7)
    assert f["coverage_top"] == 1.0 and f["term_share"] == 0.75 and f["log_terms"] == pytest.approx(math.log(4))
    empty = query_features([], [], [], [], [], [], 0)
    assert empty["keyword_top"] < -13 and empty["term_share"] == 0.0 and empty["vector_gap"] == 0.0
    gate = Calibration(("keyword_top", "term_share"), (1.0, 2.0), 0.5)
    assert answer_probability(f, gate) == pytest.approx(_sig(0.5 + math.log(0.25) + 1.5))


def test_idf_coverage_weighs_a_rare_term_above_common_ones() -> None:
    """A chunk holding the query's common words but not its rare one covers most of its terms and little of its
    IDF; without counts (the keyword leg did not run) every term weighs the same."""
    words = ("the", "of", "river", "zambezi")
    chunk = ChunkInfo(1, "memory/a.md", "memory", 1, 2, "the length of the river", 0.0, True,
                      frozenset({"the", "of", "river", "length"}))
    plain = Candidates("the length of the zambezi river", words, keyword=(LegHit(1, -3.0, 1),), vector=(),
                       chunks={1: chunk}, pool=40, vector_searched=False)
    counted = dataclasses.replace(plain, doc_count=1000, term_docs=(990, 700, 40, 0))
    _, f_plain = decision_features(plain, DEFAULT_RANKING)
    _, f = decision_features(counted, DEFAULT_RANKING)
    assert f_plain["idf_coverage_top"] == f_plain["coverage_top"] == f["coverage_top"] == 0.75
    weights = [bm25_idf(1000, n) for n in (990, 700, 40, 0)]
    assert f["idf_coverage_top"] == pytest.approx(sum(weights[:3]) / sum(weights))
    assert f["idf_coverage_top"] < 0.5  # "zambezi", held by no chunk, weighs most


def test_each_shipped_gate_reads_the_features_its_fit_chooses() -> None:
    """What `hybridmem eval calibrate --decisions --write` would fit is what ships: e5's gate with the IDF-weighted
    coverage, MiniLM's and the keyword leg's without it, each model's aligned gate with the token alignment (train
    chose so; docs/ranking.md)."""
    from hybridmem.eval.decisions import (ALIGNED_USED_BY_MODEL, GATE_USED, GATE_USED_BY_MODEL, KEYWORD_ALIGNED_USED,
                                          KEYWORD_USED, PAIR_SHIFT, VECTOR_USED)

    assert GATE_MODELS["multilingual-e5-small"].features == GATE_USED
    for model, features in ALIGNED_USED_BY_MODEL.items():  # the gate read when the candidates carry the alignment
        assert GATE_MODELS[f"{model}|aligned"].features == features
        assert {"align_mean", "align_q25", "align_weighted", "align_exact", "log_terms"} <= set(features)
    # e5's also reads how far the best matches stand above the rest of the passage (the tenth round); MiniLM's does not
    assert "align_centred" in ALIGNED_USED_BY_MODEL["multilingual-e5-small"]
    assert "align_centred" not in ALIGNED_USED_BY_MODEL["all-MiniLM-L6-v2"] + KEYWORD_ALIGNED_USED
    # MiniLM gives no token states; its aligned gate reads the bundled e5's
    assert set(ALIGNED_USED_BY_MODEL) == {"multilingual-e5-small", "all-MiniLM-L6-v2"}
    assert "idf_coverage_top" in GATE_USED
    assert GATE_MODELS["all-MiniLM-L6-v2"].features == GATE_USED_BY_MODEL["all-MiniLM-L6-v2"]
    assert GATE_MODELS["keyword"].features == KEYWORD_USED
    assert GATE_MODELS["multilingual-e5-small|vector"].features == VECTOR_USED
    keyword, alignment = GATE_MODELS["all-MiniLM-L6-v2|keyword+aligned"]  # where MiniLM's blind leg is dropped
    assert keyword.features == KEYWORD_USED and keyword.coef == GATE_MODELS["keyword"].coef
    assert keyword.intercept == round(GATE_MODELS["keyword"].intercept + PAIR_SHIFT, 4)  # refit together
    assert alignment.features == KEYWORD_ALIGNED_USED
    assert "multilingual-e5-small|keyword+aligned" not in GATE_MODELS  # e5's vector leg is never dropped


def test_rank_abstains_as_a_whole_and_scales_hits_by_the_gate() -> None:
    cands = _cands([(1, 0.9), (2, 0.8)], [(1, -5.0), (2, -1.0)])
    sure = DEFAULT_RANKING.replace(answer_threshold=0.01)
    r = rank(cands, sure, now=0.0)
    assert r.hits and not r.abstained and 0.0 < r.answer_probability <= 1.0
    for h in r.hits:  # the order is the joint model's; each score is P(relevant | answer) * P(answer)
        assert h.final_score == pytest.approx(h.fused_score * r.answer_probability)
    assert [h.chunk_id for h in r.hits] == [h.chunk_id for h in rank(cands, PRESETS["joint"], now=0.0).hits]
    weak = _cands([(1, 0.75), (2, 0.74)], [(2, -0.2)], query="car repair cake")
    p = rank(weak, sure, now=0.0).answer_probability
    assert 0.0 < p < 0.99
    r = rank(weak, DEFAULT_RANKING.replace(answer_threshold=min(0.999, p + 0.005)), now=0.0)
    assert r.hits == () and r.abstained and {h.cut_reason for h in r.candidates} == {"no_answer"}
    off = rank(cands, DEFAULT_RANKING.replace(answer_threshold=0.0), now=0.0)
    assert off.answer_probability is None and not off.abstained and len(off.hits) == 2


def test_answer_threshold_validated() -> None:
    with pytest.raises(ConfigError, match="answer_threshold"):
        RankConfig(answer_threshold=1.0)
    with pytest.raises(ConfigError, match="answer_threshold"):
        RankConfig(answer_threshold=-0.1)


def test_choose_threshold_keeps_every_set_within_its_false_abstention() -> None:
    from hybridmem.eval.decisions import choose_threshold

    probs = {"a": [0.9] * 98 + [0.1, 0.2], "b": list(np.linspace(0.3, 1.0, 100)), "tiny": [0.05] + [0.9] * 9}
    t = choose_threshold(probs, max_false=0.02)
    ok = lambda t: all(np.sum(np.asarray(p) < t) <= max(0.02 * len(p), 1) for p in probs.values())  # noqa: E731
    assert ok(t) and not ok(t + 0.005)
    assert 0.2 < t <= 0.31  # set "a" binds (two of 100 under 0.2); "tiny" may lose its one query


def test_false_point_lies_halfway_between_the_last_query_lost_and_the_first_kept() -> None:
    from hybridmem.eval.decisions import choose_threshold, false_point

    rng = np.random.default_rng(5)
    lg = lambda p: np.log(p / (1.0 - p))  # noqa: E731
    for _ in range(20):
        probs = {s: list(rng.beta(2.0, 1.0 + s, 50 + 37 * s) * 0.3) for s in range(3)}
        point = false_point(probs)
        ok = lambda t: all(np.sum(np.asarray(p) < t) <= max(0.02 * len(p), 1) for p in probs.values())  # noqa: E731
        # the first threshold that loses one query too many: some set's first kept query, just above it
        keep = min(sorted(p)[int(max(0.02 * len(p), 1))] for p in probs.values())
        lose = max(v for p in probs.values() for v in p if v < keep)  # the nearest query under it, of any set
        assert ok(point) and not ok(keep + 1e-12) and lose < point < keep
        assert lg(point) - lg(lose) == pytest.approx(lg(keep) - lg(point))  # halfway in log-odds: rounding-proof
        assert choose_threshold(probs) <= keep  # the grid's threshold stays within the same bound
    assert false_point({"two": [0.5, 0.6]}) == pytest.approx(0.55, abs=0.001)  # one query may be lost
    assert false_point({"one": [0.5]}) == 1.0 and false_point({}) == 0.0  # losing its only query is within bounds


def _rows(rng: np.random.Generator) -> DecisionRows:
    """Decision rows with one order row (the gate fits do not read it), for gate rows to be added."""
    return DecisionRows(order=[("s", rng.random((6, len(JOINT_FEATURES))), np.array([1, 0, 0, 0, 0, 0]))])


def _row(name: str, features: list[float], label: int) -> tuple[str, dict[str, list[float]], int]:
    """A gate row whose features read the same whichever legs take part."""
    return name, {"both": features, "keyword": features, "vector": features}, label


def test_fit_rows_adds_the_aligned_gate_only_for_rows_with_the_alignment() -> None:
    """A model whose rows carry the token alignment gets ``<model>|aligned``, which learns it and crosses the shared
    threshold where its own 2% false-abstention point lies; rows without it (MiniLM) get none. So with the order: one
    that weighs the alignment only where train gives it a weight, beside the plain one every model has."""
    from hybridmem.eval.decisions import _answerable, false_point, fit_rows

    rng = np.random.default_rng(3)
    col = {f: i for i, f in enumerate(GATE_FEATURES)}
    lift = JOINT_FEATURES.index("align_lift")

    def order(aligned: bool) -> list[tuple[str, np.ndarray, np.ndarray]]:
        out = []
        for i in range(60):  # three passages on top the legs cannot tell apart; the alignment tells the answer
            f = np.zeros((12, len(JOINT_FEATURES)))
            f[:3, :lift] = 0.9
            f[3:, :lift] = rng.uniform(0.0, 0.5, (9, lift))
            y = np.zeros(12, dtype=int)
            y[rng.integers(0, 3)] = 1
            if aligned:
                f[:3, lift] = 0.02 + 0.1 * y[:3]
            out.append((f"s{i % 2}", f, y))
        return out

    def rows(aligned: bool) -> DecisionRows:
        out = _rows(rng)
        out.order = order(aligned)
        for label in (1, 0):
            for i in range(300):
                f = list(rng.normal(0.0, 1.0, len(GATE_FEATURES)))
                f[col["vector_top"]] += 0.5 * label  # a weak signal everywhere
                f[col["align_mean"]] = (0.9 if label else 0.7) + rng.normal(0, 0.05) if aligned else 0.0
                out.gate.append(_row("a" if label else "none", f, label))
        return out

    e5, minilm = rows(True), rows(False)
    d = fit_rows({"multilingual-e5-small": e5, "all-MiniLM-L6-v2": minilm})
    assert set(d.joints) == {"multilingual-e5-small", "multilingual-e5-small|aligned", "all-MiniLM-L6-v2"}
    plain, aligned = d.joints["multilingual-e5-small"], d.joints["multilingual-e5-small|aligned"]
    assert plain.coef[lift] == 0.0 and aligned.coef[lift] > 0 and aligned.coef[:lift] == plain.coef[:lift]
    gate = d.gates["multilingual-e5-small|aligned"]
    assert "all-MiniLM-L6-v2|aligned" not in d.gates
    coef = dict(zip(gate.features, gate.coef))
    assert coef["align_mean"] > 5 * abs(coef["vector_gap"])
    own = false_point(_answerable({"m": e5}, {"m": gate}, "both"))
    assert own == pytest.approx(d.threshold, abs=1e-3)  # exactly, up to the intercept's four decimals
    # every shifted gate keeps each answerable train set within its 2% (or one query) at the shared threshold
    for name, legs, rows_of in (("multilingual-e5-small|aligned", "both", e5), ("keyword", "keyword", e5),
                                ("multilingual-e5-small|vector", "vector", e5), ("all-MiniLM-L6-v2", "both", minilm),
                                ("all-MiniLM-L6-v2|vector", "vector", minilm)):
        for probs in _answerable({"m": rows_of}, {"m": d.gates[name]}, legs).values():
            assert np.sum(np.asarray(probs) < d.threshold) <= max(0.02 * len(probs), 1.0), name


def test_a_vector_leg_that_found_nothing_leaves_both_decisions_to_the_keyword_leg() -> None:
    """A nearest-neighbour search finds something whenever a vector exists in scope: a vector leg searched and empty
    means there was none (a search while another process is still embedding the notes). It read as a leg that found
    nothing near, and the gate of both legs refused an exact keyword match (P 0.000 for `HTTPRetryPolicy`, its note
    the keyword leg's first). Now it does not take part: the order and the gate are those of a search whose vector leg
    was not run."""
    from hybridmem.config.calibration import gate_model
    from hybridmem.tokenization import tokenize

    notes = {1: "Introduced `HTTPRetryPolicy` with exponential backoff, max 5 attempts.",
             2: "The refund goes back to the card within five days.", 3: "Priya maintains the Terraform modules."}
    chunks = {c: ChunkInfo(c, f"memory/n{c}.md", "memory", 1, 2, t, 0.0, True, frozenset(tokenize(t)))
              for c, t in notes.items()}
    query = "HTTPRetryPolicy"

    def cands(vector_searched: bool) -> Candidates:
        return Candidates(query, tuple(tokenize(query)), keyword=(LegHit(1, -6.5, 1),), vector=(), chunks=chunks,
                          pool=40, vector_searched=vector_searched, vector_model="multilingual-e5-small")

    empty, not_run = rank(cands(True), DEFAULT_RANKING, now=0.0), rank(cands(False), DEFAULT_RANKING, now=0.0)
    assert [h.chunk_id for h in empty.hits] == [h.chunk_id for h in not_run.hits] == [1]
    assert empty.answer_probability == pytest.approx(not_run.answer_probability)
    _, f = decision_features(cands(False), DEFAULT_RANKING)
    assert empty.answer_probability == pytest.approx(answer_probability(f, gate_model("multilingual-e5-small",
                                                                                          {"keyword"})))
    assert empty.answer_probability >= DEFAULT_RANKING.answer_threshold
    assert empty.hits[0].final_score == pytest.approx(not_run.hits[0].final_score)


def test_a_gate_of_both_legs_is_fitted_on_the_queries_it_decides() -> None:
    """Where the adaptive step dropped a blind vector leg (``vector_top`` reads as having found nothing) the keyword
    leg's gate decides, so those rows neither fit a gate of both legs (the aligned one, or a model's plain one) nor
    set its 2% point."""
    from hybridmem.eval.decisions import _answerable, fit_rows

    rng = np.random.default_rng(4)
    col = {f: i for i, f in enumerate(GATE_FEATURES)}
    rows = _rows(rng)
    for label in (1, 0):
        for i in range(400):
            dropped = i % 4 == 0
            f = list(rng.normal(0.0, 1.0, len(GATE_FEATURES)))
            f[col["align_mean"]] = (0.9 if label else 0.7) + rng.normal(0, 0.05)
            f[col["vector_gap"]] = (0.05 if label else 0.0) + rng.normal(0, 0.01)
            if dropped:  # blind: the signals read the other way here, and the vector leg did not take part
                f[col["align_mean"]] = 0.6 if label else 0.95
                f[col["vector_gap"]] = 0.0 if label else 0.2
                f[col["vector_top"]] = logit(0.0)
            rows.gate.append(_row(("a" if label else "none") + ("-blind" * dropped), f, label))
    d = fit_rows({"multilingual-e5-small": rows, "all-MiniLM-L6-v2": rows})
    for name, signal in (("multilingual-e5-small|aligned", "align_mean"), ("all-MiniLM-L6-v2|aligned", "align_mean"),
                         ("multilingual-e5-small", "vector_gap"), ("all-MiniLM-L6-v2", "vector_gap")):
        gate = d.gates[name]
        assert gate.fitted_on.startswith("300 answerable and 300 no-answer") and "blind" not in gate.fitted_on, name
        assert dict(zip(gate.features, gate.coef))[signal] > 0, name  # the rows it decides, not the blind ones
        sighted = _answerable({"m": rows}, {"m": gate}, "both")["m:a"]
        assert np.sum(np.asarray(sighted) < d.threshold) <= 0.02 * len(sighted), name


def test_where_the_vector_leg_is_dropped_a_pair_of_gates_shares_the_false_abstention() -> None:
    """A model whose rows carry the alignment and hold queries whose blind vector leg was dropped gets
    ``<model>|keyword+aligned``: the keyword leg's gate (its intercept raised) and a gate over the alignment, fitted on
    those queries, that must both answer; together they keep each answerable set there within its share and abstain on
    more than the keyword gate alone. Rows without such queries (e5's) get none."""
    from hybridmem.eval.decisions import PAIR_MAX_FALSE, PAIR_SHIFT, fit_rows
    from hybridmem.ranking.gate import answer_probability

    rng = np.random.default_rng(6)  # draws whose keyword half fits at PAIR_SHIFT (a larger raise: the test below)
    col = {f: i for i, f in enumerate(GATE_FEATURES)}

    def rows(blind: bool) -> DecisionRows:
        out = _rows(rng)
        for label in (1, 0):
            for i in range(800):
                f = list(rng.normal(0.0, 1.0, len(GATE_FEATURES)))
                dropped = blind and i % 4 < 2
                # an answerable query shares the words and the meaning; a no-answer one only the words (even i,
                # which the keyword gate cannot tell) or only the topic (odd i, which the alignment cannot)
                f[col["keyword_top"]] += 3.0 if label or i % 2 == 0 else 0.0
                f[col["align_mean"]] = (0.9 if label or i % 2 == 1 else 0.75) + rng.normal(0, 0.03)
                if dropped:
                    f[col["vector_top"]] = logit(0.0)
                out.gate.append(_row(("a" if label else "none") + ("-blind" if dropped else ""), f, label))
        return out

    e5, minilm = rows(False), rows(True)
    d = fit_rows({"multilingual-e5-small": e5, "all-MiniLM-L6-v2": minilm})
    assert "multilingual-e5-small|keyword+aligned" not in d.gates
    keyword, alignment = pair = d.gates["all-MiniLM-L6-v2|keyword+aligned"]
    assert keyword.coef == d.gates["keyword"].coef
    assert keyword.intercept == round(d.gates["keyword"].intercept + PAIR_SHIFT, 4)
    assert alignment.fitted_on.startswith("400 answerable and 400 no-answer") and "-blind" in alignment.fitted_on
    blind = [(dict(zip(GATE_FEATURES, r[1]["both"])), r[2]) for r in minilm.gate if r[0].endswith("-blind")]
    answered = [answer_probability(f, pair) for f, label in blind if label]
    assert np.sum(np.asarray(answered) < d.threshold) <= max(PAIR_MAX_FALSE * len(answered), 1.0)
    alone = np.mean([answer_probability(f, d.gates["keyword"]) < d.threshold for f, label in blind if not label])
    both = np.mean([answer_probability(f, pair) < d.threshold for f, label in blind if not label])
    assert alone < 0.6 and both > alone + 0.3  # the alignment's gate holds those that share the words
    assert answer_probability(blind[0][0], pair) == min(answer_probability(blind[0][0], half) for half in pair)


def test_the_pair_counts_what_its_keyword_half_loses_and_gives_it_up_where_it_must() -> None:
    """The pair's budget covers both halves: the answerable queries the keyword half loses count against each set's
    share, so the alignment's half loses only what is left; where the keyword half alone loses more than a set may,
    its intercept is raised further; where no raise is enough, the fit warns and ships no pair."""
    from hybridmem.eval.decisions import KEYWORD_USED, PAIR_MAX_FALSE, PAIR_SHIFT, _shift, fit_pair
    from hybridmem.ranking.gate import answer_probability

    rng = np.random.default_rng(6)
    col = {f: i for i, f in enumerate(GATE_FEATURES)}
    rows = DecisionRows()
    for label in (1, 0):
        for i in range(1000):
            f = list(rng.normal(0.0, 1.0, len(GATE_FEATURES)))
            f[col["vector_top"]] = logit(0.0)
            f[col["keyword_top"]] = rng.normal(1.0 if label else -1.0, 1.0)
            f[col["align_mean"]] = rng.normal(0.85 if label else 0.75, 0.05)
            rows.gate.append(_row("a" if label else "none", f, label))
    answerable = [dict(zip(GATE_FEATURES, r[1]["both"])) for r in rows.gate if r[2]]
    keyword = Calibration(KEYWORD_USED, (1.0, 0.0, 0.0), 0.0)

    def lost(gate: object) -> int:
        return int(np.sum([answer_probability(f, gate) < 0.07 for f in answerable]))  # type: ignore[arg-type]

    # a keyword gate that alone loses 1% of the answerable queries at the threshold, after the raise
    at = sorted(answer_probability(f, keyword) for f in answerable)[10]
    keyword = _shift(keyword, at, 0.07)
    keyword = Calibration(keyword.features, keyword.coef, keyword.intercept - PAIR_SHIFT)
    first, second = pair = fit_pair(rows, keyword, 0.07)
    assert first.intercept == round(keyword.intercept + PAIR_SHIFT, 4)
    budget = int(max(PAIR_MAX_FALSE * len(answerable), 1.0))
    assert lost(first) == 10 and lost(pair) <= budget  # the second half had only what the first left
    assert lost(pair) > lost(first) and lost(second) < budget  # it used it, not the whole budget on its own
    # a keyword gate that loses 3% even after the raise: raised further, until the pair fits
    greedy = _shift(keyword, sorted(answer_probability(f, keyword) for f in answerable)[30], 0.07)
    first, _ = pair = fit_pair(rows, greedy, 0.07)
    assert first.intercept > round(greedy.intercept + PAIR_SHIFT, 4) and lost(pair) <= budget
    # a keyword gate that can never fit (it loses everything whatever the raise): an error
    with pytest.raises(ValueError):
        fit_pair(rows, Calibration(KEYWORD_USED, (0.0, 0.0, 0.0), -100.0), 0.07)


def test_fit_rows_ships_no_pair_it_cannot_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pair that cannot be placed leaves the keyword gate to decide, with a warning, and the rest of the fit stands."""
    import hybridmem.eval.decisions as decisions

    rng = np.random.default_rng(7)
    col = {f: i for i, f in enumerate(GATE_FEATURES)}
    rows = _rows(rng)
    for label in (1, 0):
        for i in range(400):
            f = list(rng.normal(0.0, 1.0, len(GATE_FEATURES)))
            f[col["align_mean"]] = (0.9 if label else 0.7) + rng.normal(0, 0.05)
            if i % 2:
                f[col["vector_top"]] = logit(0.0)
            rows.gate.append(_row("a" if label else "none", f, label))

    def cannot(*_: object, **__: object) -> None:
        raise ValueError("the keyword gate alone abstains on more answerable queries than a set may lose")

    monkeypatch.setattr(decisions, "fit_pair", cannot)
    with pytest.warns(UserWarning, match="no pair of gates"):
        d = decisions.fit_rows({"multilingual-e5-small": rows, "all-MiniLM-L6-v2": rows})
    assert "all-MiniLM-L6-v2|keyword+aligned" not in d.gates and "all-MiniLM-L6-v2|aligned" in d.gates


def test_fit_order_learns_the_informative_feature_and_is_a_probability() -> None:
    from hybridmem.eval.decisions import fit_order

    rng = np.random.default_rng(1)
    rows = DecisionRows()
    for _ in range(60):
        f = rng.random((20, len(JOINT_FEATURES)))
        y = (f[:, 1] > 0.8).astype(int)  # only keyword min-max tells
        if y.any() and not y.all():
            rows.order.append(("s", f, y))
    orders = fit_order(rows)
    model = orders.plain
    assert model.coef[JOINT_FEATURES.index("align_lift")] == 0.0
    assert all(c >= 0 for c in model.coef)
    assert model.coef[1] == max(model.coef) and model.coef[1] > 5 * max(model.coef[:1] + model.coef[2:])


def test_fit_lift_weighs_the_alignment_by_the_order_it_gives() -> None:
    """The lift's weight is the one whose order of the top scores best on train: where the alignment tells the
    answer among the top passages a weight is chosen, where it is noise none is."""
    from hybridmem.eval.lift import fit_lift

    rng = np.random.default_rng(2)
    told, noise = [], []
    for i in range(80):
        y = np.zeros(12, dtype=int)
        y[rng.integers(0, 3)] = 1  # the answer is one of the three passages on top, which the legs cannot tell apart
        z = np.r_[np.full(3, 1.0), rng.normal(-3.0, 0.5, 9)]
        lift = np.r_[0.05 + 0.1 * y[:3] - 0.02 * rng.random(3), np.zeros(9)]
        told.append((f"s{i % 2}", z, lift, y))
        # here the legs already tell, and an alignment that says nothing could only upset it
        noise.append((f"s{i % 2}", z + 0.5 * y, np.r_[0.1 * rng.random(3), np.zeros(9)], y))
    beta = fit_lift(told)
    assert beta > 0
    first = told[0][1] + beta * told[0][2]
    assert np.argmax(first) == np.argmax(told[0][3])  # the answer on top
    assert fit_lift(noise) == 0.0


def test_xquad_cross_asks_each_question_of_the_other_half(tmp_path) -> None:  # noqa: ANN001
    from hybridmem.eval.abstention import confine, xquad_cross
    from hybridmem.eval.datasets import load_dataset
    from hybridmem.eval.datasets.xquad import article_halves

    ds = load_dataset("xquad-th")
    s = xquad_cross(ds)
    docs, questions = article_halves("th")
    assert s.name == "xquad-th-cross" and len(s.queries) == len(ds.queries)
    runs, asked = article_halves("th", parts=4)  # the two-language memories' runs: each half cut in two
    assert set(asked.values()) == {0, 1, 2, 3} and all(runs[d] // 2 == docs[d] for d in docs)
    assert all(asked[q] // 2 == questions[q] for q in questions)
    assert {q.split for q in s.queries} == {"train", "test"}
    for q in s.queries[::97]:
        qid = q.id.split("@")[0]
        allowed = s.within[q.id]
        assert allowed and all(docs[d] != questions[qid] for d in allowed)
        assert not set(ds.qrels[qid]) & allowed  # the answer sentence is never in scope
    cands = _cands([(1, 0.9), (2, 0.8), (3, 0.7)], [(3, -5.0), (2, -1.0)])
    c = confine(cands, frozenset({"memory/n2.md", "memory/n3.md"}), pool=1)
    assert [(h.chunk_id, h.rank) for h in c.vector] == [(2, 1)]
    assert [(h.chunk_id, h.rank) for h in c.keyword] == [(3, 1)]
    assert set(c.chunks) == {2, 3}


def test_the_constants_block_renders_back_to_the_shipped_numbers() -> None:
    """`hybridmem eval calibrate --write` rewrites config/calibration.py from :func:`render`: every gate, a pair of
    them included, reads back as it was."""
    from hybridmem.config import calibration as current
    from hybridmem.eval.calibrate import render

    block = render(dict(current.VECTOR_CALIBRATIONS), current.KEYWORD_CALIBRATION)
    namespace: dict[str, object] = {"Calibration": Calibration}
    exec(block, namespace)  # noqa: S102 - our own generated constants
    assert namespace["GATE_MODELS"] == current.GATE_MODELS
    assert isinstance(namespace["GATE_MODELS"]["all-MiniLM-L6-v2|keyword+aligned"], tuple)
    assert namespace["JOINT_MODELS"] == current.JOINT_MODELS and namespace["ANSWER_THRESHOLD"] == current.ANSWER_THRESHOLD
    odd = Calibration(("keyword_top",), (1.0,), -0.5, 'the pair\'s "1.25%" point; 中文')  # quotes of both kinds
    exec(render(dict(current.VECTOR_CALIBRATIONS), current.KEYWORD_CALIBRATION, gates={"x": (odd, odd), "y": (odd,)}),
         namespace)  # noqa: S102 - our own generated constants
    assert namespace["GATE_MODELS"]["x"] == (odd, odd) and namespace["GATE_MODELS"]["y"] == (odd,)
    # and the file holds exactly what render writes
    text = Path(current.__file__).read_text(encoding="utf-8")
    assert block in text


def test_gate_table_places_the_gate_and_reads_each_language_with_a_gate_fitted_without_it() -> None:
    """The train table a round of the gate is chosen by (``eval/reports/gate_rounds.py``): the gate is placed at its
    2% point, so no answerable set loses more than its share; each XQuAD-R language is read by a gate fitted without
    it. A language whose no-answer questions only one feature tells apart, a feature that is noise everywhere else,
    is held on train (the fit sees it) and not when it is left out (nothing else teaches that feature)."""
    from hybridmem.eval.decisions import MAX_FALSE_ABSTENTION
    from hybridmem.eval.gate_rounds import gate_table

    rng = np.random.default_rng(11)
    col = {f: i for i, f in enumerate(GATE_FEATURES)}
    rows = _rows(rng)
    for lang in ("aa", "bb", "cc", "dd"):
        for label in (1, 0):
            for _ in range(300):
                f = [0.0] * len(GATE_FEATURES)
                f[col["vector_top"]] = rng.normal(3.0 if label or lang == "dd" else -2.0, 1.0)
                f[col["term_share"]] = rng.normal(0.0, 1.0) - (4.0 if lang == "dd" and not label else 0.0)
                rows.gate.append(_row(f"xquad-{lang}" + ("" if label else "-cross"), f, label))
    for label in (1, 0):  # a set that is no language's
        for _ in range(200):
            f = [0.0] * len(GATE_FEATURES)
            f[col["vector_top"]] = rng.normal(3.0 if label else -2.0, 1.0)
            rows.gate.append(_row("locomo" + ("" if label else "-cross"), f, label))
    t = gate_table(rows, ("vector_top", "term_share"), 0.07)
    assert set(t.false) == {"locomo", "xquad-aa", "xquad-bb", "xquad-cc", "xquad-dd"}
    assert max(t.false.values()) <= MAX_FALSE_ABSTENTION
    assert set(t.held_out_abstention) == {f"xquad-{lang}-cross" for lang in ("aa", "bb", "cc", "dd")}
    assert set(t.held_out_false) == {f"xquad-{lang}" for lang in ("aa", "bb", "cc", "dd")}
    assert t.abstention["xquad-aa-cross"] > 0.8 and t.held_out_abstention["xquad-aa-cross"] > 0.8
    assert t.abstention["xquad-dd-cross"] > 0.5 > 0.1 > t.held_out_abstention["xquad-dd-cross"]


def test_xquad_pair_is_a_memory_in_two_languages_with_questions_about_either_half() -> None:
    """``xquad-en+vi``: every other article in English, the rest in Vietnamese, questions in English judged against
    the sentence in the language their article is in; its no-answer set asks each of the other half of the articles,
    in both languages, so it never holds the answer."""
    from collections import Counter

    from hybridmem.errors import DatasetError
    from hybridmem.eval.abstention import no_answer_sets
    from hybridmem.eval.datasets import load_dataset
    from hybridmem.eval.datasets.xquad import articles

    ds = load_dataset("xquad-en+vi")
    paths = {d.path for d in ds.documents}
    en, vi = articles("en"), articles("vi")
    assert paths == ({f"en/{d}" for d, a in en[0].items() if a % 2 == 0}
                     | {f"vi/{d}" for d, a in vi[0].items() if a % 2 == 1})
    english = {q.id: q.text for q in load_dataset("xquad-en").queries}
    assert all(q.text == english[q.id] for q in ds.queries)
    for q in ds.queries:
        (unit,) = ds.qrels[q.id]
        assert unit in paths and unit.startswith("en/" if q.category == "own" else "vi/")
        assert (q.category == "own") == (en[1][q.id] % 2 == 0)
    assert Counter(q.category for q in ds.queries if q.split == "test") == {"own": 172, "across": 128}
    (cross,) = no_answer_sets(ds)
    assert cross.name == "xquad-en+vi-cross" and len(cross.queries) == len(ds.queries)
    for q in cross.queries:
        held = cross.within[q.id] & paths
        assert held and not set(ds.qrels[q.id.split("@")[0]]) & held
        assert {p.split("/")[0] for p in held} == {"en", "vi"}  # the memory asked is in both languages
    with pytest.raises(DatasetError, match="one language twice"):
        load_dataset("xquad-en+en")

def test_a_question_in_another_script_than_its_passages_may_be_answered_by_the_crosslingual_gate() -> None:
    """An English question over notes in Chinese: neither the keyword leg nor the token alignment can read the pair,
    and the aligned gate, fitted on questions in their passages' language, refused 9 in 10 such answerable questions
    (XQuAD-R en->zh). There the cross-lingual gate may answer too; in the notes' own script it has no say."""
    from hybridmem.config.calibration import CROSSLINGUAL_GATES, gate_model
    from hybridmem.ranking.memo import RankMemo
    from hybridmem.tokenization import tokenize

    notes = {1: "周一上午九点召开团队周会，讨论发布计划。", 2: "退款会在五个工作日内退回原账户。",
             3: "服务器每天凌晨两点自动备份数据库。", 4: "ERR_CONN_RESET 出现在支付网关的日志里。"}
    chunks = {c: ChunkInfo(c, f"memory/n{c}.md", "memory", 1, 2, t, 0.0, True, frozenset(tokenize(t)))
              for c, t in notes.items()}

    def cands(query: str, first: int = 1, **kw: object) -> Candidates:
        order = [first] + [c for c in (1, 3, 2, 4) if c != first]
        vec = tuple(LegHit(c, s, i) for i, (c, s) in enumerate(zip(order, (0.86, 0.80, 0.79, 0.78)), 1))
        return Candidates(query, tuple(tokenize(query)), keyword=(), vector=vec, chunks=chunks, pool=40,
                          vector_model="multilingual-e5-small", **kw)  # type: ignore[arg-type]

    def probabilities(c: Candidates) -> tuple[float, float, float]:
        _, f = decision_features(c, DEFAULT_RANKING)
        cross = CROSSLINGUAL_GATES["multilingual-e5-small|aligned" if c.alignment else "multilingual-e5-small"]
        usual = gate_model("multilingual-e5-small", aligned=c.alignment is not None)
        return (rank(c, DEFAULT_RANKING, now=0.0).answer_probability, answer_probability(f, usual),
                answer_probability(f, cross))

    for asked in (cands("when is the weekly team meeting?"),
                  cands("when is the weekly team meeting?", alignment=(0.8, 0.6, 0.8, 0.2, 0.1))):
        assert RankMemo(asked).other_language()
        got, usual, cross = probabilities(asked)
        assert cross > usual and got == pytest.approx(max(usual, cross))
    same = cands("团队周会是什么时候？")  # the notes' own script: the usual gate alone
    got, usual, cross = probabilities(same)
    assert not RankMemo(same).other_language() and got == pytest.approx(usual) and cross > usual


def test_a_memory_in_two_languages_reads_the_crosslingual_gate_where_the_nearest_note_is_in_the_other() -> None:
    """Notes in Chinese and English: an English question about a Chinese note finds it first and an English note
    next, so it is not asked across the languages of each of its top passages, and the usual gate refused half such
    answerable questions (XQuAD-R train, memories half in each language: 50.4% answered). Where the nearest passage
    alone is in another language the cross-lingual gate may answer too, against NEAREST_ACROSS_THRESHOLD instead of
    the shipped threshold; the hits take the cross-lingual fit. A question whose nearest note is in its own language
    is decided by the usual gate alone."""
    from hybridmem.config.calibration import (
        ANSWER_THRESHOLD, CROSSLINGUAL_GATES, CROSSLINGUAL_HITS, NEAREST_ACROSS_THRESHOLD, gate_model,
    )
    from hybridmem.ranking.gate import raised
    from hybridmem.ranking.memo import RankMemo
    from hybridmem.tokenization import tokenize

    notes = {1: "周一上午九点召开团队周会，讨论发布计划。", 2: "The refund goes back to the card within five days.",
             3: "服务器每天凌晨两点自动备份数据库。", 4: "Priya maintains the Terraform modules."}
    chunks = {c: ChunkInfo(c, f"memory/n{c}.md", "memory", 1, 2, t, 0.0, True, frozenset(tokenize(t)))
              for c, t in notes.items()}

    def cands(query: str, order: tuple[int, ...], top: float) -> Candidates:
        vec = tuple(LegHit(c, top - d, i) for i, (c, d) in enumerate(zip(order, (0.0, 0.01, 0.02, 0.03)), 1))
        return Candidates(query, tuple(tokenize(query)), keyword=(), vector=vec, chunks=chunks, pool=40,
                          vector_model="multilingual-e5-small")

    usual, cross = gate_model("multilingual-e5-small"), CROSSLINGUAL_GATES["multilingual-e5-small"]
    decided = []
    for top in (0.8, 0.84, 0.9):
        asked = cands("when is the weekly team meeting?", (1, 2, 3, 4), top)
        memo = RankMemo(asked)
        assert memo.across() == "nearest" and not memo.other_language()
        _, f = decision_features(asked, DEFAULT_RANKING)
        p, q = answer_probability(f, usual), answer_probability(f, cross)
        got = rank(asked, DEFAULT_RANKING, now=0.0)
        assert got.answer_probability == pytest.approx(max(p, raised(q, NEAREST_ACROSS_THRESHOLD, ANSWER_THRESHOLD)))
        assert got.routed_across == "nearest"
        assert (got.answer_probability >= ANSWER_THRESHOLD) == (p >= ANSWER_THRESHOLD or q >= NEAREST_ACROSS_THRESHOLD)
        decided.append((p >= ANSWER_THRESHOLD, bool(got.hits)))
        if got.hits:  # the hits take the cross-lingual fit, as for a question asked across each top passage
            feats, _ = decision_features(asked, DEFAULT_RANKING.replace(answer_threshold=0.0))
            m = CROSSLINGUAL_HITS["multilingual-e5-small"]
            z = np.array(list(feats.values())) @ np.array(m.coef) + m.intercept
            assert got.hits[0].final_score <= float(1 / (1 + np.exp(-z.max()))) + 1e-9
    # the usual gate alone refused all three; the cross-lingual gate gives them 0.61, 0.94 and 0.998, and the bar
    # (0.98) answers the last alone, where a question asked across each top passage would take all three
    assert decided == [(False, False), (False, False), (False, True)]
    answered = rank(cands("when is the weekly team meeting?", (1, 2, 3, 4), 0.9), DEFAULT_RANKING, now=0.0)
    assert answered.hits[0].chunk_id == 1
    own = cands("when is the weekly team meeting?", (2, 1, 3, 4), 0.84)  # its nearest note in its language
    assert RankMemo(own).across() == "" and rank(own, DEFAULT_RANKING, now=0.0).routed_across == ""
    _, f = decision_features(own, DEFAULT_RANKING)
    assert rank(own, DEFAULT_RANKING, now=0.0).answer_probability == pytest.approx(answer_probability(f, usual))

def test_a_memory_in_several_scripts_reads_the_crosslingual_gate_against_the_nearest_routes_bar() -> None:
    """Notes in Thai, Arabic and Japanese beside English ones: an English question about none of them found those
    three first (e5 puts short notes of other scripts near any question), so it was asked across each top passage and
    the cross-lingual gate answered it at the shipped threshold (P 0.951 in a real workspace). Top passages in several
    scripts besides the question's are a memory in several languages, not one in another language: the cross-lingual
    gate is read against the nearest route's bar there. Passages in one other script keep the route as it was, and so
    does a Chinese memory with a passage full of Latin names among its top ones."""
    from hybridmem.config.calibration import ANSWER_THRESHOLD, CROSSLINGUAL_GATES, NEAREST_ACROSS_THRESHOLD, gate_model
    from hybridmem.ranking.gate import across_languages, raised, several_scripts
    from hybridmem.ranking.memo import RankMemo
    from hybridmem.tokenization import tokenize

    notes = {1: "คุณยายไปตรวจความดันโลหิตที่โรงพยาบาลศิริราชเมื่อวันจันทร์", 2: "زرعنا أشجار الزيتون والليمون في الحديقة الخلفية.",
             3: "宿は祇園の近くの旅館を予約した。二泊三日。", 4: "หมอสั่งยาใหม่และนัดตรวจอีกครั้งในเดือนหน้า",
             5: "ยายชอบดื่มชาเขียวตอนเช้า", 6: "Deploys happen on Thursdays after the standup."}
    chunks = {c: ChunkInfo(c, f"memory/n{c}.md", "memory", 1, 2, t, 0.0, True, frozenset(tokenize(t)))
              for c, t in notes.items()}

    def cands(query: str, order: tuple[int, ...]) -> Candidates:
        vec = tuple(LegHit(c, 0.9 - 0.01 * i, i) for i, c in enumerate(order, 1))
        return Candidates(query, tuple(tokenize(query)), keyword=(), vector=vec, chunks=chunks, pool=40,
                          vector_model="multilingual-e5-small")

    question = "when is my sister's birthday?"
    several = cands(question, (1, 2, 3, 6))
    assert several_scripts(question, [notes[c] for c in (1, 2, 3)])
    assert RankMemo(several).across() == "nearest" and not RankMemo(several).other_language()
    _, f = decision_features(several, DEFAULT_RANKING)
    usual, cross = gate_model("multilingual-e5-small"), CROSSLINGUAL_GATES["multilingual-e5-small"]
    p, q = answer_probability(f, usual), answer_probability(f, cross)
    got = rank(several, DEFAULT_RANKING, now=0.0)
    assert got.routed_across == "nearest" and q >= ANSWER_THRESHOLD  # the shipped threshold alone would answer it
    assert got.answer_probability == pytest.approx(max(p, raised(q, NEAREST_ACROSS_THRESHOLD, ANSWER_THRESHOLD)))
    one = cands(question, (1, 4, 5, 6))  # a Thai memory: the cross-lingual gate at the shipped threshold, as before
    assert RankMemo(one).across() == "top" and rank(one, DEFAULT_RANKING, now=0.0).answer_probability == \
        pytest.approx(max(p, answer_probability(decision_features(one, DEFAULT_RANKING)[1], cross)))
    assert not several_scripts(question, ["周一上午九点召开团队周会。", "Apple 和 Google 的 API keys rotate monthly", "备份。"])
    assert across_languages("ai giữ chìa khóa?", [notes[c] for c in (1, 2, 3)]) == "nearest"
    assert across_languages("ai giữ chìa khóa?", [notes[c] for c in (1, 4, 5)]) == "top"


def test_a_question_asked_across_languages_takes_the_crosslingual_hit_probabilities() -> None:
    """A cosine across languages sits lower than one within a language, and the keyword leg finds little: the order's
    own fit, fitted on questions in their passages' language, gave the right note of an English question over German
    notes 0.04 while the gate was sure. A routed question keeps its order and takes the cross-lingual fit's
    probabilities down it (XQuAD-R test, routed pairs: the top 10 hits' mean 0.038 against 0.089 relevant before,
    0.089 after); a question in the notes' own language, and a model without such a fit, keep the order's own."""
    from hybridmem.config.calibration import CROSSLINGUAL_HITS, hit_model
    from hybridmem.ranking.memo import RankMemo
    from hybridmem.tokenization import tokenize

    notes = {1: "周一上午九点召开团队周会，讨论发布计划。", 2: "退款会在五个工作日内退回原账户。",
             3: "服务器每天凌晨两点自动备份数据库。", 4: "支付网关的日志里出现了连接重置。"}
    chunks = {c: ChunkInfo(c, f"memory/n{c}.md", "memory", 1, 2, t, 0.0, True, frozenset(tokenize(t)))
              for c, t in notes.items()}
    config = DEFAULT_RANKING.replace(answer_threshold=0.0)  # P(relevant | an answer), the gate's factor aside

    def cands(query: str, model: str = "multilingual-e5-small") -> Candidates:
        vec = tuple(LegHit(c, s, i) for i, (c, s) in enumerate(zip((1, 3, 2, 4), (0.86, 0.80, 0.79, 0.78)), 1))
        return Candidates(query, tuple(tokenize(query)), keyword=(), vector=vec, chunks=chunks, pool=40,
                          vector_model=model)

    def scored(c: Candidates, model: Calibration) -> list[float]:  # the model's probabilities, highest first
        feats, _ = decision_features(c, config)
        x = np.array(list(feats.values()))
        return sorted((1.0 / (1.0 + np.exp(-(x @ np.array(model.coef) + model.intercept)))).tolist(), reverse=True)

    across, own = cands("when is the weekly team meeting?"), cands("团队周会是什么时候？")
    assert RankMemo(across).other_language() and not RankMemo(own).other_language()
    got, usual = rank(across, config, now=0.0).hits, rank(own, config, now=0.0).hits
    assert [h.chunk_id for h in got] == [h.chunk_id for h in usual] == [1, 3, 2, 4]  # the same order
    assert [h.final_score for h in got] == pytest.approx(scored(across, CROSSLINGUAL_HITS["multilingual-e5-small"]))
    assert [h.final_score for h in usual] == pytest.approx(scored(own, joint_model("multilingual-e5-small")))
    assert got[0].final_score > 2 * usual[0].final_score
    minilm = cands("when is the weekly team meeting?", "all-MiniLM-L6-v2")  # no cross-lingual fit: its own
    assert hit_model("all-MiniLM-L6-v2", crosslingual=True) is joint_model("all-MiniLM-L6-v2")
    assert [h.final_score for h in rank(minilm, config, now=0.0).hits] == pytest.approx(
        scored(minilm, joint_model("all-MiniLM-L6-v2")))


def test_a_question_in_another_language_of_the_same_script_is_routed_by_the_language_identifier() -> None:
    """English over notes in German, Spanish or Turkish: one script, so the script rule routed none of them, and the
    aligned gate refused 30% of XQuAD-R's answerable English questions over German sentences. The real py3langid
    model reads the language; related languages and variants (a German question read as Luxembourgish), identifiers
    and two-word queries are not routed."""
    from hybridmem.ranking.gate import asked_across
    from hybridmem.ranking.language import language_share, other_language

    de = ["Die Datenbankmigration auf PostgreSQL 16 übernimmt Jonas bis Ende Januar.",
          "Der Schlüssel für den Serverraum liegt bei Frau Becker im dritten Stock."]
    es = ["La migración de la base de datos la hace Jonás antes de fin de enero.",
          "La llave de la sala de servidores la tiene la señora Becker en el tercer piso."]
    tr = ["Veritabanı geçişini Ocak sonuna kadar Jonas yapacak.", "Sunucu odasının anahtarı üçüncü kattaki Ayşe'de."]
    en = ["Jonas owns the database migration to PostgreSQL 16, due at the end of January.",
          "The server room key is kept by Ms Becker on the third floor."]
    asked = "who has the key to the server room?"
    for notes in (de, es, tr):
        assert other_language(asked, notes) and asked_across(asked, notes)
    assert not other_language(asked, en) and not other_language(asked, [de[0], en[1]])  # one in its language
    assert not other_language("Wer hat den Schlüssel zum Serverraum?", de)
    assert not other_language("¿Quién tiene la llave de la sala de servidores?", es)
    assert not other_language("Sunucu odasının anahtarı kimde?", tr)
    assert not other_language("ERR_CONN_RESET fetchUserProfile E1042", de)  # code: no language to read
    assert not other_language("server key", de)  # two words
    assert [language_share(t)[0][0] for t in (*de, *es, *tr, *en)] == ["de"] * 2 + ["es"] * 2 + ["tr"] * 2 + ["en"] * 2


def test_the_language_identifier_is_unpacked_once_into_the_user_cache(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """py3langid's model is xz-compressed (0.6 s to read at each process start); it is unpacked once into the user
    cache and mapped from there, with the same probabilities. A cache that cannot be written falls back to the
    package's file."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    from hybridmem.ranking import language

    texts = ["who has the key to the server room?", "Wer hat den Schlüssel zum Serverraum?", "服务器机房的钥匙在哪里",
             "Mẹ mổ mắt ở bệnh viện nào?", "กุญแจห้องเซิร์ฟเวอร์อยู่ที่ไหน", "Ключ от серверной у кого?"]
    packaged = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    for cache, unpacked in ((tmp_path / "cache", True), (tmp_path / "a-file", False)):
        if not unpacked:
            cache.write_text("not a folder")
        monkeypatch.setenv("HYBRIDMEM_CACHE_DIR", str(cache))
        monkeypatch.setattr(language, "_identifier", None)
        for _ in range(2):  # unpacked the first time, read from the cache the second
            got = language._model()
            monkeypatch.setattr(language, "_identifier", None)
            assert [got.rank(t) for t in texts] == [packaged.rank(t) for t in texts]
        assert isinstance(got.tk_nextmove, memoryview) is unpacked
        if unpacked:
            (folder,) = cache.iterdir()
            assert folder.name.startswith("langid-") and len(list(folder.glob("*.npy"))) == 6


def test_the_language_identifier_is_unpacked_into_the_configured_shared_cache_dir(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A search preloads the identifier with ``embedding.shared_cache_dir``: its tables go there, as the embedding
    cache does, when ``$HYBRIDMEM_CACHE_DIR`` is not set."""
    from hybridmem.ranking import language

    monkeypatch.delenv("HYBRIDMEM_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(language, "_identifier", None)
    monkeypatch.setattr(language, "_cache_setting", "")
    language.preload(str(tmp_path / "mine"))
    assert language._model().rank("Wer hat den Schlüssel zum Serverraum?")[0][0] == "de"
    (folder,) = (tmp_path / "mine").iterdir()
    assert folder.name.startswith("langid-") and not (tmp_path / "xdg").exists()


def test_without_the_language_identifier_only_the_script_routes(monkeypatch: pytest.MonkeyPatch) -> None:
    """py3langid missing or broken: searches go on, a question in another script is still routed."""
    from hybridmem.ranking import language
    from hybridmem.ranking.gate import asked_across

    monkeypatch.setattr(language, "_identifier", False)
    de = ["Der Schlüssel für den Serverraum liegt bei Frau Becker im dritten Stock."]
    assert not asked_across("who has the key to the server room?", de)
    assert asked_across("who has the key to the server room?", ["服务器机房的钥匙在三楼的贝克尔女士那里。"])


def test_vietnamese_counts_as_a_script_of_its_own_for_the_crosslingual_gate() -> None:
    """Vietnamese is Latin letters, some only it writes: a Vietnamese question over English notes was refused 87% of
    the time (XQuAD-R vi->en, test) and routed nowhere while Latin was one script."""
    from hybridmem.ranking.gate import dominant_script, other_script

    vi_notes = ["Đã thay lọc gió điều hoà ô tô ở gara Hoàng Long.", "Mẹ mổ mắt ở Bệnh viện Mắt Đà Nẵng."]
    en_notes = ["The nightly backup runs at 02:30 UTC.", "Linh prefers the Gruvbox theme."]
    assert dominant_script(vi_notes[:1]) == "VIETNAMESE" and dominant_script(en_notes) == "LATIN"
    assert other_script("when was the car air filter replaced?", vi_notes)
    assert other_script("Bản sao lưu hằng đêm chạy lúc mấy giờ?", en_notes)
    assert not other_script("Mẹ mổ mắt ở bệnh viện nào?", vi_notes)
    assert not other_script("thay loc gio o dau", en_notes)  # unaccented Vietnamese reads as Latin
    # a question full of English names has too few of Vietnamese's own letters to be told apart: not sent across
    assert dominant_script(["Peyton Manning bao nhiêu tuổi khi anh chơi trong Super Bowl 50?"]) == "LATIN"
    assert not other_script("Peyton Manning bao nhiêu tuổi khi anh chơi trong Super Bowl 50?", vi_notes)
    assert dominant_script(["Café crème brûlée, naïve señor, İstanbul güzel"]) == "LATIN"  # other accents are not it


def test_a_note_holding_the_questions_script_among_others_is_not_asked_across() -> None:
    """A day's note may hold a line in Chinese, one in Vietnamese and one in Thai. Its first letters read as Chinese
    and the language identifier read it as Thai, so a Chinese question about a cat's vaccine, which nothing holds, went
    to the cross-lingual gate and was answered with the note (P 0.82). The question's own part of the note decides."""
    from hybridmem.ranking.gate import asked_across

    note = ["# 2026-11-20\n\n- 搬家公司报价三千五百元，下周六早上八点来搬。\n- Mẹ khám mắt ở bệnh viện Mắt Trung ương vào "
            "thứ Ba, 9 giờ sáng.\n- พ่อไปตรวจสุขภาพประจำปีที่โรงพยาบาลกรุงเทพ วันที่ 3 ธันวาคม"]
    for own in ("猫的疫苗什么时候打？", "Con mèo tiêm phòng khi nào?", "แมวฉีดวัคซีนเมื่อไร", "Mẹ khám mắt ở bệnh viện nào?"):
        assert not asked_across(own, note), own
    assert asked_across("when is the cat's vaccine due?", note)  # no line of it is English
    # a line of English in it: an English question reads it as in its own language (names and code do not count)
    with_english = [note[0] + "\n- Dentist appointment moved to Friday at 3pm with Dr. Lee."]
    assert not asked_across("when is the cat's vaccine due?", with_english)
    assert asked_across("when is the cat's vaccine due?", [note[0] + "\n- Dr. Lee, retry_backoff_ms = 250"])
    assert asked_across("猫的疫苗什么时候打？", ["The 東京 backup job runs nightly at 02:30 UTC, then uploads to S3."])
    assert asked_across("Con mèo tiêm phòng khi nào?", ["พ่อไปตรวจสุขภาพประจำปีที่โรงพยาบาลกรุงเทพ กับ Dr. Smith"])


def test_a_query_in_no_language_is_not_asked_across() -> None:
    """`NEAR(a b)` over a memory whose only note with letters is Japanese (the others "..." and "---") went to the
    cross-lingual gate and was answered with it at P 0.94; code and identifiers are the usual gate's to read."""
    from hybridmem.ranking.gate import asked_across

    notes = ["会議は月曜日の九時からです。", "---", "..."]
    for junk in ("NEAR(a b)", "ERR_CONN_RESET", "E1042 x"):
        assert not asked_across(junk, notes), junk
    assert asked_across("wifi password", ["无线网密码贴在冰箱上。"]) and asked_across("猫", ["Linh fed the cat at noon."])
    assert asked_across("Internet2与谁达成合作伙伴关系", ["وفي أكتوبر من سنة 2007، أعلن إنترنت2 عن إيقاف آبلين"])
