"""Figure group 2, the keyword leg on SciFact (300 test queries): the engine's FTS5 leg against bm25s and rank_bm25,
queries per second and nDCG@10 side by side.

The engine runs exactly what live search runs (``MemoryIndex.keyword_search``: ``retrieve.keyword_leg``, the safe
FTS5 query builder ``tokenization.fts_query`` and ``Store.keyword_search``) on a keyword-only ``MemoryIndex`` of
SciFact, with the default candidate pool; chunks map to their documents, first occurrence wins. The peers index whole
documents with bm25s's own tokenizer (English stopwords, Snowball stemmer), the setting of their published SciFact
numbers.
"""

from __future__ import annotations

import time

from hybridmem.bench.common import BenchOptions, first_occurrence, ndcg10, percentiles, time_each
from hybridmem.bench.corpora import beir_of, doc_of_chunks, scifact_dataset, scifact_evaluator
from hybridmem.config import RankConfig


def bench_engine(opts: BenchOptions, queries: dict[str, str], out: dict[str, float]) -> dict[str, dict[str, float]]:
    ev = scifact_evaluator(opts, None)
    idx = ev.index
    doc_of = doc_of_chunks(idx)
    pool = RankConfig().pool
    qtexts = list(queries.values())

    for q in qtexts[:2]:  # the facade builds its in-memory copy of the postings from a generation's 2nd query on
        idx.retrieve(q, pool, vector=False)
    idx.wait_for_copies()
    engine = idx.keyword_search()  # the leg exactly as MemoryIndex.retrieve runs it (over the in-memory postings)
    fts5_leg = idx.keyword_search(in_memory=False)

    def one(q: str) -> dict[str, float]:
        return first_occurrence(doc_of[h.chunk_id] for h in engine(q, pool))

    def fts5(q: str) -> dict[str, float]:
        return first_occurrence(doc_of[h.chunk_id] for h in fts5_leg(q, pool))

    samples: list[float] = []
    cpu: list[float] = []
    f_samples: list[float] = []
    f_cpu: list[float] = []
    for rep in range(1 if opts.quick else 3):
        samples += time_each(one, qtexts, warmup=5 if rep == 0 else 0, cpu=cpu)
        f_samples += time_each(fts5, qtexts, warmup=5 if rep == 0 else 0, cpu=f_cpu)
    out["keyword_cpu_qps_scifact"] = len(cpu) / sum(cpu)
    out["keyword_fts5_cpu_qps_scifact"] = len(f_cpu) / sum(f_cpu)
    out["keyword_fts5_qps_scifact"] = len(f_samples) / sum(f_samples)
    p50, p95 = percentiles(samples)
    out["keyword_p50_ms_scifact"], out["keyword_p95_ms_scifact"] = p50 * 1000, p95 * 1000
    out["keyword_fts5_p50_ms_scifact"] = percentiles(f_samples)[0] * 1000
    out["keyword_qps_scifact"] = len(samples) / sum(samples)
    same = [engine(q, 200) == fts5_leg(q, 200) for q in qtexts]
    out["keyword_memory_same_as_fts5"] = sum(same) / len(same)  # 1.0: identical ids, ranks and bm25 scores
    out["keyword_pool"] = float(pool)
    out["keyword_chunks_scifact"] = float(len(doc_of))
    run = {qid: one(q) for qid, q in queries.items()}
    ev.close()
    return run


def bench_peers(opts: BenchOptions, beir, queries: dict[str, str], out: dict[str, float]):  # noqa: ANN001, ANN201
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    doc_ids = list(beir.corpus)
    texts = [beir.corpus[d] for d in doc_ids]
    t0 = time.perf_counter()
    corpus_tokens = bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False)
    retriever = bm25s.BM25()
    retriever.index(corpus_tokens, show_progress=False)
    out["bm25s_index_s_scifact"] = time.perf_counter() - t0
    qids, qtexts = list(queries), list(queries.values())

    def bm25s_batch() -> list:
        qt = bm25s.tokenize(qtexts, stopwords="en", stemmer=stemmer, show_progress=False)
        return retriever.retrieve(qt, k=10, show_progress=False, n_threads=1)[0]

    def bm25s_one(q: str):  # noqa: ANN202
        qt = bm25s.tokenize([q], stopwords="en", stemmer=stemmer, show_progress=False)
        return retriever.retrieve(qt, k=10, show_progress=False, n_threads=1)[0][0]

    bm25s_batch()
    batch_t, batch_c = [], []
    for _ in range(3 if opts.quick else 7):
        c0, t0 = time.process_time(), time.perf_counter()
        docs = bm25s_batch()
        batch_t.append(time.perf_counter() - t0)
        batch_c.append(time.process_time() - c0)
    out["bm25s_qps_scifact"] = len(qtexts) / percentiles(batch_t)[0]
    out["bm25s_cpu_qps_scifact"] = len(qtexts) / percentiles(batch_c)[0]
    single_cpu: list[float] = []
    single = time_each(bm25s_one, qtexts, warmup=5, cpu=single_cpu)
    out["bm25s_cpu_qps_single_scifact"] = len(single_cpu) / sum(single_cpu)
    out["bm25s_qps_single_scifact"] = len(single) / sum(single)
    out["bm25s_p50_ms_scifact"] = percentiles(single)[0] * 1000
    bm25s_run = {qid: {doc_ids[int(d)]: float(10 - r) for r, d in enumerate(row)} for qid, row in zip(qids, docs)}

    from rank_bm25 import BM25Okapi

    inv = {v: k for k, v in corpus_tokens.vocab.items()}
    okapi = BM25Okapi([[inv[i] for i in ids] for ids in corpus_tokens.ids])
    q_lists = []
    for q in qtexts:
        qt = bm25s.tokenize([q], stopwords="en", stemmer=stemmer, show_progress=False)
        q_inv = {v: k for k, v in qt.vocab.items()}
        q_lists.append([q_inv[i] for i in qt.ids[0]])
    n_timed = 30 if opts.quick else len(q_lists)
    scores_of: dict[int, list[float]] = {}

    def okapi_one(i: int) -> None:
        scores_of[i] = okapi.get_scores(q_lists[i])

    rb_c: list[float] = []
    rb_t = time_each(okapi_one, range(n_timed), warmup=2, cpu=rb_c)
    out["rank_bm25_cpu_qps_scifact"] = len(rb_c) / sum(rb_c)
    out["rank_bm25_qps_scifact"] = len(rb_t) / sum(rb_t)
    rb_run = {}
    for i, qid in enumerate(qids[:n_timed]):
        s = scores_of[i]
        top = sorted(range(len(s)), key=lambda j: -s[j])[:10]
        rb_run[qid] = {doc_ids[j]: float(s[j]) for j in top}
    return bm25s_run, rb_run


def run(opts: BenchOptions) -> dict[str, float]:
    """All keyword figures."""
    beir = beir_of(scifact_dataset(opts))
    queries = beir.queries
    out: dict[str, float] = {}
    engine_run = bench_engine(opts, queries, out)
    bm25s_run, rb_run = bench_peers(opts, beir, queries, out)
    qrels = {q: beir.qrels[q] for q in queries}
    out["keyword_ndcg10_scifact"] = ndcg10(engine_run, qrels)
    out["bm25s_ndcg10_scifact"] = ndcg10(bm25s_run, qrels)
    out["rank_bm25_ndcg10_scifact"] = ndcg10(rb_run, {q: qrels[q] for q in rb_run})
    out["keyword_qps_ratio_vs_bm25s"] = out["keyword_qps_scifact"] / out["bm25s_qps_scifact"]
    out["keyword_qps_ratio_vs_bm25s_single"] = out["keyword_qps_scifact"] / out["bm25s_qps_single_scifact"]
    out["keyword_qps_ratio_vs_rank_bm25"] = out["keyword_qps_scifact"] / out["rank_bm25_qps_scifact"]
    out["keyword_queries_scifact"] = float(len(queries))
    return out
