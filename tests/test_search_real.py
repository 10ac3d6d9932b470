"""Search on the demo workspace with the real all-MiniLM-L6-v2 model."""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pytest

from hybridmem.config import preset
from tests.conftest import DEMO

pytestmark = pytest.mark.slow


def _labels():
    queries = [json.loads(line) for line in (DEMO / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
    judged = defaultdict(list)
    for line in (DEMO / "judgments.jsonl").read_text(encoding="utf-8").splitlines():
        j = json.loads(line)
        judged[j["query_id"]].append(j)
    return queries, judged


def _found(hits, evidence) -> bool:
    return any(h.path == e["path"] and h.start_line <= e["start_line"] and e["end_line"] <= h.end_line
               for h in hits for e in evidence)


@pytest.mark.parametrize("category", ["vi", "zh", "ja", "th", "identifier"])
def test_keyword_leg_finds_each_language_and_identifiers(demo_index, category):
    queries, judged = _labels()
    cfg = preset("keyword").replace(max_results=5)
    qs = [q for q in queries if q["category"] == category]
    found = [_found(demo_index.search(q["text"], config=cfg).results, judged[q["id"]]) for q in qs]
    assert len(qs) >= 6
    assert sum(found) / len(found) >= 0.85, f"{category}: {sum(found)}/{len(found)}"


def test_identifier_found_across_naming_conventions(demo_index):
    cfg = preset("keyword").replace(max_results=3)
    for q in ["paymentProcessor", "payment_processor", "PaymentProcessor"]:
        assert any("payment_processor" in h.text for h in demo_index.search(q, config=cfg).results)


def test_vector_leg_finds_paraphrases(demo_index):
    queries, judged = _labels()
    cfg = preset("vector").replace(max_results=5)
    qs = [q for q in queries if q["category"] == "paraphrase"]
    found = [_found(demo_index.search(q["text"], config=cfg).results, judged[q["id"]]) for q in qs]
    assert sum(found) / len(found) >= 0.75


def test_mmr_lambda_one_is_relevance_order_and_half_separates_near_duplicates(demo_index):
    queries, judged = _labels()
    base = preset("default").replace(max_results=6, min_score=0.0)
    copies_plain = copies_diverse = 0
    for q in (q for q in queries if q["category"] == "near-duplicate"):
        plain = demo_index.search(q["text"], config=base).results
        same = demo_index.search(q["text"], config=base.replace(mmr=True, mmr_lambda=1.0)).results
        assert [h.chunk_id for h in plain] == [h.chunk_id for h in same]
        diverse = demo_index.search(q["text"], config=base.replace(mmr=True, mmr_lambda=0.5)).results
        copies = {e["path"] for e in judged[q["id"]]}
        copies_plain += sum(h.path in copies for h in plain[:4])
        copies_diverse += sum(h.path in copies for h in diverse[:4])
        assert diverse[0].chunk_id == plain[0].chunk_id  # the most relevant stays first
    # diversity pushes repeated copies of the same fact out of the top 4
    assert copies_diverse < copies_plain


@pytest.mark.parametrize(
    "query",
    ['"', 'NEAR(a b)', "title:x*", "a AND (b OR -c)", "'; DROP TABLE chunks; --", "🙂🙃" * 50, "", "   ",
     "x" * 100_000, "\x00\x01", "ค" * 5000, "ERR_CONN_RESET OR \"E1042\""],
)
def test_hostile_queries_return_cleanly(demo_index, query):
    resp = demo_index.search(query)
    assert isinstance(resp.results, tuple)
    assert demo_index.status()["chunks"] > 0


def test_stage_scores_are_all_present(demo_index):
    resp = demo_index.search("retry backoff for the payment processor", mmr=True, decay=True)
    h = resp.results[0]
    assert h.vector_score is not None and h.text_score is not None and h.mmr_position == 1
    assert 0 < h.decay_factor <= 1 and h.final_score == pytest.approx(h.decayed_score)
    assert resp.provider == "local" and resp.model == "all-MiniLM-L6-v2" and not resp.fallback
    assert set(resp.timings) >= {"keyword", "embed", "vector", "rank"}


def test_query_embedding_is_bit_identical_to_encode(demo_index):
    """One text goes straight through the model's modules (embed_query's fast path); it must give exactly what
    SentenceTransformer.encode gives, or the int8/float32 ties and every cached comparison would drift."""
    embedder = demo_index.embedder
    st = embedder._st  # noqa: SLF001 - the peer is the model's own encode
    for text in ["retry backoff for the payment processor", "", " ", "thanh toán 支付 ชำระเงิน", "x" * 30_000,
                 "paymentProcessor.retry_backoff_ms"]:
        fast = embedder.embed_batch([text], is_query=True)
        want = st.encode([text], convert_to_numpy=True, normalize_embeddings=False, show_progress_bar=False)
        assert fast.dtype == want.dtype and np.array_equal(fast, want), text[:40]


QUERY_TEXTS = ["retry backoff for the payment processor", "", " ", "thanh toán 支付 ชำระเงิน", "x" * 30_000,
               "paymentProcessor.retry_backoff_ms", "décision prise 決定 the deploy freeze"]


def test_traced_query_embedding_is_bit_identical_to_encode(demo_index):
    """From the second one-text call on, the transformer runs as a TorchScript trace built in the background; once
    built, every query vector must still equal ``encode``'s bit for bit, at every token count up to truncation."""
    embedder = demo_index.embedder
    traced = embedder._traced  # noqa: SLF001
    for text in QUERY_TEXTS[:2]:
        embedder.embed_batch([text], is_query=True)
    traced.wait()
    assert traced.state == "traced", traced.reason
    st = embedder._st  # noqa: SLF001
    for text in QUERY_TEXTS:
        fast = embedder.embed_batch([text], is_query=True)
        want = st.encode([text], convert_to_numpy=True, normalize_embeddings=False, show_progress_bar=False)
        assert fast.dtype == want.dtype and np.array_equal(fast, want), text[:40]


def test_a_trace_that_differs_is_refused_and_the_eager_model_answers(demo_index, monkeypatch):
    """The bit-for-bit check after tracing is what makes the trace safe: a trace whose output differs (here, off by
    1e-6, as a shape-specialized or reordered graph would be) must be refused, and queries keep the eager vectors."""
    import torch

    from hybridmem.embeddings.local import _TracedTransformer

    real_trace = torch.jit.trace

    def drifting_trace(module, example, **kw):
        traced = real_trace(module, example, **kw)
        return lambda *args: traced(*args) + 1e-6

    monkeypatch.setattr(torch.jit, "trace", drifting_trace)
    embedder = demo_index.embedder
    traced = _TracedTransformer(embedder._st)  # noqa: SLF001 - a fresh one, the shared one may be built already
    monkeypatch.setattr(type(embedder), "_traced", property(lambda self: traced))
    st = embedder._st  # noqa: SLF001
    for text in QUERY_TEXTS:
        fast = embedder.embed_batch([text], is_query=True)
        traced.wait()
        want = st.encode([text], convert_to_numpy=True, normalize_embeddings=False, show_progress_bar=False)
        assert np.array_equal(fast, want), text[:40]
    assert traced.state == "refused" and "differs from the eager model" in traced.reason
