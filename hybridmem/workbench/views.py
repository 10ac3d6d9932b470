"""UI pieces several pages share: opening an index with progress, tables of ranked candidates, rank movements, the
per-leg contribution chart and highlighted snippets.

Every score shown is a field of a :class:`~hybridmem.Hit` that ranking produced (the contribution chart included:
each leg's term of the fused score is ``Hit.vector_part`` / ``text_part``); nothing here scores.
"""

from __future__ import annotations

import html
import re
from typing import Iterable, Mapping

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from hybridmem.config import RankConfig
from hybridmem.errors import HybridMemError
from hybridmem.index import MemoryIndex
from hybridmem.records import Hit, Ranking
from hybridmem.tokenization import token_spans
from hybridmem.workbench import state
from hybridmem.wording import ACROSS_WORDS

VECTOR_COLOR = "#4C78A8"
TEXT_COLOR = "#F58518"


def fail(message: str) -> None:
    """Show ``message`` as an error in the page and stop the page here."""
    st.error(message, icon=":material/error:")
    st.stop()


def literal(text: str) -> str:
    r"""``text`` shown as typed inside Markdown (``unsafe_allow_html`` or not): HTML escaped, and every character
    Markdown, LaTeX or Streamlit's ``:badge[...]``/``:emoji:`` directives read backslash-escaped.

    Example:
        >>> literal("retry_backoff_ms *x* <b>")
        'retry\\_backoff\\_ms \\*x\\* &lt;b&gt;'
    """
    escaped = html.escape(text, quote=False)
    return re.sub(r"([\\`*_{}\[\]()#+\-.!|~$:])", r"\\\1", escaped)


def write_refused() -> None:
    """Say why the last click saved nothing (:func:`state.may_write` refused a workspace the sidebar did not show)."""
    message = st.session_state.pop(state.WRITE_REFUSED_KEY, None)
    if message:
        st.error(message, icon=":material/block:")


def dataset_or_warning(source: state.Source) -> tuple[object | None, str | None]:
    """The labeled dataset behind ``source`` and None; for a memory folder whose own label files cannot be read, None
    and why (shown as a warning: a page that searches or lists the index goes on without labels). Any other error
    stops the page."""
    try:
        return state.dataset_for(source), None
    except HybridMemError as exc:
        if not source.own_labels:
            fail(state.error_text(exc))
        broken = state.error_text(exc)
        st.warning(f"{broken}. This page goes on without the workspace's labels: mend or remove that file to label "
                   "and evaluate here.", icon=":material/warning:")
        return None, broken


def open_workspace(source: state.Source) -> MemoryIndex:
    """The cached index of ``source``'s workspace, synced (with progress) when it is empty; errors stop the page."""
    problem = state.check_workspace(source.workspace) or state.without_memory(source.workspace)
    if problem:
        fail(problem)
    try:
        idx = state.get_index(source.workspace)
        if idx.counts()["files"] == 0:
            sync(idx, "Indexing the workspace for the first time")
    except HybridMemError as exc:
        fail(state.error_text(exc))
    if idx.counts()["files"] == 0:
        fail(state.no_memory_text(source.workspace))
    return idx


def open_source(source: state.Source, dataset: object | None) -> MemoryIndex:
    """The index the inspector and the index page use: the workspace's own for a memory folder (and the demo), the
    evaluator's document index for a document dataset (SciFact, LoCoMo, a BEIR folder)."""
    workspace = getattr(dataset, "workspace", None)
    if dataset is None:
        return open_workspace(source)
    if workspace is not None:
        return open_workspace(state.Source("folder", str(workspace)))
    try:
        with st.spinner("Opening the dataset's index (the first time it is built: embedding every document)…"):
            return state.get_evaluator(state.dataset_name(source)).index
    except HybridMemError as exc:
        fail(state.error_text(exc))
    raise AssertionError("unreachable")


def sync(idx: MemoryIndex, label: str = "Syncing") -> None:
    """``idx.sync()`` with a progress bar per stage (files read, chunks embedded)."""
    bar = st.progress(0.0, text=f"{label}…")

    def progress(stage: str, done: int, total: int) -> None:
        bar.progress(min(1.0, done / total) if total else 1.0, text=f"{label}: {stage} {done}/{total}")

    with st.spinner("Loading the embedding model…"):
        _ = idx.embedder
    report = idx.sync(progress=progress)
    bar.empty()
    st.toast(f"Indexed {report.files} files, {report.chunks} chunks in {report.seconds:.1f}s "
             f"(embedded {report.embedded}, cache hits {report.cache_hits})")


def other_fusion(cfg: RankConfig) -> RankConfig:
    """``cfg`` under another built-in fusion, with that fusion's preset min score (RRF scores are ~0.03): RRF beside
    the joint model or a weighted sum, the weighted sum beside RRF."""
    return cfg.with_fusion("weighted" if cfg.fusion == "rrf" else "rrf")


def highlight(text: str, query_tokens: Iterable[str]) -> str:
    """HTML of ``text`` (escaped) with the query's matches in ``<mark>``, as the search tokenizer matches (stems,
    folded case and diacritics, identifier parts, CJK n-grams); of overlapping matches the longest is marked
    (``ERR_CONN_RESET`` whole, not its parts).

    Example:
        >>> highlight("Saw ERR_CONN_RESET", ("err", "errconnreset"))
        'Saw <mark>ERR_CONN_RESET</mark>'
    """
    wanted = set(query_tokens)
    spans = sorted((a, -b, b) for t, a, b in token_spans(text) if t in wanted) if wanted else []
    out, last = [], 0
    for a, _, b in spans:
        if a < last:
            continue
        out.append(html.escape(text[last:a]))
        out.append(f"<mark>{html.escape(text[a:b])}</mark>")
        last = b
    out.append(html.escape(text[last:]))
    return "".join(out).replace("\n", "<br>")


def _fmt(v: float | None) -> float | None:
    return None if v is None else round(float(v), 4)


def candidates_frame(ranking: Ranking, relevant: Mapping[int, str] | None = None) -> pd.DataFrame:
    """One row per candidate with every stage's score; ``relevant`` maps chunk ids to the units they hold."""
    rows = []
    for h in ranking.candidates:
        row = {"final pos": h.position, "citation": h.citation}
        if relevant is not None:
            row["relevant"] = relevant.get(h.chunk_id, "")
        row.update({
            "kept": h.kept, "cut because": h.cut_reason or ("rescued" if h.rescued else ""),
            "vector score": _fmt(h.vector_score), "vector rank": h.vector_rank,
            "text score": _fmt(h.text_score), "text rank": h.text_rank,
            "fused": _fmt(h.fused_score), "decay": _fmt(h.decay_factor), "after decay": _fmt(h.decayed_score),
            "MMR score": _fmt(h.mmr_score), "MMR pos": h.mmr_position,
        })
        rows.append(row)
    df = pd.DataFrame(rows)
    for col in ("final pos", "vector rank", "text rank", "MMR pos"):
        if col in df:
            df[col] = df[col].astype("Int64")
    return df


def contributions(ranking: Ranking) -> pd.DataFrame:
    """Each kept hit's score split into its vector and text parts: each leg's term of the fused score
    (``Hit.vector_part``, ``text_part``) scaled by the hit's decay factor, as its fused score is. Fusions that are not
    a sum of leg terms (ranx methods) have no parts: empty.
    """
    columns = ["citation", "label", "leg", "contribution"]
    rows = []
    for h in ranking.hits:
        if h.vector_part is None or h.text_part is None:
            return pd.DataFrame(columns=columns)
        for name, part in (("vector", h.vector_part), ("text", h.text_part)):
            rows.append({"citation": f"{h.position}. {h.citation}", "label": f"{h.position}. {_short(h.citation)}",
                         "leg": name, "contribution": part * h.decay_factor})
    return pd.DataFrame(rows, columns=columns)


def _short(citation: str, width: int = 28) -> str:
    """The file name and lines of a citation, shortened for axis labels."""
    tail = citation.rsplit("/", 1)[-1]
    return tail if len(tail) <= width else "…" + tail[-(width - 1):]


def contribution_chart(df: pd.DataFrame, title: str) -> go.Figure:
    """Horizontal stacked bars: vector and text parts of each result's score (after decay)."""
    fig = go.Figure()
    for name, color in (("vector", VECTOR_COLOR), ("text", TEXT_COLOR)):
        part = df[df["leg"] == name]
        fig.add_bar(y=part["label"], x=part["contribution"], name=name, orientation="h", marker_color=color,
                    customdata=part["citation"], hovertemplate="%{customdata}<br>" + name + " %{x:.4f}<extra></extra>")
    fig.update_layout(barmode="stack", title=title, height=120 + 32 * max(1, df["citation"].nunique()),
                      margin=dict(l=10, r=10, t=60, b=10), yaxis=dict(autorange="reversed"),
                      legend=dict(orientation="h", y=1.02, yanchor="bottom", x=1, xanchor="right"))
    return fig


def movement_frame(left: Ranking, right: Ranking, relevant: Mapping[int, str] | None = None,
                   names: tuple[str, str] = ("weighted", "rrf")) -> pd.DataFrame:
    """Results of two rankings of the same candidates side by side, with each chunk's move from left to right."""
    lpos = {h.chunk_id: h.position for h in left.hits}
    rpos = {h.chunk_id: h.position for h in right.hits}
    by_id: dict[int, Hit] = {h.chunk_id: h for h in (*left.candidates, *right.candidates)}
    ids = sorted(set(lpos) | set(rpos), key=lambda c: (rpos.get(c) or 10**6, lpos.get(c) or 10**6))
    rows = []
    for cid in ids:
        a, b = lpos.get(cid), rpos.get(cid)
        if a is None:
            move = "new"
        elif b is None:
            move = "dropped"
        elif a == b:
            move = "="
        else:
            move = f"▲{a - b}" if b < a else f"▼{b - a}"
        row = {names[0]: a, names[1]: b, "move": move}
        if relevant is not None:
            row["relevant"] = relevant.get(cid, "")
        row["citation"] = by_id[cid].citation
        rows.append(row)
    columns = [names[0], names[1], "move"] + (["relevant"] if relevant is not None else []) + ["citation"]
    df = pd.DataFrame(rows, columns=columns)
    for col in names:
        df[col] = df[col].astype("Int64")
    return df


def gate_words(ranking: Ranking, threshold: float, alignment: tuple[float, ...] | None) -> str:
    """The answer gate's decision for the inspector's caption: its probability against ``threshold``, the token
    alignment it read, the bar of the question's language where it read one, and whether the question was asked
    across languages (as ``hybridmem search --explain`` says them); empty where no gate decided."""
    if ranking.answer_probability is None:
        return ""
    read = [f"token alignment of the top passages {alignment[0]:.2f}"] if alignment is not None else []
    if ranking.language_bar:
        read.append(f"read as {ranking.language_bar[0]}, against its bar {ranking.language_bar[1]:g}")
    words = (f" · answer gate: P(memory holds an answer) {ranking.answer_probability:.2f} "
             f"{'<' if ranking.abstained else '≥'} {threshold:g}" + (f" ({'; '.join(read)})" if read else ""))
    if ranking.routed_across:
        words += (f" · asked across languages of {ACROSS_WORDS[ranking.routed_across]}: the cross-lingual gate may "
                  "answer too")
    return words


def nothing_returned(name: str, ranking: Ranking, cfg: RankConfig) -> str | None:
    """Why ``ranking`` (of config ``name``) returned no hit, in one sentence, or None when it returned some."""
    if ranking.hits:
        return None
    if ranking.abstained and ranking.answer_probability is not None:
        return (f"{name} returned nothing for this query: the answer gate put the chance that memory holds an answer "
                f"at {ranking.answer_probability:.2f}, under its threshold of {cfg.answer_threshold:g} (an answer "
                "threshold of 0 in the sidebar lists the nearest notes anyway).")
    if not ranking.candidates:
        return f"{name} returned nothing for this query: neither leg found a candidate."
    reasons = {h.cut_reason for h in ranking.candidates}
    if reasons == {"min_score"}:
        return f"{name} returned nothing for this query: every candidate scored under the min score {cfg.min_score:g}."
    return f"{name} returned nothing for this query: every candidate was cut ({', '.join(sorted(map(str, reasons)))})."


def style_moves(df: pd.DataFrame):  # noqa: ANN201
    """Colour the move column: green up, red down or dropped, blue new; a position a ranking lacks shows as "—"."""
    def color(v: object) -> str:
        s = str(v)
        if s.startswith("▲") or s == "new":
            return "color: #1a7f37; font-weight: 600"
        if s.startswith("▼") or s == "dropped":
            return "color: #cf222e; font-weight: 600"
        return ""

    # Streamlit draws a missing value as "None" whatever the Styler's na_rep: positions go to the page as text
    shown = df.copy()
    for col in (c for c in df.columns if c not in ("move", "relevant", "citation")):
        shown[col] = [("—" if pd.isna(v) else str(v)) for v in df[col]]
    return shown.style.map(color, subset=["move"])
