"""Figure group ``backends``: the SQLite and PostgreSQL store engines side by side in one run (issue #25).

Per size (100k and 1M synthetic chunks of 384 dims; ``--quick``: 1k), both engines are filled through the same store
write path (``upsert_file`` in transactions of 100 files: tokens to FTS5 or to postings, vectors to sqlite-vec or
pgvector), which gives each one's sync throughput (chunks/s; PostgreSQL's includes its HNSW build, also reported
alone). Then end-to-end ``MemoryIndex.search`` (query embedding by the hash embedder, both legs, chunk loading,
``rank()``) p50/p95 at 1 client and at 16 concurrent clients: SQLite serves the 16 from one long-lived index (its
model: one process, one file, in-memory copies), PostgreSQL from 16 indexes with a connection each (its model: many
clients of one server). PostgreSQL's HNSW recall@10 against its own exact scan is measured on the same vectors.

The server is ``$HYBRIDMEM_BENCH_PG_URL`` when set, else a private pgserver in a temporary folder.
``$HYBRIDMEM_BENCH_BACKEND_SIZES`` (comma-separated chunk counts) overrides the sizes.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from hybridmem.bench.common import BenchOptions, ms, percentiles
from hybridmem.bench.corpora import DIMS, _sentence_pool, random_unit_vectors
from hybridmem.config import Settings
from hybridmem.embeddings.fake import HashEmbedder
from hybridmem.index import MemoryIndex
from hybridmem.store import IndexStore, open_store

CLIENTS = 16
FILE_CHUNKS = 10
TX_FILES = 100


def sizes(opts: BenchOptions) -> tuple[int, ...]:
    env = os.environ.get("HYBRIDMEM_BENCH_BACKEND_SIZES")
    if env:
        return tuple(int(x) for x in env.split(",") if x.strip())
    return (1_000,) if opts.quick else (100_000, 1_000_000)


def label(n: int) -> str:
    return f"{n // 1_000_000}m" if n >= 1_000_000 and n % 1_000_000 == 0 else f"{n // 1000}k"


class _Server:
    """``$HYBRIDMEM_BENCH_PG_URL``, or a private pgserver stopped (SIGINT to its postmaster) and deleted at the end."""

    def __init__(self) -> None:
        self.url = os.environ.get("HYBRIDMEM_BENCH_PG_URL", "")
        self.base: Path | None = None
        if not self.url:
            import pgserver

            self.base = Path(tempfile.mkdtemp(prefix="hm-bench-pg-"))
            os.chmod(self.base, 0o777)
            self.url = pgserver.get_server(self.base / "data", cleanup_mode=None).get_uri()

    def close(self) -> None:
        if self.base is None:
            return
        try:
            pid = int((self.base / "data" / "postmaster.pid").read_text().split()[0])
            os.kill(pid, signal.SIGINT)
            for _ in range(200):
                os.kill(pid, 0)
                time.sleep(0.05)
        except (OSError, ValueError, IndexError):
            pass
        shutil.rmtree(self.base, ignore_errors=True)


def _files(opts: BenchOptions, n: int) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]], list[np.ndarray]]]:
    """``n`` synthetic chunks (four SciFact sentences each, random unit vectors) in files of ten."""
    sents, toks = _sentence_pool(limit_docs=300 if opts.quick else None)
    rng = np.random.default_rng(opts.seed + n)
    picks = rng.integers(0, len(sents), size=(n, 4))
    vecs = random_unit_vectors(n, DIMS, seed=opts.seed + n)
    for f in range(0, n, FILE_CHUNKS):
        rows = []
        for i in range(f, min(n, f + FILE_CHUNKS)):
            text = " ".join(sents[j] for j in picks[i])
            rows.append({"start_line": i - f + 1, "end_line": i - f + 1, "text": text, "timestamp": 0.0,
                         "hash": hashlib.sha256(f"{i}\0{text}".encode()).hexdigest(), "evergreen": True,
                         "tokens": " ".join(toks[j] for j in picks[i])})
        path = f"memory/notes-{f // FILE_CHUNKS:07d}.md"
        yield ({"path": path, "abspath": None, "source": "memory", "hash": path, "mtime": 0.0, "size": 0,
                "date": None, "evergreen": 1}, rows, list(vecs[f:f + len(rows)]))


def fill(store: IndexStore, opts: BenchOptions, n: int, embedder: HashEmbedder) -> tuple[float, float]:
    """Write ``n`` chunks; returns (seconds for the rows, seconds of the last commit's index work, e.g. HNSW)."""
    store.ensure_vec_table(DIMS)
    for k, v in {"provider": embedder.name, "model": embedder.model, "provider_key": embedder.provider_key,
                 "dims": DIMS}.items():
        store.set_meta(k, v)
    t0 = time.perf_counter()
    batch: list = []
    key = (embedder.name, embedder.model, embedder.provider_key)

    def flush() -> None:
        with store.transaction():
            for file, rows, vecs in batch:
                store.upsert_file(file, rows, vecs)
        store.cache_put(*key, {r["hash"]: v for _, rows, vecs in batch for r, v in zip(rows, vecs)})
        batch.clear()

    for item in _files(opts, n):
        batch.append(item)
        if len(batch) == TX_FILES:
            flush()
    if batch:
        flush()
    rows_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    with store.transaction():
        store.bump_generation()  # PostgreSQL builds its HNSW index here once the namespace is big enough
    if hasattr(store, "analyze"):
        store.analyze()  # planner statistics, as autovacuum would soon have them
    return rows_s, time.perf_counter() - t0


def _latencies(make: Callable[[], MemoryIndex], shared: MemoryIndex | None, queries: list[str], clients: int
               ) -> list[float]:
    out: list[float] = []
    lock = threading.Lock()
    per = max(1, len(queries) // clients)

    def client(c: int) -> None:
        idx = shared or make()
        mine = []
        for q in (queries[c * per:(c + 1) * per] if clients > 1 else queries):
            t0 = time.perf_counter()
            idx.search(q)
            mine.append(time.perf_counter() - t0)
        with lock:
            out.extend(mine)
        if shared is None:
            idx.close()

    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def run(opts: BenchOptions) -> dict[str, float]:
    out: dict[str, float] = {}
    embedder = HashEmbedder(dims=DIMS)
    sents, _ = _sentence_pool(limit_docs=300)
    rng = np.random.default_rng(opts.seed)
    queries = [" ".join(sents[i].split()[:8]) for i in rng.choice(len(sents), size=32 if opts.quick else 320,
                                                                    replace=False)]
    server = _Server()
    tmp = Path(tempfile.mkdtemp(prefix="hm-bench-backends-"))
    try:
        for n in sizes(opts):
            lab = label(n)
            base_settings = Settings()
            pg_settings = replace(base_settings, store=replace(base_settings.store, backend="postgres", url=server.url,
                                                               namespace=f"bench-{n}-{time.time_ns()}"))
            engines = {"sqlite": (base_settings, tmp / f"bench-{n}.sqlite"), "postgres": (pg_settings, tmp / f"pg-{n}")}
            for name, (settings, path) in engines.items():
                store = open_store(settings, path)
                rows_s, index_s = fill(store, opts, n, embedder)
                out[f"backend_{name}_sync_chunks_per_s_{lab}"] = n / (rows_s + index_s)
                if name == "postgres":
                    out[f"backend_postgres_hnsw_build_s_{lab}"] = index_s
                    recall = []
                    for q in random_unit_vectors(20, DIMS, seed=opts.seed + 1):
                        exact = {i for i, _ in store.vector_knn(q, 10, exact=True)}  # type: ignore[call-arg]
                        ann = {i for i, _ in store.vector_knn(q, 10)}
                        recall.append(len(exact & ann) / 10)
                    out[f"backend_postgres_hnsw_recall10_{lab}"] = float(np.mean(recall))
                    out[f"backend_postgres_hnsw_used_{lab}"] = float(store.ann_ready(DIMS))  # type: ignore[attr-defined]
                store.close()

                def make(settings: Settings = settings, path: Path = path) -> MemoryIndex:
                    return MemoryIndex(None, index_path=path, settings=settings, embedder=embedder)

                one = make()
                for q in queries[:3]:
                    one.search(q)
                one.wait_for_copies()  # the in-memory keyword copy (and SQLite's vectors), as a long-lived server has them
                lat1 = _latencies(make, one, queries, 1)
                out[f"backend_{name}_p50_ms_{lab}_1c"], out[f"backend_{name}_p95_ms_{lab}_1c"] = map(
                    ms, percentiles(lat1))
                # 16 clients of one long-lived index (an MCP server), on both engines: its in-memory keyword copy
                # is shared, as it is in production (16 private indexes in one process would each build one)
                lat16 = _latencies(make, one, queries, CLIENTS)
                out[f"backend_{name}_p50_ms_{lab}_16c"], out[f"backend_{name}_p95_ms_{lab}_16c"] = map(
                    ms, percentiles(lat16))
                one.close()
            out[f"backend_pg_over_sqlite_p50_{lab}"] = (out[f"backend_postgres_p50_ms_{lab}_1c"]
                                                        / out[f"backend_sqlite_p50_ms_{lab}_1c"])
    finally:
        server.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return out
