"""UI pieces several pages share: opening an index with progress, tables of ranked candidates, rank movements, the
per-leg contribution chart and highlighted snippets.

Scores all come from :func:`hybridmem.ranking.rank`; the contribution chart calls the fusion functions of
:mod:`hybridmem.ranking.fusion` one leg at a time, so it can never disagree with ranking.
"""

from __future__ import annotations

import html
from typing import Iterable, Mapping

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from hybridmem.config import PRESETS, RankConfig
from hybridmem.errors import HybridMemError
from hybridmem.index import MemoryIndex
from hybridmem.records import Hit, Ranking
from hybridmem.ranking import ScoredLeg, get_fusion, match_spans
from hybridmem.workbench import state

VECTOR_COLOR = "#4C78A8"
TEXT_COLOR = "#F58518"


def fail(message: str) -> None:
    """Show ``message`` as an error in the page and stop the page here."""
    st.error(message, icon=":material/error:")
    st.stop()


def open_workspace(source: state.Source) -> MemoryIndex:
    """The cached index of ``source``'s workspace, synced (with progress) when it is empty; errors stop the page."""
    problem = state.check_workspace(source.workspace)
    if problem:
        fail(problem)
    try:
        idx = state.get_index(source.workspace)
        if idx.store.counts()["files"] == 0:
            sync(idx, "Indexing the workspace for the first time")
    except HybridMemError as exc:
        fail(state.error_text(exc))
    if idx.store.counts()["files"] == 0:
        fail(f"No Markdown memory files in {source.workspace}: expected MEMORY.md, memory.md or memory/**/*.md "
             "(or sessions/*.jsonl). Add notes there, or choose another folder in the sidebar.")
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
    """``cfg`` under the other built-in fusion, with that fusion's preset min score (RRF scores are ~0.03)."""
    method = "rrf" if cfg.fusion == "weighted" else "weighted"
    return as_fusion(cfg, method)


def as_fusion(cfg: RankConfig, method: str) -> RankConfig:
    """``cfg`` with ``fusion=method``; switching fusion also takes the min score of the method's preset."""
    if cfg.fusion == method:
        return cfg
    return cfg.replace(fusion=method, min_score=PRESETS[method].min_score)


def highlight(text: str, query_tokens: Iterable[str]) -> str:
    """HTML of ``text`` (escaped) with query-token matches in ``<mark>``."""
    spans = match_spans(text, tuple(query_tokens))
    out, last = [], 0
    for a, b, _ in spans:
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


def contributions(ranking: Ranking, cfg: RankConfig, vector_searched: bool = True,
                  keyword_searched: bool = True) -> pd.DataFrame:
    """Each kept hit's fused score split into its vector and text parts.

    Each part is the configured fusion applied to that leg alone, with the other leg present but empty, which for
    the weighted sum and RRF is exactly that leg's term of the fused score. Other fusions are not additive: empty.
    """
    if cfg.fusion not in ("weighted", "rrf"):
        return pd.DataFrame(columns=["citation", "leg", "contribution"])
    fuse = get_fusion(cfg.fusion)
    hits = ranking.candidates
    weights = {"vector": cfg.vector_weight if vector_searched else 0.0,
               "text": cfg.text_weight if keyword_searched else 0.0}
    present = {"vector": any(h.vector_rank is not None for h in hits),
               "text": any(h.text_rank is not None for h in hits)}
    active = [leg for leg in ("vector", "text") if weights[leg] > 0 and present[leg]]

    def leg(name: str, filled: bool) -> ScoredLeg:
        members = [h for h in hits if getattr(h, f"{name}_rank") is not None] if filled else []
        return ScoredLeg(name, weights[name], tuple(h.chunk_id for h in members),
                         tuple(getattr(h, f"{name}_score") for h in members),
                         tuple(getattr(h, f"{name}_rank") for h in members))

    parts = {name: fuse([leg(o, o == name) for o in active], cfg.rrf_k) for name in active}
    rows = []
    for h in ranking.hits:
        for name in ("vector", "text"):
            part = parts.get(name, {}).get(h.chunk_id, 0.0) * h.decay_factor
            rows.append({"citation": f"{h.position}. {h.citation}", "label": f"{h.position}. {_short(h.citation)}",
                         "leg": name, "contribution": part})
    return pd.DataFrame(rows)


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


def style_moves(df: pd.DataFrame):  # noqa: ANN201
    """Colour the move column: green up, red down or dropped, blue new."""
    def color(v: object) -> str:
        s = str(v)
        if s.startswith("▲") or s == "new":
            return "color: #1a7f37; font-weight: 600"
        if s.startswith("▼") or s == "dropped":
            return "color: #cf222e; font-weight: 600"
        return ""

    return df.style.map(color, subset=["move"])
