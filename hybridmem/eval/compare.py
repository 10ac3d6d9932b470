"""Compare named configs: a metrics table, significance against a baseline config, per-query wins and losses.

Significance uses ranx's tests on the per-query scores (Bassani, ECIR 2022): the two-sided paired Student's t-test
(``ttest``) or Fisher's randomization test (``fisher``, Smucker et al., CIKM 2007; 1000 permutations, seed 42). A
query where both configs score the same is a tie; identical per-query scores give p = 1.

Example:
    >>> cmp = compare(result, baseline="keyword")                       # doctest: +SKIP
    >>> cmp.rows[0]["wins"], cmp.rows[0]["losses"]                     # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from hybridmem.errors import HybridMemError
from hybridmem.eval.runner import EvalResult

TESTS = ("ttest", "fisher")
TIE_EPS = 1e-9


@dataclass
class Comparison:
    """Every config against ``baseline``, per metric: one row each (dicts, ready for a DataFrame or JSON)."""

    baseline: str
    test: str
    max_p: float
    rows: list[dict[str, Any]] = field(default_factory=list)

    def to_frame(self):  # noqa: ANN201
        import pandas as pd

        return pd.DataFrame(self.rows)

    def row(self, config: str, metric: str) -> dict[str, Any]:
        for r in self.rows:
            if r["config"] == config and r["metric"] == metric:
                return r
        raise KeyError((config, metric))


def significance(control: np.ndarray, treatment: np.ndarray, test: str = "ttest", max_p: float = 0.05) -> float:
    """p-value of the difference between two per-query score arrays (ranx's tests)."""
    if test not in TESTS:
        raise HybridMemError(f"unknown significance test {test!r}: expected one of {', '.join(TESTS)}")
    control, treatment = np.asarray(control, dtype=float), np.asarray(treatment, dtype=float)
    if len(control) < 2 or np.allclose(control, treatment, atol=TIE_EPS, rtol=0):
        return 1.0
    from ranx.statistical_tests import fisher_randomization_test, paired_student_t_test

    if test == "ttest":
        p, _ = paired_student_t_test(control, treatment, max_p=max_p)
    else:
        p, _ = fisher_randomization_test(control, treatment, n_permutations=1000, max_p=max_p, random_seed=42)
    return 1.0 if p != p else float(p)  # nan (zero variance of the differences) -> no evidence of a difference


def compare(result: EvalResult, baseline: str | None = None, metrics: Sequence[str] | None = None,
            test: str = "ttest", max_p: float = 0.05) -> Comparison:
    """Every config of ``result`` against ``baseline`` (default: the first config).

    Rows: ``config, metric, mean, baseline_mean, delta, p_value, significant, wins, losses, ties``.

    Raises:
        HybridMemError: ``baseline`` is not one of the result's configs.
    """
    names = list(result.per_query)
    baseline = baseline or names[0]
    if baseline not in result.per_query:
        raise HybridMemError(f"baseline config {baseline!r} is not among {', '.join(names)}")
    cmp = Comparison(baseline, test, max_p)
    base = result.per_query[baseline]
    for name in names:
        for m in metrics or result.metrics:
            a, b = base[m], result.per_query[name][m]
            diff = b - a
            p = 1.0 if name == baseline else significance(a, b, test, max_p)
            cmp.rows.append({
                "config": name, "metric": m, "mean": float(b.mean()), "baseline_mean": float(a.mean()),
                "delta": float(b.mean() - a.mean()), "p_value": p, "significant": bool(p <= max_p),
                "wins": int((diff > TIE_EPS).sum()), "losses": int((diff < -TIE_EPS).sum()),
                "ties": int((np.abs(diff) <= TIE_EPS).sum()),
            })
    return cmp


def metrics_table(result: EvalResult):  # noqa: ANN201
    """A pandas DataFrame: one row per config, one column per metric (means)."""
    import pandas as pd

    return pd.DataFrame(result.means).T[result.metrics]
