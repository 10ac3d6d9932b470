"""Score normalization: turn one retrieval leg's raw scores into comparable scores, higher is better.

Each normalizer takes one leg's raw scores and 1-based ranks (parallel sequences in rank order, already cut to the
pool) and returns one float per entry. They are selected by name from :data:`BM25_NORMALIZERS` (keyword leg,
``RankConfig.bm25_norm``) and :data:`VECTOR_NORMALIZERS` (vector leg, ``RankConfig.vector_norm``).

The keyword leg's raw score is SQLite FTS5's ``bm25()``, which is negative with lower meaning better; the vector
leg's raw score is cosine similarity, higher is better.

Example:
    >>> raw, ranks = [-4.0, -1.0, -0.5], [1, 2, 3]
    >>> bm25_reference(raw, ranks)
    [0.8, 0.5, 0.3333333333333333]
    >>> bm25_minmax(raw, ranks)
    [1.0, 0.14285714285714285, 0.0]
    >>> rank_reciprocal(raw, ranks)
    [1.0, 0.5, 0.3333333333333333]
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from hybridmem.errors import ConfigError
Normalizer = Callable[[Sequence[float], Sequence[int]], list[float]]

__all__ = [
    "BM25_NORMALIZERS",
    "VECTOR_NORMALIZERS",
    "Normalizer",
    "bm25_minmax",
    "bm25_reference",
    "get_normalizer",
    "minmax",
    "rank_reciprocal",
    "vector_minmax",
    "vector_raw",
    "vector_zscore",
    "zscore",
    "bm25_zscore",
]


def minmax(values: Sequence[float]) -> list[float]:
    """Min-max scaling to [0, 1]: ``(x - min) / (max - min)``.

    When every value is equal (including a single value) every score is 1.0: the list holds no information about
    order, and each entry is as good as the best one. A float64 array gives an array of the same values (MMR's
    relevance).

    Example:
        >>> minmax([3.0, 1.0, 2.0])
        [1.0, 0.0, 0.5]
        >>> minmax([0.2])
        [1.0]
    """
    if isinstance(values, np.ndarray):
        if not len(values):
            return values
        lo, hi = values.min(), values.max()
        span = hi - lo
        return np.ones(len(values)) if span <= 0.0 else (values - lo) / span
    if not values:
        return []
    lo = min(values)
    hi = max(values)
    span = hi - lo
    if span <= 0.0:
        return [1.0] * len(values)
    return [(x - lo) / span for x in values]


def bm25_reference(raw: Sequence[float], ranks: Sequence[int] = ()) -> list[float]:
    """The reference system's BM25 transform: ``r / (1 + r)`` with ``r = max(0, -bm25)``.

    FTS5's ``bm25()`` is negative (lower is better), so ``r`` is the usual positive BM25 score and ``r / (1 + r)``
    maps it monotonically into [0, 1). The reference's first version computed ``1 / (1 + max(0, rank))``: since FTS5
    ranks are never positive, ``max(0, rank)`` is always 0 and every hit scored 1.0, which made the keyword leg a
    constant. Its later version, reproduced here, fixed that.

    Example:
        >>> bm25_reference([-3.0, 2.0])
        [0.75, 0.0]
    """
    out = []
    for x in raw:
        r = -x if x < 0.0 else 0.0
        out.append(r / (1.0 + r))
    return out


def bm25_minmax(raw: Sequence[float], ranks: Sequence[int] = ()) -> list[float]:
    """Min-max scaling of ``-bm25()`` (so higher is better); see :func:`minmax`."""
    return minmax([-x for x in raw])


def vector_raw(raw: Sequence[float], ranks: Sequence[int] = ()) -> list[float]:
    """The cosine similarity as it is (the reference system's choice)."""
    return list(raw)


def vector_minmax(raw: Sequence[float], ranks: Sequence[int] = ()) -> list[float]:
    """Min-max scaling of the cosine similarity; see :func:`minmax`."""
    return minmax(raw)


def zscore(values: Sequence[float]) -> list[float]:
    """Distance from the leg's weakest candidate in standard deviations: ``(x - min) / std``.

    The z-score ``(x - mean) / std`` of score-distribution fusion (Montague & Aslam, "Relevance score normalization
    for metasearch", CIKM 2001), shifted by a constant per leg so the weakest candidate scores 0 and a chunk the leg
    did not find (0 in fusion) ranks below every one it found. Unlike min-max, one outlying top score does not squeeze
    the rest of the leg towards 0, and a leg whose scores are all alike (a query the model cannot read) is not
    stretched to fill [0, 1]. When every value is equal, every score is 1.0, as for :func:`minmax`.

    Example:
        >>> [round(z, 6) for z in zscore([3.0, 1.0, 2.0])]
        [2.44949, 0.0, 1.224745]
    """
    n = len(values)
    if n == 0:
        return []
    lo = min(values)
    mean = sum(values) / n
    var = sum((x - mean) ** 2 for x in values) / n
    if var <= 0.0:
        return [1.0] * n
    std = var**0.5
    return [(x - lo) / std for x in values]


def bm25_zscore(raw: Sequence[float], ranks: Sequence[int] = ()) -> list[float]:
    """:func:`zscore` of ``-bm25()`` (so higher is better)."""
    return zscore([-x for x in raw])


def vector_zscore(raw: Sequence[float], ranks: Sequence[int] = ()) -> list[float]:
    """:func:`zscore` of the cosine similarity."""
    return zscore(raw)


def rank_reciprocal(raw: Sequence[float], ranks: Sequence[int]) -> list[float]:
    """Rank-based score ``1 / rank`` (rank 1-based), which ignores the raw score's scale entirely."""
    return [1.0 / r for r in ranks]


BM25_NORMALIZERS: dict[str, Normalizer] = {
    "reference": bm25_reference,
    "minmax": bm25_minmax,
    "zscore": bm25_zscore,
    "rank": rank_reciprocal,
}

VECTOR_NORMALIZERS: dict[str, Normalizer] = {
    "raw": vector_raw,
    "minmax": vector_minmax,
    "zscore": vector_zscore,
    "rank": rank_reciprocal,
}


def get_normalizer(leg: str, name: str) -> Normalizer:
    """The normalizer ``name`` for ``leg`` (``"keyword"`` or ``"vector"``); ConfigError lists the valid names.

    Example:
        >>> get_normalizer("vector", "raw") is vector_raw
        True
    """
    registry = BM25_NORMALIZERS if leg == "keyword" else VECTOR_NORMALIZERS
    setting = "ranking.bm25_norm" if leg == "keyword" else "ranking.vector_norm"
    try:
        return registry[name]
    except KeyError:
        raise ConfigError(
            f"unknown {leg} normalization {setting}={name!r}: expected one of {', '.join(registry)}"
        ) from None
