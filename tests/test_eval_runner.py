"""The runner: cached indexes embed nothing the second time, and its rankings equal live MemoryIndex.search()."""

from __future__ import annotations

import pytest

from hybridmem.config import PRESETS, preset
from hybridmem.embeddings.fake import HashEmbedder
from hybridmem.eval.compare import compare, metrics_table
from hybridmem.eval.datasets import load_dataset
from hybridmem.eval.runner import Evaluator, eval_config

from test_eval_metrics import toy_dataset


def test_second_run_embeds_nothing(tmp_path):
    ds = toy_dataset()
    first = HashEmbedder(dims=32)
    ev = Evaluator(ds, embedder=first, cache=tmp_path, progress=False)
    a = ev.evaluate(["weighted", "rrf"], ["ndcg@10"])
    ev.close()
    assert first.embedded == len(ds.documents) + len(ds.queries)
    second = HashEmbedder(dims=32)
    ev2 = Evaluator(ds, embedder=second, cache=tmp_path, progress=False)
    b = ev2.evaluate(["weighted", "rrf"], ["ndcg@10"])
    ev2.close()
    assert second.embedded == 0 and second.calls == 0
    assert ev2.index_report.unchanged == len(ds.documents)
    assert a.means == b.means
    assert len(list(tmp_path.glob("toy-*.sqlite"))) == 1


def test_other_index_settings_get_another_cache_file(tmp_path):
    from hybridmem.config import Settings

    ds = toy_dataset()
    p1 = Evaluator(ds, embedder=HashEmbedder(32), cache=tmp_path).index_path()
    p2 = Evaluator(ds, Settings().override(chunking={"tokens": 200, "overlap": 40}), HashEmbedder(32),
                   cache=tmp_path).index_path()
    p3 = Evaluator(ds, embedder=HashEmbedder(16), cache=tmp_path).index_path()
    assert len({p1, p2, p3}) == 3


CONFIGS = {
    **{n: PRESETS[n] for n in ("keyword", "vector", "weighted", "rrf", "reference")},
    "mmr": preset("weighted").replace(mmr=True, mmr_lambda=0.5, min_score=0.0),
    "decay": preset("rrf").replace(decay=True, half_life_days=20.0),
    "small_pool": preset("weighted").replace(candidate_multiplier=1, min_score=0.1),
}


def test_runner_equals_live_search(demo_eval):
    """Retrieve-once + rank() gives the same chunks in the same order as search() for every config."""
    ds = demo_eval.dataset
    depth = 10
    res = demo_eval.evaluate(CONFIGS, ["ndcg@10"], depth=depth)
    qids = res.query_ids
    cands = demo_eval._cands
    idx = demo_eval.index
    for name, cfg in CONFIGS.items():
        ecfg = eval_config(cfg, depth)
        assert res.configs[name] == ecfg
        runs = demo_eval.rank_runs(ecfg, qids, cands)
        for q, ranked in zip(ds.queries, runs.ranked):
            live = idx.search(q.text, config=ecfg, now=ds.reference_time)
            from hybridmem.ranking import rank

            mine = rank(cands[q.id], ecfg, now=ds.reference_time, explain=False, centred_snippets=False).hits
            assert [(h.path, h.start_line, h.end_line) for h in mine] == \
                   [(h.path, h.start_line, h.end_line) for h in live.results], (name, q.id)
        assert res.per_query[name]["ndcg@10"].shape == (len(qids),)


def test_rankings_of_one_query_are_the_evaluations(demo_eval):
    """Evaluator.rankings (the workbench's per-query view) ranks exactly as the evaluation: its configs, its
    candidates, the dataset's clock; every candidate explained."""
    from hybridmem.ranking import rank

    ds = demo_eval.dataset
    named = {n: CONFIGS[n] for n in ("weighted", "rrf", "mmr", "decay")}
    cfgs, cands = demo_eval.prepare(named, 10)
    for q in ds.queries[:5]:
        got = demo_eval.rankings(q.id, named, 10)
        assert list(got) == list(named)
        for name, ranking in got.items():
            assert ranking == rank(cands[q.id], cfgs[name], now=ds.reference_time)
            lengths = demo_eval.rank_runs(cfgs[name], [q.id], cands).lengths[0]
            assert [len(h.text) for h in ranking.hits] == lengths and len(ranking.candidates) > len(ranking.hits)


def test_compare_and_categories(demo_eval):
    res = demo_eval.evaluate(["keyword", "weighted", "rrf"], ["ndcg@10", "evidence_recall@5"], split="test")
    assert len(res.query_ids) == 38
    cmp = compare(res, baseline="keyword")
    row = cmp.row("weighted", "ndcg@10")
    assert row["wins"] + row["losses"] + row["ties"] == 38
    assert 0.0 <= row["p_value"] <= 1.0
    same = cmp.row("keyword", "ndcg@10")
    assert same["p_value"] == 1.0 and same["ties"] == 38
    assert row["delta"] == pytest.approx(res.means["weighted"]["ndcg@10"] - res.means["keyword"]["ndcg@10"])
    by_cat = res.by_category()
    assert set(by_cat) == {q.category for q in demo_eval.dataset.select("test").queries}
    table = metrics_table(res)
    assert list(table.index) == ["keyword", "weighted", "rrf"]


def test_query_scope_matches_search_with_path_prefix(tmp_path):
    """A scoped query (LoCoMo: its own conversation) retrieves as search(path_prefix=...) does."""
    from hybridmem.eval.datasets import Dataset, Query
    from hybridmem.records import Document

    docs = (Document("a/s1", "Caroline went hiking\nMel painted"), Document("b/s1", "Caroline went hiking too"))
    ds = Dataset("scoped", "evidence", (Query("q", "Caroline hiking", scope="a/"),),
                 {"q": {"a/s1#L1-L1": 1}}, documents=docs,
                 evidence={"a/s1#L1-L1": __import__("hybridmem.eval.datasets", fromlist=["Evidence"]).Evidence(
                     "a/s1", 1, 1)})
    ev = Evaluator(ds, embedder=HashEmbedder(16), cache=tmp_path, progress=False)
    res = ev.evaluate(["keyword"], ["recall@10"], depth=10)
    assert res.means["keyword"]["recall@10"] == 1.0
    assert {h.chunk_id for h in ev._cands["q"].keyword} <= set(ev._cands["q"].chunks)
    assert {ci.path for ci in ev._cands["q"].chunks.values()} == {"a/s1"}
    live = ev.index.search("Caroline hiking", config=eval_config(preset("keyword"), 10), path_prefix="a/", now=0.0)
    assert [h.path for h in live.results] == ["a/s1"]
    ev.close()


def test_locomo_queries_are_scoped_to_their_conversation():
    ds = load_dataset("locomo")
    assert all(q.scope == q.id.split("/")[0] + "/" for q in ds.queries)
    assert all(u.startswith(q.scope) for q in ds.queries for u in ds.qrels[q.id])


def test_each_metric_is_ranked_to_its_own_depth(demo_eval):
    """min-max normalises over the pool, so its top 10 in a pool of 400 (depth 100) differs from its top 10 in one of
    40: ndcg@10 was scored on the deeper ranking whenever a deeper metric was asked beside it (the abstention table's
    budget_recall@4000), and two commands printed two figures for one config. Each metric now has its own ranking."""
    named = {n: PRESETS[n] for n in ("minmax", "rrf")}
    alone = demo_eval.evaluate(named, ["ndcg@10", "recall@5"], split="test")
    beside = demo_eval.evaluate(named, ["budget_recall@4000", "ndcg@10", "recall@100", "recall@5"], split="test")
    forced = demo_eval.evaluate(named, ["ndcg@10", "recall@100", "budget_recall@4000"], split="test", depth=100)
    assert beside.depths == {"budget_recall@4000": 100, "ndcg@10": 10, "recall@100": 100, "recall@5": 10}
    assert beside.metrics == ["budget_recall@4000", "ndcg@10", "recall@100", "recall@5"]
    assert beside.depth == 100 and beside.configs["minmax"].max_results == 100
    assert beside.depth_words() == "depth 10, budget_recall@4000 to 100, recall@100 to 100"
    for name in named:
        for m in ("ndcg@10", "recall@5"):
            assert list(beside.per_query[name][m]) == list(alone.per_query[name][m]), (name, m)
        for m in ("recall@100", "budget_recall@4000"):
            assert list(beside.per_query[name][m]) == list(forced.per_query[name][m]), (name, m)
    # the two depths do differ here, so the figures above could not agree by chance
    assert beside.means["minmax"]["ndcg@10"] != forced.means["minmax"]["ndcg@10"]
