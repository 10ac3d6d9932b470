"""``hybridmem eval``, ``hybridmem eval gate`` and ``hybridmem sweep``: thin commands over :mod:`hybridmem.eval`.

Examples::

    hybridmem eval --dataset scifact --split test --config keyword vector weighted rrf --json
    hybridmem sweep --dataset scifact --param vector_weight=0.3,0.5,0.7 --param bm25_norm=minmax,rank --metric ndcg@10
    hybridmem eval gate --suite eval/suites/ci.toml --baseline eval/baselines/ci.json
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from typing import Any

from hybridmem.cli import command, print_json
from hybridmem.config import DEFAULT_EVAL_CONFIGS, PRESETS, PROVIDERS, Settings, load_settings, preset
from hybridmem.errors import HybridMemError


def _settings(args: argparse.Namespace) -> Settings:
    s = load_settings(args.settings) if args.settings else Settings()
    if getattr(args, "provider", None):
        s = s.override(embedding={"provider": args.provider})
    if args.keyword_only:
        s = s.override(embedding={"provider": "none"})
    return s


def _evaluator(args: argparse.Namespace):  # noqa: ANN202
    from hybridmem.eval.datasets import load_dataset
    from hybridmem.eval.runner import Evaluator

    if not args.dataset:
        raise HybridMemError("--dataset is required (a name such as demo, scifact, locomo, or a path)")
    ds = load_dataset(args.dataset, args.queries, args.judgments)
    limit = getattr(args, "limit", None)
    if limit is not None:
        if limit < 1:
            raise HybridMemError(f"--limit must be >= 1, not {limit}")
        split = getattr(args, "split", None)
        ds = ds.select(split=None if split in (None, "all") else split)
        keep = {q.id for q in ds.queries[:limit]}
        ds = replace(ds, queries=ds.queries[:limit], qrels={k: v for k, v in ds.qrels.items() if k in keep})
    return Evaluator(ds, _settings(args), progress=not args.json)


def _run_eval(args: argparse.Namespace) -> int:
    from hybridmem.eval.compare import compare
    from hybridmem.eval.metrics import DEFAULT_METRICS, EVIDENCE_METRICS
    from hybridmem.eval.report import markdown, result_json, write_report

    ev = _evaluator(args)
    metrics = args.metrics or list(DEFAULT_METRICS) + (list(EVIDENCE_METRICS) if ev.dataset.kind == "evidence" else [])
    configs = args.config or list(DEFAULT_EVAL_CONFIGS)
    for name in configs:
        preset(name)
    split = None if args.split == "all" else args.split
    result = ev.evaluate(configs, metrics, split=split, categories=args.category, min_score=args.min_score)
    ev.close()
    cmp = compare(result, baseline=args.baseline_config or configs[0], test=args.test) if len(configs) > 1 else None
    by_cat = len(set(result.categories)) > 1
    if args.out:
        path = write_report(args.out, result, cmp, ev.dataset, by_category=by_cat)
        print(f"wrote {path} and {path.with_suffix('.json')}", file=sys.stderr)
    if args.json:
        print_json(result_json(result, cmp, by_category=by_cat))
    elif not args.out:
        print(markdown(result, cmp, by_category=by_cat), end="")
    return 0


def _run_gate(args: argparse.Namespace) -> int:
    from hybridmem.eval.gate import gate

    if not args.suite or not args.baseline:
        raise HybridMemError("eval gate needs --suite SUITE.toml and --baseline BASELINE.json")
    res = gate(args.suite, args.baseline, update=args.update_baseline, progress=not args.json)
    if args.json:
        print_json({"passed": res.passed, "failures": res.failures, "values": res.values,
                     "seconds": round(res.seconds, 2)})
    else:
        print("\n".join(res.lines))
        print(f"gate {'passed' if res.passed else 'FAILED'} in {res.seconds:.1f}s"
              + (f": {len(res.failures)} metric(s) dropped beyond tolerance" if res.failures else ""))
        for f in res.failures:
            print(f"regression: {f}", file=sys.stderr)
    return 0 if res.passed else 1


@command("eval")
def cmd_eval(args: argparse.Namespace) -> int:
    """Score ranking configs on a labeled dataset, or run the CI gate."""
    if args.action == "gate":
        return _run_gate(args)
    return _run_eval(args)


@command("sweep")
def cmd_sweep(args: argparse.Namespace) -> int:
    """Grid-sweep ranking parameters (retrieve once, rank many); ``--optimize`` tunes on train, reports on test."""
    from hybridmem.eval.sweeps import optimize, parse_param, sweep

    if not args.param:
        raise HybridMemError("give at least one --param NAME=V1,V2,... (e.g. --param mmr_lambda=0.5,0.7)")
    params = dict(parse_param(p) for p in args.param)
    ev = _evaluator(args)
    base = preset(args.base)
    if args.optimize:
        res = optimize(ev, params, args.metric, base=base, report_metrics=[args.metric, "recall@100"])
        ev.close()
        out = {"dataset": ev.dataset.name, "metric": args.metric, "best_params": res.best_params,
               "train_score": round(res.train_score, 4),
               "test": {n: {m: round(v, 4) for m, v in ms.items()} for n, ms in res.test.means.items()}}
        if args.json:
            print_json(out)
        else:
            print(f"best on train ({args.metric} {res.train_score:.4f}): {res.best_params}")
            for n, ms in out["test"].items():
                print(f"test {n}: " + ", ".join(f"{m} {v:.4f}" for m, v in ms.items()))
        return 0
    split = args.split
    if split is None:
        split = "train" if "train" in ev.dataset.splits else None
    df = sweep(ev, params, base, [args.metric], split=split, progress=not args.json)
    ev.close()
    df = df.sort_values(args.metric, ascending=False, kind="stable")
    if args.json:
        print_json({"dataset": ev.dataset.name, "split": split or "all", "metric": args.metric,
                     "base": args.base, "rows": df.to_dict(orient="records"),
                     "seconds": round(df.attrs["rank_score_s"], 3)})
    else:
        print(f"{ev.dataset.name} split {split or 'all'}, {df.attrs['queries']} queries, {len(df)} configs "
              f"ranked and scored in {df.attrs['rank_score_s']:.2f}s")
        print(df.to_string(index=False))
    return 0


def _common(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--dataset", default=None, help="demo, scifact, locomo, cranfield, xquad-<lang>, or a path")
    sp.add_argument("--queries", default=None, help="queries.jsonl for a plain workspace folder")
    sp.add_argument("--judgments", default=None, help="judgments.jsonl for a plain workspace folder")
    sp.add_argument("--settings", default=None, help="index settings TOML (default: built-in defaults)")
    sp.add_argument("--keyword-only", action="store_true", help="no embeddings (vector configs find nothing)")
    sp.add_argument("--provider", default=None, choices=PROVIDERS,
                    help="embedding provider for this run (e.g. local = all-MiniLM-L6-v2, e5 = multilingual-e5-small)")
    sp.add_argument("--limit", type=int, default=None, metavar="N",
                    help="only the first N queries of the split, in the dataset's order (e.g. --limit 300)")
    sp.add_argument("--json", action="store_true", help="machine-readable output")


def add_parsers(sub: Any) -> None:
    sp = sub.add_parser("eval", help="evaluate ranking configs on labeled data; 'eval gate' runs the CI gate")
    sp.add_argument("action", nargs="?", choices=["gate"], default=None, help="gate: the regression gate")
    _common(sp)
    sp.add_argument("--split", default="test", help="train, test or all (default test)")
    sp.add_argument("--config", nargs="+", action="extend", default=None, metavar="NAME",
                    help=f"configs to compare (presets: {', '.join(sorted(PRESETS))})")
    sp.add_argument("--metrics", nargs="+", default=None, help="e.g. ndcg@10 recall@10 mrr budget_recall@4000")
    sp.add_argument("--category", nargs="+", default=None, help="only queries of these categories")
    sp.add_argument("--min-score", dest="min_score", type=float, default=None,
                    help="override every config's min_score (default: each config's own)")
    sp.add_argument("--baseline-config", dest="baseline_config", default=None,
                    help="config the others are tested against (default: the first)")
    sp.add_argument("--test", choices=["ttest", "fisher"], default="ttest", help="significance test")
    sp.add_argument("--out", default=None, help="write a Markdown report here (and .json beside it)")
    sp.add_argument("--suite", default=None, help="gate: suite TOML")
    sp.add_argument("--baseline", default=None, help="gate: baseline JSON")
    sp.add_argument("--update-baseline", dest="update_baseline", action="store_true",
                    help="gate: rewrite the baseline with today's values")

    sp = sub.add_parser("sweep", help="grid-sweep ranking parameters on labeled data")
    _common(sp)
    sp.add_argument("--param", action="append", default=[], metavar="NAME=V1,V2",
                    help="mmr_lambda, half_life, candidate_multiplier, vector_weight, rrf_k, min_score, bm25_norm")
    sp.add_argument("--metric", default="ndcg@10")
    sp.add_argument("--split", default=None, help="default: train when the dataset has one, else all queries")
    sp.add_argument("--base", default="weighted", choices=sorted(PRESETS), help="config the grid changes")
    sp.add_argument("--optimize", action="store_true", help="best point on train, reported on test")

