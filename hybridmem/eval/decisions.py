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
  fitted. The token alignment's lift among the top passages (``align_lift``) is left out of the pairwise fit and
  weighed after it, on train nDCG@10 (:func:`hybridmem.eval.lift.fit_lift`): that order is ``"<model>|aligned"``,
  read when the candidates carry the alignment, its hits scored with the plain order's probabilities.
- **Gate** (:mod:`hybridmem.ranking.gate`), one per embedding model: every TRAIN query it decides labelled 1 when
  answerable and 0 when it is in a no-answer set (:func:`hybridmem.eval.abstention.no_answer_sets`); answerable and
  no-answer rows weigh the same in total, each set within them the same. Features are standardized for the fit. A
  gate of both legs decides the queries whose vector leg took part. Where the adaptive step drops a blind one
  (MiniLM outside Latin script) the keyword leg's gate decides, with a gate over the token alignment beside it when
  the candidates carry one: a pair that must both answer (:func:`fit_pair`, fitted on those queries).
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
import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Mapping, NamedTuple, Sequence

import numpy as np

from hybridmem.config import DEFAULT_RANKING, RankConfig
from hybridmem.config.calibration import JOINT_FEATURES, KEYWORD_GATE, Calibration
from hybridmem.eval.abstention import no_answer_candidates, no_answer_sets
from hybridmem.eval.lift import DEPTH, fit_lift, source_weights
from hybridmem.eval.runner import Evaluator, eval_config
from hybridmem.eval.units import holds_judged
from hybridmem.ranking.calibrate import fit_logistic
from hybridmem.ranking.gate import ALIGN_FEATURES, GATE_FEATURES, answer_probability, logit
from hybridmem.ranking.pipeline import decision_features
from hybridmem.records import Candidates

__all__ = ["ALIGNED_USED", "ALIGNED_USED_BY_MODEL", "DECISION_DATASETS", "DEPTH", "GATE_USED", "GATE_USED_BY_MODEL",
           "KEYWORD_ALIGNED_USED", "LIFT", "MAX_FALSE_ABSTENTION", "PAIRS", "PAIR_MAX_FALSE", "PAIR_SHIFT",
           "DecisionRows", "Decisions", "Orders", "choose_threshold", "collect", "collect_rows", "false_point",
           "fit_decisions", "fit_gate", "fit_order", "fit_pair", "fit_rows", "place_gate", "vector_dropped",
           "vector_took_part"]

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
# e5's adds the centred alignment (the tenth round, over whole chunks: train mean 78.2 -> 80.9%, worst 42.8 -> 49.3%);
# MiniLM's keeps the four: with it, a language left out of the fit lost 4.3% of its answerable questions (Turkish).
PLAIN_ALIGNMENT = ALIGN_FEATURES[:4]  # all but align_centred
ALIGNED_USED = ("vector_top", "vector_gap", "idf_coverage_top", "term_share", *ALIGN_FEATURES, "log_terms")
ALIGNED_USED_BY_MODEL = {"multilingual-e5-small": ALIGNED_USED,
                         "all-MiniLM-L6-v2": tuple(f for f in ALIGNED_USED if f != "align_centred")}
KEYWORD_USED = ("keyword_top", "coverage_top", "term_share")  # the keyword leg alone
# The keyword leg alone with the token alignment (a model whose blind vector leg the adaptive step dropped: MiniLM
# outside Latin script): a gate over the alignment that must answer too, beside the keyword leg's gate
# (:func:`fit_pair`). Train chose the alignments and the query's length alone (docs/ranking.md, eighth round): the
# keyword leg's evidence is its partner's.
KEYWORD_ALIGNED_USED = (*PLAIN_ALIGNMENT, "log_terms")
# The pair's placement, chosen on train by leaving each language out of the fit in turn (docs/ranking.md, eighth
# round): the most abstention on the left-out language's questions while its false abstention stays within 2%. At the
# shared 2% it reached 2.7% (Russian), so the pair together loses at most 1.25% of each set's answerable queries (the
# keyword gate's share included); its keyword half gives up 0.25 logits (intercept raised) to its partner.
PAIR_MAX_FALSE = 0.0125
PAIR_SHIFT = 0.25
_EMPTY = [0.0] * len(GATE_FEATURES)
LIFT = "align_lift"  # the order's alignment lift (ranking/joint.py), weighed on its own (eval/lift.py)
VECTOR_USED = ("vector_top", "vector_gap")  # the vector leg alone


class Decisions(NamedTuple):
    """What :func:`fit_rows` fits: the pooled order, one order per embedding model (and ``"<model>|aligned"``, the one
    that weighs the token alignment, where train gave it a weight), the gates, the threshold."""

    joint: Calibration
    joints: dict[str, Calibration]
    gates: dict[str, Calibration | tuple[Calibration, ...]]
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
        labels = [int(holds_judged(c.chunks[cid], ds.qrels[q.id], ds.evidence, ds.kind)) for cid in ids]
        rows.order.append((_source(ds.name), np.array([joint[i] for i in ids]), np.array(labels)))
    for s in no_answer_sets(ds):
        sub = s.select(split)
        for c in no_answer_candidates(ev, sub.queries, config.pool, sub.within):
            rows.gate.append((s.name, _gate_features(_aligned(ev, c), config), 0))


class Orders(NamedTuple):
    """What :func:`fit_order` fits: the order without the token alignment (the legs' features, a Platt step: a
    probability) and the order that weighs it (the same plus ``align_lift``: an order only, whose hits take the plain
    order's probabilities, :func:`~hybridmem.ranking.joint.joint_fusion`)."""

    plain: Calibration
    aligned: Calibration

    @property
    def lifted(self) -> bool:
        """Whether train gave the alignment a weight (else the plain order is the only one needed)."""
        return self.aligned.coef[JOINT_FEATURES.index(LIFT)] > 0


def fit_order(rows: DecisionRows, l2: float = 1e-3, seed: int = 0) -> Orders:
    """The joint model (see the module doc): pairwise direction over the legs' features, a Platt step to a
    probability (:attr:`Orders.plain`), then the alignment's weight (:func:`~hybridmem.eval.lift.fit_lift`;
    :attr:`Orders.aligned`)."""
    rng = np.random.default_rng(seed)
    per_source: dict[str, int] = defaultdict(int)
    usable = [(s, f, y) for s, f, y in rows.order if y.any() and not y.all()]
    for s, _, _ in usable:
        per_source[s] += 1
    legs = JOINT_FEATURES.index(LIFT)  # the legs' features come first; the lift is fitted on its own below
    xs, ys, ws = [], [], []
    for s, f, y in usable:
        pos, neg = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
        d = f[rng.choice(pos, PAIRS), :legs] - f[rng.choice(neg, PAIRS), :legs]
        w = 1.0 / PAIRS / per_source[s]
        xs += [d, -d]
        ys += [np.ones(PAIRS), np.zeros(PAIRS)]
        ws += [np.full(PAIRS, w), np.full(PAIRS, w)]
    direction, _ = fit_logistic(np.vstack(xs), np.concatenate(ys), np.concatenate(ws), l2=l2,
                                nonnegative=tuple(range(legs)))
    direction = np.asarray(direction)
    scores = [f[:, :legs] @ direction for _, f, _ in rows.order]
    label = np.concatenate([y for _, _, y in rows.order]).astype(float)
    src = [s for s, f, _ in rows.order for _ in range(len(f))]
    (a,), b = fit_logistic(np.concatenate(scores)[:, None], label, source_weights(src), l2=l2, nonnegative=(0,))
    beta = fit_lift([(s, a * score + b, f[:, legs], y) for (s, f, y), score in zip(rows.order, scores)])
    fitted = (f"{len(label)} candidates ({int(label.sum())} relevant) of {len(rows.order)} queries from "
              + ", ".join(sorted(per_source)))
    coef = tuple(round(float(a * c), 4) for c in direction)
    return Orders(Calibration(JOINT_FEATURES, (*coef, 0.0), round(float(b), 4), fitted),
                  Calibration(JOINT_FEATURES, (*coef, round(beta, 4)), round(float(b), 4),
                              f"{fitted}; align_lift weighed {beta:g} logits on train nDCG@{DEPTH}"))


def fit_gate(rows: DecisionRows, features: Sequence[str] = GATE_USED, legs: str = "both",
             l2: float = 1e-2) -> Calibration:
    """The answer gate (see the module doc) over ``features`` as ``rank()`` reads them when ``legs`` take part."""
    cols = [GATE_FEATURES.index(f) for f in features]
    x = np.array([r[1][legs] for r in rows.gate])[:, cols]
    y = np.array([r[2] for r in rows.gate], dtype=float)
    sets = [("A:" if r[2] else "N:") + _source(r[0]) for r in rows.gate]
    w = source_weights(sets)
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


def false_point(answerable: Mapping[str, Sequence[float]], max_false: float = MAX_FALSE_ABSTENTION,
                lost: Mapping[str, int] | None = None) -> float:
    """The point :func:`choose_threshold` rounds down to its grid, exactly: the largest threshold at which no set of
    ``answerable`` abstains (``p < point``) on more than ``max_false`` of its queries (or one query), moved down
    halfway, in log-odds, to the nearest probability under it, so that an intercept rounded to four decimals cannot
    tip a query to the other side. A gate's 2% point is read here before its intercept is moved onto the shared
    threshold: a probability of 0.013 would round to 0.01 on the grid, 0.26 logits off. ``lost``: per set, how many
    more of its answerable queries another gate abstains on already (not in ``answerable``; they count against its
    share); 0 when no point keeps a set within it.

    Example:
        >>> round(false_point({"a": [0.9, 0.8, 0.2, 0.95]}, max_false=0.25), 2)
        0.5
        >>> round(false_point({"a": [0.9, 0.8, 0.95]}, max_false=0.25, lost={"a": 1}), 3)  # one query lost already
        0.8
        >>> false_point({"a": [0.9, 0.95]}, max_false=0.25, lost={"a": 2})
        0.0
        >>> false_point({"a": [0.9, 0.95]}, max_false=0.25, lost={"b": 2})  # a set with every query lost already
        0.0
    """
    lost = lost or {}
    values = {name: np.sort(np.asarray(answerable.get(name, ()), dtype=float)) for name in {*answerable, *lost}
              if len(answerable.get(name, ())) or lost.get(name)}
    if not values:
        return 0.0
    keeps = []
    for name, v in values.items():
        gone = lost.get(name, 0)
        k = int(np.floor(max(max_false * (len(v) + gone), 1.0))) - gone
        if k < 0:
            return 0.0
        if len(v) > k:
            keeps.append(v[k])
    if not keeps:
        return 1.0  # no set can lose more than it may
    top = float(min(keeps))
    under = [float(v[v < top].max()) for v in values.values() if (v < top).any()]

    def odds(p: float) -> float:
        p = min(max(p, 1e-300), 1.0 - 1e-16)
        return math.log(p / (1.0 - p))

    # halfway to the nearest probability under it; when the binding query is the lowest of all (another gate spent
    # the share), 0.001 logits under it
    low = odds(max(under)) if under else odds(top) - 2e-3
    return float(1.0 / (1.0 + math.exp(-(low + odds(top)) / 2.0)))


def fit_decisions(settings_by_model: Mapping[str, object], datasets: Sequence[str],
                  progress: bool = True) -> Decisions:
    """Fit the order (per model, and on every model's rows together), one gate per model, and the threshold (see the
    module doc).

    ``settings_by_model``: ``{embedding model: Settings that select it}``; ``datasets``: dataset names (their train
    splits and no-answer sets are read).
    """
    return fit_rows({model: collect_rows(settings, datasets, progress)
                     for model, settings in settings_by_model.items()})


def collect_rows(settings: object, datasets: Sequence[str], progress: bool = True,
                 split: str = "train") -> DecisionRows:
    """:func:`collect` over each of ``datasets`` (their ``split`` and no-answer sets) under ``settings``."""
    from hybridmem.eval.datasets import load_dataset

    rows = DecisionRows()
    for name in datasets:
        ev = Evaluator(load_dataset(name), settings, progress=progress)  # type: ignore[arg-type]
        collect(ev, rows, split)
        ev.close()
    return rows


def fit_rows(rows_by_model: Mapping[str, DecisionRows]) -> Decisions:
    """:func:`fit_decisions` on rows already collected (``{embedding model: rows}``)."""
    pooled = DecisionRows(order=[r for rows in rows_by_model.values() for r in rows.order])
    joint = fit_order(pooled).plain  # a model never fitted: the legs' features alone
    orders = {model: fit_order(rows) for model, rows in rows_by_model.items() if rows.order}
    joints = {model: order.plain for model, order in orders.items()}
    joints.update({f"{model}|aligned": order.aligned for model, order in orders.items() if order.lifted})
    # A gate of both legs is fitted, and its 2% point read, on the queries it decides: those whose vector leg took
    # part (where the adaptive step drops a blind one, the keyword leg's gate decides).
    decided = {model: vector_took_part(rows) for model, rows in rows_by_model.items()}
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
    for name, (gate, rows_of, legs) in single.items():  # every other gate crosses the threshold at its own 2% point
        gates[name] = place_gate(gate, rows_of, legs, threshold)
    pairs: dict[str, tuple[Calibration, Calibration]] = {}
    for model, rows in rows_by_model.items():  # where a blind vector leg was dropped, with the alignment: a pair
        if ALIGNED_USED_BY_MODEL.get(model) and _has_alignment(rows) and _enough(vector_dropped(rows)):
            try:
                pairs[f"{model}|keyword+aligned"] = fit_pair(rows, gates[KEYWORD_GATE], threshold)
            except ValueError as e:
                warnings.warn(f"{model}: no pair of gates for a dropped vector leg ({e}); the keyword gate decides")
    return Decisions(joint, joints, {**gates, **pairs}, threshold)


def place_gate(gate: Calibration, rows_by_model: Mapping[str, DecisionRows], legs: str,
               threshold: float) -> Calibration:
    """``gate`` with its intercept moved so that its own 2% point over ``rows_by_model``'s answerable queries, read on
    ``legs`` (:func:`false_point`), becomes ``threshold``: how :func:`fit_rows` places every gate but the default's."""
    return _shift(gate, false_point(_answerable(rows_by_model, {m: gate for m in rows_by_model}, legs)), threshold)


def fit_pair(rows: DecisionRows, keyword_gate: Calibration, threshold: float,
             features: Sequence[str] = KEYWORD_ALIGNED_USED, shift: float = PAIR_SHIFT,
             max_false: float = PAIR_MAX_FALSE) -> tuple[Calibration, Calibration]:
    """The gate of a keyword leg whose candidates carry the token alignment, fitted on ``rows``' queries whose vector
    leg was dropped: two models that must both answer (the lower probability decides). One is ``keyword_gate`` (placed
    on ``threshold``) with its intercept raised by ``shift``; the other a gate over ``features`` fitted on those
    queries, its intercept moved so that, with the first, no answerable set loses more than ``max_false`` of its
    queries there, or one query (:func:`false_point`, the queries the first loses counted against each set's share).

    A pair, not one model over both: Chinese questions asked of other articles align with the passages found almost as
    well as answerable ones in other scripts, so one linear gate fitted on all scripts loses them (train: 58 -> 17%),
    while the keyword leg's gate holds them; the alignment's gate holds what the keyword one misses (Thai, Hindi).

    Raises:
        ValueError: the keyword half alone loses more than a set may.
    """
    blind = vector_dropped(rows)
    second = fit_gate(blind, features)
    answered = []  # each answerable query's features and the second half's probability, read once
    for name, feats, label in blind.gate:
        if label:
            f = dict(zip(GATE_FEATURES, feats["both"]))
            answered.append((name, f, answer_probability(f, second)))
    for raised in (round(shift + 0.05 * i, 4) for i in range(41)):  # more only where the keyword half loses too many
        first = Calibration(keyword_gate.features, keyword_gate.coef, round(keyword_gate.intercept + raised, 4),
                            keyword_gate.fitted_on + f"; intercept raised by {raised:.2f}: one of a pair with a gate "
                            "over the alignment")
        answerable: dict[str, list[float]] = defaultdict(list)
        lost: dict[str, int] = defaultdict(int)
        for name, f, p in answered:
            if answer_probability(f, first) < threshold:
                lost[name] += 1
            else:
                answerable[name].append(p)
        point = false_point(answerable, max_false, lost=lost)
        if point > 0.0:
            moved = _shift(second, point, threshold)
            return first, Calibration(moved.features, moved.coef, moved.intercept, second.fitted_on
                                      + f"; intercept moved so that the pair's {max_false:.2%} point is the threshold")
    raise ValueError("the keyword gate alone abstains on more answerable queries than a set may lose")


def _enough(rows: DecisionRows, least: int = 100) -> bool:
    """Whether ``rows`` hold at least ``least`` answerable and ``least`` no-answer queries to fit a gate on."""
    answerable = sum(r[2] for r in rows.gate)
    return answerable >= least and len(rows.gate) - answerable >= least


def vector_took_part(rows: DecisionRows) -> DecisionRows:
    """``rows``' gate rows whose vector leg took part under the default config: not those where the adaptive step
    dropped a blind one (MiniLM on Arabic, Thai or Chinese), whose ``vector_top`` reads as having found nothing and
    which the keyword leg's side decides (:func:`~hybridmem.config.calibration.gate_model`)."""
    return DecisionRows(order=rows.order, gate=[r for r in rows.gate if not _dropped(r)])


def vector_dropped(rows: DecisionRows) -> DecisionRows:
    """``rows``' gate rows whose vector leg was dropped (the others of :func:`vector_took_part`), which the pair
    decides where they carry the alignment (:func:`fit_pair`)."""
    return DecisionRows(order=rows.order, gate=[r for r in rows.gate if _dropped(r)])


def _dropped(row: tuple[str, dict[str, list[float]], int]) -> bool:
    """Whether the vector leg of a gate row was dropped: its ``vector_top`` reads as having found nothing."""
    return row[1]["both"][GATE_FEATURES.index("vector_top")] <= logit(0.0) + 1e-6


def _has_alignment(rows: DecisionRows) -> bool:
    """Whether ``rows`` were collected with the token alignment (an embedder that gives token states)."""
    i = GATE_FEATURES.index("align_mean")
    return any(feats["both"][i] != 0.0 for _, feats, _ in rows.gate)


def _answerable(rows_by_model: Mapping[str, DecisionRows], gates: Mapping[str, Calibration],
                legs: str) -> dict[str, list[float]]:
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
