"""``hybridmem bench``: every performance figure of the engine beside its peer, measured in the same run.

Groups (one module each): ``vectors`` (in-memory exact and pre-filter+rescore against numpy and sqlite-vec, memory
bandwidth), ``keyword`` (FTS5 leg against bm25s and rank_bm25 on SciFact), ``e2e`` (search at 10k and 100k chunks),
``indexing`` (cold indexing against raw encode, warm re-sync, peak memory) and ``sweep`` (100 ranking configs after
one retrieval against re-running search) and ``serving`` (one-shot CLI, MCP cold start and round trips over stdio
and HTTP, beside the in-process search) and ``backends`` (the SQLite and PostgreSQL store engines side by side:
sync throughput, search p50/p95 at 1 and 16 clients, HNSW recall; needs ``hybridmem[postgres]``). Each group runs in its own process by default, so its peak memory is its
own and one group's caches do not warm another's.

Outputs: ``bench.json`` (a flat mapping figure name -> number) and ``bench.md`` (the side-by-side table) under
``--out``. ``--quick`` shrinks every size for tests (and is labelled so in the output).

Example:
    $ hybridmem bench --out eval/bench            # minutes; builds cached corpora on first run
    $ hybridmem bench --quick --json --only vectors
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Sequence

from hybridmem.bench.common import BenchOptions, peak_rss_mb
from hybridmem.bench.report import REQUIRED, save
from hybridmem.commands import command

GROUPS = ("vectors", "keyword", "e2e", "indexing", "sweep", "serving", "backends")
_NEEDS_MODEL = {"vectors", "e2e", "indexing", "sweep"}

__all__ = ["GROUPS", "REQUIRED", "BenchOptions", "run_all", "run_group"]


def _embedder(kind: str):  # noqa: ANN202
    if kind == "hash":
        from hybridmem.embeddings.fake import HashEmbedder

        return HashEmbedder(dims=384), 0.0
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from hybridmem.embeddings.local import SentenceTransformerEmbedder

    t0 = time.perf_counter()
    e = SentenceTransformerEmbedder()
    return e, time.perf_counter() - t0


def run_group(name: str, opts: BenchOptions, embedder_kind: str = "minilm") -> dict[str, float]:
    """One figure group in this process; adds ``peak_rss_mb_<group>``."""
    if name not in GROUPS:
        raise ValueError(f"unknown bench group {name!r}: expected one of {', '.join(GROUPS)}")
    mod = importlib.import_module(f"hybridmem.bench.{name}")
    out: dict[str, float] = {}
    if name in _NEEDS_MODEL:
        embedder, load_s = _embedder(embedder_kind)
        if embedder_kind != "hash":
            out["model_load_s"] = load_s
        out.update(mod.run(opts, embedder))
    else:
        out.update(mod.run(opts))
    out[f"peak_rss_mb_{name}"] = peak_rss_mb()
    return out


def run_all(
    opts: BenchOptions,
    groups: Sequence[str] = GROUPS,
    isolate: bool = True,
    embedder_kind: str = "minilm",
    log: Any = None,
) -> dict[str, float]:
    """Run ``groups`` (each in a fresh process when ``isolate``) and merge their figures."""
    figures: dict[str, float] = {"quick": float(opts.quick), "cpu_count": float(os.cpu_count() or 0),
                                 "timestamp": time.time()}
    for name in groups:
        t0 = time.perf_counter()
        if isolate:
            with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
                part = pool.submit(run_group, name, opts, embedder_kind).result()
        else:
            part = run_group(name, opts, embedder_kind)
        part[f"bench_{name}_s"] = time.perf_counter() - t0
        if log is not None:
            print(f"bench: {name} done in {part[f'bench_{name}_s']:.1f}s", file=log, flush=True)
        figures.update(part)
    return figures


def _header(opts: BenchOptions, groups: Sequence[str]) -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"# hybridmem bench{' (--quick: small sizes, labels name the full sizes)' if opts.quick else ''}\n\n"
        f"{time.strftime('%Y-%m-%d %H:%M:%S')} on {platform.machine()} {platform.processor() or ''} "
        f"({os.cpu_count()} CPUs, load average {load:.2f} at the end), Python {platform.python_version()}; "
        f"groups: {', '.join(groups)}. Medians over repeated queries; each engine figure's peer ran in the same "
        "process. 100k-chunk corpora use synthetic normalized vectors (see hybridmem/bench/corpora.py)."
    )


def add_parsers(sub: Any) -> None:
    sp = sub.add_parser("bench", help="performance figures beside their peers (saved as JSON + Markdown)")
    sp.add_argument("--json", action="store_true", help="print the figures as JSON")
    sp.add_argument("--out", default=None, help="folder for bench.json and bench.md (e.g. eval/bench)")
    sp.add_argument("--quick", action="store_true", help="small sizes, seconds (for tests)")
    sp.add_argument("--only", default=None, help=f"comma-separated groups of: {', '.join(GROUPS)}")
    sp.add_argument("--cache-dir", default=None, help="where synthetic corpora are cached")
    sp.add_argument("--no-isolate", dest="isolate", action="store_false", help="run every group in this process")
    sp.add_argument("--hash-embedder", action="store_true",
                    help="use the fake hash embedder instead of all-MiniLM-L6-v2 (no model; for tests)")



@command("bench")
def cmd_bench(args: argparse.Namespace) -> int:
    """Run the benchmark, print the table (or JSON), save both under --out."""
    from hybridmem.errors import ConfigError

    groups = [g.strip() for g in args.only.split(",")] if args.only else list(GROUPS)
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        raise ConfigError(f"unknown bench group(s) {', '.join(unknown)}: expected some of {', '.join(GROUPS)}")
    kw: dict[str, Any] = {"quick": args.quick}
    if args.cache_dir:
        kw["cache_dir"] = Path(args.cache_dir)
    opts = BenchOptions(**kw)
    figures = run_all(opts, groups, isolate=args.isolate, embedder_kind="hash" if args.hash_embedder else "minilm",
                      log=sys.stderr)
    header = _header(opts, groups)
    if args.out:
        stem = "bench-quick" if args.quick else "bench"
        previous = Path(args.out) / f"{stem}.json"
        if args.only and previous.is_file():  # a partial re-run updates its groups' figures, keeps the others
            old = json.loads(previous.read_text(encoding="utf-8"))
            figures = {**{k: v for k, v in old.items() if v is not None}, **figures}
            header += f" Re-run of {', '.join(groups)}; other figures from the earlier run."
        jp, mp = save(figures, Path(args.out), header, stem=stem)
        print(f"bench: wrote {jp} and {mp}", file=sys.stderr)
    if args.json:
        print(json.dumps(figures, indent=2, sort_keys=True))
    else:
        from hybridmem.bench.report import markdown

        print(markdown(figures, header))
    return 0
