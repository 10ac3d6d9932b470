"""Metric values on hand-made data, computed by hand (ranx for rank metrics, evidence recall by definition)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hybridmem.eval.datasets import Dataset, Evidence, Query
from hybridmem.eval.metrics import MetricError, QueryRuns, Scorer, depth_for, parse_metric
from hybridmem.eval.runner import Evaluator
from hybridmem.eval.units import hits_within_budget, judged_units
from hybridmem.records import Document

L2 = math.log2


def three_query_runs() -> tuple[Scorer, QueryRuns]:
    qrels = {"q1": {"d1": 1}, "q2": {"d4": 2, "d5": 1}, "q3": {"d7": 1}}
    runs = QueryRuns(
        ranked=[["d2", "d1", "d3"], ["d4", "d6", "d5"], []],
        first=[{"d1": 2}, {"d4": 1, "d5": 3}, {}],
        lengths=[[1000, 1000, 1000], [3000, 500, 500], []],
    )
    return Scorer(["q1", "q2", "q3"], qrels), runs


def test_hand_computed_rank_metrics():
    scorer, runs = three_query_runs()
    s = scorer.score(runs, ["ndcg@10", "recall@1", "recall@10", "mrr", "precision@2", "hit_rate@1", "map"])
    ndcg_q1 = (1 / L2(3)) / 1
    ndcg_q2 = (2 / L2(2) + 1 / L2(4)) / (2 / L2(2) + 1 / L2(3))
    assert s["ndcg@10"] == pytest.approx([ndcg_q1, ndcg_q2, 0.0])
    assert s["ndcg@10"].mean() == pytest.approx((0.6309297535714575 + 0.9502344167898102) / 3)
    assert s["recall@1"] == pytest.approx([0.0, 0.5, 0.0])
    assert s["recall@10"] == pytest.approx([1.0, 1.0, 0.0])
    assert s["mrr"] == pytest.approx([0.5, 1.0, 0.0])
    assert s["precision@2"] == pytest.approx([0.5, 0.5, 0.0])
    assert s["hit_rate@1"] == pytest.approx([0.0, 1.0, 0.0])
    assert s["map"] == pytest.approx([0.5, (1 + 2 / 3) / 2, 0.0])


def test_single_metric_works_around_ranx():
    scorer, runs = three_query_runs()
    assert list(scorer.score(runs, ["ndcg@10"])) == ["ndcg@10"]


def test_evidence_and_budget_recall():
    scorer, runs = three_query_runs()
    s = scorer.score(runs, ["evidence_recall@1", "evidence_recall@3", "budget_recall@2500", "budget_recall@4000"])
    assert s["evidence_recall@1"] == pytest.approx([0.0, 0.5, 0.0])
    assert s["evidence_recall@3"] == pytest.approx([1.0, 1.0, 0.0])
    # q1: two 1000-char hits fit in 2500 (d1 is hit 2); q2: the first hit alone is 3000 chars
    assert s["budget_recall@2500"] == pytest.approx([1.0, 0.0, 0.0])
    assert s["budget_recall@4000"] == pytest.approx([1.0, 1.0, 0.0])


def test_units_mapping():
    ev = {"a.md#L3-L4": Evidence("a.md", 3, 4), "a.md#L9-L9": Evidence("a.md", 9, 9)}
    judged = {"a.md#L3-L4": 1, "a.md#L9-L9": 1}
    # hit 1 holds line 3 only (no containment), hit 2 holds lines 1-5 and 9? no: 1-5; hit 3 lines 5-12
    ranked, first = judged_units(["a.md", "a.md", "a.md"], [7, 8, 9], [4, 1, 5], [8, 5, 12], judged, ev, "evidence")
    assert ranked == ["chunk:7", "a.md#L3-L4", "a.md#L9-L9"]
    assert first == {"a.md#L3-L4": 2, "a.md#L9-L9": 3}
    ranked, first = judged_units(["d2", "d1", "d2", "d3"], [1, 2, 3, 4], [1] * 4, [1] * 4, {"d1": 1}, {}, "documents")
    assert ranked == ["d2", "d1", "d3"] and first == {"d1": 2}  # first occurrence wins
    assert hits_within_budget([1500, 1500, 1500], 4000) == 2
    assert hits_within_budget([5000], 4000) == 0


def test_metric_names_validated():
    assert parse_metric("budget_recall@4000") == ("budget_recall", 4000)
    assert depth_for(["ndcg@10", "recall@100"]) == 100
    assert depth_for(["ndcg@5"]) == 10
    for bad in ("ndgc@10", "ndcg", "recall@x", "ndcg@0"):
        with pytest.raises(MetricError):
            parse_metric(bad)


def toy_dataset() -> Dataset:
    docs = (
        Document("d1", "apple banana orchard", source="corpus", evergreen=True),
        Document("d2", "cherry blossom", source="corpus", evergreen=True),
        Document("d3", "durian smell", source="corpus", evergreen=True),
        Document("d4", "mango season", source="corpus", evergreen=True),
        Document("d9", "pear tree", source="corpus", evergreen=True),
    )
    queries = (Query("q1", "cherry"), Query("q2", "apple"), Query("q3", "durian"))
    qrels = {"q1": {"d2": 1}, "q2": {"d9": 1}, "q3": {"d3": 1, "d4": 1}}
    return Dataset("toy", "documents", queries, qrels, documents=docs)


def test_three_query_dataset_end_to_end_known_values(tmp_path):
    """Real FTS5 keyword retrieval on a corpus where each query term occurs in exactly one document."""
    ev = Evaluator(toy_dataset(), embedder=None, cache=tmp_path, progress=False)
    res = ev.evaluate(["keyword"], ["ndcg@10", "recall@10", "mrr"])
    pq = res.per_query["keyword"]
    assert pq["ndcg@10"] == pytest.approx([1.0, 0.0, 1 / (1 + 1 / L2(3))])
    assert pq["recall@10"] == pytest.approx([1.0, 0.0, 0.5])
    assert pq["mrr"] == pytest.approx([1.0, 0.0, 1.0])
    assert res.means["keyword"]["ndcg@10"] == pytest.approx((1 + 1 / (1 + 1 / L2(3))) / 3)
    assert [r for r in res.runs["keyword"].ranked] == [["d2"], ["d1"], ["d3"]]
    ev.close()


def test_scorer_uses_ranx_equivalently():
    """The fast typed-list path gives what ranx's own Qrels/Run API gives."""
    from ranx import Qrels, Run, evaluate

    scorer, runs = three_query_runs()
    mine = scorer.score(runs, ["ndcg@10", "map"])
    run = runs.to_run(scorer.query_ids)
    run["q3"] = {"zz": 1.0}
    ref = evaluate(Qrels(scorer.qrels), Run(run), ["ndcg@10", "map"], return_mean=False)
    assert np.allclose(mine["ndcg@10"], ref["ndcg@10"]) and np.allclose(mine["map"], ref["map"])
