"""The order's alignment lift (``align_lift``, :mod:`hybridmem.ranking.joint`): its weight, chosen on train nDCG@10.

The lift acts only among the top passages of each leg that the token alignment read. :func:`fit_lift` chooses its
weight from :data:`LIFT_GRID` on the measure it is for (a pairwise fit over the whole pool weighs it by the many pairs
it cannot change); :func:`hybridmem.eval.decisions.fit_order` calls it after the legs' pairwise fit
(``docs/ranking.md``, the twelfth round). The lifted score is an order only: a hit's probability stays the plain
order's (:func:`hybridmem.ranking.joint.joint_fusion`, ``scored_by``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Sequence

import numpy as np

from hybridmem.eval.metrics import QueryRuns, Scorer

__all__ = ["DEPTH", "LIFT_GRID", "fit_lift", "lift_ndcg", "source_weights"]

DEPTH = 10  # the evaluation depth the two decisions are fitted at (nDCG@10; pool 40 per leg)
# logits per unit of alignment mean (e5's train rows: flat from 80 to 160, 0.8118 against 0.8013 without)
LIFT_GRID = (0.0, 10.0, 20.0, 40.0, 60.0, 80.0, 120.0, 160.0, 240.0)


def source_weights(sources: Sequence[str]) -> np.ndarray:
    """Each row's weight, so that every source weighs the same in total."""
    counts: dict[str, int] = defaultdict(int)
    for s in sources:
        counts[s] += 1
    return np.array([1.0 / counts[s] for s in sources])


def lift_ndcg(rows: Sequence[tuple[str, np.ndarray, np.ndarray, np.ndarray]], beta: float) -> np.ndarray:
    """nDCG@10 of each of ``rows`` ``(source, z, lift, labels)`` with a relevant candidate, ordered by
    ``z + beta * lift`` (ties keep the rows' order), in the order of those rows."""
    usable = [r for r in rows if r[3].any()]
    ids = [str(i) for i in range(len(usable))]
    scorer = Scorer(ids, {q: {str(j): 1 for j in np.flatnonzero(y)} for q, (_, _, _, y) in zip(ids, usable)})
    ranked = [[str(j) for j in np.argsort(-(z + beta * lift), kind="stable")[:DEPTH]] for _, z, lift, _ in usable]
    metric = f"ndcg@{DEPTH}"
    return scorer.score(QueryRuns(ranked, [{}] * len(ranked), [[]] * len(ranked)), [metric])[metric]


def fit_lift(rows: Sequence[tuple[str, np.ndarray, np.ndarray, np.ndarray]], grid: Sequence[float] = LIFT_GRID,
             ) -> float:
    """``beta`` for the order ``z + beta * lift`` over rows ``(source, z, lift, labels)`` of answerable queries (``z``
    the legs' logit, ``lift`` the ``align_lift`` feature): the one of ``grid`` with the highest nDCG@10 averaged per
    source (ties: the smaller).

    The lift acts only among the top passages of each leg; a pairwise or pointwise fit over the whole pool weighs it
    by the many pairs it cannot change (on e5's train rows: 0.35 logits per unit against the 40-80 that order the top
    best), so its weight is chosen on the measure it is for.
    """
    usable = [r for r in rows if r[3].any()]
    by_source: dict[str, list[int]] = defaultdict(list)
    for i, (s, _, _, _) in enumerate(usable):
        by_source[s].append(i)

    def quality(beta: float) -> float:
        per = lift_ndcg(usable, beta)
        return float(np.mean([per[idx].mean() for idx in by_source.values()]))
    scores = [(quality(beta), -beta) for beta in grid]
    return float(-max(scores)[1]) if usable else 0.0
