"""Figure group 3, end-to-end search: ``MemoryIndex.search`` (real all-MiniLM-L6-v2 query embedding, FTS5 leg,
vector leg, chunk loading, ``rank()``) at two corpus sizes, p50 and p95, with the median of each stage.

Peers in the same run: the same search with the vector leg served by sqlite-vec KNN (``store.vector_search =
"sqlite-vec"``, the persistent copy), and the query embedding alone (the floor no search can go under), by the
engine's query runtime (ONNX Runtime) and by the eager torch model, interleaved query by query.
Corpora are the cached synthetic stores (SciFact sentences, synthetic vectors; see :mod:`hybridmem.bench.corpora`);
queries are SciFact's test claims.

Because ONNX Runtime's query vectors are not bit-identical to torch's (1e-7 a component), the group also measures
what that does to rankings on SciFact's real index: the share of test queries whose default top 10 (and whose vector
candidate list) is the same from either vector, beside the same share for the eval harness's batched query vectors.
"""

from __future__ import annotations

import time

import numpy as np

from hybridmem.bench.common import BenchOptions, ms, percentiles, time_each
from hybridmem.bench.corpora import scifact_dataset, scifact_evaluator, synthetic_store
from hybridmem.config import Settings
from hybridmem.index import MemoryIndex
from hybridmem.ranking import rank

STAGES = ("embed", "keyword", "vector", "load", "rank")
ROUNDS = 3  # passes over the queries, each search timed once a pass; p50 and p95 are over every pass


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
    idx.wait_for_copies()
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

    ne: list[float] = []
    ne_cpu: list[float] = []
    samples: list[float] = []
    cpu: list[float] = []
    for rep in range(ROUNDS if not opts.quick else 1):  # rounds alternate, so a noisy minute weighs on both alike
        ne += time_each(no_embed, queries, warmup=3 if rep == 0 else 0, cpu=ne_cpu)
        samples += time_each(one, queries, warmup=3 if rep == 0 else 0, cpu=cpu)
    out[f"e2e_no_embed_p50_ms_{label}"], out[f"e2e_no_embed_p95_ms_{label}"] = map(ms, percentiles(ne))
    out[f"e2e_no_embed_cpu_p50_ms_{label}"] = ms(percentiles(ne_cpu)[0])
    out[f"e2e_p50_ms_{label}"], out[f"e2e_p95_ms_{label}"] = map(ms, percentiles(samples))
    out[f"e2e_cpu_p50_ms_{label}"] = ms(percentiles(cpu)[0])
    for s in STAGES:
        out[f"e2e_{s}_p50_ms_{label}"] = float(np.median(stage[s]))
    idx.close()

    knn = MemoryIndex(None, index_path=path, settings=Settings().override(store={"vector_search": "sqlite-vec"}),
                      embedder=embedder)  # type: ignore[arg-type]
    if knn.status()["vector_backend"] == "sqlite-vec":
        knn_t = time_each(lambda q: knn.search(q), queries[: max(10, len(queries) // 3)], warmup=2)
        out[f"e2e_sqlitevec_p50_ms_{label}"], out[f"e2e_sqlitevec_p95_ms_{label}"] = map(ms, percentiles(knn_t))
    knn.close()


def _torch_twin(embedder: object) -> object | None:
    """The same model with ``query_runtime="torch"`` (eager, bit-identical to encode), or None when ``embedder`` has
    no other query runtime (the hash embedder, a torch-configured one)."""
    if getattr(embedder, "query_runtime", None) != "onnx":
        return None
    from hybridmem.embeddings.local import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(embedder.model, embedder.batch_size, query_runtime="torch")  # type: ignore[attr-defined]


def bench_query_embedding(embedder: object, queries: list[str], out: dict[str, float]) -> None:
    """The query embedding alone: the engine's runtime and, interleaved query by query, the eager torch model."""
    twin = _torch_twin(embedder)
    if twin is not None:
        for q in queries[:2]:  # the ONNX copy is built from the second one-text call; time it once it is ready
            embedder.embed_query(q)  # type: ignore[attr-defined]
        embedder.onnx.wait()  # type: ignore[attr-defined]
        out["query_embed_onnx_ready"] = float(embedder.onnx.state == "ready")  # type: ignore[attr-defined]
        out["query_embed_onnx_max_diff"] = float(embedder.onnx.max_diff)  # type: ignore[attr-defined]
    runs = {"": embedder, "_torch": twin} if twin is not None else {"": embedder}
    wall: dict[str, list[float]] = {k: [] for k in runs}
    cpu: dict[str, list[float]] = {k: [] for k in runs}
    for i, q in enumerate(queries):
        for key, e in runs.items():
            c0, t0 = time.process_time(), time.perf_counter()
            e.embed_query(q)  # type: ignore[attr-defined]
            if i >= 3:  # warm-up
                wall[key].append(time.perf_counter() - t0)
                cpu[key].append(time.process_time() - c0)
    for key in runs:
        out[f"query_embed{key}_p50_ms"], out[f"query_embed{key}_p95_ms"] = map(ms, percentiles(wall[key]))
        out[f"query_embed{key}_cpu_p50_ms"] = ms(percentiles(cpu[key])[0])


def bench_query_runtime_rankings(opts: BenchOptions, embedder: object, out: dict[str, float]) -> None:
    """On SciFact's real index: how often the ONNX query vector ranks differently from the eager torch one (default
    config, top 10 as the eval ranks it), and the same for the eval harness's batched query vectors (its reference
    for "same up to float rounding"). Skipped without an ONNX runtime."""
    twin = _torch_twin(embedder)
    if twin is None or embedder.onnx.state != "ready":  # type: ignore[attr-defined]
        return
    from hybridmem.eval.runner import eval_config

    ev = scifact_evaluator(opts, embedder)
    idx = ev.index
    cfg = eval_config(idx.settings.ranking, 10)
    texts = [q.text for q in ev.dataset.queries]
    batched = ev.query_vectors(texts)

    def ranked(text: str, vector: np.ndarray) -> tuple[list[int], list[int]]:
        cands = idx.retrieve(text, cfg.pool, query_vector=vector)
        return [h.chunk_id for h in cands.vector], [h.chunk_id for h in rank(cands, cfg).hits]

    same = {"onnx": 0, "onnx_leg": 0, "batched": 0, "batched_leg": 0}
    worst = 0.0
    for text in texts:
        ref_vec = twin.embed_query(text)  # type: ignore[attr-defined]
        onnx_vec = embedder.embed_query(text)  # type: ignore[attr-defined]
        worst = max(worst, float(np.abs(onnx_vec - ref_vec).max()))
        ref = ranked(text, ref_vec)
        for name, vec in (("onnx", onnx_vec), ("batched", batched[text])):
            got = ranked(text, vec)
            same[name] += got[1] == ref[1]
            same[f"{name}_leg"] += got[0] == ref[0]
    n = len(texts)
    out["query_onnx_same_top10_scifact"] = same["onnx"] / n
    out["query_onnx_same_vector_leg_scifact"] = same["onnx_leg"] / n
    out["query_batched_same_top10_scifact"] = same["batched"] / n
    out["query_batched_same_vector_leg_scifact"] = same["batched_leg"] / n
    out["query_onnx_max_abs_diff_scifact"] = worst
    out["query_runtime_queries_scifact"] = float(n)
    ev.close()


def run(opts: BenchOptions, embedder: object) -> dict[str, float]:
    """End-to-end figures."""
    queries = [q.text for q in scifact_dataset(opts).queries][: opts.queries]
    out: dict[str, float] = {}
    bench_query_embedding(embedder, queries, out)
    bench_query_runtime_rankings(opts, embedder, out)
    for n in opts.sizes:
        bench_size(opts, n, embedder, queries, out)
    big = _label(opts.sizes[1])
    out["e2e_p50_ms_100k"] = out[f"e2e_p50_ms_{big}"]
    out["e2e_speedup_vs_sqlitevec_" + big] = out.get(f"e2e_sqlitevec_p50_ms_{big}", float("nan")) / out[
        f"e2e_p50_ms_{big}"]
    return out
