"""The CI regression gate: run a suite of checks, compare with a saved baseline, fail on drops beyond tolerance.

Suite (TOML)::

    tolerance = 0.01                 # default allowed absolute drop
    [settings.embedding]             # optional index settings (any hybridmem.toml section)
    provider = "local"
    [[check]]
    dataset = "demo"                 # a name or path, as in `hybridmem eval --dataset`
    split = "test"
    configs = ["keyword", "vector", "weighted", "rrf"]
    metrics = ["ndcg@10", "recall@10"]
    [check.tolerances]               # optional, per metric
    "ndcg@10" = 0.02
    [check.settings.embedding]       # optional, this check only (e.g. keyword-only: provider = "none")
    provider = "none"

A check's ``label`` (default: the dataset's name) starts its keys; give checks of one dataset with different
settings different labels.

A workspace folder with labels (``.hybridmem-labels/``, see :mod:`hybridmem.eval.labels`) is a suite too
(:func:`workspace_suite`): one check over its labeled queries, ranked with its own ``hybridmem.toml`` (config name
``workspace``) under its own index settings; its baseline defaults to ``.hybridmem-labels/baseline.json``.

Baseline (JSON): ``{"queries": {"<dataset name>/<split>": n}, "values": {"<dataset name>/<split>/<config>/<metric>":
{"value": v, "tolerance": t}}}``. A key measured now but absent from the baseline is reported and passes; a baseline
key no longer measured fails, and so does a ``dataset/split`` now measured on another number of queries than the
baseline's (labels added to a workspace: the same metric over other queries is not comparable); update the baseline
on purpose with ``--update-baseline`` when the suite or its labels change. A baseline without ``queries`` (written
before they were kept) is compared on its values only.
"""

from __future__ import annotations

import json
import time
import tomllib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from hybridmem.config import LABELS_DIRNAME, PRESETS, RankConfig, Settings, load_settings, preset, settings_from_dict
from hybridmem.embeddings import Embedder
from hybridmem.errors import ConfigError, HybridMemError
from hybridmem.eval.datasets import load_dataset
from hybridmem.eval.runner import AUTO, Evaluator
from hybridmem.wording import counted

DEFAULT_TOLERANCE = 0.01
WORKSPACE_CONFIG = "workspace"  # a config name: the ranking of the dataset's workspace's own hybridmem.toml
WORKSPACE_METRICS = ("ndcg@10", "recall@10", "mrr@10")


class GateError(HybridMemError):
    """The suite or baseline file is missing or malformed."""


@dataclass
class Check:
    dataset: str
    split: str | None
    configs: list[str]
    metrics: list[str]
    tolerances: dict[str, float]
    settings: dict[str, Any] = field(default_factory=dict)
    label: str = ""


@dataclass
class Suite:
    path: Path
    checks: list[Check]
    tolerance: float = DEFAULT_TOLERANCE
    settings: Settings = field(default_factory=Settings)


@dataclass
class GateResult:
    """``values``: measured now; ``failures``: one line per failure (a metric that dropped beyond its tolerance, a
    baseline key no longer measured, a ``dataset/split`` measured on another number of queries); ``kinds``: how many
    failures of each kind (``dropped``, ``unmeasured``, ``queries``; see :func:`check_baseline`)."""

    values: dict[str, float]
    tolerances: dict[str, float]
    failures: list[str]
    lines: list[str]
    seconds: float
    kinds: dict[str, int] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def summary(self) -> str:
        """What failed, in one line ("" when the gate passed): the labeled queries or the suite changed since the
        baseline (update it on purpose), and how many metrics dropped beyond tolerance.

        Example:
            >>> GateResult({}, {}, ["a"], [], 1.0, {"dropped": 1}).summary
            '1 metric dropped beyond tolerance'
            >>> GateResult({}, {}, ["a"], [], 1.0, {"queries": 1}).summary
            'the labeled queries changed since the baseline (added or removed): rerun with --update-baseline'
        """
        k = self.kinds
        changed = []
        if k.get("queries"):
            changed.append("the labeled queries changed since the baseline (added or removed)")
        if k.get("unmeasured"):
            changed.append(f"{counted(k['unmeasured'], 'baseline metric')} no longer measured (the suite changed?)")
        parts = [" and ".join(changed) + ": rerun with --update-baseline"] if changed else []
        if k.get("dropped"):
            parts.append(f"{counted(k['dropped'], 'metric')} dropped beyond tolerance")
        if not parts and self.failures:
            parts = [counted(len(self.failures), "failure")]
        return "; ".join(parts)


def is_workspace_suite(path: str | Path) -> bool:
    return (Path(path).expanduser() / LABELS_DIRNAME / "queries.jsonl").is_file()


def workspace_suite(workspace: str | Path, tolerance: float = DEFAULT_TOLERANCE) -> Suite:
    """A labeled workspace as a suite: every labeled query, its own settings and ranking (see module doc)."""
    ws = Path(workspace).expanduser().resolve()
    check = Check(str(ws), None, [WORKSPACE_CONFIG], list(WORKSPACE_METRICS), {}, {}, "workspace")
    return Suite(ws, [check], tolerance, load_settings(workspace=ws))


def default_baseline(suite_path: str | Path) -> Path | None:
    """Where a workspace suite's baseline lives (None for a suite file: give ``--baseline``)."""
    return Path(suite_path).expanduser() / LABELS_DIRNAME / "baseline.json" if is_workspace_suite(suite_path) else None


def resolve_check_configs(names: list[str], workspace: Path | None) -> dict[str, RankConfig]:
    """Preset names, and ``workspace``: the ranking of ``workspace``'s ``hybridmem.toml``."""
    out = {}
    for n in names:
        if n == WORKSPACE_CONFIG:
            if workspace is None:
                raise GateError("the config 'workspace' needs a dataset with a workspace")
            out[n] = load_settings(workspace=workspace).ranking
        elif n in PRESETS:
            out[n] = preset(n)
        else:
            raise GateError(f"unknown config {n!r}: expected one of {', '.join([*PRESETS, WORKSPACE_CONFIG])}")
    return out


def load_suite(path: str | Path) -> Suite:
    if is_workspace_suite(path):
        return workspace_suite(path)
    p = Path(path)
    if p.is_dir():
        raise GateError(f"{p} is a folder without labels: label queries in the workbench's search inspector or run "
                        f"`hybridmem labels import FILE {p}`, then gate it; or give a suite TOML file")
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise GateError(f"suite file not found: {p}") from None
    except tomllib.TOMLDecodeError as exc:
        raise GateError(f"cannot parse suite {p}: {exc}") from None
    tol = float(data.get("tolerance", DEFAULT_TOLERANCE))
    checks = []
    for i, c in enumerate(data.get("check", [])):
        if "dataset" not in c:
            raise GateError(f"{p}: check #{i + 1} has no 'dataset'")
        checks.append(Check(str(c["dataset"]), c.get("split", "test"), list(c.get("configs", ["weighted"])),
                            list(c.get("metrics", ["ndcg@10"])),
                            {str(k): float(v) for k, v in c.get("tolerances", {}).items()},
                            dict(c.get("settings", {})), str(c.get("label", ""))))
    if not checks:
        raise GateError(f"{p}: the suite has no [[check]] tables")
    try:
        settings = settings_from_dict(data.get("settings", {}))
        for c in checks:
            settings_from_dict(c.settings, settings)  # validate now, not halfway through the run
    except ConfigError as exc:
        raise GateError(f"{p}: {exc}") from None
    return Suite(p, checks, tol, settings)


def run_suite(suite: Suite, embedder: Embedder | None | str = AUTO, cache: str | Path | None = None,
              progress: bool = True, queries: dict[str, int] | None = None) -> tuple[dict[str, float], dict[str, float]]:
    """Measure every check; ``({key: value}, {key: tolerance})`` with keys ``dataset/split/config/metric``;
    ``queries`` (when given) receives how many queries each ``dataset/split`` was measured on."""
    values: dict[str, float] = {}
    tolerances: dict[str, float] = {}
    evaluators: dict[str, Evaluator] = {}
    for check in suite.checks:
        settings = settings_from_dict(check.settings, suite.settings) if check.settings else suite.settings
        ev_key = f"{check.dataset}|{settings.index_hash()}|{settings.embedding.provider}"
        ev = evaluators.get(ev_key)
        if ev is None:
            chosen = None if settings.embedding.provider == "none" else embedder
            ev = evaluators[ev_key] = Evaluator(load_dataset(check.dataset), settings, chosen, cache, progress)
        res = ev.evaluate(resolve_check_configs(check.configs, ev.dataset.workspace), check.metrics, split=check.split)
        if queries is not None:
            queries[f"{check.label or ev.dataset.name}/{check.split or 'all'}"] = len(res.query_ids)
        for name, ms in res.means.items():
            for m, v in ms.items():
                label = check.label or ev.dataset.name
                key = f"{label}/{check.split or 'all'}/{name}/{m}"
                values[key] = round(v, 6)
                tolerances[key] = check.tolerances.get(m, suite.tolerance)
    for ev in evaluators.values():
        ev.close()
    return values, tolerances


def check_baseline(values: dict[str, float], baseline: dict[str, Any], measured: dict[str, int] | None = None,
                   kinds: dict[str, int] | None = None) -> tuple[list[str], list[str]]:
    """``(failures, report lines)`` of ``values`` against a baseline mapping (see module doc); ``measured``: the
    queries each ``dataset/split`` was measured on, checked against the baseline's own counts when it has them;
    ``kinds`` (when given) receives how many failures of each kind: ``dropped`` (beyond tolerance), ``unmeasured``
    (in the baseline, not measured now), ``queries`` (measured on another number of queries)."""
    base = baseline.get("values", {})
    failures, lines = [], []
    kinds = {} if kinds is None else kinds
    for key, v in values.items():
        if key not in base:
            lines.append(f"NEW   {key}: {v:.4f} (not in the baseline)")
            continue
        b, tol = float(base[key]["value"]), float(base[key].get("tolerance", DEFAULT_TOLERANCE))
        if v < b - tol - 1e-12:
            msg = f"{key} dropped from {b:.4f} to {v:.4f} ({v - b:+.4f}, tolerance {tol})"
            failures.append(msg)
            kinds["dropped"] = kinds.get("dropped", 0) + 1
            lines.append(f"FAIL  {msg}")
        else:
            lines.append(f"ok    {key}: {v:.4f} (baseline {b:.4f}, {v - b:+.4f})")
    for key in base:
        if key not in values:
            msg = f"{key} is in the baseline but was not measured (suite changed? rerun with --update-baseline)"
            failures.append(msg)
            kinds["unmeasured"] = kinds.get("unmeasured", 0) + 1
            lines.append(f"FAIL  {msg}")
    for key, n in (measured or {}).items():  # the same figure over other queries is another figure
        was = baseline.get("queries", {}).get(key)
        if was is not None and int(was) != n:
            msg = (f"{key} was measured on {n} queries, the baseline on {was} (labels added or removed?): compare "
                   "like with like, rerun with --update-baseline")
            failures.append(msg)
            kinds["queries"] = kinds.get("queries", 0) + 1
            lines.append(f"FAIL  {msg}")
    return failures, lines


def gate(suite_path: str | Path, baseline_path: str | Path | None, update: bool = False,
         embedder: Embedder | None | str = AUTO, cache: str | Path | None = None, progress: bool = True) -> GateResult:
    """Run the suite and compare with the baseline; ``update`` rewrites the baseline instead (always passes).

    Raises:
        GateError: the suite is malformed, or the baseline is missing (and ``update`` is False).
    """
    t0 = time.perf_counter()
    suite = load_suite(suite_path)
    chosen = baseline_path or default_baseline(suite_path)
    if chosen is None:
        raise GateError("give --baseline BASELINE.json (only a labeled workspace has a default baseline)")
    bpath = Path(chosen)
    if not update and not bpath.is_file():
        raise GateError(f"baseline not found: {bpath}; create it with --update-baseline")
    queries: dict[str, int] = {}
    values, tols = run_suite(suite, embedder, cache, progress, queries)
    if update:
        bpath.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "suite": str(suite_path),
            "updated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "queries": dict(sorted(queries.items())),
            "values": {k: {"value": v, "tolerance": tols[k]} for k, v in sorted(values.items())},
        }
        bpath.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        lines = [f"wrote {len(values)} baseline values to {bpath}"]
        return GateResult(values, tols, [], lines, time.perf_counter() - t0)
    try:
        baseline = json.loads(bpath.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise GateError(f"baseline {bpath} is not valid JSON: {exc}") from None
    kinds: dict[str, int] = {}
    failures, lines = check_baseline(values, baseline, queries, kinds)
    return GateResult(values, tols, failures, lines, time.perf_counter() - t0, kinds)
