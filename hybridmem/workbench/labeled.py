"""Glue between the labeled-data pages (fusion compare, sweeps, evaluation) and :mod:`hybridmem.eval`.

One cached :class:`hybridmem.eval.Evaluator` per dataset holds the index and every query's retrieved candidates, so
each table here is ``rank()`` per config plus ranx scoring. Tables are cached with ``st.cache_data`` keyed by the
configs' fields. ``hybridmem.eval`` is imported inside functions only: ranx and numba stay off the first paint.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Mapping

import pandas as pd
import streamlit as st

from hybridmem.config import PRESETS, RankConfig
from hybridmem.errors import HybridMemError
from hybridmem.records import Ranking
from hybridmem.workbench import state, views
from hybridmem.wording import counted

SPLITS = ("all", "test", "train")


def require_dataset() -> tuple[str, Any]:
    """The chosen source's labeled dataset (and its name for caches), or an explanation and a stopped page."""
    source = state.current_source()
    if source.kind == "folder" and not source.path:
        views.fail("Enter a folder path in the sidebar.")
    problem = state.check_workspace(source.path) if source.kind == "folder" else None
    if problem:
        views.fail(problem)
    if not source.labeled:
        st.info(f"{state.code(source.path)} has no labeled queries yet. This page needs a labeled dataset: label "
                "this memory in the **Search inspector** (type a query, mark results *Relevant* or *Not relevant*) "
                "or accept suggestions on **Agent queries**, and this page scores it from the first labeled query. "
                "Labels made elsewhere come in with `hybridmem labels import`; the demo memory, LoCoMo, SciFact, a "
                "BEIR folder and a folder with meta.json, queries.jsonl and judgments.jsonl are labeled already.",
                icon=":material/info:")
        st.stop()
    try:
        with st.spinner("Loading the dataset…"):
            name = state.dataset_name(source)
            dataset = state.load_dataset(name)
        if source.own_labels:
            own_labels_note(dataset)
        return name, dataset
    except HybridMemError as exc:
        views.fail(state.error_text(exc))
    raise AssertionError("unreachable")  # views.fail stops the page


def own_labels_note(dataset: Any) -> None:
    """How many queries of this workspace are labeled, and a warning when too few for significance."""
    from hybridmem.eval.labels import MIN_SIGNIFICANT_QUERIES

    n = len(dataset.queries)
    st.caption(f"This workspace's own labels: {counted(n, 'labeled query')} "
               f"({sum(len(v) for v in dataset.qrels.values())} relevant spans). Label more in the search inspector "
               "or from Agent queries.")
    if n < MIN_SIGNIFICANT_QUERIES:
        st.warning(f"Only {counted(n, 'labeled query')}: with fewer than {MIN_SIGNIFICANT_QUERIES}, a "
                   "difference between configs is rarely significant. Treat these scores as a first look.",
                   icon=":material/warning:")


def evaluator(name: str) -> Any:
    """The cached evaluator, its index built (with a spinner the first time)."""
    try:
        with st.spinner("Opening the dataset's index (the first time it is built: embedding every chunk)…"):
            ev = state.get_evaluator(name)
            _ = ev.index
        return ev
    except HybridMemError as exc:
        views.fail(state.error_text(exc))


def compare_configs(cfg: RankConfig) -> dict[str, RankConfig]:
    """The sidebar config under its own fusion (first), as the joint model, weighted sum and RRF, plus keyword-only
    and vector-only (weights and min score from those presets; everything else from the sidebar)."""
    def leg_only(name: str) -> RankConfig:
        p = PRESETS[name]
        return cfg.replace(fusion=p.fusion, vector_weight=p.vector_weight, text_weight=p.text_weight,
                           min_score=p.min_score)

    fusions = dict.fromkeys([cfg.fusion, "joint", "weighted", "rrf"])
    return {**{f: cfg.with_fusion(f) for f in fusions}, "keyword": leg_only("keyword"), "vector": leg_only("vector")}


def configs_key(configs: Mapping[str, RankConfig]) -> str:
    """A stable text key of named configs (for ``st.cache_data``)."""
    return json.dumps({n: dataclasses.asdict(c) for n, c in configs.items()}, sort_keys=True)


@st.cache_data(show_spinner=False, max_entries=64)
def evaluate(name: str, key: str, metrics: tuple[str, ...], split: str, _configs: Mapping[str, RankConfig],
             baseline: str | None = None, test: str = "ttest") -> tuple[Any, Any]:
    """Score named configs on dataset ``name`` (``key`` is :func:`configs_key` of ``_configs``, for the cache).

    Returns:
        The :class:`hybridmem.eval.EvalResult` and its :class:`hybridmem.eval.compare.Comparison` against
        ``baseline`` (default: the first config), with ranx's paired ``test``.
    """
    from hybridmem.eval.compare import compare

    ev = state.get_evaluator(name)
    result = ev.evaluate(dict(_configs), list(metrics), split=None if split == "all" else split)
    return result, compare(result, baseline=baseline, test=test)


def means_frame(result: Any) -> pd.DataFrame:
    """One row per config, one column per metric."""
    return pd.DataFrame(result.means).T[result.metrics].reset_index(names="config")


def per_query_frame(result: Any, dataset: Any) -> pd.DataFrame:
    """One row per query and config: ``query``, ``text``, ``category``, ``config``, then the metrics."""
    texts = {q.id: q.text for q in dataset.queries}
    rows = []
    for cfg_name, per in result.per_query.items():
        for i, qid in enumerate(result.query_ids):
            rows.append({"query": qid, "text": texts.get(qid, ""), "category": result.categories[i],
                         "config": cfg_name, **{m: float(per[m][i]) for m in result.metrics}})
    return pd.DataFrame(rows)


def metric_names(dataset: Any, k: int, budget: int) -> tuple[str, ...]:
    """recall@k, nDCG@k, MRR@k, and for evidence datasets evidence recall at an injected-character budget."""
    names = (f"recall@{k}", f"ndcg@{k}", f"mrr@{k}")
    if dataset.kind == "evidence" and budget > 0:
        names += (f"budget_recall@{budget}",)
    return names


def rankings(name: str, query_id: str, configs: Mapping[str, RankConfig], depth: int) -> dict[str, Ranking]:
    """Each config's ranking of one query, as the evaluation ranks it (:meth:`hybridmem.eval.Evaluator.rankings`:
    same configs, same candidates, same clock)."""
    return state.get_evaluator(name).rankings(query_id, dict(configs), depth)


def significance_frame(comparison: Any) -> pd.DataFrame:
    """The comparison's rows against its baseline (the baseline's own rows left out)."""
    df = comparison.to_frame()
    df = df[df["config"] != comparison.baseline]
    return df[["config", "metric", "mean", "baseline_mean", "delta", "p_value", "significant", "wins", "losses",
               "ties"]]
