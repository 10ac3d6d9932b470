"""Fusion of scored retrieval legs into one score per chunk.

Every fusion takes the active legs (weight > 0, already cut to the pool and normalized) as :class:`ScoredLeg` and
returns ``{chunk_id: fused_score}``. A chunk missing from a leg gets nothing from it (its score counts as 0).

* ``weighted``: weighted sum of normalized scores, weights renormalized to sum 1 (the reference system's fusion).
* ``rrf``: Reciprocal Rank Fusion, ``sum_leg w_leg / (k + rank_leg)``, Cormack, Clarke & Buettcher, "Reciprocal
  rank fusion outperforms Condorcet and individual rank learning methods", SIGIR 2009. Weights are used as given.
* any name of :data:`RANX_FUSIONS`: delegated to ``ranx.fuse`` (Bassani & Romelli, "ranx.fuse: A Python library for
  metasearch", CIKM 2022), imported lazily because ranx compiles with numba on first use (seconds to tens of
  seconds); ``import hybridmem.ranking`` never imports it.

Example:
    >>> legs = [ScoredLeg("vector", 0.7, (1, 2), (1.0, 0.0), (1, 2)),
    ...         ScoredLeg("keyword", 0.3, (2, 3), (1.0, 0.5), (1, 2))]
    >>> weighted_fusion(legs)
    {1: 0.7, 2: 0.3, 3: 0.15}
    >>> rrf_fusion(legs, k=60)[2] == 0.7 / 62 + 0.3 / 61
    True
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, NamedTuple, Sequence

from hybridmem.errors import ConfigError

__all__ = [
    "FUSIONS",
    "LEG_TERMS",
    "RANX_FUSIONS",
    "RANX_TRAINED_FUSIONS",
    "FusionFn",
    "ScoredLeg",
    "fusion_names",
    "get_fusion",
    "ranx_fusion",
    "rrf_fusion",
    "rrf_terms",
    "weighted_fusion",
    "weighted_terms",
]


class ScoredLeg(NamedTuple):
    """One retrieval leg ready to fuse: parallel tuples in rank order.

    Attributes:
        name: ``"vector"`` or ``"keyword"`` (any label works; fusion never branches on it).
        weight: the leg's weight as configured (> 0).
        ids: chunk ids in rank order.
        scores: normalized scores, higher is better.
        ranks: 1-based ranks from retrieval.
    """

    name: str
    weight: float
    ids: tuple[int, ...]
    scores: tuple[float, ...]
    ranks: tuple[int, ...]


FusionFn = Callable[..., dict[int, float]]


def weighted_fusion(legs: Sequence[ScoredLeg], k: int = 60) -> dict[int, float]:
    """Weighted sum of normalized scores with weights renormalized to sum 1.

    ``fused = sum_leg (w_leg / sum_w) * score_leg``; a leg that did not find the chunk adds 0. ``k`` is unused (it
    keeps one signature for every fusion).

    Example:
        >>> weighted_fusion([ScoredLeg("a", 3.0, (5,), (0.5,), (1,)), ScoredLeg("b", 1.0, (5,), (1.0,), (1,))])
        {5: 0.625}
    """
    fused: dict[int, float] = {}
    get = fused.get
    for leg, w in zip(legs, _shares(legs)):
        for cid, s in zip(leg.ids, leg.scores):
            fused[cid] = get(cid, 0.0) + w * s
    return fused


def _shares(legs: Sequence[ScoredLeg]) -> list[float]:
    """Each leg's weight over the legs' total (none when the total is 0): the weighted sum's factors."""
    total = 0.0
    for leg in legs:
        total += leg.weight
    if total <= 0.0:
        return []
    return [leg.weight / total for leg in legs]


def rrf_fusion(legs: Sequence[ScoredLeg], k: int = 60) -> dict[int, float]:
    """Weighted Reciprocal Rank Fusion (Cormack et al. 2009): ``sum_leg w_leg / (k + rank_leg)``.

    Weights are the raw configured weights (not renormalized), so weights 1 and 1 give the paper's unweighted RRF.
    Only ranks matter; normalized scores are ignored.

    Example:
        >>> rrf_fusion([ScoredLeg("a", 1.0, (8, 9), (0.0, 0.0), (1, 2))], k=60)
        {8: 0.01639344262295082, 9: 0.016129032258064516}
    """
    fused: dict[int, float] = {}
    get = fused.get
    for leg in legs:
        w = leg.weight
        for cid, r in zip(leg.ids, leg.ranks):
            fused[cid] = get(cid, 0.0) + w / (k + r)
    return fused


LegTerms = Callable[[Sequence[ScoredLeg], int], list[Callable[[int], float]]]


def weighted_terms(legs: Sequence[ScoredLeg], k: int = 60) -> list[Callable[[int], float]]:
    """Per leg, the function from an entry's index in that leg to its term of :func:`weighted_fusion`'s sum.

    Example:
        >>> legs = [ScoredLeg("a", 3.0, (5,), (0.5,), (1,)), ScoredLeg("b", 1.0, (5,), (1.0,), (1,))]
        >>> [term(0) for term in weighted_terms(legs)]
        [0.375, 0.25]
    """
    return [lambda i, w=w, scores=leg.scores: w * scores[i] for leg, w in zip(legs, _shares(legs))]


def rrf_terms(legs: Sequence[ScoredLeg], k: int = 60) -> list[Callable[[int], float]]:
    """Per leg, the function from an entry's index in that leg to its term of :func:`rrf_fusion`'s sum.

    Example:
        >>> rrf_terms([ScoredLeg("a", 1.0, (8, 9), (0.0, 0.0), (1, 2))], k=60)[0](1)
        0.016129032258064516
    """
    return [lambda i, w=leg.weight, ranks=leg.ranks: w / (k + ranks[i]) for leg in legs]


# Fusions whose score is a sum of one term per leg, each added in leg order: a chunk's terms (0 from a leg that did
# not find it) add up to its fused score exactly. rank() keeps each hit's terms (``Hit.vector_part``, ``text_part``).
LEG_TERMS: dict[str, LegTerms] = {"weighted": weighted_terms, "rrf": rrf_terms}


# Our name -> ranx's method name. ranx's own short names are accepted too, and ``comb*`` spellings from the papers.
RANX_FUSIONS: dict[str, str] = {
    "combsum": "sum", "sum": "sum",
    "combmnz": "mnz", "mnz": "mnz",
    "combmax": "max", "max": "max",
    "combmin": "min", "min": "min",
    "combmed": "med", "med": "med",
    "combanz": "anz", "anz": "anz",
    "combgmnz": "gmnz", "gmnz": "gmnz",
    "isr": "isr", "log_isr": "log_isr", "logn_isr": "logn_isr",
    "bordafuse": "bordafuse", "condorcet": "condorcet", "rbc": "rbc",
    "wsum": "wsum", "wmnz": "wmnz", "mixed": "mixed",
    "w_bordafuse": "w_bordafuse", "w_condorcet": "w_condorcet",
}
# Methods that take the legs' weights (renormalized to sum 1), in leg order.
_RANX_WEIGHTED = frozenset({"wsum", "wmnz", "mixed", "w_bordafuse", "w_condorcet"})
# Fixed parameters for methods that need one: RBC's persistence (Bailey et al. 2017 use 0.8 to 0.99) and
# CombGMNZ's exponent (1 makes it CombMNZ's generalisation at its common setting).
_RANX_PARAMS: dict[str, dict[str, Any]] = {"rbc": {"phi": 0.8}, "gmnz": {"gamma": 1.0}}
# ranx methods that need parameters trained on relevance judgments; rank() has none, so they are refused.
RANX_TRAINED_FUSIONS = ("bayesfuse", "mapfuse", "posfuse", "probfuse", "segfuse", "slidefuse")


def ranx_fusion(legs: Sequence[ScoredLeg], method: str, k: int = 60) -> dict[int, float]:
    """Fuse with ``ranx.fuse(runs, method=..., norm=None)`` over the legs' already-normalized scores.

    The legs' scores are used as they are (``norm=None``): normalization is ``rank()``'s own stage, set by
    ``bm25_norm`` / ``vector_norm``. Weighted methods (``wsum``, ``wmnz``, ``mixed``, ``w_bordafuse``,
    ``w_condorcet``) get ``weights`` renormalized to sum 1. With a single active leg the fused score is that leg's
    score (ranx needs at least two runs). ranx is imported here only.

    Raises:
        ConfigError: ``method`` is not a supported ranx method.
        ImportError: ranx is not installed (``pip install ranx``).
    """
    ranx_name = _ranx_method(method)
    legs = [leg for leg in legs if len(leg.ids)]  # a leg that found nothing: ranx refuses an empty run
    if not legs:
        return {}
    if len(legs) == 1:
        return dict(zip(legs[0].ids, legs[0].scores))
    try:
        from ranx import Run, fuse
    except ImportError as exc:  # pragma: no cover - ranx is a core dependency
        raise ImportError(f"fusion {method!r} needs ranx: pip install ranx ({exc})") from None
    # ids of one width: ranx's numba score-combining methods (sum, mnz, max, wsum, mixed) read ids of different
    # lengths as different documents and return a phantom one (``'7\Uffffffff'`` beside ``'7'`` and ``'12'``)
    width = max(len(str(cid)) for leg in legs for cid in leg.ids) if any(leg.ids for leg in legs) else 1
    runs = [Run({"q": {str(cid).zfill(width): float(s) for cid, s in zip(leg.ids, leg.scores)}}, name=leg.name)
            for leg in legs]
    params: dict[str, Any] = dict(_RANX_PARAMS.get(ranx_name, {}))
    if ranx_name in _RANX_WEIGHTED:
        total = sum(leg.weight for leg in legs)
        params["weights"] = [leg.weight / total for leg in legs]
    with warnings.catch_warnings():  # numba's NumbaTypeSafetyWarning on ranx's own casts, one per call
        warnings.simplefilter("ignore")
        fused_run = fuse(runs=runs, norm=None, method=ranx_name, params=params)
    scores = fused_run.to_dict().get("q", {})
    return {int(doc): float(s) for doc, s in scores.items()}


def _ranx_method(method: str) -> str:
    try:
        return RANX_FUSIONS[method]
    except KeyError:
        pass
    if method in RANX_TRAINED_FUSIONS:
        raise ConfigError(
            f"fusion {method!r} needs parameters trained on relevance judgments (ranx's {method}_train), which "
            f"rank() does not have: expected one of {', '.join(fusion_names())}"
        )
    raise ConfigError(f"unknown fusion ranking.fusion={method!r}: expected one of {', '.join(fusion_names())}")


FUSIONS: dict[str, FusionFn] = {
    "weighted": weighted_fusion,
    "rrf": rrf_fusion,
}


def fusion_names() -> list[str]:
    """Every accepted fusion name: ``joint`` (:mod:`hybridmem.ranking.joint`, which ``rank()`` runs itself), the
    built-ins, then the ranx methods."""
    return ["joint", *FUSIONS] + [n for n in RANX_FUSIONS if n not in FUSIONS]


def get_fusion(name: str) -> Callable[[Sequence[ScoredLeg], int], dict[int, float]]:
    """The fusion function for ``name``, called as ``fn(legs, k)``; ConfigError lists the valid names.

    Example:
        >>> get_fusion("rrf") is rrf_fusion
        True
        >>> get_fusion("combmnz")([], 60)
        {}
    """
    fn = FUSIONS.get(name)
    if fn is not None:
        return fn
    _ranx_method(name)  # validate now, import ranx only when called

    def _fuse(legs: Sequence[ScoredLeg], k: int = 60) -> dict[int, float]:
        return ranx_fusion(legs, name, k)

    return _fuse
