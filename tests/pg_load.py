"""Writers and searchers against one PostgreSQL namespace at once: the harness of tests/test_pg_concurrency.py and of
the hand-run measurement (issue #25: 16 clients x 1,000 searches while 4 writers sync)::

    python tests/pg_load.py --clients 16 --searches 1000 --writers 4 --rounds 20

(starts a private pgserver unless HYBRIDMEM_TEST_PG_URL names a server). Prints one JSON line: searches, errors,
wrong answers, latency percentiles, writer syncs, and the final check (duplicates, lost updates).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

STABLE = 40  # notes no writer touches: each holds a unique word, and its search must answer with it first

WRITER = r"""
import sys, time
from dataclasses import replace
from pathlib import Path
from hybridmem.config import Settings
from hybridmem.embeddings.fake import HashEmbedder
from hybridmem.index import MemoryIndex
url, ns, ws, wid, rounds = sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
s = Settings()
s = replace(s, store=replace(s.store, backend="postgres", url=url, namespace=ns))
idx = MemoryIndex(ws, index_path=ws / ".hybridmem" / "index.sqlite", settings=s, embedder=HashEmbedder(dims=64))
for r in range(rounds):
    for f in range(3):
        p = ws / "memory" / f"writer{wid}-{f}.md"
        p.write_text(f"# writer {wid} file {f}\n\nround marker w{wid}f{f}r{r} payment retry note\n" * (1 + r % 3))
    idx.sync()
    print("synced", r, flush=True)
idx.close()
"""


def make_workspace(root: Path) -> Path:
    ws = root / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n\nShared facts about payments and retries.\n")
    for i in range(STABLE):
        (ws / "memory" / f"stable-{i:03d}.md").write_text(f"# Stable {i}\n\nThe unique word is zq{i}stable "
                                                           f"and the note talks about payment retry backoff.\n")
    return ws


def settings_for(url: str, ns: str):  # noqa: ANN201
    from hybridmem.config import Settings

    s = Settings()
    return replace(s, store=replace(s.store, backend="postgres", url=url, namespace=ns))


def run_load(url: str, ns: str, ws: Path, writers: int, clients: int, searches: int, rounds: int) -> dict:
    from hybridmem.embeddings.fake import HashEmbedder
    from hybridmem.index import MemoryIndex

    settings = settings_for(url, ns)
    first = MemoryIndex(ws, index_path=ws / ".hybridmem" / "index.sqlite", settings=settings,
                        embedder=HashEmbedder(dims=64))
    first.sync()
    script = ws.parent / "writer.py"
    script.write_text(WRITER)
    procs = [subprocess.Popen([sys.executable, str(script), url, ns, str(ws), str(w), str(rounds)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for w in range(writers)]
    errors: list[str] = []
    wrong: list[str] = []
    lat: list[float] = []
    lock = threading.Lock()

    def client(c: int) -> None:
        idx = MemoryIndex(ws, index_path=ws / ".hybridmem" / "index.sqlite", settings=settings,
                          embedder=HashEmbedder(dims=64))
        try:
            for n in range(searches):
                i = (c * 7919 + n) % STABLE
                t0 = time.perf_counter()
                try:
                    resp = idx.search(f"zq{i}stable", min_score=0, answer_threshold=0)
                except Exception as exc:  # noqa: BLE001 - counted, reported
                    with lock:
                        errors.append(f"{type(exc).__name__}: {exc}")
                    continue
                dt = time.perf_counter() - t0
                top = resp.results[0].path if resp.results else None
                spans = [(h.path, h.start_line) for h in resp.results]
                with lock:
                    lat.append(dt)
                    if top != f"memory/stable-{i:03d}.md" or len(spans) != len(set(spans)):
                        wrong.append(f"zq{i}stable -> {top}")
        finally:
            idx.close()

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    search_s = time.perf_counter() - t0
    writer_errors = []
    syncs = 0
    for p in procs:
        out, err = p.communicate(timeout=600)
        syncs += out.count("synced")
        if p.returncode != 0:
            writer_errors.append(err.strip().splitlines()[-1] if err.strip() else f"exit {p.returncode}")
    # after everyone stopped: one more sync, then every writer's last round is there, once
    first.sync()
    store = first.store
    spans = store.chunk_spans()
    dup = len(spans) - len({(p, a) for p, a, _, _ in spans})
    lost = []
    for w in range(writers):
        for f in range(3):
            kw = store.keyword_search(f'"w{w}f{f}r{rounds - 1}"', 5)
            if not kw:
                lost.append(f"writer{w}-{f}")
    problems = store.check()
    first.close()
    lat.sort()
    pct = (lambda q: round(lat[min(len(lat) - 1, int(q * len(lat)))] * 1000, 2)) if lat else (lambda q: None)
    return {"clients": clients, "searches": len(lat) + len(errors), "errors": len(errors), "wrong": len(wrong),
            "p50_ms": pct(0.5), "p95_ms": pct(0.95), "search_seconds": round(search_s, 1), "writers": writers,
            "writer_syncs": syncs, "writer_errors": writer_errors, "duplicate_chunks": dup, "lost_updates": lost,
            "check": problems, "error_examples": errors[:3], "wrong_examples": wrong[:3]}


def main(argv: list[str] | None = None) -> int:
    import argparse
    import uuid

    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--searches", type=int, default=1000)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=20)
    a = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).parent))
    from pgserver_fixture import URL_ENV, LocalServer

    server = None if os.environ.get(URL_ENV) else LocalServer()
    url = os.environ.get(URL_ENV) or server.url  # type: ignore[union-attr]
    try:
        root = Path(tempfile.mkdtemp(prefix="hm-load-"))
        out = run_load(url, f"load-{uuid.uuid4().hex[:8]}", make_workspace(root), a.writers, a.clients, a.searches,
                       a.rounds)
        print(json.dumps(out))
    finally:
        if server is not None:
            server.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
