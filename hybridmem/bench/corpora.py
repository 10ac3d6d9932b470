"""Corpora the benchmark runs on, built once and cached under ``BenchOptions.cache_dir``.

* SciFact indexed by the engine (keyword-only, and with all-MiniLM-L6-v2 vectors for the sweep and real-vector recall);
  the hybridmem eval harness's cached index builder is preferred when it exists.
* Synthetic stores of N chunks (10k, 100k): sentences of SciFact abstracts shuffled into chunks, with **synthetic
  normalized random 384-dim vectors** written straight through ``Store.upsert_file`` / ``Store.cache_put`` under the
  real model's cache key. Embedding 100k chunks with the real model would take hours on 2 cores; vector search speed
  does not depend on what the vectors mean (recall is measured on real SciFact vectors instead).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import replace
from pathlib import Path

import numpy as np

from hybridmem.bench.common import BenchOptions, Beir
from hybridmem.config import DEFAULT_MODEL
from hybridmem.store import Store
from hybridmem.tokenization import tokenize

DIMS = 384
SYNTH_KEY = ("local", DEFAULT_MODEL, "")  # the cache key MemoryIndex uses with the default local embedder
_SENT_RE = re.compile(r"(?<=[.!?])\s+")
_BUILD_VERSION = 1


def scifact_dataset(opts: BenchOptions):  # noqa: ANN201
    """SciFact's test split as the eval harness loads it; ``--quick``: 40 queries over their judged documents plus
    400 others (a separate, small cached index)."""
    from hybridmem.eval import load_dataset

    ds = load_dataset("scifact").select("test")
    if getattr(ds, "chunking", None) is not None:
        # the bench measures the engine as configured by default (400-token chunks); the eval harness may index
        # documents whole, which is another index (and, here, another half hour of embedding)
        ds = replace(ds, chunking=None)
    if not opts.quick:
        return ds
    queries = ds.queries[:40]
    qrels = {q.id: dict(ds.qrels[q.id]) for q in queries}
    judged = {d for r in qrels.values() for d in r}
    docs = tuple(d for i, d in enumerate(ds.documents) if i < 400 or d.path in judged)
    return replace(ds, name="scifact-quick", queries=queries, qrels=qrels, documents=docs)


def beir_of(ds) -> Beir:  # noqa: ANN001
    """The peers' view of a documents dataset."""
    return Beir(corpus={d.path: d.text for d in ds.documents}, queries={q.id: q.text for q in ds.queries},
                qrels={q: dict(r) for q, r in ds.qrels.items()})


def scifact_evaluator(opts: BenchOptions, embedder: object | None):  # noqa: ANN201
    """The eval harness's :class:`~hybridmem.eval.Evaluator` on :func:`scifact_dataset` (its cached index builder
    and retrieve-once path); ``embedder=None`` is keyword-only. Full runs share the harness's index cache."""
    from hybridmem.eval import Evaluator

    return Evaluator(scifact_dataset(opts), embedder=embedder, cache=opts.eval_cache_dir, progress=False)  # type: ignore[arg-type]


def doc_of_chunks(idx) -> dict[int, str]:  # noqa: ANN001
    """chunk id -> document path, for mapping chunk rankings to BEIR documents."""
    return idx.chunk_paths()


def _sentence_pool(limit_docs: int | None = None) -> tuple[list[str], list[str]]:
    """SciFact sentences and their pre-computed token strings."""
    from hybridmem.eval import load_dataset

    sents: list[str] = []
    for i, doc in enumerate(load_dataset("scifact").documents):
        if limit_docs is not None and i >= limit_docs:
            break
        sents.extend(s for s in _SENT_RE.split(doc.text.split("\n", 1)[-1]) if len(s) > 20)
    return sents, [" ".join(tokenize(s)) for s in sents]


def random_unit_vectors(n: int, dims: int = DIMS, seed: int = 0) -> np.ndarray:
    """``n`` random unit vectors (float32), deterministic for ``seed``."""
    rng = np.random.default_rng(seed)
    out = np.empty((n, dims), dtype=np.float32)
    for i in range(0, n, 20_000):
        block = rng.standard_normal((min(20_000, n - i), dims), dtype=np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[i : i + len(block)] = block
    return out


def synthetic_store_path(opts: BenchOptions, n: int) -> Path:
    return opts.cache_dir / f"synthetic-{n}-v{_BUILD_VERSION}.sqlite"


def synthetic_store(opts: BenchOptions, n: int, chunks_per_file: int = 10, sentences_per_chunk: int = 4) -> Path:
    """A store of ``n`` chunks (sqlite-vec table, FTS5, embedding cache), built once. Returns its path."""
    path = synthetic_store_path(opts, n)
    if path.exists():
        store = Store(path)
        try:
            if store.get_meta("bench_complete") == "1" and store.counts()["chunks"] == n:
                return path
        finally:
            store.close()
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".building")
    for p in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
        p.unlink(missing_ok=True)
    rng = np.random.default_rng(opts.seed + n)
    sents, toks = _sentence_pool(limit_docs=300 if opts.quick else None)
    vecs = random_unit_vectors(n, seed=opts.seed + n)
    store = Store(tmp)
    store.ensure_vec_table(DIMS)
    picks = rng.integers(0, len(sents), size=(n, sentences_per_chunk))
    with store.transaction():
        for f in range(0, n, chunks_per_file):
            rows, vectors, cache = [], [], {}
            for i in range(f, min(n, f + chunks_per_file)):
                text = " ".join(sents[j] for j in picks[i])
                h = hashlib.sha256(f"{i}\0{text}".encode()).hexdigest()
                rows.append({"start_line": i - f + 1, "end_line": i - f + 1, "hash": h, "text": text,
                             "tokens": " ".join(toks[j] for j in picks[i]), "timestamp": 0.0, "evergreen": True})
                vectors.append(vecs[i])
                cache[h] = vecs[i]
            fpath = f"memory/notes-{f // chunks_per_file:06d}.md"
            store.upsert_file({"path": fpath, "abspath": None, "source": "memory", "hash": fpath, "mtime": 0.0,
                               "size": 0, "date": None, "evergreen": 1}, rows, vectors)
            store.cache_put(*SYNTH_KEY, cache)
    for key, value in {"provider": SYNTH_KEY[0], "model": SYNTH_KEY[1], "provider_key": "", "dims": DIMS,
                       "generation": 1, "bench_complete": 1}.items():
        store.set_meta(key, value)
    store.close()
    tmp.replace(path)
    for suffix in ("-wal", "-shm"):
        Path(f"{tmp}{suffix}").unlink(missing_ok=True)
    return path
