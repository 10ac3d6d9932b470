"""Both embedding models side by side, each in a fresh process: load time, RSS after load, documents embedded per
second (the demo workspace's chunks), median query latency, peak RSS. Writes eval/reports/models.json.

    PYTHONPATH=. python eval/reports/model_bench.py
"""
import json, os, resource, subprocess, sys, time
from pathlib import Path

CHILD = r'''
import json, os, resource, statistics, sys, time
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
from hybridmem.config import EmbeddingConfig
from hybridmem.embeddings import create_embedder
from hybridmem import sources as src
from hybridmem.chunking import chunk_text
from hybridmem.config import ChunkingConfig, SourcesConfig
from hybridmem.eval.datasets import load_demo
t0 = time.perf_counter()
emb = create_embedder(EmbeddingConfig(provider=sys.argv[1])).embedder
load_s = time.perf_counter() - t0
after_load = rss()
ds = load_demo()
texts = []
for sf in src.discover(ds.workspace, SourcesConfig()):
    doc = src.load(sf, SourcesConfig()).document
    if doc is not None:
        texts += [c.text for c in chunk_text(doc.text, ChunkingConfig())]
texts = texts[:16]  # 16 chunks of up to 1,600 chars: enough for a rate on a busy 2-core machine
emb.embed_documents(texts[:2])
t0 = time.perf_counter(); emb.embed_documents(texts); docs_s = time.perf_counter() - t0
qs = [q.text for q in ds.queries[:30]]
lat = []
for q in qs:
    t0 = time.perf_counter(); emb.embed_query(q); lat.append((time.perf_counter() - t0) * 1000)
print(json.dumps({"provider": sys.argv[1], "model": emb.model, "load_s": round(load_s, 2),
                  "rss_after_load_mb": round(after_load), "chunks": len(texts),
                  "chunks_per_s": round(len(texts) / docs_s, 1), "query_ms_p50": round(statistics.median(lat), 1),
                  "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
                  "torch_imported": "torch" in sys.modules}))
'''
rows = []
for prov in ("e5", "local"):
    out = subprocess.run([sys.executable, "-c", CHILD, prov], capture_output=True, text=True, env=os.environ)
    if out.returncode:
        sys.exit(out.stderr)
    rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(rows[-1], flush=True)
load = os.getloadavg()[0]
Path("eval/reports/models.json").write_text(json.dumps({"load_average_1m": round(load, 1), "rows": rows}, indent=1))
