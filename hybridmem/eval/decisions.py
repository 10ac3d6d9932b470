"""Fit the two decisions on train splits (``hybridmem eval calibrate --decisions``): the order and the answer gate.

Rows come from :func:`hybridmem.ranking.pipeline.decision_features`, so they are exactly what ``rank()`` reads under
the default config at the evaluation depth (10; pool 40 per leg).

- **Order** (:mod:`hybridmem.ranking.joint`): every candidate of the union of both legs' pools of every answerable
  TRAIN query, labelled 1 when it holds a judged unit. A pairwise logistic model (each relevant candidate against
  each irrelevant one of the same query, at most :data:`PAIRS` pairs a query; Joachims, "Optimizing search engines
  using clickthrough data", KDD 2002, with a logistic loss as in RankNet) gives the direction that orders best, with
  every coefficient >= 0 (monotone in each leg's raw score); a Platt step on the pointwise rows then maps it to a
  probability of relevance. Each source (a dataset; XQuAD-R's 11 languages together) weighs the same. One fit per
  embedding model on its own candidates (a leg reads differently per model: MiniLM's vector leg is blind outside
  English, e5's is the stronger leg in Russian or German), and one on every model's rows together for a model never
  fitted.
- **Gate** (:mod:`hybridmem.ranking.gate`), one per embedding model: every TRAIN query it decides labelled 1 when
  answerable and 0 when it is in a no-answer set (:func:`hybridmem.eval.abstention.no_answer_sets`); answerable and
  no-answer rows weigh the same in total, each set within them the same. Features are standardized for the fit. A
  gate of both legs decides the queries whose vector leg took part: where the adaptive step drops a blind one
  (MiniLM outside Latin script), the keyword leg's gate decides, so those rows fit, and place, that gate only.
- **Threshold**: the largest answer probability, on a grid of 0.005, at which no answerable train set (each dataset,
  each XQuAD-R language on its own) abstains on more than :data:`MAX_FALSE_ABSTENTION` of its queries (or one query,
  in a set too small for that share to be one) under the default model's gate. Every other gate (another model's,
  and the one-leg gates: keyword alone, vector alone) gets its intercept moved so that its own such point lies on
  the same threshold (:func:`false_point`): one ``answer_threshold`` means the same for every model and every
  combination of legs. So does the gate of a model whose candidates carry the token alignment
  (``"<model>|aligned"``, :data:`ALIGNED_USED_BY_MODEL`), which ``rank()`` reads when they do. A gate's 2% point is
  read on the queries it decides, as it is fitted.

Example:
    >>> round(choose_threshold({"a": [0.9, 0.8, 0.3, 0.95]}, max_false=0.25), 3)
    0.8
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Mapping, NamedTuple, Sequence

import numpy as np

from hybridmem.config import DEFAULT_RANKING, RankConfig
from hybridmem.config.calibration import JOINT_FEATURES, KEYWORD_GATE, Calibration
from hybridmem.eval.abstention import no_answer_candidates, no_answer_sets
from hybridmem.eval.runner import Evaluator, eval_config
from hybridmem.eval.units import judged_units
from hybridmem.ranking.calibrate import fit_logistic
from hybridmem.ranking.gate import ALIGN_FEATURES, GATE_FEATURES, logit
from hybridmem.ranking.pipeline import decision_features
from hybridmem.records import Candidates

__all__ = ["ALIGNED_USED", "ALIGNED_USED_BY_MODEL", "DECISION_DATASETS", "DEPTH", "GATE_USED", "GATE_USED_BY_MODEL",
           "MAX_FALSE_ABSTENTION", "PAIRS", "DecisionRows", "Decisions", "choose_threshold", "collect", "false_point",
           "fit_decisions", "fit_gate", "fit_order", "fit_rows"]

DEPTH = 10
PAIRS = 100
# The datasets whose TRAIN splits (and no-answer sets) both fits read. Cranfield is never fitted on: it is the held-out
# check (English technical abstracts, a domain none of these is).
DECISION_DATASETS = ("scifact", "locomo", "demo", *(f"xquad-{lang}" for lang in
                                                     ("ar", "de", "el", "en", "es", "hi", "ru", "th", "tr", "vi", "zh")))
MAX_FALSE_ABSTENTION = 0.02
# The gate's features: chosen on train splits (docs/ranking.md); the others of GATE_FEATURES did not help there.
GATE_USED = ("keyword_top", "vector_top", "vector_gap", "coverage_top", "idf_coverage_top", "term_share")
# Per model where train chose otherwise: MiniLM's gate lost abstention with the IDF-weighted coverage (train mean 21.0
# -> 20.2%), so it keeps the five features of #22.
GATE_USED_BY_MODEL = {"all-MiniLM-L6-v2": ("keyword_top", "vector_top", "vector_gap", "coverage_top", "term_share")}
# The gate of a model whose candidates carry the token alignment (retrieve/alignment.py: e5's token states, the bundled
# e5's for MiniLM, which gives none), both legs: chosen on train (docs/ranking.md): the keyword leg's top and plain
# coverage left out, which cost Thai and Vietnamese; then (sixth round) the alignment weighted by surprisal and its
# share of the question's own pieces, and the query's length in terms: a question cut into many short units (Thai,
# Chinese, Vietnamese) aligns better with any passage. MiniLM's (seventh round) takes the same features: the variants
# tried gained under a point in the mean and lost in the worst set.
ALIGNED_USED = ("vector_top", "vector_gap", "idf_coverage_top", "term_share", *ALIGN_FEATURES, "log_terms")
ALIGNED_USED_BY_MODEL = {"multilingual-e5-small": ALIGNED_USED, "all-MiniLM-L6-v2": ALIGNED_USED}
KEYWORD_USED = ("keyword_top", "coverage_top", "term_share")  # the keyword leg alone
_EMPTY = [0.0] * len(GATE_FEATURES)
VECTOR_USED = ("vector_top", "vector_gap")  # the vector leg alone


class Decisions(NamedTuple):
    """What :func:`fit_rows` fits: the pooled order, one order per embedding model, the gates, the threshold."""

    joint: Calibration
    joints: dict[str, Calibration]
    gates: dict[str, Calibration]
    threshold: float


@dataclass
class DecisionRows:
    """Rows for both fits. ``order``: per answerable query, ``(source, features, labels)``; ``gate``: per query,
    ``(set, {legs: features}, answerable)`` where ``set`` is the dataset (answerable) or the no-answer set's name and
    ``legs`` is ``both``, ``keyword`` or ``vector`` (the features ``rank()`` reads when only that leg takes part)."""

    order: list[tuple[str, np.ndarray, np.ndarray]] = field(default_factory=list)
    gate: list[tuple[str, dict[str, list[float]], int]] = field(default_factory=list)


def _source(name: str) -> str:
    return "xquad" if name.startswith("xquad-") else name


LEG_CONFIGS = {"both": {}, "keyword": {"vector_weight": 0.0}, "vector": {"text_weight": 0.0}}


def _gate_features(c: Candidates, config: RankConfig) -> dict[str, list[float]]:
    out = {}
    for legs, change in LEG_CONFIGS.items():
        _, query = decision_features(c, config.replace(**change) if change else config)
        out[legs] = [query.get(f, 0.0) for f in GATE_FEATURES] if query else _EMPTY
    return out


def _aligned(ev: Evaluator, c: Candidates) -> Candidates:
    """``c`` with the token alignment when its model is one whose aligned gate is fitted (:data:`ALIGNED_USED_BY_MODEL`)
    and retrieval did not add it (a model without token states of its own, before its aligned gate exists)."""
    if c.alignment is None and c.vector_model in ALIGNED_USED_BY_MODEL:
        return ev.index.align(c, always=True)
    return c


def collect(ev: Evaluator, rows: DecisionRows, split: str = "train") -> None:
    """Add ``ev``'s dataset's ``split`` rows (answerable queries and its no-answer sets) to ``rows``."""
    ds = ev.dataset
    config = eval_config(DEFAULT_RANKING, DEPTH)
    cands = ev.candidates(config.pool)
    for q in ds.select(split).queries:
        c = _aligned(ev, cands[q.id])
        joint, _ = decision_features(c, config)
        rows.gate.append((ds.name, _gate_features(c, config), 1))
        if not joint:
            continue
        ids = list(joint)
        labels = []
        for cid in ids:
            ch = c.chunks[cid]
            _, first = judged_units([ch.path], [cid], [ch.start_line], [ch.end_line], ds.qrels[q.id], ds.evidence,
                                    ds.kind)
            labels.append(1 if first else 0)
        rows.order.append((_source(ds.name), np.array([joint[i] for i in ids]), np.array(labels)))
    for s in no_answer_sets(ds):
        sub = s.select(split)
        for c in no_answer_candidates(ev, sub.queries, config.pool, sub.within):
            rows.gate.append((s.name, _gate_features(_aligned(ev, c), config), 0))


def _weights(sources: Sequence[str]) -> np.ndarray:
    counts: dict[str, int] = defaultdict(int)
    for s in sources:
        counts[s] += 1
    return np.array([1.0 / counts[s] for s in sources])


def fit_order(rows: DecisionRows, l2: float = 1e-3, seed: int = 0) -> Calibration:
    """The joint model (see the module doc): pairwise direction, then a Platt step to a probability."""
    rng = np.random.default_rng(seed)
    per_source: dict[str, int] = defaultdict(int)
    usable = [(s, f, y) for s, f, y in rows.order if y.any() and not y.all()]
    for s, _, _ in usable:
        per_source[s] += 1
    xs, ys, ws = [], [], []
    for s, f, y in usable:
        pos, neg = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
        d = f[rng.choice(pos, PAIRS)] - f[rng.choice(neg, PAIRS)]
        w = 1.0 / PAIRS / per_source[s]
        xs += [d, -d]
        ys += [np.ones(PAIRS), np.zeros(PAIRS)]
        ws += [np.full(PAIRS, w), np.full(PAIRS, w)]
    n = len(JOINT_FEATURES)
    direction, _ = fit_logistic(np.vstack(xs), np.concatenate(ys), np.concatenate(ws), l2=l2,
                                nonnegative=tuple(range(n)))
    direction = np.asarray(direction)
    score = np.concatenate([f @ direction for _, f, _ in rows.order])
    label = np.concatenate([y for _, _, y in rows.order]).astype(float)
    src = [s for s, f, _ in rows.order for _ in range(len(f))]
    (a,), b = fit_logistic(score[:, None], label, _weights(src), l2=l2, nonnegative=(0,))
    coef = tuple(round(float(a * c), 4) for c in direction)
    return Calibration(JOINT_FEATURES, coef, round(float(b), 4),
                       f"{len(label)} candidates ({int(label.sum())} relevant) of {len(rows.order)} queries from "
                       + ", ".join(sorted(per_source)))


def fit_gate(rows: DecisionRows, features: Sequence[str] = GATE_USED, legs: str = "both",
             l2: float = 1e-2) -> Calibration:
    """The answer gate (see the module doc) over ``features`` as ``rank()`` reads them when ``legs`` take part."""
    cols = [GATE_FEATURES.index(f) for f in features]
    x = np.array([r[1][legs] for r in rows.gate])[:, cols]
    y = np.array([r[2] for r in rows.gate], dtype=float)
    sets = [("A:" if r[2] else "N:") + _source(r[0]) for r in rows.gate]
    w = _weights(sets)
    for label in (0, 1):  # answerable and no-answer rows weigh the same in total
        mask = y == label
        w[mask] /= w[mask].sum()
    mu, sd = x.mean(0), x.std(0) + 1e-9
    coef, b = fit_logistic((x - mu) / sd, y, w, l2=l2)
    coef = np.asarray(coef) / sd
    b = b - float((coef * mu).sum())
    n_sets = sorted({r[0] for r in rows.gate})
    return Calibration(tuple(features), tuple(round(float(c), 4) for c in coef), round(float(b), 4),
                       f"{int(y.sum())} answerable and {int(len(y) - y.sum())} no-answer train queries from "
                       + ", ".join(n_sets))


def choose_threshold(answerable: Mapping[str, Sequence[float]], max_false: float = MAX_FALSE_ABSTENTION,
                     step: float = 0.005) -> float:
    """The largest threshold (a multiple of ``step``) at which every set in ``answerable`` (``{set: answer
    probabilities of its answerable queries}``) abstains on at most ``max_false`` of its queries, or on one query
    where that share is less than one (the demo set's 43 train queries)."""
    best = 0.0
    for t in np.arange(0.0, 1.0, step):
        if all(np.sum(np.asarray(p) < t) <= max(max_false * len(p), 1.0) for p in answerable.values() if len(p)):
            best = float(t)
        else:
            break
    return round(best, 4)


def false_point(answerable: Mapping[str, Sequence[float]], max_false: float = MAX_FALSE_ABSTENTION) -> float:
    """The point :func:`choose_threshold` rounds down to its grid, exactly: the largest threshold at which no set of
    ``answerable`` abstains (``p < point``) on more than ``max_false`` of its queries (or one query), moved down
    halfway, in log-odds, to the nearest probability under it, so that an intercept rounded to four decimals cannot
    tip a query to the other side. A gate's 2% point is read here before its intercept is moved onto the shared
    threshold: a probability of 0.013 would round to 0.01 on the grid, 0.26 logits off.

    Example:
        >>> round(false_point({"a": [0.9, 0.8, 0.2, 0.95]}, max_false=0.25), 2)
        0.5
    """
    values = [np.sort(np.asarray(p, dtype=float)) for p in answerable.values() if len(p)]
    if not values:
        return 0.0
    keeps = [v[k] for v in values if len(v) > (k := int(np.floor(max(max_false * len(v), 1.0))))]
    if not keeps:
        return 1.0  # no set can lose more than it may
    top = float(min(keeps))
    under = [float(v[v < top].max()) for v in values if (v < top).any()]
    if not under:
        return top
    pair = np.clip(np.array([max(under), top]), 1e-300, 1.0 - 1e-16)
    return float(1.0 / (1.0 + math.exp(-float(np.log(pair / (1.0 - pair)).mean()))))


def fit_decisions(settings_by_model: Mapping[str, object], datasets: Sequence[str],
                  progress: bool = True) -> Decisions:
    """Fit the order (per model, and on every model's rows together), one gate per model, and the threshold (see the
    module doc).

    ``settings_by_model``: ``{embedding model: Settings that select it}``; ``datasets``: dataset names (their train
    splits and no-answer sets are read).
    """
    from hybridmem.eval.datasets import load_dataset

    rows_by_model: dict[str, DecisionRows] = {}
    for model, settings in settings_by_model.items():
        rows = rows_by_model[model] = DecisionRows()
        for name in datasets:
            ev = Evaluator(load_dataset(name), settings, progress=progress)  # type: ignore[arg-type]
            collect(ev, rows)
            ev.close()
    return fit_rows(rows_by_model)


def fit_rows(rows_by_model: Mapping[str, DecisionRows]) -> Decisions:
    """:func:`fit_decisions` on rows already collected (``{embedding model: rows}``)."""
    pooled = DecisionRows(order=[r for rows in rows_by_model.values() for r in rows.order])
    joint = fit_order(pooled)
    joints = {model: fit_order(rows) for model, rows in rows_by_model.items() if rows.order}
    # A gate of both legs is fitted, and its 2% point read, on the queries it decides: those whose vector leg took
    # part (where the adaptive step drops a blind one, the keyword leg's gate decides).
    decided = {model: _vector_took_part(rows) for model, rows in rows_by_model.items()}
    gates = {model: fit_gate(decided[model], GATE_USED_BY_MODEL.get(model, GATE_USED)) for model in rows_by_model}
    default, first = next(iter(rows_by_model.items()))  # the default model's gate sets the threshold
    threshold = choose_threshold(_answerable({default: decided[default]}, gates, "both"))
    single = {KEYWORD_GATE: (fit_gate(first, KEYWORD_USED, "keyword"), {"": first}, "keyword")}
    for model, rows in rows_by_model.items():
        single[f"{model}|vector"] = (fit_gate(rows, VECTOR_USED, "vector"), {model: rows}, "vector")
        if model != default:
            single[model] = (gates[model], {model: decided[model]}, "both")
        aligned = ALIGNED_USED_BY_MODEL.get(model)
        if aligned and _has_alignment(rows):
            single[f"{model}|aligned"] = (fit_gate(decided[model], aligned), {model: decided[model]}, "both")
    for name, (gate, rows_of, legs) in single.items():  # every other gate crosses the threshold where its own
        own = false_point(_answerable(rows_of, {m: gate for m in rows_of}, legs))  # 2% point lies
        gates[name] = _shift(gate, own, threshold)
    return Decisions(joint, joints, gates, threshold)


def _vector_took_part(rows: DecisionRows) -> DecisionRows:
    """``rows``' gate rows whose vector leg took part under the default config: not those where the adaptive step
    dropped a blind one (MiniLM on Arabic, Thai or Chinese), whose ``vector_top`` reads as having found nothing and
    which the keyword leg's gate decides (:func:`~hybridmem.config.calibration.gate_model`)."""
    i, nothing = GATE_FEATURES.index("vector_top"), logit(0.0)
    return DecisionRows(order=rows.order, gate=[r for r in rows.gate if r[1]["both"][i] > nothing + 1e-6])


def _has_alignment(rows: DecisionRows) -> bool:
    """Whether ``rows`` were collected with the token alignment (an embedder that gives token states)."""
    i = GATE_FEATURES.index("align_mean")
    return any(feats["both"][i] != 0.0 for _, feats, _ in rows.gate)


def _answerable(rows_by_model: Mapping[str, DecisionRows], gates: Mapping[str, Calibration],
                legs: str) -> dict[str, list[float]]:
    from hybridmem.ranking.gate import answer_probability

    out: dict[str, list[float]] = defaultdict(list)
    for model, rows in rows_by_model.items():
        for name, feats, label in rows.gate:
            if label:
                out[f"{model}:{name}"].append(answer_probability(dict(zip(GATE_FEATURES, feats[legs])), gates[model]))
    return out


def _shift(gate: Calibration, at: float, to: float) -> Calibration:
    """``gate`` with its intercept moved so that a probability of ``at`` becomes ``to``."""
    return Calibration(gate.features, gate.coef, round(gate.intercept + logit(to) - logit(at), 4),
                       gate.fitted_on + f"; intercept moved so its {MAX_FALSE_ABSTENTION:.0%} point is the threshold")
