"""Calibrated scores (#16): exact fitted values, monotonicity, the identifier in one note of hundreds, abstention on an
unrelated query, the nothing-relevant sentence and the recall block."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from hybridmem.config import DEFAULT_RANKING, PRESETS, RankConfig
from hybridmem.config.calibration import (FALLBACK_VECTOR_MODEL, KEYWORD_CALIBRATION, VECTOR_CALIBRATIONS,
                                          Calibration, vector_calibration)
from hybridmem.ranking import rank
from hybridmem.ranking.calibrate import fit_logistic, keyword_features, keyword_probabilities, vector_probabilities
from hybridmem.records import Candidates, ChunkInfo, LegHit

CAL = RankConfig(fusion="weighted", bm25_norm="calibrated", vector_norm="calibrated", min_score=0.0,
                 rescue_keyword=False, answer_threshold=0.0)


def _chunk(cid: int, text: str, tokens: str) -> ChunkInfo:
    return ChunkInfo(cid, f"n{cid}.md", "memory", 1, 1, text, 0.0, True, frozenset(tokens.split()))


# -- fitting: exact values on a tiny inline set -----------------------------------------------------------------------
def test_fit_logistic_exact_values() -> None:
    # sklearn's LogisticRegression(C=1) on the same rows gives 0.95828595, -1.43742892 (intercept not penalized)
    coef, b = fit_logistic(np.array([[0.0], [1.0], [2.0], [3.0]]), np.array([0.0, 0.0, 1.0, 1.0]), l2=1.0)
    assert round(coef[0], 6) == 0.958286 and round(b, 6) == -1.437429


def test_fit_logistic_weights_equal_duplicated_rows() -> None:
    x, y = np.array([[0.0], [1.0], [2.0]]), np.array([0.0, 1.0, 1.0])
    a = fit_logistic(x, y, np.array([2.0, 1.0, 1.0]), l2=0.5)
    b = fit_logistic(np.array([[0.0], [0.0], [1.0], [2.0]]), np.array([0.0, 0.0, 1.0, 1.0]), l2=0.5)
    assert np.allclose(a[0], b[0]) and math.isclose(a[1], b[1])


def test_fit_logistic_drops_a_negative_monotone_coefficient() -> None:
    # column 1 is anti-correlated with the label: constrained to >= 0, it is dropped and column 0 refitted alone
    x = np.array([[0.0, 1.0], [1.0, 1.0], [2.0, 0.0], [3.0, 0.0]])
    coef, b = fit_logistic(x, np.array([0.0, 0.0, 1.0, 1.0]), l2=1.0, nonnegative=(1,))
    alone = fit_logistic(x[:, :1], np.array([0.0, 0.0, 1.0, 1.0]), l2=1.0)
    assert coef[1] == 0.0 and math.isclose(coef[0], alone[0][0]) and math.isclose(b, alone[1])


def test_probabilities_exact() -> None:
    cal = Calibration(("cosine",), (10.0,), -5.0)
    assert vector_probabilities([0.5, 0.3], cal) == [0.5, 1 / (1 + math.exp(2.0))]
    kcal = Calibration(("log1p_bm25", "coverage", "log_terms"), (1.0, 2.0, -1.0), -1.0)
    # bm25 -e+1 -> log1p = 1; coverage 1/2; log 2 terms
    p = keyword_probabilities([-(math.e - 1)], [{"billing"}], ["deploy", "billing"], kcal)[0]
    assert math.isclose(p, 1 / (1 + math.exp(-(-1.0 + 1.0 + 1.0 - math.log(2)))))
    assert keyword_features(-3.0, frozenset(), {"x"}) == (math.log1p(3.0), 0.0, 0.0)


def test_every_model_fitted_and_fallback() -> None:
    assert {"all-MiniLM-L6-v2", "multilingual-e5-small"} <= VECTOR_CALIBRATIONS.keys()
    assert vector_calibration("unknown") is VECTOR_CALIBRATIONS[FALLBACK_VECTOR_MODEL]
    for cal in (*VECTOR_CALIBRATIONS.values(), KEYWORD_CALIBRATION):
        assert cal.coef[0] > 0  # the raw score's coefficient


# -- monotonic in each leg's raw score ------------------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(st.floats(-1, 1), st.floats(-1, 1), st.floats(-40, 0), st.floats(-40, 0), st.integers(0, 3),
       st.sampled_from(sorted(VECTOR_CALIBRATIONS)))
def test_calibrated_score_is_monotonic_in_each_raw_score(c1: float, c2: float, b1: float, b2: float, matched: int,
                                                         model: str) -> None:
    lo_c, hi_c = sorted((c1, c2))
    lo_b, hi_b = sorted((b1, b2), reverse=True)  # bm25() is negative: lower is better
    vc = vector_calibration(model)
    assert vector_probabilities([lo_c], vc)[0] <= vector_probabilities([hi_c], vc)[0]
    q = ["a", "b", "c"]
    toks = set(q[:matched])
    assert (keyword_probabilities([lo_b], [toks], q, KEYWORD_CALIBRATION)[0]
            <= keyword_probabilities([hi_b], [toks], q, KEYWORD_CALIBRATION)[0])
    # and the fused score of one chunk found by both legs
    chunks = {1: _chunk(1, "x", " ".join(toks))}

    def fused(cos: float, bm: float) -> float:
        c = Candidates("a b c", tuple(q), (LegHit(1, bm, 1),), (LegHit(1, cos, 1),), chunks, 24,
                       vector_model=model)
        return rank(c, CAL, now=0.0).hits[0].final_score

    assert fused(lo_c, lo_b) <= fused(hi_c, lo_b) <= fused(hi_c, hi_b)


# -- pipeline behaviour ---------------------------------------------------------------------------------------------
def test_empty_leg_is_p0_not_renormalized() -> None:
    chunks = {1: _chunk(1, "x", "x")}
    c = Candidates("q", ("q",), (), (LegHit(1, 0.5, 1),), chunks, 24, vector_model="all-MiniLM-L6-v2")
    h = rank(c, CAL, now=0.0).hits[0]
    p = vector_probabilities([0.5], VECTOR_CALIBRATIONS["all-MiniLM-L6-v2"])[0]
    assert h.vector_score == p and h.text_score is None and h.text_part == 0.0
    assert math.isclose(h.final_score, p * CAL.vector_weight / (CAL.vector_weight + CAL.text_weight))
    # min-max, by contrast, renormalizes the lone leg to 1.0
    assert rank(c, PRESETS["minmax"], now=0.0).hits[0].final_score == 1.0


def test_nothing_passes_returns_nothing_by_default() -> None:
    """The default's answer gate, not a per-hit cut, says "nothing relevant"; the old calibrated default cut by
    min score."""
    assert not DEFAULT_RANKING.rescue_keyword and DEFAULT_RANKING.answer_threshold > 0
    chunks = {1: _chunk(1, "cluster names", "cluster name")}
    c = Candidates("cake", ("cake",), (LegHit(1, -0.01, 1),), (LegHit(1, 0.02, 1),), chunks, 24,
                   vector_model="all-MiniLM-L6-v2")
    r = rank(c, DEFAULT_RANKING, now=0.0)
    assert r.hits == () and not r.rescued and r.abstained and r.candidates[0].cut_reason == "no_answer"
    r = rank(c, PRESETS["calibrated"], now=0.0)
    assert r.hits == () and r.candidates[0].cut_reason == "min_score"


def test_identifier_in_one_note_of_hundreds_ranks_first(tmp_path: Path, hash_embedder) -> None:
    from hybridmem.index import MemoryIndex

    ws = tmp_path / "ws"
    topics = ["deploy", "billing", "cluster", "invoice", "retry", "cache", "queue", "refund", "ledger", "alert"]
    for i in range(300):
        (ws / "memory").mkdir(parents=True, exist_ok=True)
        body = (f"Note {i} about the {topics[i % 10]} service and the {topics[(i * 3) % 10]} job.\n"
                f"We discussed the {topics[(i * 7) % 10]} rollout with the team on day {i}.\n")
        if i == 137:
            body += "The failing job id was ERR_LEDGER_7731 in the nightly run.\n"
        (ws / "memory" / f"note-{i:03d}.md").write_text(body, encoding="utf-8")
    with MemoryIndex(ws, embedder=hash_embedder) as idx:
        idx.sync()
        for q in ("ERR_LEDGER_7731", "err_ledger_7731", "what was ERR_LEDGER_7731?"):
            res = idx.search(q).results
            assert res and res[0].path == "memory/note-137.md", q


CAKE_NOTES = {
    "memory/2026-05-01.md": "# Billing deploy\n\nThe billing service deploy failed on Friday: the migration timed out "
                            "and we rolled back to v2.3.\n",
    "memory/2026-05-02.md": "# Clusters\n\nProduction cluster is kumo-prod-sg1, staging is kumo-stg-sg1, the batch "
                            "cluster is kumo-batch-tk1.\n",
    "memory/2026-05-03.md": "# ETL decision\n\nWe decided to move the nightly ETL from cron to Airflow, owned by the "
                            "data team.\n",
}
CAKE_QUERIES = {"memory/2026-05-01.md": "why did the billing deploy fail?",
                "memory/2026-05-02.md": "what is the staging cluster called?",
                "memory/2026-05-03.md": "what did we decide about the nightly ETL?"}


def _cake_workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "cake"
    for rel, text in CAKE_NOTES.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text, encoding="utf-8")
    return ws


def test_chocolate_cake_returns_nothing_keyword_only(tmp_path: Path) -> None:
    """Without an embedder the keyword leg's own gate decides (a fake embedder's cosines mean nothing to a gate
    fitted on real models; the real models are tested below)."""
    from hybridmem.index import MemoryIndex
    from hybridmem.tools import NOTHING_FOUND, MemoryTools, recall

    with MemoryIndex(_cake_workspace(tmp_path), embedder=None) as idx:
        idx.sync()
        assert idx.search("chocolate cake recipe").results == ()
        assert recall(idx, "chocolate cake recipe") == ""
        out = json.loads(MemoryTools(idx).handle("memory_search", {"query": "chocolate cake recipe"}))
        assert out["results"] == [] and out["message"].startswith(NOTHING_FOUND)
        out = json.loads(MemoryTools(idx).handle("memory_search", {"query": "zzqqxx"}))
        assert out["message"].endswith("The keyword search found no candidate (the only one this search ran).")
        for path, q in CAKE_QUERIES.items():
            res = idx.search(q).results
            assert res and res[0].path == path, q
            block = recall(idx, q)
            assert f"[{res[0].citation}]" in block and len(block) <= idx.settings.ranking.max_injected_chars


@pytest.mark.slow
@pytest.mark.parametrize("provider", ["e5", "local"])
def test_chocolate_cake_returns_nothing_real_models(tmp_path: Path, provider: str) -> None:
    from hybridmem.config import Settings
    from hybridmem.index import MemoryIndex

    settings = Settings().override(embedding={"provider": provider})
    with MemoryIndex(_cake_workspace(tmp_path), settings=settings) as idx:
        idx.sync()
        assert idx.search("chocolate cake recipe").results == ()
        for path, q in CAKE_QUERIES.items():
            res = idx.search(q).results
            assert res and res[0].path == path, q


def test_recall_block_clamped() -> None:
    from hybridmem.tools import recall_block

    hits = [("a.md#L1", 0.9, "x" * 100), ("b.md#L2", 0.8, "y" * 100)]
    full = recall_block(hits, 0)
    assert full.count("[") == 2 and full.startswith("<memory>") and full.endswith("</memory>")
    one = recall_block(hits, len(full) - 1)
    assert "[a.md#L1]" in one and "[b.md#L2]" not in one and len(one) <= len(full) - 1
    assert recall_block(hits, 20) == "" and recall_block([], 4000) == ""


def test_calibrate_cli_refits_one_model_and_keeps_the_others(monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """`hybridmem eval calibrate --models e5` keys the fit by the provider's model and keeps MiniLM's fit."""
    import hybridmem.eval.calibrate as cal
    from hybridmem.cli import main

    new = Calibration(("cosine",), (4.0,), -7.0, "test rows")
    seen: list[str] = []

    def fake(models, progress=True):  # noqa: ANN001, ANN202
        seen.extend(models)
        return {m: new for m in models}, KEYWORD_CALIBRATION

    monkeypatch.setattr(cal, "calibrate", fake)
    assert main(["eval", "calibrate", "--models", "e5", "--json"]) == 0
    out = capsys.readouterr().out
    assert seen == ["multilingual-e5-small"]
    assert '"multilingual-e5-small": Calibration(("cosine",), (4.0,), -7.0,' in out
    kept = VECTOR_CALIBRATIONS["all-MiniLM-L6-v2"]
    assert f'"all-MiniLM-L6-v2": Calibration(("cosine",), ({kept.coef[0]!r},), {kept.intercept!r},' in out


def test_calibrate_fits_the_keyword_leg_on_xquad_too_and_the_vector_leg_without(monkeypatch: pytest.MonkeyPatch
                                                                                ) -> None:
    """XQuAD-R's 11 languages reach the keyword fit only, as one source, through keyword-only indexes."""
    import hybridmem.eval.calibrate as cal
    from hybridmem.config import Settings

    class FakeEvaluator:
        def __init__(self, ds, settings, progress=True):  # noqa: ANN001
            self.name, self.provider = ds, settings.embedding.provider

        def close(self) -> None:
            pass

    calls: list[tuple[str, str, str | None]] = []

    def collect(ev, vec, kw, pool=24, source=None):  # noqa: ANN001, ANN202
        calls.append((ev.name, ev.provider, source))
        vec.add(ev.name, [0.5], 1); vec.add(ev.name, [0.1], 0)
        kw.add(source or ev.name, [1.0, 1.0, 0.0], 1); kw.add(source or ev.name, [0.0, 0.0, 0.0], 0)

    monkeypatch.setattr(cal, "Evaluator", FakeEvaluator)
    monkeypatch.setattr(cal, "collect", collect)
    monkeypatch.setattr("hybridmem.eval.datasets.load_dataset", lambda name: name)
    vector, keyword = cal.calibrate({"m": Settings().override(embedding={"provider": "e5"})}, progress=False)
    assert calls[:3] == [("scifact", "e5", None), ("locomo", "e5", None), ("demo", "e5", None)]
    assert calls[3:] == [(f"xquad-{lang}", "none", "xquad") for lang in cal.LANGUAGES]
    assert len(cal.LANGUAGES) == 11
    assert "xquad" in keyword.fitted_on and "xquad" not in vector["m"].fitted_on
