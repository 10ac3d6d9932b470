"""The default order: one logistic model over both legs' features of a candidate (``fusion = "joint"``). Pure.

A weighted sum of per-leg probabilities halves every chunk only one leg found, and min-max or RRF each read one view
of a leg (its scores relative to the query's pool, or its ranks). :func:`joint_fusion` reads them all at once, per
candidate of the union of both legs' pools:

- ``vector_minmax`` / ``keyword_minmax``: the leg's raw score min-max normalized between its best and its
  :data:`NORM_DEPTH`-th (BM25 as ``-bm25()``; the pool's last when the pool is shorter), 0 below that and when the
  leg did not find the chunk. A fixed depth, not the whole pool, so the top of the order does not move with
  ``max_results`` (an evaluation to depth 100 draws a pool of 200, whose tail would squeeze every feature);
- ``vector_p`` / ``keyword_p``: the leg's calibrated probability of relevance
  (:mod:`hybridmem.ranking.calibrate`), 0 when not found;
- ``vector_rank`` / ``keyword_rank``: ``RANK_K / (RANK_K + rank)``, 0 when not found;
- ``both``: 1 when both legs found the chunk;
- ``align_lift``: for a passage the token alignment read (the top :data:`~hybridmem.retrieve.alignment.DEPTH` of
  each leg, ``Candidates.passage_alignment``), its alignment mean less the lowest of the read passages' (so the
  least aligned and every passage not read get 0); 0 for all without an alignment. Cosine and BM25 read a passage
  whole; the alignment reads how much of the question it says token by token, which tells the passage that answers
  from its neighbours on the same subject.

``p = sigmoid(intercept + sum_f coef_f * x_f)`` with every coefficient >= 0, so a chunk's score never falls as either
leg's raw score (and so its rank, min-max and probability) rises: the order is monotone in each leg's raw score.
The model is a :class:`~hybridmem.config.calibration.Calibration` fitted on train splits
(:mod:`hybridmem.eval.calibrate`; the numbers and how they were chosen live in :mod:`hybridmem.config.calibration`),
so ``p`` is a probability that the chunk is relevant given that the query has an answer (under an order that weighs
the token alignment, ``scored_by`` below, the probability of the chunk's position in the order: the plain fit's k-th
highest for the k-th; the position, not that number, is what stays monotone in the chunk's raw scores). Leg weights
scale each
leg's terms (``factor = weight / mean weight``: 1 at equal weights, as fitted; the adaptive step's reduced vector
weight shrinks the vector terms and ``align_lift``, which the embedder reads; ``both`` counts only while both legs
take part).

Pointwise logistic regression for ranking: Cooper, Gey & Dabney, "Probabilistic retrieval based on staged logistic
regression", SIGIR 1992; the features are those of score-based fusion studies (Bruch, Gai & Ingber, "An analysis of
fusion functions for hybrid retrieval", TOIS 2023: min-max normalized scores beat RRF's ranks when the legs' scores
are informative).

Example:
    >>> from hybridmem.config.calibration import Calibration
    >>> model = Calibration(JOINT_FEATURES, (1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 2.0, 0.0), -2.0)
    >>> legs = [JointLeg("vector", 1.0, (1, 2), (0.9, 0.5), (0.2, 0.01), (1, 2)),
    ...         JointLeg("keyword", 1.0, (2, 3), (-4.0, -1.0), (0.6, 0.1), (1, 2))]
    >>> {cid: round(p, 3) for cid, p in joint_fusion(legs, model).items()}
    {1: 0.269, 2: 0.731, 3: 0.119}
"""

from __future__ import annotations

from itertools import chain
from typing import Mapping, NamedTuple, Sequence

import numpy as np

from hybridmem.config.calibration import JOINT_FEATURES, Calibration
from hybridmem.config.ranking import DECISION_DEPTH

__all__ = ["JOINT", "JOINT_FEATURES", "NORM_DEPTH", "RANK_K", "JointLeg", "feature_matrix", "joint_features",
           "joint_fusion"]

JOINT = "joint"  # the fusion name
RANK_K = 10  # the rank feature's constant: rank 1 -> 0.91, rank 10 -> 0.5, rank 40 -> 0.2
NORM_DEPTH = DECISION_DEPTH  # the min-max features' floor: the pool the model was fitted at (depth 10 x multiplier 4)


class JointLeg(NamedTuple):
    """One leg as the joint model reads it: parallel tuples in rank order.

    Attributes:
        name: ``"vector"`` or ``"keyword"``.
        factor: the leg's weight over the mean weight of the configured legs (1.0 at equal weights).
        ids: chunk ids in rank order.
        raws: raw scores (cosine; FTS5 ``bm25()``, negative, lower is better).
        probs: calibrated probabilities of relevance.
        ranks: 1-based ranks.
    """

    name: str
    factor: float
    ids: tuple[int, ...]
    raws: tuple[float, ...] | list[float]
    probs: tuple[float, ...] | list[float]
    ranks: tuple[int, ...]


def _minmax(values: Sequence[float]) -> np.ndarray:
    """``values`` (best first) scaled so the best is 1 and the :data:`NORM_DEPTH`-th 0, clipped to [0, 1]."""
    x = np.asarray(values, dtype=np.float64)
    if not len(x):
        return x
    hi, lo = x.max(), x[:NORM_DEPTH].min()
    if hi - lo <= 1e-12:
        return (x >= hi - 1e-12).astype(np.float64)
    return np.minimum(np.maximum((x - lo) / (hi - lo), 0.0), 1.0)  # clipped to [0, 1] (np.clip's dispatch is slower)


def joint_features(legs: Sequence[JointLeg],
                   alignment: Mapping[int, float] | None = None) -> dict[int, list[float]]:
    """Each candidate's features in :data:`JOINT_FEATURES` order (unscaled by the legs' factors); ``alignment`` the
    read passages' alignment means (``Candidates.passage_alignment``).

    Example:
        >>> f = joint_features([JointLeg("keyword", 1.0, (7, 8), (-2.0, -1.0), (0.3, 0.1), (1, 2))], {7: 0.75, 8: 0.5})
        >>> f[7]
        [0.0, 1.0, 0.0, 0.3, 0.0, 0.9090909090909091, 0.0, 0.25]
        >>> f[8]  # the least aligned passage read gets 0, as does every one not read
        [0.0, 0.0, 0.0, 0.1, 0.0, 0.8333333333333334, 0.0, 0.0]
    """
    ids, x = feature_matrix(legs, alignment)
    return dict(zip(ids, x.tolist()))


def feature_matrix(legs: Sequence[JointLeg],
                   alignment: Mapping[int, float] | None = None) -> tuple[list[int], np.ndarray]:
    """:func:`joint_features` as ``(chunk ids, one row per id)``, the form :func:`joint_fusion` reads: the ids in
    first-seen order (a leg's in rank order, the next leg's new ones after)."""
    firsts = []  # per leg: the ids it lists and the entry each keeps (a chunk listed twice keeps its first)
    for leg in legs:
        ids = list(leg.ids)
        entry = dict(zip(ids, range(len(ids))))
        if len(entry) != len(ids):
            entry = {}
            for i, cid in enumerate(ids):
                entry.setdefault(cid, i)
            ids = list(entry)
        firsts.append((ids, entry))
    seen = dict.fromkeys(chain.from_iterable(ids for ids, _ in firsts))
    row = dict(zip(seen, range(len(seen))))
    x = np.zeros((len(row), len(JOINT_FEATURES)), dtype=np.float64)
    for leg, (ids, entry) in zip(legs, firsts):
        if not ids:
            continue
        vector = leg.name == "vector"
        a = 0 if vector else 1  # column offset: vector features are even, keyword odd
        raws = np.asarray(leg.raws, dtype=np.float64)
        mm = _minmax(raws if vector else -raws)
        at = np.fromiter(map(row.__getitem__, ids), dtype=np.intp, count=len(ids))
        kept = np.fromiter(map(entry.__getitem__, ids), dtype=np.intp, count=len(ids))
        x[at, a] = mm[kept]
        x[at, 2 + a] = np.asarray(leg.probs, dtype=np.float64)[kept]
        x[at, 4 + a] = RANK_K / (RANK_K + np.asarray(leg.ranks, dtype=np.float64)[kept])
    x[:, 6] = (x[:, 4] > 0.0) & (x[:, 5] > 0.0)
    read = {row[cid]: a for cid, a in (alignment or {}).items() if cid in row}
    if read:
        low = min(read.values())
        for i, a in read.items():
            x[i, 7] = a - low
    return list(row), x


def joint_fusion(legs: Sequence[JointLeg], model: Calibration,
                 features: tuple[list[int], np.ndarray] | None = None,
                 scored_by: Calibration | None = None) -> dict[int, float]:
    """Each candidate's probability of relevance under ``model`` (see the module doc), in first-seen order (in
    ``model``'s order with ``scored_by``).
    ``features``: :func:`feature_matrix` of ``legs`` when the caller has it (a sweep reuses it across configs).

    ``scored_by``: a model whose probabilities the candidates take instead, handed out down ``model``'s order (the
    highest to ``model``'s first, and so on; each lower than the one before): e5's order that weighs the token
    alignment (``"<model>|aligned"``) moves a read passage up by many logits to break the near-ties among the top
    passages, more than it raises the chance that the passage is relevant, so no map of that score to a probability
    fits every source (its Platt step, fitted on the train rows, read SciFact's top 10 with a log loss of 0.56
    against the plain order's 0.19). The k-th hit's score is the plain order's k-th highest probability instead:
    calibrated over the hits shown (``eval/reports/hit-scores-e5.md``), but a chunk the alignment moved up past a
    chunk the legs prefer takes that chunk's probability, and a chunk's score can fall as its own raw score rises
    while its position never does. Ties in ``model``'s score keep the order of :func:`feature_matrix` (a leg's ids in
    rank order, the other leg's after).

    Raises:
        ConfigError (from the model): ``model`` or ``scored_by`` does not name :data:`JOINT_FEATURES`.
    """
    for m in (model, scored_by):
        if m is not None and tuple(m.features) != JOINT_FEATURES:
            from hybridmem.errors import ConfigError

            raise ConfigError(f"the joint model names features {m.features}, expected {JOINT_FEATURES}")
    ids, x = feature_matrix(legs) if features is None else features
    if not ids:
        return {}
    factors = {leg.name: leg.factor for leg in legs}
    fv, fk = factors.get("vector", 0.0), factors.get("keyword", 0.0)
    scale = np.array((fv, fk, fv, fk, fv, fk, min(fv, fk) if len(legs) > 1 else 0.0, fv))
    if scored_by is None:
        return dict(zip(ids, _sigmoid(x @ (np.array(model.coef) * scale) + float(model.intercept)).tolist()))
    both = x @ (np.array((model.coef, scored_by.coef)) * scale).T + np.array((model.intercept, scored_by.intercept))
    z = both[:, 0]
    p = np.sort(_sigmoid(both[:, 1]))[::-1]
    if len(p) > 1 and (p[1:] >= p[:-1]).any():  # ties: strictly lower down the order, so a sort by score keeps it
        for k in range(1, len(p)):
            p[k] = min(p[k], np.nextafter(p[k - 1], -1.0))
    return dict(zip([ids[i] for i in np.argsort(-z, kind="stable")], p.tolist()))


def _sigmoid(z: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(z))  # the logistic function without overflow, as calibrate.sigmoid
    return np.where(z >= 0, 1.0, e) / (1.0 + e)
