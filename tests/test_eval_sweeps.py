"""Sweeps: grid parsing, sweep values equal the runner's, and the optimizer never looks at test queries."""

from __future__ import annotations

import pytest

from hybridmem.config import preset
from hybridmem.errors import ConfigError
from hybridmem.eval.sweeps import configs_for, grid, optimize, param_changes, parse_param, sweep


def test_param_parsing_and_aliases():
    assert parse_param("rrf_k=30,60") == ("rrf_k", [30, 60])
    assert parse_param("bm25_norm=minmax,rank") == ("bm25_norm", ["minmax", "rank"])
    assert param_changes("mmr_lambda", 0.5) == {"mmr": True, "mmr_lambda": 0.5}
    assert param_changes("vector_weight", 0.3) == {"vector_weight": 0.3, "text_weight": 0.7}
    assert param_changes("candidate_multiplier", 2.0) == {"candidate_multiplier": 2}
    assert len(grid({"a": [1, 2, 3], "b": [4, 5]})) == 6
    cfg = configs_for([{"half_life": 7}], preset("rrf"))[0]
    assert cfg.decay and cfg.half_life_days == 7.0 and cfg.fusion == "rrf"
    with pytest.raises(ConfigError, match="unknown sweep parameter"):
        param_changes("lambda", 1)
    with pytest.raises(ConfigError):
        parse_param("rrf_k")


def test_sweep_values_equal_the_runner(demo_eval):
    params = {"vector_weight": [0.0, 0.5, 1.0], "bm25_norm": ["minmax", "rank"]}
    df = sweep(demo_eval, params, preset("weighted"), ["ndcg@10", "recall@10"], split="train")
    assert len(df) == 6 and list(df.columns) == ["vector_weight", "bm25_norm", "ndcg@10", "recall@10"]
    assert df.attrs["queries"] == 43 and df.attrs["depth"] == 10
    cfg = preset("weighted").replace(vector_weight=0.5, text_weight=0.5, bm25_norm="rank")
    res = demo_eval.evaluate({"x": cfg}, ["ndcg@10", "recall@10"], split="train")
    row = df[(df.vector_weight == 0.5) & (df.bm25_norm == "rank")].iloc[0]
    assert row["ndcg@10"] == pytest.approx(res.means["x"]["ndcg@10"])
    assert row["recall@10"] == pytest.approx(res.means["x"]["recall@10"])


def test_a_sweep_scores_each_metric_at_its_own_depth_as_the_runner_does(demo_eval):
    """A deeper metric beside ndcg@10 leaves the sweep's ndcg@10 as it is alone (min-max orders its top 10 a little
    differently in a deeper pool), and each column equals the runner's figure for that point."""
    params = {"vector_weight": [0.3, 0.7]}
    alone = sweep(demo_eval, params, preset("minmax"), ["ndcg@10"], split="train")
    both = sweep(demo_eval, params, preset("minmax"), ["recall@100", "ndcg@10"], split="train")
    assert list(both.columns) == ["vector_weight", "recall@100", "ndcg@10"] and both.attrs["depth"] == 100
    assert list(both["ndcg@10"]) == list(alone["ndcg@10"])
    for _, row in both.iterrows():
        cfg = preset("minmax").replace(vector_weight=row.vector_weight, text_weight=round(1 - row.vector_weight, 10))
        res = demo_eval.evaluate({"x": cfg}, ["ndcg@10", "recall@100"], split="train")
        assert (row["ndcg@10"], row["recall@100"]) == pytest.approx((res.means["x"]["ndcg@10"],
                                                                     res.means["x"]["recall@100"]))


def test_optimizer_tunes_on_train_only(demo_eval, monkeypatch):
    seen: list[list[str]] = []
    real = demo_eval.rank_runs_many

    def spy(configs, query_ids, cands):
        seen.extend([list(query_ids)] * len(configs))  # one entry per config ranked
        return real(configs, query_ids, cands)

    monkeypatch.setattr(demo_eval, "rank_runs_many", spy)
    params = {"vector_weight": [0.0, 0.3, 0.7], "min_score": [0.0, 0.35]}
    res = optimize(demo_eval, params, "ndcg@10", base=preset("weighted"))
    ds = demo_eval.dataset
    train = {q.id for q in ds.queries if q.split == "train"}
    test = {q.id for q in ds.queries if q.split == "test"}
    # the 6 grid points are ranked on train queries only; then base and tuned once each on test
    assert len(seen) == 6 + 2
    assert all(set(ids) == train for ids in seen[:6])
    assert all(set(ids) == test for ids in seen[6:])
    assert res.train_score == pytest.approx(res.train_table["ndcg@10"].max())
    assert res.best_params == res.train_table.iloc[int(res.train_table["ndcg@10"].to_numpy().argmax())][
        ["vector_weight", "min_score"]].to_dict()
    assert set(res.test.means) == {"base", "tuned"}
    assert len(res.test.query_ids) == len(test)
