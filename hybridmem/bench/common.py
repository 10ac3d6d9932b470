"""Shared pieces of the benchmark: timing statistics, the SciFact loader, cached indexes, memory bandwidth.

Timings are wall-clock (``time.perf_counter``) medians over many repetitions because the machine is shared; every
figure group measures the engine and its peer in the same process, interleaved where cheap, so both see the same noise.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

import numpy as np


LAUNCH = "import sys; from hybridmem.cli import main; sys.exit(main())"  # `python -c LAUNCH ARGS` runs the CLI


@dataclass(frozen=True)
class BenchOptions:
    """Sizes and repetitions; ``quick`` shrinks everything so the suite runs in seconds (tests)."""

    quick: bool = False
    cache_dir: Path = Path(os.environ.get("HYBRIDMEM_BENCH_CACHE", Path.home() / ".cache" / "hybridmem" / "bench"))
    seed: int = 7
    eval_cache: Path | None = None  # where SciFact indexes live; None = the eval harness's own cache (shared)

    @property
    def eval_cache_dir(self) -> Path | None:
        """SciFact index cache: the given one, else the eval harness's own (shared) for full runs, else a folder
        under ``cache_dir`` for ``--quick`` runs (their small index must not shadow the harness's)."""
        if self.eval_cache is not None:
            return self.eval_cache
        return self.cache_dir / "eval" if self.quick else None

    @property
    def sizes(self) -> tuple[int, int]:
        """Small and large corpus sizes (chunks) for the vector and end-to-end legs."""
        return (1_000, 5_000) if self.quick else (10_000, 100_000)

    @property
    def queries(self) -> int:
        """Timed queries per measurement."""
        return 30 if self.quick else 300


def ms(seconds: float) -> float:
    return seconds * 1000.0


def percentiles(samples: Iterable[float]) -> tuple[float, float]:
    """``(p50, p95)`` of ``samples``."""
    arr = np.asarray(list(samples), dtype=np.float64)
    if arr.size == 0:
        return float("nan"), float("nan")
    return float(np.percentile(arr, 50)), float(np.percentile(arr, 95))


def time_each(fn: Callable[[object], object], items: Iterable[object], warmup: int = 3,
              cpu: list[float] | None = None) -> list[float]:
    """Wall seconds per call of ``fn(item)`` for each item (after ``warmup`` untimed calls on the first items).

    ``cpu``, when given, receives each call's CPU seconds (this process, all threads): on a shared machine the wall
    time includes waiting for a core, the CPU time does not, so it estimates a quiet machine's latency for
    single-threaded code.
    """
    items = list(items)
    for it in items[:warmup]:
        fn(it)
    out = []
    for it in items:
        c0 = time.process_time()
        t0 = time.perf_counter()
        fn(it)
        out.append(time.perf_counter() - t0)
        if cpu is not None:
            cpu.append(time.process_time() - c0)
    return out


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def memory_bandwidth_gbs(mbytes: int = 256, repeats: int = 7) -> float:
    """Measured copy bandwidth: a ``mbytes`` MB numpy copy reads and writes it once each (counted as 2x bytes).

    The median of ``repeats`` copies; the destination is pre-faulted so page faults are not timed.
    """
    src = np.ones(mbytes * 1_000_000 // 8, dtype=np.float64)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        times.append(time.perf_counter() - t0)
    return 2 * src.nbytes / float(np.median(times)) / 1e9


def read_bandwidth_gbs(mbytes: int = 256, repeats: int = 7) -> float:
    """Measured read bandwidth: ``np.sum`` over a ``mbytes`` MB float32 array (what a scan does), median GB/s."""
    arr = np.ones(mbytes * 1_000_000 // 4, dtype=np.float32)
    arr.sum()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        arr.sum()
        times.append(time.perf_counter() - t0)
    return arr.nbytes / float(np.median(times)) / 1e9


# -- SciFact ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Beir:
    """A BEIR dataset as the peers see it: ``corpus`` id -> text (title line + abstract, as the engine indexes it),
    ``queries`` id -> text (judged test queries), ``qrels`` query id -> {doc id: grade}."""

    corpus: dict[str, str]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]


def ndcg10(run: dict[str, dict[str, float]], qrels: dict[str, dict[str, int]]) -> float:
    """Mean nDCG@10 with ranx (imported here only: it compiles with numba on first use)."""
    from ranx import Qrels, Run, evaluate

    run = {q: (r if r else {"__none__": 0.0}) for q, r in run.items()}
    return float(evaluate(Qrels(qrels), Run(run), "ndcg@10"))


def first_occurrence(doc_ids: Iterable[str], k: int = 10) -> dict[str, float]:
    """A ranked list of chunk documents as a ranked document run: first occurrence wins, scores ``k..1``."""
    out: dict[str, float] = {}
    for d in doc_ids:
        if d not in out:
            out[d] = float(k - len(out))
            if len(out) == k:
                break
    return out
