"""Parameter sweeps over ranking settings (retrieve once, rank many) and a train-split optimizer.

Sweepable parameters (any other :class:`~hybridmem.config.RankConfig` field works too, by its own name):

============================  ===============================================================================
``mmr_lambda``                MMR trade-off; turns MMR on
``half_life`` (``_days``)     temporal decay half-life in days; turns decay on
``candidate_multiplier``      pool = depth x multiplier (capped by ``max_candidates``)
``vector_weight``             vector weight ``w``; the text weight becomes ``1 - w``
``rrf_k``                     RRF's k (only matters with ``fusion=rrf``)
``min_score``                 the score cut
``bm25_norm``                 BM25 normalization: ``reference``, ``minmax``, ``rank``
============================  ===============================================================================

Example:
    >>> grid({"vector_weight": [0.3, 0.7], "rrf_k": [60]})
    [{'vector_weight': 0.3, 'rrf_k': 60}, {'vector_weight': 0.7, 'rrf_k': 60}]
    >>> param_changes("half_life", 14)
    {'decay': True, 'half_life_days': 14.0}
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, fields
from typing import Any, Callable, Mapping, Sequence

from hybridmem.config import RankConfig, preset
from hybridmem.errors import ConfigError, HybridMemError
from hybridmem.eval.metrics import Scorer, metric_depths, parse_metric
from hybridmem.eval.runner import EvalResult, Evaluator

_ALIASES: dict[str, Callable[[Any], dict[str, Any]]] = {
    "mmr_lambda": lambda v: {"mmr": True, "mmr_lambda": float(v)},
    "half_life": lambda v: {"decay": True, "half_life_days": float(v)},
    "half_life_days": lambda v: {"decay": True, "half_life_days": float(v)},
    "vector_weight": lambda v: {"vector_weight": float(v), "text_weight": round(1.0 - float(v), 10)},
    "bm25_normalization": lambda v: {"bm25_norm": str(v)},
}
SWEEP_PARAMS = ("mmr_lambda", "half_life", "candidate_multiplier", "vector_weight", "rrf_k", "min_score", "bm25_norm")


def param_changes(name: str, value: Any) -> dict[str, Any]:
    """The RankConfig fields that ``name=value`` sets.

    Raises:
        ConfigError: ``name`` is neither a sweep parameter nor a RankConfig field.
    """
    known = {f.name: f for f in fields(RankConfig)}
    if name not in _ALIASES and name not in known:
        raise ConfigError(f"unknown sweep parameter {name!r}: expected one of {', '.join(SWEEP_PARAMS)} "
                          f"or a ranking setting ({', '.join(sorted(known))})")
    default = None if name in _ALIASES else getattr(RankConfig(), name)
    whole = isinstance(default, int) and not isinstance(default, bool)
    try:
        if name in _ALIASES:
            return _ALIASES[name](value)
        if isinstance(default, bool):
            value = value if isinstance(value, bool) else str(value).lower() in ("1", "true", "yes", "on")
        elif whole:
            if float(value) != int(float(value)):
                raise ValueError("not a whole number")
            value = int(float(value))
        elif isinstance(default, float):
            value = float(value)
        return {name: value}
    except (TypeError, ValueError):
        raise ConfigError(f"--param {name}={value}: expected {'a whole number' if whole else 'a number'}") from None


def check_points(points: Sequence[Mapping[str, Any]], base: RankConfig | None = None) -> list[RankConfig]:
    """Every grid point's config, checked before anything is retrieved: a bad value or fusion name is a
    :class:`ConfigError` at once, not after minutes of retrieval."""
    from hybridmem.ranking.fusion import get_fusion

    cfgs = configs_for(points, base or RankConfig())
    for fusion in {c.fusion for c in cfgs} - {"joint"}:
        get_fusion(fusion)
    return cfgs


def parse_param(spec: str) -> tuple[str, list[Any]]:
    """``'rrf_k=30,60'`` -> ``('rrf_k', [30, 60])`` (numbers parsed; other values kept as strings)."""
    name, sep, values = spec.partition("=")
    if not sep or not name.strip() or not values.strip():
        raise ConfigError(f"--param {spec!r}: expected NAME=V1,V2,... (e.g. mmr_lambda=0.5,0.7)")

    def conv(v: str) -> Any:
        for cast in (int, float):
            try:
                return cast(v)
            except ValueError:
                pass
        return v

    return name.strip(), [conv(v.strip()) for v in values.split(",") if v.strip()]


def grid(params: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every combination of ``params`` (cartesian product, in the given order)."""
    names = list(params)
    return [dict(zip(names, combo)) for combo in itertools.product(*(params[n] for n in names))]


def configs_for(points: Sequence[Mapping[str, Any]], base: RankConfig) -> list[RankConfig]:
    out = []
    for point in points:
        changes: dict[str, Any] = {}
        for k, v in point.items():
            changes.update(param_changes(k, v))
        out.append(base.replace(**changes))
    return out


def sweep(evaluator: Evaluator, params: Mapping[str, Sequence[Any]], base: RankConfig | None = None,
          metrics: Sequence[str] = ("ndcg@10",), split: str | None = None, depth: int | None = None,
          min_score: float | None = None, progress: bool = False):  # noqa: ANN201
    """Score every grid point; a pandas DataFrame with one row per point (parameters, then metric means).

    ``df.attrs`` holds ``depth``, ``queries`` and timings (``retrieve_s``: the one retrieval, ``rank_score_s``: every
    config ranked and scored).
    """
    import pandas as pd

    base = base or preset("default")
    metrics = list(metrics)
    for m in metrics:
        parse_metric(m)
    groups = metric_depths(metrics) if depth is None else {depth: metrics}
    depth = max(groups)
    points = grid(params)
    if not points:
        raise HybridMemError("the sweep grid is empty: give at least one value per parameter")
    cfgs = check_points(points, base)
    sub = evaluator.dataset.select(split)
    qids = [q.id for q in sub.queries]
    t0 = time.perf_counter()
    named = {str(i): c for i, c in enumerate(cfgs)}
    _, cands = evaluator.prepare(named, depth, min_score)
    t1 = time.perf_counter()
    scorer = Scorer(qids, sub.qrels)
    rows = []
    bar = None
    if progress:
        from hybridmem.eval.runner import _tqdm

        bar = _tqdm(len(points), "sweep", True)
    step = 10  # configs ranked together, query by query (see Evaluator.rank_runs_many), between progress updates
    for start in range(0, len(points), step):
        names = [str(i) for i in range(start, min(start + step, len(points)))]
        # each metric on a ranking to its own depth, as Evaluator.evaluate scores it
        scores, _ = evaluator.score_at_depths({n: named[n] for n in names}, groups, qids, cands, scorer, min_score)
        for n in names:
            rows.append({**points[int(n)], **{m: float(scores[n][m].mean()) for m in metrics}})
        if bar is not None:
            bar.update(len(names))
    if bar is not None:
        bar.close()
    df = pd.DataFrame(rows)
    df.attrs.update(depth=depth, queries=len(qids), split=split, configs=len(points),
                    retrieve_s=t1 - t0, rank_score_s=time.perf_counter() - t1)
    return df


@dataclass
class OptimizeResult:
    """The best grid point on the train split, and base vs tuned on the test split."""

    metric: str
    best_params: dict[str, Any]
    best_config: RankConfig
    train_score: float
    train_table: Any
    test: EvalResult


def optimize(evaluator: Evaluator, params: Mapping[str, Sequence[Any]], metric: str = "ndcg@10",
             base: RankConfig | None = None, train_split: str = "train", test_split: str = "test",
             report_metrics: Sequence[str] | None = None, min_score: float | None = None) -> OptimizeResult:
    """Pick the grid point with the best mean ``metric`` on ``train_split`` (ties: the first in grid order), then score
    ``base`` and the tuned config on ``test_split``. Test queries are never seen while choosing.

    Raises:
        DatasetError: the dataset has no queries in ``train_split`` or ``test_split``.
    """
    base = base or preset("default")
    report = list(dict.fromkeys([metric, *(report_metrics or [])]))
    evaluator.dataset.select(test_split)  # fail early when there is no test split
    table = sweep(evaluator, params, base, [metric], split=train_split, min_score=min_score)
    best = int(table[metric].to_numpy().argmax())
    point = grid(params)[best]
    tuned = configs_for([point], base)[0]
    test = evaluator.evaluate({"base": base, "tuned": tuned}, report, split=test_split, min_score=min_score)
    return OptimizeResult(metric, point, tuned, float(table[metric].iloc[best]), table, test)
