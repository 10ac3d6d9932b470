"""Backend fallback (primary search backend -> builtin -> unavailable) and runtime embedding-provider failover."""

from __future__ import annotations

from pathlib import Path

import pytest
from embed_server import EmbedServer

from hybridmem.fallback import BackendManager, Unavailable
from hybridmem.retrieve.failover import EmbedderFailover
from hybridmem.config import DEFAULT_PROVIDER, EmbeddingConfig, Settings
from hybridmem.embeddings.fake import HashEmbedder
from hybridmem.errors import ProviderError
from hybridmem.index import MemoryIndex


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class Backend:
    """A search backend whose failures are scripted; counts instances, searches and closes."""

    made = 0

    def __init__(self, name: str, fail: bool = False) -> None:
        Backend.made += 1
        self.name, self.fail, self.searches, self.closed = name, fail, 0, False

    def search(self, query: str, **kw: object) -> str:
        self.searches += 1
        if self.fail:
            raise RuntimeError(f"{self.name} is down")
        return f"{self.name}:{query}"

    def close(self) -> None:
        self.closed = True


def test_primary_serves_while_healthy() -> None:
    mgr = BackendManager(lambda: Backend("qmd"), lambda: Backend("builtin"))
    assert mgr.search("a") == "qmd:a" and mgr.search("b") == "qmd:b"
    assert mgr.status() == {"active": "primary", "primary_failed": False, "failures": 0, "last_error": None,
                            "retry_in_s": None}


def test_failure_switches_records_evicts_and_retries_later() -> None:
    clock = Clock()
    state = {"fail": True}
    made: list[Backend] = []

    def primary() -> Backend:
        b = Backend("qmd", fail=state["fail"])
        made.append(b)
        return b

    mgr = BackendManager(primary, lambda: Backend("builtin"), retry_after_s=60, clock=clock)
    assert mgr.search("q") == "builtin:q"  # the failure is answered by the builtin backend, not raised
    assert mgr.status() == {"active": "builtin", "primary_failed": True, "failures": 1,
                            "last_error": "RuntimeError: qmd is down", "retry_in_s": 60.0}
    assert made[0].closed  # evicted
    clock.t += 30
    assert mgr.search("q2") == "builtin:q2" and len(made) == 1  # not retried before retry_after_s
    state["fail"] = False
    clock.t += 31
    assert mgr.active == "primary"
    assert mgr.search("q3") == "qmd:q3"  # self-healed with a fresh instance
    assert len(made) == 2 and mgr.status()["primary_failed"] is False


def test_everything_down_returns_unavailable() -> None:
    mgr = BackendManager(lambda: Backend("qmd", fail=True), lambda: Backend("builtin", fail=True))
    res = mgr.search("where is the invoice")
    assert isinstance(res, Unavailable)
    assert res.results == () and res.unavailable
    assert res.error == ("memory search unavailable: builtin backend failed (RuntimeError: builtin is down); "
                         "primary backend failed earlier (RuntimeError: qmd is down)")
    assert res.to_dict()["unavailable"] is True


def test_primary_that_cannot_be_built_falls_back() -> None:
    def broken() -> Backend:
        raise ValueError("qmd binary not found on PATH")

    mgr = BackendManager(broken, lambda: Backend("builtin"))
    assert mgr.search("x") == "builtin:x"
    assert mgr.last_error == "ValueError: qmd binary not found on PATH"


def test_startup_probe_shows_misconfiguration_early() -> None:
    bad = BackendManager(lambda: Backend("qmd", fail=True), lambda: Backend("builtin"))
    assert bad.probe() == {"backend": "builtin", "ok": False, "error": "RuntimeError: qmd is down"}
    good = BackendManager(lambda: Backend("qmd"), lambda: Backend("builtin"))
    assert good.probe() == {"backend": "primary", "ok": True, "error": None}
    assert BackendManager(None, lambda: Backend("builtin")).probe()["backend"] == "builtin"


def test_builtin_memory_index_behind_a_failing_primary(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "a.md").write_text("The payment service retries with exponential backoff.\n")
    idx = MemoryIndex(ws, embedder=HashEmbedder())
    idx.sync()
    mgr = BackendManager(lambda: Backend("qmd", fail=True), lambda: idx)
    resp = mgr.search("payment backoff", min_score=0.0, answer_threshold=0.0)
    assert [h.citation for h in resp.results] == ["memory/a.md#L1"]
    mgr.close()


class FlakyEmbedder(HashEmbedder):
    """The default provider, failing queries while ``broken`` is set."""

    name = DEFAULT_PROVIDER

    def __init__(self) -> None:
        super().__init__(dims=16, model="flaky")
        self.broken = False

    def embed_batch(self, texts, is_query=False):  # noqa: ANN001, ANN201
        if self.broken and is_query:
            raise ProviderError("model crashed: CUDA error")
        return super().embed_batch(texts, is_query)


def test_repeated_query_errors_switch_provider_and_reindex(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "pay.md").write_text("The payment service retries with exponential backoff.\n")
    (ws / "memory" / "car.md").write_text("The mechanic replaced the timing belt of the car.\n")
    with EmbedServer(dims=8) as srv:
        settings = Settings().override(embedding={"provider": "auto", "fallback": ["openai"],
                                                  "base_url": srv.url + "/v1", "max_retries": 0})
        flaky = FlakyEmbedder()
        idx = MemoryIndex(ws, settings=settings, embedder=flaky)
        idx.sync()
        flaky.broken = True
        for _ in range(2):  # below the threshold: keyword-only answers, no switch
            resp = idx.search("timing belt", min_score=0.0, answer_threshold=0.0)
            assert resp.results[0].path == "memory/car.md" and resp.results[0].vector_rank is None
            assert resp.fallback and "query embedding failed (ProviderError: model crashed: CUDA error)" in \
                resp.fallback_reason
        assert idx.embedder is flaky
        resp = idx.search("timing belt", min_score=0.0, answer_threshold=0.0)  # third error: switch to the next provider
        assert idx.embedder is not None and idx.embedder.name == "openai"
        assert idx.dirty
        assert f"{DEFAULT_PROVIDER}: switched off after 3 consecutive errors (ProviderError: model crashed: CUDA error)" in \
            idx.fallback_reason
        resp = idx.search("timing belt", min_score=0.0, answer_threshold=0.0)  # dirty + sync_on_search: a safe full reindex first
        assert idx.last_sync is not None and idx.last_sync.full_reindex
        assert idx.status()["provider"] == "openai" and idx.status()["dims"] == 8
        assert resp.results[0].path == "memory/car.md" and resp.results[0].vector_rank == 1
        assert idx.store.consistency()["vec_rows"] == 2
        idx.close()


def test_failover_chain_ends_in_keyword_only() -> None:
    fo = EmbedderFailover(EmbeddingConfig(provider="auto", fallback=("voyage",)), threshold=2)
    emb = FlakyEmbedder()
    assert fo.chain_after(DEFAULT_PROVIDER) == ["voyage"]
    assert fo.record_error(emb, RuntimeError("x")) is False
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("VOYAGE_API_KEY", raising=False)
        assert fo.record_error(emb, RuntimeError("x")) is None
    assert fo.switched[0] == f"{DEFAULT_PROVIDER}: switched off after 2 consecutive errors (RuntimeError: x)"
    assert fo.switched[1].startswith("voyage: no API key for voyage")
