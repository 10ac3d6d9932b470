"""Figure group 3, end-to-end search: ``MemoryIndex.search`` (real all-MiniLM-L6-v2 query embedding, FTS5 leg,
vector leg, chunk loading, ``rank()``) at two corpus sizes, p50 and p95, with the median of each stage.

Peers in the same run: the same search with the vector leg served by sqlite-vec KNN (``store.vector_search =
"sqlite-vec"``, the persistent copy), and the query embedding alone (the floor no search can go under).
Corpora are the cached synthetic stores (SciFact sentences, synthetic vectors; see :mod:`hybridmem.bench.corpora`);
queries are SciFact's test claims.
"""

from __future__ import annotations

import time

import numpy as np

from hybridmem.bench.common import BenchOptions, ms, percentiles, time_each
from hybridmem.bench.corpora import scifact_dataset, synthetic_store
from hybridmem.config import Settings
from hybridmem.index import MemoryIndex
from hybridmem.ranking import rank

STAGES = ("embed", "keyword", "vector", "load", "rank")


def _label(n: int) -> str:
    return f"{n // 1000}k"


def bench_size(opts: BenchOptions, n: int, embedder: object, queries: list[str], out: dict[str, float]) -> None:
    label = _label(n)
    path = synthetic_store(opts, n)
    idx = MemoryIndex(None, index_path=path, settings=Settings(), embedder=embedder)  # type: ignore[arg-type]
    t0 = time.perf_counter()
    idx.search(queries[0])  # loads the in-memory matrix
    out[f"e2e_first_query_s_{label}"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    idx.search(queries[1])  # starts the background builds: in-memory keyword index, int8 copy of the vectors
    if idx._keywords_thread is not None:  # noqa: SLF001
        idx._keywords_thread.join()  # noqa: SLF001
    if idx._matrix is not None:  # noqa: SLF001
        _ = idx._matrix.int8  # noqa: SLF001 - waits for (or does) the int8 build
    out[f"e2e_keyword_index_build_s_{label}"] = time.perf_counter() - t0
    stage: dict[str, list[float]] = {s: [] for s in STAGES}

    def one(q: str) -> None:
        resp = idx.search(q)
        for s in STAGES:
            stage[s].append(resp.timings.get(s, 0.0))

    qvecs = dict(zip(queries, embedder.embed_documents(queries)))  # type: ignore[attr-defined]
    cfg = idx.settings.ranking

    def no_embed(q: str) -> None:
        rank(idx.retrieve(q, cfg.pool, query_vector=qvecs[q]), cfg)

    ne_cpu: list[float] = []
    ne = time_each(no_embed, queries, warmup=3, cpu=ne_cpu)
    out[f"e2e_no_embed_p50_ms_{label}"], out[f"e2e_no_embed_p95_ms_{label}"] = map(ms, percentiles(ne))
    out[f"e2e_no_embed_cpu_p50_ms_{label}"] = ms(percentiles(ne_cpu)[0])
    samples: list[float] = []
    cpu: list[float] = []
    for rep in range(1):
        samples += time_each(one, queries, warmup=3 if rep == 0 else 0, cpu=cpu)
    out[f"e2e_p50_ms_{label}"], out[f"e2e_p95_ms_{label}"] = map(ms, percentiles(samples))
    out[f"e2e_cpu_p50_ms_{label}"] = ms(percentiles(cpu)[0])
    for s in STAGES:
        out[f"e2e_{s}_p50_ms_{label}"] = float(np.median(stage[s]))
    idx.close()

    knn = MemoryIndex(None, index_path=path, settings=Settings().override(store={"vector_search": "sqlite-vec"}),
                      embedder=embedder)  # type: ignore[arg-type]
    if knn.store.vec_available:
        knn_t = time_each(lambda q: knn.search(q), queries[: max(10, len(queries) // 3)], warmup=2)
        out[f"e2e_sqlitevec_p50_ms_{label}"], out[f"e2e_sqlitevec_p95_ms_{label}"] = map(ms, percentiles(knn_t))
    knn.close()


def run(opts: BenchOptions, embedder: object) -> dict[str, float]:
    """End-to-end figures."""
    queries = [q.text for q in scifact_dataset(opts).queries][: opts.queries]
    out: dict[str, float] = {}
    embed_c: list[float] = []
    embed_t = time_each(lambda q: embedder.embed_query(q), queries, warmup=3, cpu=embed_c)  # type: ignore[attr-defined]
    out["query_embed_cpu_p50_ms"] = ms(percentiles(embed_c)[0])
    out["query_embed_p50_ms"], out["query_embed_p95_ms"] = map(ms, percentiles(embed_t))
    for n in opts.sizes:
        bench_size(opts, n, embedder, queries, out)
    big = _label(opts.sizes[1])
    out["e2e_p50_ms_100k"] = out[f"e2e_p50_ms_{big}"]
    out["e2e_speedup_vs_sqlitevec_" + big] = out.get(f"e2e_sqlitevec_p50_ms_{big}", float("nan")) / out[
        f"e2e_p50_ms_{big}"]
    return out
