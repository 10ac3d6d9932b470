"""Evaluation: labeled datasets, a retrieve-once runner, ranx metrics, comparisons, sweeps, reports and the CI gate.

Nothing here is imported by the engine; ranx (numba) and pandas load only when metrics or tables are computed.

Example:
    >>> from hybridmem.eval import Evaluator, load_dataset                     # doctest: +SKIP
    >>> ev = Evaluator(load_dataset("scifact"))                                # doctest: +SKIP
    >>> ev.evaluate(["keyword", "weighted"], ["ndcg@10"], split="test").means  # doctest: +SKIP
"""

from hybridmem.eval.compare import Comparison, compare, metrics_table
from hybridmem.eval.datasets import Dataset, Evidence, Query, load_dataset
from hybridmem.eval.gate import GateResult, gate
from hybridmem.eval.metrics import DEFAULT_METRICS, EVIDENCE_METRICS, Scorer, parse_metric
from hybridmem.eval.report import markdown, result_json, write_report
from hybridmem.eval.runner import EvalResult, Evaluator, cache_dir, eval_config, resolve_configs
from hybridmem.eval.sweeps import OptimizeResult, grid, optimize, sweep

__all__ = [
    "DEFAULT_METRICS", "EVIDENCE_METRICS", "Comparison", "Dataset", "EvalResult", "Evaluator", "Evidence", "GateResult",
    "OptimizeResult", "Query", "Scorer", "cache_dir", "compare", "eval_config", "gate", "grid", "load_dataset",
    "markdown", "metrics_table", "optimize", "parse_metric", "resolve_configs", "result_json", "sweep",
    "write_report",
]
