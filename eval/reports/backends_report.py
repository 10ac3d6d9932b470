"""eval/reports/backends.md/.json: the same datasets evaluated on the SQLite and the PostgreSQL store engines, side
by side (issue #25: nDCG@10 equal within 0.001, the same top 10 on >= 99% of queries), with the default embedder (e5).

    PYTHONPATH=.:tests python eval/reports/backends_report.py demo,locomo,scifact   # a private pgserver
    HYBRIDMEM_TEST_PG_URL=postgresql://... PYTHONPATH=.:tests python eval/reports/backends_report.py scifact

SQLite indexes come from the eval harness's cache (``HYBRIDMEM_CACHE``, else the harness's own), so nothing
is embedded again; PostgreSQL's embedding cache is seeded from them (``compare_backends(seed_cache=True)``). SciFact
runs its 300 test queries, the others every query.
"""
import json
import os
import sys
import time
from pathlib import Path

from hybridmem.eval.backends import compare_backends
from hybridmem.eval.datasets import load_dataset
from hybridmem.eval.runner import cache_dir
from pgserver_fixture import URL_ENV, LocalServer

names = sys.argv[1].split(",") if len(sys.argv) > 1 else ["demo", "locomo", "scifact"]
cache = os.environ.get("HYBRIDMEM_CACHE") or str(cache_dir())
server = None if os.environ.get(URL_ENV) else LocalServer()
url = os.environ.get(URL_ENV) or server.url
rows = []
try:
    for name in names:
        t0 = time.time()
        for r in compare_backends(load_dataset(name), url, ["default", "rrf", "keyword", "vector"], cache=cache,
                                  split="test" if name == "scifact" else None):
            rows.append({"dataset": name, **r, "seconds": round(time.time() - t0)})
            print(json.dumps(rows[-1]), flush=True)
finally:
    if server is not None:
        server.destroy()
out = Path(__file__).parent
(out / "backends.json").write_text(json.dumps(rows, indent=1) + "\n")
lines = ["# SQLite and PostgreSQL store engines: the same answers", "",
         f"`PYTHONPATH=.:tests python eval/reports/backends_report.py {','.join(names)}` ({time.strftime('%Y-%m-%d %H:%M')}, "
         "default embedder e5). Same top 10: share of queries whose top 10 citations are the same list.", "",
         "| dataset | queries | config | SQLite nDCG@10 | PostgreSQL nDCG@10 | largest per-query difference | same top 10 |",
         "|---|---|---|---|---|---|---|"]
for r in rows:
    lines.append(f"| {r['dataset']} | {r['queries']} | {r['config']} | {r['sqlite']:.4f} | {r['postgres']:.4f} | "
                 f"{r['max_query_diff']:.4f} | {r['same_top10']:.1%} |")
(out / "backends.md").write_text("\n".join(lines) + "\n")
