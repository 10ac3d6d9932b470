"""The adaptive fusion (ranking/adaptive.py): a blind vector leg loses its weight for the query, nothing else moves."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from hybridmem.config import RankConfig, preset
from hybridmem.embeddings.fake import HashEmbedder
from hybridmem.index import MemoryIndex
from hybridmem.ranking import rank
from hybridmem.ranking.adaptive import adapted_weights, foreign_share, letter_script
from hybridmem.records import Candidates, ChunkInfo, LegHit

LATIN = frozenset({"LATIN"})


def _chunk(cid: int, text: str) -> ChunkInfo:
    return ChunkInfo(cid, f"memory/n{cid}.md", "memory", 1, 1, text, 0.0, True, frozenset(text.split()))


def _cands(query: str, scripts: frozenset[str] | None) -> Candidates:
    """Keyword leg: chunk 1 (raw -4.0), chunk 3 (-1.0). Vector leg: chunk 2 (0.30), chunk 1 (0.20), chunk 3 (0.10)."""
    chunks = {i: _chunk(i, t) for i, t in ((1, "alpha"), (2, "beta"), (3, "gamma"))}
    return Candidates(query, (query,), keyword=(LegHit(1, -4.0, 1), LegHit(3, -1.0, 2)),
                      vector=(LegHit(2, 0.30, 1), LegHit(1, 0.20, 2), LegHit(3, 0.10, 3)), chunks=chunks, pool=24,
                      vector_scripts=scripts)


def _ranked(c: Candidates, config: RankConfig) -> list[tuple[int, float, float, float]]:
    return [(h.chunk_id, round(h.fused_score, 6), round(h.vector_part or 0.0, 6), round(h.text_part or 0.0, 6))
            for h in rank(c, config.replace(min_score=0.0), now=0.0).candidates]


def test_letter_scripts() -> None:
    assert [letter_script(ch) for ch in "aệдαไ中かاअ"] == [
        "LATIN", "LATIN", "CYRILLIC", "GREEK", "THAI", "CJK", "HIRAGANA", "ARABIC", "DEVANAGARI"]


def test_foreign_share_counts_letters_only() -> None:
    assert foreign_share("ไทย car", LATIN) == 0.5  # 3 Thai letters, 3 Latin; the space is no letter
    assert foreign_share("ไทย car 2024?!", LATIN) == 0.5  # digits and punctuation are no letters either
    assert foreign_share("đã trả tiền điện", LATIN) == 0.0  # Vietnamese is Latin script
    assert foreign_share("支付重试", LATIN) == 1.0
    assert foreign_share("支付重试", None) == 0.0  # a model that claims every script
    assert foreign_share("2024 ?!", LATIN) == 0.0  # no letters: nothing to judge


def test_weights() -> None:
    assert adapted_weights(_cands("ไทย", LATIN), 0.5, 0.5) == (0.0, 0.5)
    assert adapted_weights(_cands("ไทย car", LATIN), 0.5, 0.5) == (0.25, 0.5)
    assert adapted_weights(_cands("car", LATIN), 0.5, 0.5) == (0.5, 0.5)
    assert adapted_weights(_cands("ไทย", None), 0.7, 0.3) == (0.7, 0.3)


def test_thai_query_against_an_english_model_ranks_by_keywords() -> None:
    cfg = preset("minmax").replace(adaptive=True)
    # min-max: keyword (FTS5 ranks, lower is better) chunk 1 1.0, chunk 3 0.0; vector chunk 2 1.0, chunk 1 0.5,
    # chunk 3 0.0. Static 0.5/0.5: chunk 1 0.75, chunk 2 0.5, chunk 3 0.0.
    assert _ranked(_cands("ไทย", LATIN), preset("minmax")) == [
        (1, 0.75, 0.25, 0.5), (2, 0.5, 0.5, 0.0), (3, 0.0, 0.0, 0.0)]
    # adaptive: the vector weight is 0 for an all-Thai query, so the vector leg drops out (chunk 2, found by it
    # alone, is no candidate) and the fused score is the keyword leg's alone
    assert _ranked(_cands("ไทย", LATIN), cfg) == [(1, 1.0, 0.0, 1.0), (3, 0.0, 0.0, 0.0)]
    # half the letters foreign: weights 0.25 / 0.5, shares 1/3 and 2/3
    assert _ranked(_cands("ไทย car", LATIN), cfg) == [
        (1, round(0.5 / 3 + 2 / 3, 6), round(0.5 / 3, 6), round(2 / 3, 6)), (2, round(1 / 3, 6), round(1 / 3, 6), 0.0),
        (3, 0.0, 0.0, 0.0)]


def test_rrf_weights_shift_too() -> None:
    cfg = preset("rrf").replace(adaptive=True)
    assert _ranked(_cands("ไทย", LATIN), cfg)[0] == (1, round(1 / 61, 6), 0.0, round(1 / 61, 6))
    assert _ranked(_cands("car", LATIN), cfg) == _ranked(_cands("car", LATIN), preset("rrf"))


def test_sighted_queries_and_single_legs_are_untouched() -> None:
    for query, scripts in (("car", LATIN), ("ไทย", None), ("支付", None)):
        c = _cands(query, scripts)
        assert _ranked(c, preset("minmax").replace(adaptive=True)) == _ranked(c, preset("minmax"))
    for name in ("vector", "keyword"):  # one leg takes part: nothing to shift weight onto
        c = _cands("ไทย", LATIN)
        assert _ranked(c, preset(name).replace(adaptive=True)) == _ranked(c, preset(name))


def test_retriever_carries_the_models_scripts(tmp_path) -> None:  # noqa: ANN001
    (tmp_path / "MEMORY.md").write_text("alpha beta\n")
    emb = HashEmbedder()
    with MemoryIndex(tmp_path, embedder=emb) as idx:
        idx.sync()
        assert idx.retrieve("alpha", 4).vector_scripts is None  # the fake embedder makes no claim
        emb.scripts = LATIN
        assert idx.retrieve("alpha", 4).vector_scripts == LATIN


_text = st.text(alphabet="abcไทย中 ", max_size=12)


@settings(max_examples=200, deadline=None)
@given(query=_text, raws=st.lists(st.floats(-1, 1, allow_nan=False), min_size=1, max_size=6),
       kws=st.lists(st.floats(-20, 0, allow_nan=False), min_size=1, max_size=6),
       fusion=st.sampled_from(["weighted", "rrf"]))
def test_parts_add_up_and_blind_share_is_monotone(query: str, raws: list[float], kws: list[float],
                                                   fusion: str) -> None:
    chunks = {i: _chunk(i, f"t{i}") for i in range(12)}
    vec = tuple(LegHit(i, r, i + 1) for i, r in enumerate(sorted(raws, reverse=True)))
    kw = tuple(LegHit(6 + i, r, i + 1) for i, r in enumerate(sorted(kws)))
    c = Candidates(query, (), keyword=kw, vector=vec, chunks=chunks, pool=24, vector_scripts=LATIN)
    cfg = preset(fusion).replace(adaptive=True, min_score=-1.0)
    for h in rank(c, cfg, now=0.0).candidates:
        assert math.isclose((h.vector_part or 0.0) + (h.text_part or 0.0), h.fused_score, abs_tol=1e-12)
    vw, tw = adapted_weights(c, 0.5, 0.5)
    assert tw == 0.5 and 0.0 <= vw <= 0.5
    assert vw == 0.5 * (1 - foreign_share(query, LATIN))


def test_min_score_scales_with_the_weight_the_vector_leg_kept() -> None:
    cfg = preset("minmax").replace(adaptive=True)  # min_score 0.35
    for query, min_score in (("ไทย", 0.0), ("ไทย car", 0.175), ("car", 0.35)):
        r = rank(_cands(query, LATIN), cfg, now=0.0)
        # all-Thai: the vector leg weighs 0 and drops out, so chunk 2 (found by it alone) is no candidate
        assert [h.chunk_id for h in r.hits] == ([1, 3] if min_score == 0.0 else [1, 2])
        cut = [h.cut_reason for h in r.candidates if not h.kept]
        assert cut == ([] if min_score == 0.0 else ["min_score"])
    # the static preset cuts the Thai query's second keyword hit (0.0 < 0.35) and keeps the blind leg's top
    assert [h.chunk_id for h in rank(_cands("ไทย", LATIN), preset("minmax"), now=0.0).hits] == [1, 2]


def test_the_default_is_adaptive_and_the_named_static_presets_are_not() -> None:
    assert RankConfig().adaptive and preset("default").adaptive and preset("adaptive") == preset("default")
    assert not preset("minmax").adaptive and not preset("rrf").adaptive and not preset("reference").adaptive
    assert preset("rrf-adaptive") == preset("rrf").replace(adaptive=True)


def test_calibrated_scores_keep_their_min_score() -> None:
    """With both legs calibrated the fused score is a probability whatever the weights, so the adaptive step does not
    lower min_score: a blind-vector query is cut at the same probability as any other (min-max scales it instead)."""
    cfg = preset("calibrated")  # the calibrated weighted sum (the default of #16)
    assert cfg.adaptive and cfg.vector_norm == cfg.bm25_norm == "calibrated"
    thai = _cands("ไทย", LATIN)
    best = max(h.final_score for h in rank(thai, cfg.replace(min_score=0.0), now=0.0).hits)
    assert best > 0.0
    assert rank(thai, cfg.replace(min_score=best + 1e-6), now=0.0).hits == ()
    minmax = preset("minmax").replace(adaptive=True, min_score=0.5)
    assert [h.chunk_id for h in rank(thai, minmax, now=0.0).hits] == [1, 3]  # min-max: 0.5 scaled by the kept 0.0
