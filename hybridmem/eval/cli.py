"""``hybridmem eval``, ``hybridmem eval gate`` and ``hybridmem sweep``: thin commands over :mod:`hybridmem.eval`.

Examples::

    hybridmem eval --dataset scifact --split test --config keyword vector weighted rrf --json
    hybridmem sweep --dataset scifact --param vector_weight=0.3,0.5,0.7 --param bm25_norm=minmax,rank --metric ndcg@10
    hybridmem eval gate --suite eval/suites/ci.toml --baseline eval/baselines/ci.json
    hybridmem eval --dataset ~/agent/memory              # a workspace's own labels; config 'workspace' = its toml
    hybridmem eval gate --suite ~/agent/memory --update-baseline
    hybridmem labels import qmd-fixture.json ~/agent/memory
    hybridmem labels list ~/agent/memory --json
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from hybridmem.commands import command, print_json
from hybridmem.config import DEFAULT_EVAL_CONFIGS, PRESETS, PROVIDERS, Settings, load_settings, preset
from hybridmem.errors import HybridMemError
from hybridmem.wording import counted


def _labeled_workspace(args: argparse.Namespace) -> bool:
    from hybridmem.eval.gate import is_workspace_suite

    return bool(args.dataset) and not args.queries and not args.judgments and is_workspace_suite(args.dataset)


def _settings(args: argparse.Namespace) -> Settings:
    if args.settings:
        s = load_settings(args.settings)
    else:  # a labeled workspace is evaluated under its own index settings; datasets under the defaults
        s = load_settings(workspace=args.dataset) if _labeled_workspace(args) else Settings()
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
    from hybridmem.eval.gate import WORKSPACE_CONFIG, resolve_check_configs

    names = args.config or list(DEFAULT_EVAL_CONFIGS) + ([WORKSPACE_CONFIG] if _labeled_workspace(args) else [])
    configs = resolve_check_configs(names, ev.dataset.workspace)
    split = None if args.split == "all" or (_labeled_workspace(args) and args.split == "test"
                                            and "test" not in ev.dataset.splits) else args.split
    result = ev.evaluate(configs, metrics, split=split, categories=args.category, min_score=args.min_score)
    ev.close()
    cmp = compare(result, baseline=args.baseline_config or names[0], test=args.test) if len(configs) > 1 else None
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

    if not args.suite:
        raise HybridMemError("eval gate needs --suite SUITE.toml (or a labeled workspace folder) and --baseline "
                             "BASELINE.json (a workspace's default: WORKSPACE/.hybridmem-labels/baseline.json)")
    ignored = [flag for flag, given in (("--keyword-only", args.keyword_only), ("--provider", args.provider),
                                        ("--settings", args.settings), ("--limit", args.limit)) if given]
    if ignored:  # they were accepted and ignored: a keyword-only baseline held e5's figures
        raise HybridMemError(f"eval gate takes its models and settings from the suite, not {', '.join(ignored)}: set "
                             "them in the suite file (a workspace's gate runs its index settings)")
    res = gate(args.suite, args.baseline, update=args.update_baseline, progress=not args.json)
    if args.json:
        print_json({"passed": res.passed, "failures": res.failures, "values": res.values,
                     "seconds": round(res.seconds, 2)})
    else:
        print("\n".join(res.lines))
        print(f"gate {'passed' if res.passed else 'FAILED'} in {res.seconds:.1f}s"
              + (f": {res.summary}" if res.failures else ""))
        for f in res.failures:
            print(f"regression: {f}", file=sys.stderr)
    return 0 if res.passed else 1


def _run_abstention(args: argparse.Namespace) -> int:
    from hybridmem.eval.abstention import (
        abstention_curve, abstention_table, curve_knob, curve_markdown, table_markdown,
    )

    ev = _evaluator(args)
    configs = args.config or ["default", "minmax", "rrf", "keyword", "vector"]
    named = {n: preset(n) for n in configs}
    if args.min_score is not None:
        named = {n: c.replace(min_score=args.min_score) for n, c in named.items()}
    split = None if args.split == "all" else args.split
    table = abstention_table(ev, named, split)
    curve = abstention_curve(ev, named[configs[0]], split=split)
    ev.close()
    if args.json:
        print_json({"dataset": ev.dataset.name, "split": split or "all", "table": table,
                    "curve": {"config": configs[0], "rows": curve}})
        return 0
    print(f"{ev.dataset.name}, split {split or 'all'}: answerable and no-answer queries\n")
    print(table_markdown(table))
    print(f"\ncurve over {curve_knob(named[configs[0]])} ({configs[0]}):\n")
    print(curve_markdown(curve), end="")
    return 0


def _run_calibrate(args: argparse.Namespace) -> int:
    from hybridmem.config import provider_model
    from hybridmem.config.calibration import VECTOR_CALIBRATIONS
    from hybridmem.eval.calibrate import calibrate, render, write_constants

    models = {}
    for provider in args.models:
        s = _settings(args).override(embedding={"provider": provider})
        models[provider_model(provider, s.embedding.model)] = s
    if args.decisions:  # the order and the answer gate over today's leg calibrations (hybridmem/eval/decisions.py)
        from hybridmem.config.calibration import KEYWORD_CALIBRATION
        from hybridmem.eval.decisions import DECISION_DATASETS, fit_decisions

        fitted = fit_decisions(models, DECISION_DATASETS, progress=not args.json)
        block = render(dict(VECTOR_CALIBRATIONS), KEYWORD_CALIBRATION, fitted.joint, fitted.gates, fitted.threshold,
                       fitted.joints)
    else:
        vector, keyword = calibrate(models, progress=not args.json)
        # models not refitted this run keep their fits (refit one model without re-embedding the others' datasets)
        block = render({**VECTOR_CALIBRATIONS, **vector}, keyword)
    if args.write:
        write_constants(block)
        print("wrote hybridmem/config/calibration.py", file=sys.stderr)
    print(block, end="")
    return 0


def _run_chatter(args: argparse.Namespace) -> int:
    """Fit the recall block's chatter filter per model (hybridmem/eval/chatter.py) and print what it scored."""
    from hybridmem.embeddings import create_embedder
    from hybridmem.eval.chatter import fit_chatter, render, write_fits

    fits = []
    for provider in args.models:
        s = _settings(args).override(embedding={"provider": provider})
        embedder = create_embedder(s.embedding).embedder
        if embedder is None:
            raise HybridMemError(f"embedding provider {provider!r} did not load: nothing to fit")
        fit = fit_chatter(embedder, progress=not args.json)
        print(render(fit))
        if fit.usable:
            fits.append(fit.chatter)
    if args.write and fits:
        write_fits(fits)
        print(f"wrote hybridmem/data/chatter.json ({', '.join(f.model for f in fits)})", file=sys.stderr)
    return 0


@command("eval")
def cmd_eval(args: argparse.Namespace) -> int:
    """Score ranking configs on a labeled dataset, run the CI gate, measure abstention or fit the calibration."""
    if args.action == "gate":
        return _run_gate(args)
    if args.action == "abstention":
        return _run_abstention(args)
    if args.action == "calibrate":
        return _run_calibrate(args)
    if args.action == "chatter":
        return _run_chatter(args)
    return _run_eval(args)


@command("sweep")
def cmd_sweep(args: argparse.Namespace) -> int:
    """Grid-sweep ranking parameters (retrieve once, rank many); ``--optimize`` tunes on train, reports on test."""
    from hybridmem.eval.sweeps import check_points, grid, optimize, parse_param, sweep

    if not args.param:
        raise HybridMemError("give at least one --param NAME=V1,V2,... (e.g. --param mmr_lambda=0.5,0.7)")
    params = dict(parse_param(p) for p in args.param)
    check_points(grid(params), None if args.base == "workspace" else PRESETS[args.base])  # before any retrieval
    ev = _evaluator(args)
    from hybridmem.eval.gate import resolve_check_configs

    base = resolve_check_configs([args.base], ev.dataset.workspace)[args.base]
    if args.optimize:
        res = optimize(ev, params, args.metric, base=base, report_metrics=[args.metric, "recall@100"])
        ev.close()
        out = {"dataset": ev.dataset.name, "metric": args.metric, "best_params": res.best_params,
               "train_score": round(res.train_score, 4),
               "test": {n: {m: round(v, 4) for m, v in ms.items()} for n, ms in res.test.means.items()}}
        if args.json:
            print_json(out)
        else:
            print(f"best on train ({args.metric} {res.train_score:.4f}), over --base {args.base}: {res.best_params}")
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
              f"(the grid over --base {args.base}) ranked and scored in {df.attrs['rank_score_s']:.2f}s")
        print(df.to_string(index=False))
    return 0


@command("labels")
def cmd_labels(args: argparse.Namespace) -> int:
    """Import labels into a workspace, or list them (:mod:`hybridmem.eval.labels`)."""
    from hybridmem.eval.labels import LabelStore, labels_dir
    from hybridmem.eval.labelsources import import_labels

    paths = list(args.paths)
    if len(paths) > (2 if args.action == "import" else 1):
        raise HybridMemError(f"labels {args.action}: too many paths {paths}")
    args.file = paths.pop(0) if args.action == "import" and paths else None
    args.workspace = paths[0] if paths else "."
    if not Path(args.workspace).expanduser().is_dir():
        raise HybridMemError(f"workspace folder not found: {args.workspace}")
    if args.action == "import":
        if not args.file:
            raise HybridMemError("labels import needs a FILE: a QMD fixture (.json), a BEIR folder, or "
                                 "queries.jsonl + judgments.jsonl")
        rep = import_labels(args.file, args.workspace)
        out = {"format": rep.format, "queries": rep.queries, "judgments": rep.judgments, "skipped": list(rep.skipped),
               "labels": str(labels_dir(args.workspace))}
        if args.json:
            print_json(out)
        else:
            print(f"imported {counted(rep.judgments, 'judgment')} for {counted(rep.queries, 'query')} ({rep.format}) "
                  f"into {out['labels']}")
            for line in rep.skipped:
                print(f"skipped: {line}", file=sys.stderr)
        return 0
    store = LabelStore(args.workspace)
    by_query: dict[str, list[Any]] = {}
    for j in store.judgments():  # grouped once: a scan per query took 12 s for 10,000 queries
        by_query.setdefault(j.query_id, []).append(j)
    rows = []
    for q in store.queries():
        js = by_query.get(q.id, [])
        rows.append({"id": q.id, "text": q.text, "source": q.source, "split": q.split, "category": q.category,
                     "relevant": sum(j.grade > 0 for j in js),
                     "not_relevant": sum(j.grade == 0 for j in js),
                     "evidence": [f"{j.path}#L{j.start_line}-L{j.end_line}" + (" (file)" if j.whole_file else "")
                                  for j in js if j.grade > 0]})
    if args.json:
        print_json({"workspace": str(store.workspace), "labels": str(store.dir), **store.counts(), "queries": rows})
        return 0
    if not rows:
        print(f"no labels in {store.dir}: label queries in the workbench or run `hybridmem labels import`")
        return 0
    c = store.counts()
    print(f"{c['labeled']} labeled queries ({c['queries']} in all), {c['relevant']} relevant and "
          f"{c['judgments'] - c['relevant']} not-relevant judgments in {store.dir}")
    for r in rows:
        tags = " ".join(f"[{t}]" for t in (r["split"], r["category"]) if t)
        print(f"{r['id']}  {r['relevant']} rel / {r['not_relevant']} not  {tags}  {r['text']}")
        for e in r["evidence"]:
            print(f"      {e}")
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
    sp.add_argument("action", nargs="?", choices=["gate", "abstention", "calibrate", "chatter"],
                    default=None, help="gate: the regression gate; abstention: no-answer sets and the min_score "
                                       "curve; calibrate: fit the calibrations on train splits; chatter: fit the "
                                       "recall block's chatter filter")
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
    sp.add_argument("--suite", default=None, help="gate: suite TOML, or a labeled workspace folder")
    sp.add_argument("--baseline", default=None,
                    help="gate: baseline JSON (a workspace's default: WORKSPACE/.hybridmem-labels/baseline.json)")
    sp.add_argument("--update-baseline", dest="update_baseline", action="store_true",
                    help="gate: rewrite the baseline with today's values")
    sp.add_argument("--models", nargs="+", default=["local", "e5"], help="calibrate, chatter: embedding providers to fit")
    sp.add_argument("--write", action="store_true",
                    help="calibrate, chatter: write the fitted numbers into the config")
    sp.add_argument("--decisions", action="store_true",
                    help="calibrate: fit the order (joint model), the answer gates and the threshold instead")

    sp = sub.add_parser("sweep", help="grid-sweep ranking parameters on labeled data")
    _common(sp)
    sp.add_argument("--param", action="append", default=[], metavar="NAME=V1,V2",
                    help="mmr_lambda, half_life, candidate_multiplier, vector_weight, rrf_k, min_score, bm25_norm")
    sp.add_argument("--metric", default="ndcg@10")
    sp.add_argument("--split", default=None, help="default: train when the dataset has one, else all queries")
    sp.add_argument("--base", default="default", choices=sorted([*PRESETS, "workspace"]),
                    help="config the grid changes (default: the shipped default; 'workspace': the dataset "
                         "workspace's hybridmem.toml)")
    sp.add_argument("--optimize", action="store_true", help="best point on train, reported on test")

    sp = sub.add_parser("labels", help="a workspace's own labels: import FILE [WORKSPACE], list [WORKSPACE]")
    sp.add_argument("action", choices=["import", "list"])
    sp.add_argument("paths", nargs="*", default=[], metavar="FILE|WORKSPACE",  # a default: optional in the usage
                    help="import: FILE [WORKSPACE]; list: [WORKSPACE] (default workspace: .)")
    sp.add_argument("--json", action="store_true", help="machine-readable output")
