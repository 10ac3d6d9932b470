"""Remote embedding providers against a real local HTTP server speaking their APIs (OpenAI, Gemini, Voyage)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from embed_server import EmbedServer

from hybridmem.config import DEFAULT_PROVIDER, EmbeddingConfig, Settings
from hybridmem.embeddings import create_embedder
from hybridmem.embeddings.fake import HashEmbedder
from hybridmem.embeddings.remote import (
    GeminiEmbedder, HttpClient, OpenAIEmbedder, VoyageEmbedder, api_key, create,
)
from hybridmem.errors import ProviderError
from hybridmem.index import MemoryIndex

SECRET = "sk-test-SECRET-0123456789abcdef"


def fast_client(provider: str, retries: int = 3, timeout: float = 2.0) -> tuple[HttpClient, list[float]]:
    sleeps: list[float] = []
    client = HttpClient(provider, timeout_s=timeout, max_retries=retries, backoff_s=0.01, max_backoff_s=0.05,
                        secret=SECRET, sleep=sleeps.append, rng=lambda: 1.0)
    return client, sleeps


def test_openai_compatible_embeds_in_order_and_batches() -> None:
    with EmbedServer(dims=16) as srv:
        client, _ = fast_client("openai")
        emb = OpenAIEmbedder("nomic-embed-text", srv.url + "/v1", SECRET, batch_size=4, client=client)
        texts = [f"note {i} about payment retry" for i in range(10)]
        got = emb.embed_documents(texts)
        expected = HashEmbedder(dims=16).embed_documents(texts)
        np.testing.assert_allclose(got, expected, atol=1e-6)  # answers arrive reversed; sorted back by index
        assert [len(r["body"]["input"]) for r in srv.requests] == [4, 4, 2]
        assert {r["path"] for r in srv.requests} == {"/v1/embeddings"}
        assert srv.requests[0]["headers"]["authorization"] == f"Bearer {SECRET}"
        assert srv.requests[0]["body"]["model"] == "nomic-embed-text"
        assert emb.dims == 16


def test_batches_are_bounded_by_characters() -> None:
    with EmbedServer(dims=8) as srv:
        client, _ = fast_client("openai")
        emb = OpenAIEmbedder("m", srv.url, "", batch_size=100, max_batch_chars=25, client=client)
        emb.embed_batch(["a" * 10, "b" * 10, "c" * 10, "d" * 40])
        sizes = [[len(t) for t in r["body"]["input"]] for r in srv.requests]
        assert sizes == [[10, 10], [10], [25]]  # a text longer than the bound is cut to it
        assert "authorization" not in srv.requests[0]["headers"]  # no key for a local server


def test_secret_never_in_provider_key_repr_or_errors() -> None:
    with EmbedServer(dims=8, script=[401]) as srv:
        client, _ = fast_client("openai")
        emb = OpenAIEmbedder("m", srv.url + "/v1", SECRET, dims=8, client=client)
        for text in (emb.provider_key, repr(emb), str(emb.describe()), repr(client)):
            assert SECRET not in text
        with pytest.raises(ProviderError) as info:
            emb.embed_batch(["x"])
        assert SECRET not in str(info.value)
        assert "HTTP 401" in str(info.value) and len(srv.requests) == 1  # 4xx: no retry


def test_provider_key_changes_with_url_model_and_dims_not_key() -> None:
    a = OpenAIEmbedder("m", "http://h/v1", "k1", dims=8)
    assert a.provider_key == OpenAIEmbedder("m", "http://h/v1", "k2", dims=8).provider_key
    assert a.provider_key != OpenAIEmbedder("m", "http://other/v1", "k1", dims=8).provider_key
    assert a.provider_key != OpenAIEmbedder("m2", "http://h/v1", "k1", dims=8).provider_key
    assert a.provider_key != OpenAIEmbedder("m", "http://h/v1", "k1", dims=16).provider_key


def test_429_then_success_is_retried_with_retry_after() -> None:
    with EmbedServer(dims=8, script=[("status", 429, "0.03"), 503]) as srv:
        client, sleeps = fast_client("openai", retries=3)
        emb = OpenAIEmbedder("m", srv.url + "/v1", SECRET, client=client)
        vecs = emb.embed_batch(["payment retry"])
        assert vecs.shape == (1, 8)
        assert len(srv.requests) == 3
        assert sleeps == [0.03, 0.02]  # Retry-After honoured; then backoff 0.01 * 2**1 (jitter factor 1.0)
        assert client.retries == 2


def test_500_forever_gives_up_after_bounded_attempts() -> None:
    with EmbedServer(dims=8, script=[500] * 20) as srv:
        client, sleeps = fast_client("voyage", retries=3)
        emb = VoyageEmbedder("voyage-3-lite", srv.url + "/v1", SECRET, client=client)
        with pytest.raises(ProviderError, match=r"failed after 4 attempt\(s\): HTTP 500"):
            emb.embed_batch(["x"])
        assert len(srv.requests) == 4 and len(sleeps) == 3
        assert sleeps == [0.01, 0.02, 0.04]


def test_backoff_is_exponential_capped_and_jittered() -> None:
    c = HttpClient("x", backoff_s=0.5, max_backoff_s=8.0, rng=lambda: 0.0)
    assert [c.delay(n) for n in range(6)] == [0.25, 0.5, 1.0, 2.0, 4.0, 4.0]
    c = HttpClient("x", backoff_s=0.5, max_backoff_s=8.0, rng=lambda: 1.0)
    assert [c.delay(n) for n in range(6)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    assert c.delay(0, retry_after="120") == 8.0


def test_timeouts_are_retried_then_reported() -> None:
    with EmbedServer(dims=8, script=["timeout", "timeout", "timeout"], slow_s=1.0) as srv:
        client, _ = fast_client("openai", retries=2, timeout=0.2)
        emb = OpenAIEmbedder("m", srv.url + "/v1", "", client=client)
        t0 = time.perf_counter()
        with pytest.raises(ProviderError, match=r"failed after 3 attempt\(s\): timed out after 0.2s"):
            emb.embed_batch(["x"])
        assert time.perf_counter() - t0 < 2.0
        assert len(srv.requests) == 3


def test_timeout_then_success() -> None:
    with EmbedServer(dims=8, script=["timeout"], slow_s=0.6) as srv:
        client, _ = fast_client("openai", retries=2, timeout=0.2)
        emb = OpenAIEmbedder("m", srv.url + "/v1", "", client=client)
        assert emb.embed_batch(["x"]).shape == (1, 8)
        assert len(srv.requests) == 2


def test_unreachable_server() -> None:
    client, sleeps = fast_client("openai", retries=1)
    emb = OpenAIEmbedder("m", "http://127.0.0.1:9/v1", "", client=client)  # port 9 (discard): nothing listens
    with pytest.raises(ProviderError, match=r"failed after 2 attempt\(s\): cannot connect"):
        emb.embed_batch(["x"])


def test_gemini_api_shape() -> None:
    with EmbedServer(dims=12) as srv:
        client, _ = fast_client("gemini")
        emb = GeminiEmbedder("text-embedding-004", srv.url + "/v1beta", SECRET, client=client)
        doc = emb.embed_batch(["payment retry", "car repair"])
        q = emb.embed_query("payment retry")
        assert doc.shape == (2, 12) and q.shape == (12,)
        first, second = srv.requests
        assert first["path"] == "/v1beta/models/text-embedding-004:batchEmbedContents"
        assert SECRET not in first["path"]  # the key travels in a header, never in the URL
        assert first["headers"]["x-goog-api-key"] == SECRET
        assert [r["taskType"] for r in first["body"]["requests"]] == ["RETRIEVAL_DOCUMENT"] * 2
        assert second["body"]["requests"][0]["taskType"] == "RETRIEVAL_QUERY"
        assert first["body"]["requests"][0]["model"] == "models/text-embedding-004"


def test_voyage_input_type() -> None:
    with EmbedServer(dims=8) as srv:
        client, _ = fast_client("voyage")
        emb = VoyageEmbedder("voyage-3-lite", srv.url + "/v1", SECRET, client=client)
        emb.embed_batch(["a doc"])
        emb.embed_query("a query")
        assert [r["body"]["input_type"] for r in srv.requests] == ["document", "query"]
        assert srv.requests[0]["path"] == "/v1/embeddings"


def test_keys_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("VOYAGE_API_KEY", raising=False)
    with pytest.raises(ProviderError, match="no API key for voyage: set VOYAGE_API_KEY"):
        api_key("voyage", EmbeddingConfig(provider="voyage"))
    with pytest.raises(ProviderError, match=r"environment variable MY_KEY \(embedding.api_key_env\) is not set"):
        api_key("openai", EmbeddingConfig(provider="openai", api_key_env="MY_KEY"))
    monkeypatch.setenv("MY_KEY", SECRET)
    assert api_key("openai", EmbeddingConfig(provider="openai", api_key_env="MY_KEY")) == SECRET
    assert api_key("openai", EmbeddingConfig(provider="openai", base_url="http://127.0.0.1:11434/v1")) == ""


def test_create_probes_dims_and_memory_index_uses_remote(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "pay.md").write_text("The payment service retries with exponential backoff.\n")
    (ws / "memory" / "car.md").write_text("The mechanic replaced the timing belt of the car.\n")
    with EmbedServer(dims=24) as srv:
        settings = Settings().override(embedding={"provider": "openai", "base_url": srv.url + "/v1",
                                                  "model": "nomic-embed-text", "max_retries": 1})
        with MemoryIndex(ws, settings=settings) as idx:
            report = idx.sync()
            assert report.embedded == 2
            st = idx.status()
            assert (st["provider"], st["model"], st["dims"]) == ("openai", "nomic-embed-text", 24)
            resp = idx.search("timing belt", min_score=0.0, answer_threshold=0.0)
            assert resp.results[0].path == "memory/car.md" and resp.results[0].vector_rank == 1
            assert not resp.fallback
        n = len(srv.requests)
        with MemoryIndex(ws, settings=settings) as idx:  # reopen: cached vectors, only the probe request
            assert idx.sync(force=True).cache_hits == 2
        assert len(srv.requests) == n + 1


def test_auto_chain_reports_why_providers_were_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    import hybridmem.embeddings as emb_mod

    def no_local(name, cfg):  # noqa: ANN001, ANN202 - the default model is replaced to keep this test fast
        if name == DEFAULT_PROVIDER:
            raise ProviderError("cannot load embedding model 'missing-model'")
        return orig(name, cfg)

    orig = emb_mod.make_provider
    monkeypatch.setattr(emb_mod, "make_provider", no_local)
    monkeypatch.delenv("VOYAGE_API_KEY", raising=False)
    with EmbedServer(dims=8) as srv:
        cfg = EmbeddingConfig(provider="auto", fallback=("voyage", "openai"), base_url=srv.url + "/v1")
        choice = create_embedder(cfg)
        assert choice.embedder is not None and choice.embedder.name == "openai"
        assert choice.skipped == [f"{DEFAULT_PROVIDER}: cannot load embedding model 'missing-model'",
                                  "voyage: no API key for voyage: set VOYAGE_API_KEY (or name another variable in "
                                  "embedding.api_key_env)"]
    cfg = EmbeddingConfig(provider="auto", fallback=("openai",), base_url="http://127.0.0.1:9/v1", max_retries=0)
    choice = create_embedder(cfg)
    assert choice.embedder is None  # keyword-only, with every reason kept
    assert choice.skipped[1].startswith("openai: openai embedding request to http://127.0.0.1:9/v1/embeddings failed")


def test_create_rejects_unknown_provider() -> None:
    with pytest.raises(ProviderError, match="unknown embedding provider 'cohere'"):
        create("cohere", EmbeddingConfig())
