"""Abstention metrics (#16) against hand-computed values, the no-answer sets' construction, and the demo set's
no-answer rows."""

from __future__ import annotations


from hybridmem.config import DEFAULT_RANKING, PRESETS
from hybridmem.eval.abstention import (abstention_rate, abstention_table, curve_markdown, locomo_cross,
                                       no_answer_counts, table_markdown)
from hybridmem.eval.datasets import load_dataset
from hybridmem.eval.datasets.base import Dataset, Query
from hybridmem.records import Candidates, ChunkInfo, LegHit, Document


def test_abstention_rate_hand_computed() -> None:
    # 5 queries returning 0, 2, 0, 6, 0 hits: 3 of 5 abstained
    assert abstention_rate([0, 2, 0, 6, 0]) == 3 / 5
    assert abstention_rate([1, 1]) == 0.0 and abstention_rate([0]) == 1.0 and abstention_rate([]) == 0.0


def test_no_answer_counts_follow_min_score() -> None:
    chunk = ChunkInfo(1, "a.md", "memory", 1, 1, "x", 0.0, True, frozenset({"x"}))
    c = Candidates("x", ("x",), (LegHit(1, -1.0, 1),), (LegHit(1, 0.5, 1),), {1: chunk}, 24)
    minmax = PRESETS["minmax"].replace(rescue_keyword=False)
    # min-max: the lone candidate is 1.0 whatever min score below 1 is asked; 1.01 cuts it
    assert no_answer_counts([c, c], minmax, 0.0) == [1, 1]
    assert no_answer_counts([c], minmax.replace(min_score=1.01), 0.0) == [0]
    # with the reference's rescue the keyword hit comes back however high the min score
    assert no_answer_counts([c], PRESETS["minmax"].replace(min_score=1.01), 0.0) == [1]


def _toy_locomo() -> Dataset:
    qs = tuple(Query(f"c{c}q{i}", f"question {i} of conv {c}", "1", "train" if c < 3 else "test", f"conv{c}/")
               for c in range(5) for i in range(2))
    return Dataset("locomo", "evidence", qs, {q.id: {"u": 1} for q in qs}, documents=(Document("d", "t"),))


def test_locomo_cross_pairing_rule() -> None:
    na = locomo_cross(_toy_locomo())
    got = {(q.id.split("@")[0], q.scope, q.split) for q in na.queries}
    # train conversations 0,1,2 -> 1,2,0; test 3,4 -> 4,3
    assert {(i, s) for i, s, _ in got if i.endswith("q0")} == {
        ("c0q0", "conv1/"), ("c1q0", "conv2/"), ("c2q0", "conv0/"), ("c3q0", "conv4/"), ("c4q0", "conv3/")}
    assert all(sp == ("train" if i[1] in "012" else "test") for i, _, sp in got)
    assert len(na.queries) == 10 and len(na.select("test").queries) == 4


def test_demo_no_answer_rows() -> None:
    ds = load_dataset("demo")
    na = ds.no_answer
    assert len(na) >= 15 and {q.split for q in na} == {"train", "test"}
    assert {q.category for q in na} == {"en", "vi", "zh", "ja", "th"}  # the lang is the category
    assert not {q.id for q in na} & {q.id for q in ds.queries} and not {q.id for q in na} & set(ds.qrels)


def test_markdown_tables() -> None:
    assert table_markdown({"a": {"x": 0.5}}) == "| config | x |\n|---|---:|\n| a | 0.5000 |\n"
    assert curve_markdown([{"min_score": 0.1, "x": 1.0}]).splitlines()[2] == "| 0.100 | 1.0000 |"


def test_abstention_table_on_demo(demo_eval) -> None:
    # hash embedder (no model): the table has every column; the old default never abstains on demo-none (min-max
    # gives each query's best 1.0, and the keyword rescue returns keyword hits when nothing passes)
    t = abstention_table(demo_eval, {"minmax": PRESETS["minmax"], "default": DEFAULT_RANKING}, "test",
                         sets=None)
    assert {"ndcg@10", "recall@5", "false_abstention", "abstain:demo-none", "abstain:scifact-on-demo"} <= set(
        t["default"])
    assert t["minmax"]["abstain:demo-none"] == 0.0
    assert 0.0 <= t["default"]["abstain:demo-none"] <= 1.0


def test_a_name_no_pooled_chunk_holds_is_read_by_the_gate_features() -> None:
    """``name_missing``: a question naming someone no pooled chunk mentions (LoCoMo's cross-conversation questions)
    reads 1; the same question about someone a chunk names, or a question written without capitals, reads 0."""
    from hybridmem.ranking.pipeline import decision_features
    from hybridmem.tokenization import query_terms

    def gate_feature(query: str, text: str) -> float:
        chunk = ChunkInfo(1, "a.md", "memory", 1, 1, text, 0.0, True, frozenset(query_terms(text)))
        c = Candidates(query, tuple(query_terms(query)), (LegHit(1, -1.0, 1),), (LegHit(1, 0.8, 1),), {1: chunk}, 24)
        return decision_features(c, DEFAULT_RANKING)[1]["name_missing"]

    james = "James moved into a new apartment with his dogs"
    assert gate_feature("Has Andrew moved into a new apartment?", james) == 1.0
    assert gate_feature("Has James moved into a new apartment?", james) == 0.0
    assert gate_feature("has andrew moved into a new apartment?", james) == 0.0
    assert gate_feature("Andrew moved?", james) == 0.0  # the question's first word is not read as a name
