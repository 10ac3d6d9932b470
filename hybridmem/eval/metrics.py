"""Metrics: ranx for rank metrics, plus evidence recall (per hit, and within an injected-character budget).

Metric names:

- ranx (Bassani, ECIR 2022): ``ndcg@k``, ``recall@k``, ``precision@k``, ``mrr[@k]``, ``map[@k]``, ``hit_rate@k``,
  computed over the ranked *units* (documents or evidence spans, see :mod:`hybridmem.eval.units`); graded qrels give
  graded nDCG.
- ``evidence_recall@k``: the share of a query's judged units contained in its top-k *hits* (chunks); with document
  units it is the share of relevant documents among the top-k chunks' documents.
- ``budget_recall@N``: the same, over the leading hits whose whole chunk texts fit in ``N`` characters (the 4000-char
  cap an agent gets), which compares chunk sizes fairly.

ranx compiles with numba on first use (~15 s cold): it is imported inside functions only, never by the engine.

Example:
    >>> parse_metric("ndcg@10"), parse_metric("mrr")
    (('ndcg', 10), ('mrr', None))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from hybridmem.config import DEFAULT_RANKING
from hybridmem.errors import HybridMemError

RANX_METRICS = ("ndcg", "recall", "precision", "mrr", "map", "hit_rate")
HIT_METRICS = ("evidence_recall", "budget_recall")
DEFAULT_METRICS = ("ndcg@10", "recall@10", "recall@100", "mrr@100", "map@100", "precision@10", "hit_rate@10")
EVIDENCE_METRICS = ("evidence_recall@5", "evidence_recall@10", "budget_recall@4000")
DEFAULT_DEPTH = 100


class MetricError(HybridMemError, ValueError):
    """A metric name is not known; the message lists the valid ones."""


def parse_metric(name: str) -> tuple[str, int | None]:
    """``'ndcg@10'`` -> ``('ndcg', 10)``; raises :class:`MetricError` for unknown names or bad cutoffs."""
    base, _, k = name.strip().partition("@")
    if base not in RANX_METRICS + HIT_METRICS:
        raise MetricError(f"unknown metric {name!r}: expected one of {', '.join(RANX_METRICS + HIT_METRICS)} "
                          "with an optional @k (e.g. ndcg@10, budget_recall@4000)")
    if k and not k.isdigit() or k == "0":
        raise MetricError(f"metric {name!r}: the cutoff after @ must be a positive integer")
    if base in ("ndcg", "recall", "precision", "hit_rate", "evidence_recall", "budget_recall") and not k:
        raise MetricError(f"metric {name!r} needs a cutoff, e.g. {base}@10")
    return base, int(k) if k else None


def depth_for(metrics: Sequence[str]) -> int:
    """How many results the ranking must return to compute ``metrics`` (the largest rank cutoff; at least 10).

    ``mrr``/``map`` without a cutoff and ``budget_recall`` use :data:`DEFAULT_DEPTH`.
    """
    depth = 10
    for m in metrics:
        base, k = parse_metric(m)
        if base == "budget_recall" or k is None:
            depth = max(depth, DEFAULT_DEPTH)
        else:
            depth = max(depth, k)
    return depth


def metric_depths(metrics: Sequence[str]) -> dict[int, list[str]]:
    """``metrics`` grouped by the depth each is ranked to (:func:`depth_for` of it alone), shallowest first.

    A config's pool is the depth times its candidate multiplier, and a config that normalises over its pool (min-max,
    the joint order's min-max features) orders its top 10 a little differently in a pool of 400 than in one of 40. So
    each metric is scored on a ranking to its own depth, and ``ndcg@10`` is the same figure whatever else is asked
    beside it: the ranking of a search for 10 results (pool 40 per leg, the depth the ranking's models were fitted
    at).

    Example:
        >>> metric_depths(["ndcg@10", "budget_recall@4000", "recall@5", "recall@100"])
        {10: ['ndcg@10', 'recall@5'], 100: ['budget_recall@4000', 'recall@100']}
    """
    groups: dict[int, list[str]] = {}
    for m in metrics:
        groups.setdefault(depth_for([m]), []).append(m)
    return dict(sorted(groups.items()))


@dataclass
class QueryRuns:
    """One config's results over a query set, aligned with the scorer's query order.

    Attributes:
        ranked: ranked unit ids per query (documents, or evidence spans with ``chunk:<id>`` placeholders).
        first: ``{judged unit: first hit position}`` per query.
        lengths: chunk text length of each returned hit, per query.
    """

    ranked: list[list[str]]
    first: list[dict[str, int]]
    lengths: list[list[int]]

    def to_run(self, query_ids: Sequence[str]) -> dict[str, dict[str, float]]:
        """A ranx-style run ``{query_id: {unit: score}}`` (score ``n - i`` keeps the order)."""
        return {q: {u: float(len(r) - i) for i, u in enumerate(r)} for q, r in zip(query_ids, self.ranked)}


class Scorer:
    """Scores many runs against one query set; ranx's qrels conversion is done once.

    Args:
        query_ids: the queries, in the order every :class:`QueryRuns` uses.
        qrels: ``{query_id: {unit: grade}}``.
    """

    def __init__(self, query_ids: Sequence[str], qrels: Mapping[str, Mapping[str, int]]) -> None:
        self.query_ids = list(query_ids)
        self.qrels = {q: dict(qrels[q]) for q in self.query_ids}
        self._typed_qrels = None

    def _ranx_qrels(self):  # noqa: ANN202
        if self._typed_qrels is None:
            from ranx.utils import python_dict_to_typed_list

            self._typed_qrels = python_dict_to_typed_list(
                {q: {u: float(g) for u, g in self.qrels[q].items()} for q in self.query_ids}, sort=True)
        return self._typed_qrels

    def score(self, runs: QueryRuns, metrics: Sequence[str]) -> dict[str, np.ndarray]:
        """Per-query scores, ``{metric: array aligned with query_ids}``."""
        out: dict[str, np.ndarray] = {}
        ranx_metrics = [m for m in metrics if parse_metric(m)[0] in RANX_METRICS]
        if ranx_metrics:
            from ranx import evaluate
            from ranx.utils import python_dict_to_typed_list

            run = {q: ({u: float(len(r) - i) for i, u in enumerate(r)} or {"\0empty": 0.0})
                   for q, r in zip(self.query_ids, runs.ranked)}
            # ranx's evaluate() fails on a single metric with return_mean=False (it indexes its result by the
            # metric's base name), so always ask for at least two.
            asked = ranx_metrics if len(ranx_metrics) > 1 else [*ranx_metrics, "hits@1" if ranx_metrics[0] != "hits@1" else "mrr"]
            scores = evaluate(self._ranx_qrels(), python_dict_to_typed_list(run, sort=True), asked,
                              return_mean=False, save_results_in_run=False)
            out.update({m: np.asarray(scores[m], dtype=float) for m in ranx_metrics})
        for m in metrics:
            base, k = parse_metric(m)
            if base not in HIT_METRICS:
                continue
            vals = np.empty(len(self.query_ids))
            for i, q in enumerate(self.query_ids):
                if base == "evidence_recall":
                    cut = k
                else:
                    cut = _hits_within(runs.lengths[i], k or DEFAULT_RANKING.max_injected_chars)
                found = sum(1 for pos in runs.first[i].values() if pos <= cut)
                vals[i] = found / len(self.qrels[q])
            out[m] = vals
        return {m: out[m] for m in metrics}


def _hits_within(lengths: Sequence[int], budget: int) -> int:
    from hybridmem.eval.units import hits_within_budget

    return hits_within_budget(lengths, budget)
