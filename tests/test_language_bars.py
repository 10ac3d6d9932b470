"""The answer gate's bar per question language (``LANGUAGE_BARS``; docs/ranking.md, "The sixteenth round"): where it
is read, what it does to the probability, and how it is placed on train rows."""

from __future__ import annotations

import dataclasses
import math

import pytest

from hybridmem.config import DEFAULT_RANKING
from hybridmem.config.calibration import ANSWER_THRESHOLD, LANGUAGE_BARS, Calibration, gate_model
from hybridmem.eval.decisions import DecisionRows, false_point
from hybridmem.eval.language_bars import LEAST_QUESTIONS, bar_table, language_bars, note_bars
from hybridmem.ranking import rank
from hybridmem.ranking.gate import GATE_FEATURES, answer_probability, logit, raised
from hybridmem.ranking.pipeline import decision_features
from hybridmem.records import Candidates, ChunkInfo, LegHit
from hybridmem.tokenization import tokenize

E5, MINILM = "multilingual-e5-small", "all-MiniLM-L6-v2"
BARS = LANGUAGE_BARS[f"{E5}|aligned"]
NOTES = {1: "Lịch hẹn nha sĩ của mẹ là thứ Năm lúc 9 giờ sáng ở phòng khám Hoàn Mỹ.",
         2: "The dentist appointment moved to Tuesday at 3pm at the Kensington clinic.",
         3: "佐藤さんの誕生日は3月8日。甘いものが好き。", 4: "Mẹ thích uống trà sen vào buổi sáng."}
CHUNKS = {c: ChunkInfo(c, f"memory/n{c}.md", "memory", 1, 2, t, 0.0, True, frozenset(tokenize(t)))
          for c, t in NOTES.items()}
ALIGNED = (0.86, 0.8, 0.85, 0.4, 0.12)  # the token alignment's five numbers: e5's aligned gate decides


def cands(query: str, order: tuple[int, ...], top: float, alignment: tuple | None = ALIGNED) -> Candidates:
    vec = tuple(LegHit(c, top - 0.02 * i, i + 1) for i, c in enumerate(order))
    kw = tuple(LegHit(c, 5.0 - i, i + 1) for i, c in enumerate(order[:2]))
    return Candidates(query, tuple(tokenize(query)), keyword=kw, vector=vec, chunks=CHUNKS, pool=40,
                      vector_model=E5, alignment=alignment)


def usual(c: Candidates) -> float:
    _, f = decision_features(c, DEFAULT_RANKING)
    return answer_probability(f, gate_model(E5, aligned=c.alignment is not None))


def test_a_question_is_read_against_its_languages_bar_and_an_unfitted_or_short_one_against_the_threshold() -> None:
    """A Vietnamese question over Vietnamese notes: the aligned gate's probability is moved so that Vietnamese's bar
    falls on the shared threshold (raised), so it answers exactly where its probability reaches the bar, and the
    ranking names the bar (--explain prints it). A Japanese question (no bar fitted) and a two-word query (no language
    to read) keep the gate's own probability, as English does (the reference); so does a gate without the
    alignment, which the bars were not placed on."""
    assert BARS["vi"] > ANSWER_THRESHOLD and "ja" not in BARS and "en" not in BARS
    answered = []
    for a in (0.80, 0.81, 0.82, 0.83, 0.84):  # the gate's own probability 0.06, 0.10, 0.15, 0.23, 0.33
        c = cands("lịch hẹn nha sĩ của mẹ là khi nào?", (1, 4, 2, 3), 0.84, alignment=(a, a - 0.05, a, 0.3, 0.08))
        p, got = usual(c), rank(c, DEFAULT_RANKING, now=0.0)
        assert got.routed_across == "" and got.language_bar == ("vi", BARS["vi"])
        assert got.answer_probability == pytest.approx(raised(p, BARS["vi"], ANSWER_THRESHOLD))
        assert bool(got.hits) == (p >= BARS["vi"]) and got.abstained == (p < BARS["vi"])
        answered.append((p >= ANSWER_THRESHOLD, bool(got.hits)))
    assert (True, False) in answered and (True, True) in answered  # the bar decides some the threshold would answer
    for plain in (cands("when is the dentist appointment?", (2, 1, 4, 3), 0.86),
                  cands("佐藤さんの誕生日はいつですか？", (3, 1, 2, 4), 0.86), cands("dentist Kensington", (2, 1, 4, 3), 0.86),
                  cands("lịch hẹn nha sĩ của mẹ là khi nào?", (1, 4, 2, 3), 0.86, alignment=None)):
        got = rank(plain, DEFAULT_RANKING, now=0.0)
        assert got.language_bar is None and got.answer_probability == pytest.approx(usual(plain))
    keyword = rank(cands("lịch hẹn nha sĩ của mẹ là khi nào?", (1, 4, 2, 3), 0.86),
                   DEFAULT_RANKING.replace(vector_weight=0.0), now=0.0)
    assert keyword.language_bar is None  # the keyword leg's gate has no bars


def test_bars_for_notes_start_from_englishs_own_point_over_its_notes_and_move_by_each_languages_shift() -> None:
    """The twenty-first round's bars for a question over notes alone (measured, not shipped): English's own point (at
    ``max_false``) over its note sets (XQuAD-R and SciFact; not LoCoMo's conversations nor the demo), moved per
    language by how far its point lies from English's on XQuAD-R, up or down; a bar no higher than the language's
    usual one (or the threshold) is left out, and the table reads a set over notes against it, a conversation set
    and the demo against the usual bars."""
    gate = Calibration(("vector_top",), (1.0,), 0.0)
    grid = [i / 200 for i in range(1, 200)]
    ps = {"xquad-en": [min(0.99, p + 0.3) for p in grid], "scifact": [min(0.99, p + 0.4) for p in grid],
          "locomo": grid, "demo-memory": [0.01] * 50, "xquad-vi": [min(0.99, p + 0.5) for p in grid],
          "xquad-tr": [min(0.99, p + 0.25) for p in grid], "xquad-ar": [min(0.99, p + 0.02) for p in grid],
          "xquad-vi-cross": [0.3, 0.6, 0.8], "locomo-cross": [0.1, 0.3]}
    rows = _rows(ps)
    usual_bars = language_bars(rows, gate, threshold=0.05)
    got = note_bars(rows, gate, 0.05, usual_bars, max_false=0.01)
    own = false_point({"xquad-en": ps["xquad-en"], "scifact": ps["scifact"]}, max_false=0.01)
    assert own == pytest.approx(false_point({"en": ps["xquad-en"]}, max_false=0.01))  # the lowest binds
    assert got["en"] == pytest.approx(own, abs=1e-4)

    def moved(lang: str) -> float:
        shift = logit(false_point({lang: ps[f"xquad-{lang}"]}, max_false=0.01)) - logit(
            false_point({"en": ps["xquad-en"]}, max_false=0.01))
        return 1 / (1 + math.exp(-(logit(own) + shift)))

    assert got["vi"] == pytest.approx(moved("vi"), abs=1e-4) and got["vi"] > usual_bars["vi"]
    assert moved("tr") < own and got["tr"] == pytest.approx(moved("tr"), abs=1e-4)  # a shift down is kept
    assert "ar" not in got and moved("ar") < 0.05  # never under the threshold
    table = bar_table(rows, gate, 0.05, usual_bars, notes=got)
    assert table.bar["xquad-vi-cross"] == got["vi"] and table.bar["locomo-cross"] == table.bar["locomo"] == 0.05
    assert table.bar["demo-memory"] == 0.05  # the demo holds transcripts too
    assert table.after["xquad-en"] <= 0.01 + 1e-9 and table.after["xquad-vi"] <= 0.01 + 1e-9
    assert table.after["xquad-vi-cross"] > table.before["xquad-vi-cross"]


def _rows(p_by_set: dict[str, list[float]]) -> DecisionRows:
    """Gate rows whose ``vector_top`` is the logit of the given probability (the gate below reads it alone)."""
    i = GATE_FEATURES.index("vector_top")
    rows = DecisionRows()
    for name, ps in p_by_set.items():
        for p in ps:
            feats = [0.0] * len(GATE_FEATURES)
            feats[i] = logit(p)
            rows.gate.append((name, {"both": feats}, int(not name.endswith("-cross"))))
    return rows


def test_a_bar_is_the_threshold_moved_by_how_far_a_languages_point_lies_over_englishs_on_parallel_questions() -> None:
    """The shared threshold moved up by how far each XQuAD-R language's 2% point lies above English's there (not by
    its own point: English's conversations, LoCoMo, bind lower than its Wikipedia questions); a language whose point
    lies under English's keeps the threshold, and the table reads each set against its language's bar (a set in no
    one language, the demo, against the threshold)."""
    gate = Calibration(("vector_top",), (1.0,), 0.0)
    grid = [i / 200 for i in range(1, 200)]  # 199 answerable questions a set: LEAST_QUESTIONS or more
    ps = {"xquad-en": [min(0.99, p + 0.3) for p in grid], "locomo": grid,
          "xquad-vi": [min(0.99, p + 0.5) for p in grid], "xquad-tr": grid, "xquad-vi-cross": [0.1, 0.3, 0.6],
          "demo-memory": [0.05, 0.5]}
    rows = _rows(ps)
    bars = language_bars(rows, gate, threshold=0.05)
    shift = logit(false_point({"vi": ps["xquad-vi"]})) - logit(false_point({"en": ps["xquad-en"]}))
    assert shift > 0 and bars["vi"] == pytest.approx(1 / (1 + math.exp(-(logit(0.05) + shift))), abs=1e-4)
    assert set(bars) == {"vi"}  # English is the reference; Turkish's point lies under English's
    table = bar_table(rows, gate, 0.05, bars)
    assert table.bar["xquad-vi-cross"] == bars["vi"] and table.bar["demo-memory"] == table.bar["locomo"] == 0.05
    assert table.after["xquad-vi-cross"] == pytest.approx(sum(p < bars["vi"] for p in ps["xquad-vi-cross"]) / 3)
    assert table.before["xquad-vi-cross"] == pytest.approx(0.0) and not table.answerable["xquad-vi-cross"]


def test_an_anchored_models_bars_start_from_englishs_own_point_over_its_sets_and_need_enough_questions() -> None:
    """For a model whose shared threshold is bound by languages it cannot read (ANCHORED: MiniLM), the shifts start
    from English's own 2% point over every English set (the lowest, here LoCoMo's, binds), English included; a
    language whose gate decides fewer than LEAST_QUESTIONS of its answerable questions gets no bar, however high."""
    gate = Calibration(("vector_top",), (1.0,), 0.0)
    grid = [i / 200 for i in range(1, 200)]
    ps = {"xquad-en": [min(0.99, p + 0.3) for p in grid], "locomo": [min(0.99, p + 0.1) for p in grid],
          "xquad-vi": [min(0.99, p + 0.5) for p in grid], "xquad-tr": grid,
          "xquad-th": [0.9] * (LEAST_QUESTIONS - 1)}
    rows = _rows(ps)
    plain, anchored = language_bars(rows, gate, 0.05), language_bars(rows, gate, 0.05, anchored=True)
    own = false_point({"en": ps["xquad-en"], "locomo": ps["locomo"]})
    assert own == pytest.approx(false_point({"locomo": ps["locomo"]})) and own > 0.05
    assert anchored["en"] == pytest.approx(own, abs=1e-4) and "en" not in plain
    shift = logit(false_point({"vi": ps["xquad-vi"]})) - logit(false_point({"en": ps["xquad-en"]}))
    assert anchored["vi"] == pytest.approx(1 / (1 + math.exp(-(logit(own) + shift))), abs=1e-4)
    assert anchored["vi"] > plain["vi"]
    assert "th" not in anchored and "tr" not in anchored  # too few questions; under the threshold
    table = bar_table(rows, gate, 0.05, anchored)
    assert table.after["locomo"] <= 0.02 and table.after["xquad-en"] <= 0.02  # no English set loses more than 2%
    assert table.after["locomo"] > table.before["locomo"]  # and the binding one loses up to it


def test_minilm_reads_an_english_question_against_englishs_own_bar() -> None:
    """MiniLM (English only) is anchored: its aligned gate reads an English question against English's bar, above
    the shared threshold, and names it; a two-word query keeps the threshold."""
    assert LANGUAGE_BARS[f"{MINILM}|aligned"]["en"] > ANSWER_THRESHOLD
    bar = LANGUAGE_BARS[f"{MINILM}|aligned"]["en"]
    decided = []
    for a in (0.76, 0.78, 0.80, 0.82, 0.84, 0.86):
        c = dataclasses.replace(cands("when is the dentist appointment at the clinic?", (2, 1, 4, 3), 0.62,
                                      alignment=(a, a - 0.05, a, 0.3, 0.08)), vector_model=MINILM)
        p = answer_probability(decision_features(c, DEFAULT_RANKING)[1], gate_model(MINILM, aligned=True))
        got = rank(c, DEFAULT_RANKING, now=0.0)
        assert got.language_bar == ("en", bar)
        assert got.answer_probability == pytest.approx(raised(p, bar, ANSWER_THRESHOLD))
        assert bool(got.hits) == (p >= bar)
        decided.append((p >= ANSWER_THRESHOLD, p >= bar))
    assert (True, False) in decided and (True, True) in decided
    short = dataclasses.replace(cands("dentist Kensington", (2, 1, 4, 3), 0.62), vector_model=MINILM)
    assert rank(short, DEFAULT_RANKING, now=0.0).language_bar is None


def test_the_pairs_bars_are_placed_on_the_questions_it_decides_with_english_read_as_the_pair_reads_it() -> None:
    """MiniLM's pair decides only questions whose blind vector leg was dropped, never an English one. Its bars
    (``pair=True``) read each language's point on those questions, and English's (the anchor over its sets, and the
    reference on XQuAD-R) on its keyword leg's features alone; English itself, and a language the pair decides too
    few questions of, get none."""
    gate = Calibration(("keyword_top",), (1.0,), 0.0)
    grid = [i / 200 for i in range(1, 200)]
    kw, vec = GATE_FEATURES.index("keyword_top"), GATE_FEATURES.index("vector_top")
    rows = DecisionRows()

    def add(name: str, ps: list[float], dropped: bool, both_shift: float = 0.0) -> None:
        for p in ps:
            both, keyword = [0.0] * len(GATE_FEATURES), [0.0] * len(GATE_FEATURES)
            both[kw], keyword[kw] = logit(min(0.99, p + both_shift)), logit(p)
            both[vec] = logit(0.0) if dropped else 1.0
            rows.gate.append((name, {"both": both, "keyword": keyword}, int(not name.endswith("-cross"))))

    add("xquad-en", [min(0.99, p + 0.3) for p in grid], dropped=False, both_shift=0.4)  # both legs read higher
    add("locomo", [min(0.99, p + 0.1) for p in grid], dropped=False, both_shift=0.4)
    add("xquad-vi", [min(0.99, p + 0.5) for p in grid], dropped=False)  # kept: the aligned gate decides it
    add("xquad-th", [min(0.99, p + 0.4) for p in grid], dropped=True)
    add("xquad-th-cross", [0.1, 0.15, 0.5], dropped=True)
    add("xquad-el", [0.9] * (LEAST_QUESTIONS - 1), dropped=True)
    bars = language_bars(rows, gate, 0.05, anchored=True, pair=True)
    own = false_point({"locomo": [min(0.99, p + 0.1) for p in grid]})  # LoCoMo binds, read on the keyword leg
    shift = logit(false_point({"th": [min(0.99, p + 0.4) for p in grid]})) - logit(
        false_point({"en": [min(0.99, p + 0.3) for p in grid]}))
    assert set(bars) == {"th"} and bars["th"] == pytest.approx(1 / (1 + math.exp(-(logit(own) + shift))), abs=1e-4)
    table = bar_table(rows, gate, 0.05, bars, pair=True)
    assert set(table.bar) == {"xquad-th", "xquad-th-cross", "xquad-el"}  # the questions the pair decides
    assert table.after["xquad-th-cross"] == pytest.approx(sum(p < bars["th"] for p in (0.1, 0.15, 0.5)) / 3)
    assert table.after["xquad-th"] <= 0.02 and table.before["xquad-th-cross"] == 0.0 < table.after["xquad-th-cross"]


def test_minilm_reads_a_thai_question_whose_blind_leg_was_dropped_against_the_pairs_thai_bar() -> None:
    """Where the adaptive step drops MiniLM's vector leg (a Thai question: a script it was not trained on) and the
    candidates carry the alignment, the pair decides, read against its bar for the question's language."""
    pair = gate_model(MINILM, {"keyword"}, aligned=True, blind=True)
    bar = LANGUAGE_BARS[f"{MINILM}|keyword+aligned"]["th"]
    assert isinstance(pair, tuple) and bar > ANSWER_THRESHOLD
    notes = {1: "คุณยายไปตรวจความดันโลหิตที่โรงพยาบาลเมื่อวันจันทร์ หมอบอกว่าปกติดี", 2: "พรุ่งนี้ต้องจ่ายค่าไฟฟ้าและค่าน้ำประปา",
             3: "แมวชื่อส้มชอบนอนบนโซฟา", 4: "ร้านกาแฟใหม่เปิดใกล้สถานีรถไฟ"}
    chunks = {c: ChunkInfo(c, f"memory/t{c}.md", "memory", 1, 2, t, 0.0, True, frozenset(tokenize(t)))
              for c, t in notes.items()}
    question, order = "คุณยายไปตรวจความดันโลหิตที่ไหน", (1, 2, 4, 3)
    decided = []
    for a in (0.70, 0.74, 0.78, 0.82, 0.86, 0.90):
        c = Candidates(question, tuple(tokenize(question)), chunks=chunks, pool=40, vector_model=MINILM,
                       keyword=tuple(LegHit(c, 5.0 - i, i + 1) for i, c in enumerate(order[:2])),
                       vector=tuple(LegHit(c, 0.3 - 0.01 * i, i + 1) for i, c in enumerate(order)),
                       alignment=(a, a - 0.05, a, 0.3, 0.08), vector_scripts=frozenset({"LATIN"}))
        got = rank(c, DEFAULT_RANKING, now=0.0)
        _, f = decision_features(c, DEFAULT_RANKING.replace(vector_weight=0.0))
        p = answer_probability(f, pair)
        assert got.language_bar == ("th", bar)
        assert got.answer_probability == pytest.approx(raised(p, bar, ANSWER_THRESHOLD))
        assert bool(got.hits) == (p >= bar)
        decided.append((p >= ANSWER_THRESHOLD, p >= bar))
    assert (True, False) in decided and (True, True) in decided
