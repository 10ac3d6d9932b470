"""Search on the demo workspace with the real all-MiniLM-L6-v2 model."""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pytest

from hybridmem.config import preset
from hybridmem.embeddings import sanitize
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
    assert 0 < h.decay_factor <= 1
    # the default's gate: final = (score after decay) x P(memory holds an answer)
    assert resp.ranking.answer_probability is not None
    assert h.final_score == pytest.approx(h.decayed_score * resp.ranking.answer_probability)
    assert resp.provider == "local" and resp.model == "all-MiniLM-L6-v2" and not resp.fallback
    assert set(resp.timings) >= {"keyword", "embed", "vector", "rank"}


QUERY_TEXTS = ["retry backoff for the payment processor", "", " ", "thanh toán 支付 ชำระเงิน", "x" * 30_000,
               "paymentProcessor.retry_backoff_ms", "décision prise 決定 the deploy freeze"]


def _encode(embedder, text):  # noqa: ANN001, ANN202 - the peer is the model's own encode
    return embedder._model.encode([text], convert_to_numpy=True, normalize_embeddings=False,  # noqa: SLF001
                               show_progress_bar=False)


@pytest.fixture()
def onnx_embedder(demo_index):
    """The demo index's embedder with its ONNX copy built (from the second one-text call, in the background)."""
    embedder = demo_index.embedder
    for text in QUERY_TEXTS[:2]:
        embedder.embed_batch([text], is_query=True)
    embedder.onnx.wait()
    assert embedder.onnx.state == "ready", embedder.onnx.reason
    return embedder


def test_torch_query_runtime_is_bit_identical_to_encode(demo_index):
    """``query_runtime="torch"``: one text goes straight through the model's eager modules and gives exactly what
    ``SentenceTransformer.encode`` gives, before and after the ONNX copy of the same model exists."""
    from hybridmem.embeddings.local import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder(query_runtime="torch")
    for _ in range(2):
        for text in QUERY_TEXTS:
            fast = embedder.embed_batch([text], is_query=True)
            want = _encode(embedder, text)
            assert fast.dtype == want.dtype and np.array_equal(fast, want), text[:40]
        demo_index.embedder.embed_batch(["a"], is_query=True)
        demo_index.embedder.embed_batch(["b"], is_query=True)
        demo_index.embedder.onnx.wait()
    assert embedder.runtime.startswith("torch")


def test_onnx_query_vectors_match_encode_within_tolerance(onnx_embedder, monkeypatch):
    """Once built, the ONNX copy answers one-text calls (its session runs, torch's forward does not), and each vector
    is within ONNX_TOLERANCE of ``encode``'s at every token count up to truncation, and for any script."""
    from hybridmem.embeddings.local import ONNX_TOLERANCE

    onnx = onnx_embedder.onnx
    assert onnx_embedder.runtime.startswith("onnxruntime") and 0 <= onnx.max_diff <= ONNX_TOLERANCE
    wants = {text: _encode(onnx_embedder, text) for text in QUERY_TEXTS}
    st = onnx_embedder._model  # noqa: SLF001

    def no_torch(features):  # noqa: ANN001, ANN202
        raise AssertionError("torch answered a one-text call while the ONNX copy is ready")

    monkeypatch.setattr(st, "forward", no_torch)
    for text, want in wants.items():
        got = onnx_embedder.embed_batch([text], is_query=True)
        assert got.dtype == np.float32 and got.shape == want.shape, text[:40]
        assert float(np.abs(got - want).max()) <= ONNX_TOLERANCE, text[:40]
        assert not np.array_equal(got, np.zeros_like(got))


def test_documents_never_go_through_the_onnx_copy(onnx_embedder):
    """Indexing stays on torch: a one-text batch of documents (the last of a sync, say) is ``encode``'s vector bit for
    bit even while the ONNX copy answers queries."""
    for text in QUERY_TEXTS:
        got = onnx_embedder.embed_batch([text])
        assert np.array_equal(got, _encode(onnx_embedder, text)), text[:40]
        assert np.array_equal(onnx_embedder.embed_documents([text]), sanitize(_encode(onnx_embedder, text)))


def test_onnx_rankings_equal_torch_rankings_on_the_demo_set(demo_index, onnx_embedder):
    """What "results identical" means for the ONNX copy: on all 81 labeled demo queries, the default ranking (and the
    vector leg's candidate list) from the ONNX query vector equals the one from the eager torch vector."""
    from hybridmem.embeddings.local import SentenceTransformerEmbedder
    from hybridmem.ranking import rank

    queries, _ = _labels()
    torch_embedder = SentenceTransformerEmbedder(query_runtime="torch")
    cfg = demo_index.settings.ranking
    for q in queries:
        legs, hits = [], []
        for embedder in (torch_embedder, onnx_embedder):
            cands = demo_index.retrieve(q["text"], cfg.pool, query_vector=embedder.embed_query(q["text"]))
            legs.append([h.chunk_id for h in cands.vector])
            hits.append(rank(cands, cfg).hits)
        assert legs[0] == legs[1], q["text"]
        assert [h.chunk_id for h in hits[0]] == [h.chunk_id for h in hits[1]], q["text"]
        assert [h.final_score for h in hits[0]] == pytest.approx([h.final_score for h in hits[1]], abs=1e-5)


def test_an_onnx_copy_that_differs_is_refused_and_torch_answers(demo_index, monkeypatch):
    """The check after export is what makes the copy safe: one whose vectors differ by more than the tolerance (here,
    1e-5 a component, as a mis-exported graph would) is refused, and queries keep the eager vectors, which are
    encode's bit for bit."""
    import onnxruntime

    from hybridmem.embeddings.local import _OnnxQueryModel

    real = onnxruntime.InferenceSession

    class Drifting:
        def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
            self.inner = real(*args, **kwargs)

        def run(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            return [out + 1e-5 for out in self.inner.run(*args, **kwargs)]

    monkeypatch.setattr(onnxruntime, "InferenceSession", Drifting)
    embedder = demo_index.embedder
    runner = _OnnxQueryModel(embedder._model)  # noqa: SLF001 - a fresh one, the shared one may be built already
    monkeypatch.setattr(type(embedder), "onnx", property(lambda self: runner))
    for text in QUERY_TEXTS:
        fast = embedder.embed_batch([text], is_query=True)
        runner.wait()
        assert np.array_equal(fast, _encode(embedder, text)), text[:40]
    assert runner.state == "refused" and "differs from the torch model" in runner.reason
    assert "refused" in embedder.runtime and "query_embedding" in demo_index.status()


def test_without_onnxruntime_torch_answers_and_says_why(demo_index, monkeypatch):
    import sys

    from hybridmem.embeddings.local import _OnnxQueryModel

    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    embedder = demo_index.embedder
    runner = _OnnxQueryModel(embedder._model)  # noqa: SLF001
    monkeypatch.setattr(type(embedder), "onnx", property(lambda self: runner))
    for text in QUERY_TEXTS[:3]:
        fast = embedder.embed_batch([text], is_query=True)
        runner.wait()
        assert np.array_equal(fast, _encode(embedder, text))
    assert runner.state == "refused" and "pip install 'hybridmem[embed]'" in runner.reason
    assert "onnxruntime is not installed" in demo_index.status()["query_embedding"]


def test_status_and_memory_status_say_which_chunks_minilm_does_not_read(tmp_path):
    """With the real all-MiniLM-L6-v2 (``provider = "local"``, Latin alone): a memory with a Korean note is indexed,
    and ``hybridmem status`` and ``memory_status`` say so after that sync, not only the sync that stored it."""
    import subprocess
    import sys

    from hybridmem.serve.service import MemoryService

    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "hybridmem.toml").write_text('[embedding]\nprovider = "local"\n', encoding="utf-8")
    (ws / "MEMORY.md").write_text("# Memory\n\n- The staging Redis listens on port 6380.\n", encoding="utf-8")
    (ws / "memory" / "ko.md").write_text("# 2026-03-03\n\n- 다음 주 화요일에 치과 예약이 있습니다. 오후 세 시.\n",
                                         encoding="utf-8")
    cmd = [sys.executable, "-m", "hybridmem.cli"]
    out = subprocess.run(cmd + ["index", str(ws)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "(Hangul 1)" in out.stderr, out.stderr
    out = subprocess.run(cmd + ["status", str(ws)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert ("note: 1 of 2 chunks indexed is written mostly in scripts all-MiniLM-L6-v2 does not read (Hangul 1): "
            in out.stderr), out.stderr
    assert "unread_note" not in out.stdout  # a sentence, said once as a note, not a row of the listing
    assert "languages: en 1, ko 1" in out.stdout, out.stdout  # chunks per language, as a plain list
    with MemoryService(ws, watch=False, preload=False) as svc:
        assert "all-MiniLM-L6-v2 does not read (Hangul 1)" in svc.status()["unread_note"]
