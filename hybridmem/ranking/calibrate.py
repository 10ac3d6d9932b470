"""Calibrated scores: each leg's raw score mapped to an estimated probability that the chunk is relevant.

Min-max normalization gives the best candidate of every query 1.0, whatever it is, so a min score on min-max scores
cannot tell "relevant" from "the best of the irrelevant". A calibrated
score reads the raw score itself, so it means the same in every query: a logistic regression (Platt, "Probabilistic
outputs for support vector machines", 1999) over a few features of the candidate, fitted on labelled train splits
(:mod:`hybridmem.config.calibration` holds the numbers and how they were fitted).

Features:

- vector leg: ``cosine``, the raw cosine similarity; one fit per embedding model.
- keyword leg: ``log1p_bm25`` = ``log(1 + s)`` with ``s = -bm25()`` (FTS5's score is negative); ``coverage`` = the
  share of the query's distinct terms the chunk contains (BM25 alone cannot say whether one rare word or every word
  matched); ``log_terms`` = ``log`` of the number of distinct query terms (a BM25 sum grows with the query's
  length).

A leg that was searched and found nothing gives every candidate p = 0 from that leg: nothing is renormalized to 1.

Example:
    >>> from hybridmem.config.calibration import Calibration
    >>> cal = Calibration(("cosine",), (10.0,), -5.0)
    >>> [round(p, 4) for p in vector_probabilities([0.5, 0.3], cal)]
    [0.5, 0.1192]
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence, Set

import numpy as np

from hybridmem.config.calibration import Calibration

__all__ = ["fit_logistic", "keyword_features", "keyword_probabilities", "predict", "sigmoid",
           "vector_probabilities"]


def sigmoid(z: float) -> float:
    """The logistic function, without overflow for large ``|z|``."""
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def predict(cal: Calibration, features: Sequence[float]) -> float:
    """``cal``'s probability for one row of features (in ``cal.features`` order)."""
    z = cal.intercept
    for c, x in zip(cal.coef, features):
        z += c * x
    return sigmoid(z)


def vector_probabilities(raws: Sequence[float], cal: Calibration) -> list[float]:
    """Calibrated probability of each cosine in ``raws``."""
    c, b = cal.coef[0], cal.intercept
    return [sigmoid(b + c * x) for x in raws]


def keyword_features(raw: float, query_terms: Set[str] | frozenset[str], chunk_tokens: Iterable[str] | Set[str]
                     ) -> tuple[float, float, float]:
    """``(log1p_bm25, coverage, log_terms)`` of one keyword hit (see module doc).

    Example:
        >>> keyword_features(-3.0, frozenset({"deploy", "billing"}), {"billing", "failed"})
        (1.3862943611198906, 0.5, 0.6931471805599453)
    """
    s = -raw if raw < 0.0 else 0.0
    n = len(query_terms)
    if n == 0:
        return math.log1p(s), 0.0, 0.0
    matched = sum(1 for t in query_terms if t in chunk_tokens)
    return math.log1p(s), matched / n, math.log(n)


def keyword_probabilities(raws: Sequence[float], tokens: Sequence[Set[str]], query_terms: Iterable[str],
                          cal: Calibration) -> list[float]:
    """Calibrated probability of each keyword hit: ``raws[i]`` is its ``bm25()``, ``tokens[i]`` its chunk's tokens."""
    q = frozenset(query_terms)
    return [predict(cal, keyword_features(r, q, t)) for r, t in zip(raws, tokens)]


def fit_logistic(x: np.ndarray, y: np.ndarray, weights: np.ndarray | None = None, l2: float = 1e-3,
                 nonnegative: Sequence[int] = (), iterations: int = 50) -> tuple[tuple[float, ...], float]:
    """Weighted L2-regularized logistic regression by Newton's method; ``(coef, intercept)``.

    Columns listed in ``nonnegative`` whose fitted coefficient is negative are dropped (coefficient 0) and the rest
    refitted, so the map stays monotonic in them. The intercept is not regularized. Deterministic.

    Example:
        >>> x = np.array([[0.0], [1.0], [2.0], [3.0]]); y = np.array([0.0, 0.0, 1.0, 1.0])
        >>> coef, b = fit_logistic(x, y, l2=1.0)
        >>> round(coef[0], 4), round(b, 4)
        (0.9583, -1.4374)
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    n, d = x.shape
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=float)
    active = list(range(d))
    while True:
        xa = np.hstack([x[:, active], np.ones((n, 1))])
        beta = np.zeros(len(active) + 1)
        reg = np.full(len(active) + 1, l2)
        reg[-1] = 0.0
        for _ in range(iterations):
            p = 1.0 / (1.0 + np.exp(-(xa @ beta)))
            grad = xa.T @ (w * (p - y)) + reg * beta
            hess = (xa * (w * p * (1.0 - p))[:, None]).T @ xa + np.diag(reg) + 1e-9 * np.eye(len(beta))
            step = np.linalg.solve(hess, grad)
            beta -= step
            if np.max(np.abs(step)) < 1e-10:
                break
        bad = [j for k, j in enumerate(active) if j in nonnegative and beta[k] < 0.0]
        if not bad:
            break
        active = [j for j in active if j not in bad]
    coef = [0.0] * d
    for k, j in enumerate(active):
        coef[j] = float(beta[k])
    return tuple(coef), float(beta[-1])
