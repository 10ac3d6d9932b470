"""Reports: JSON (machines, the CLI's ``--json``) and Markdown (people), with the metrics table, significance, the
configs used and the dataset's provenance.

The JSON always has ``{"dataset", "queries", "configs": {NAME: {METRIC: value}}}``; the rest is extra.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from hybridmem.eval.compare import Comparison
from hybridmem.eval.datasets.base import Dataset
from hybridmem.eval.runner import EvalResult


def _r(x: float) -> float:
    return round(float(x), 4)


def result_json(result: EvalResult, comparison: Comparison | None = None, dataset: Dataset | None = None,
                by_category: bool = False) -> dict[str, Any]:
    """The report as plain JSON-ready data."""
    out: dict[str, Any] = {
        "dataset": result.dataset,
        "split": result.split or "all",
        "queries": len(result.query_ids),
        "depth": result.depth,
        "depths": result.depths,
        "metrics": result.metrics,
        "configs": {n: {m: _r(v) for m, v in ms.items()} for n, ms in result.means.items()},
        "config_settings": {n: dataclasses.asdict(c) for n, c in result.configs.items()},
        "timings_s": {k: round(v, 3) for k, v in result.timings.items()},
    }
    if by_category:
        out["by_category"] = {cat: {n: {m: _r(v) for m, v in ms.items()} for n, ms in per.items()}
                              for cat, per in result.by_category().items()}
    if comparison is not None:
        out["significance"] = {"baseline": comparison.baseline, "test": comparison.test, "max_p": comparison.max_p,
                               "rows": [{k: (_r(v) if isinstance(v, float) else v) for k, v in r.items()}
                                        for r in comparison.rows if r["config"] != comparison.baseline]}
    if dataset is not None:
        out["reference_time"] = dataset.reference_time
        out["notes"] = list(dataset.notes)
        out["provenance"] = dataset.provenance
    return out


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    return lines + ["| " + " | ".join(r) + " |" for r in rows]


def markdown(result: EvalResult, comparison: Comparison | None = None, dataset: Dataset | None = None,
             title: str | None = None, by_category: bool = False) -> str:
    """A Markdown report."""
    lines = [f"# {title or f'Evaluation: {result.dataset}'}", ""]
    lines.append(f"Dataset `{result.dataset}`, split `{result.split or 'all'}`, {len(result.query_ids)} queries; "
                 f"ranked to {result.depth_words()} (each metric on a ranking to its own depth, whose pool is the "
                 "depth times the config's candidate multiplier: a config that normalises over its pool, `minmax` "
                 "and the default's joint order among them, orders its top 10 a little differently in a deeper one).")
    lines.append("")
    lines += _table(["config", *result.metrics],
                    [[n, *(f"{ms[m]:.4f}" for m in result.metrics)] for n, ms in result.means.items()])
    if comparison is not None:
        lines += ["", f"## Significance against `{comparison.baseline}` ({comparison.test}, p <= {comparison.max_p})",
                  ""]
        rows = [[r["config"], r["metric"], f"{r['mean']:.4f}", f"{r['delta']:+.4f}", f"{r['p_value']:.4g}",
                 "yes" if r["significant"] else "no", f"{r['wins']}/{r['losses']}/{r['ties']}"]
                for r in comparison.rows if r["config"] != comparison.baseline]
        lines += _table(["config", "metric", "mean", "delta", "p", "significant", "wins/losses/ties"], rows)
    if by_category:
        lines += ["", "## By category", ""]
        for cat, per in result.by_category().items():
            lines += [f"### {cat or '(none)'}", ""]
            lines += _table(["config", *result.metrics],
                            [[n, *(f"{ms[m]:.4f}" for m in result.metrics)] for n, ms in per.items()])
            lines.append("")
    lines += ["", "## Configs", "", "Each config as ranked to the deepest metric's depth (the eval sets `max_results` "
              "to the depth and `max_injected_chars` to 0; everything else is the config's own).", "", "```json",
              json.dumps({n: dataclasses.asdict(c) for n, c in result.configs.items()}, indent=1), "```"]
    if dataset is not None:
        lines += ["", "## Dataset", "", f"Reference time (decay clock): {dataset.reference_time}."]
        lines += [f"- {n}" for n in dataset.notes]
        lines += ["", "<details><summary>Provenance</summary>", "", dataset.provenance.strip(), "", "</details>"]
    return "\n".join(lines) + "\n"


def write_report(path: str | Path, result: EvalResult, comparison: Comparison | None = None,
                 dataset: Dataset | None = None, title: str | None = None, by_category: bool = False) -> Path:
    """Write ``path`` (Markdown) and the same name with ``.json``; returns the Markdown path. A ``path`` ending in
    ``.json`` names the JSON file: the Markdown goes beside it as ``.md`` (writing both to one name kept only the
    JSON)."""
    p = Path(path)
    if p.suffix.lower() == ".json":
        p = p.with_suffix(".md")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(markdown(result, comparison, dataset, title, by_category), encoding="utf-8")
    p.with_suffix(".json").write_text(
        json.dumps(result_json(result, comparison, dataset, by_category), indent=2, ensure_ascii=False) + "\n",
        encoding="utf-8")
    return p
