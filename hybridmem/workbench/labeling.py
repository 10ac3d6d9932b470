"""Labeling widgets of the search inspector: judge pooled candidates and results, narrow the evidence lines, undo, edit
and delete. UI only: storage and pools are :mod:`hybridmem.eval.labels`; every click writes the workspace's labels at
once (``<workspace>/.hybridmem-labels/``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import streamlit as st

from hybridmem.config import RankConfig
from hybridmem.errors import HybridMemError
from hybridmem.eval.labels import (
    POOL_DEPTH, Judgment, LabelStore, judgment_for, parse_lines, pool, pool_configs, unjudged,
)
from hybridmem.index import MemoryIndex
from hybridmem.records import Hit
from hybridmem.workbench import state, views
from hybridmem.wording import counted

GRADE_BADGE = {0: ":red-badge[not relevant]", 1: ":green-badge[relevant]", 2: ":green-badge[highly relevant]"}


def _lines_key(query: str, citation: str) -> str:
    return "lab_lines_" + hashlib.sha1(f"{query}\0{citation}".encode()).hexdigest()[:10]


def _judge(workspace: str, query: str, path: str, default: tuple[int, int], lines_key: str | None, grade: int) -> None:
    if not state.may_write(workspace):
        return
    try:
        a, b = parse_lines(st.session_state.get(lines_key, "") if lines_key else "", default)
        LabelStore(workspace).judge(query, path, a, b, grade)
    except HybridMemError as exc:
        st.session_state["lab_error"] = str(exc)
        return
    state.labels_changed()


def _unjudge(workspace: str, j: Judgment) -> None:
    if not state.may_write(workspace):
        return
    LabelStore(workspace).unjudge(j.query_id, j.path, j.start_line, j.end_line)
    state.labels_changed()


def _undo(workspace: str) -> None:
    if not state.may_write(workspace):
        return
    LabelStore(workspace).undo()
    state.labels_changed()


def _delete_query(workspace: str, query_id: str) -> None:
    if not state.may_write(workspace):
        return
    LabelStore(workspace).delete_query(query_id)
    state.labels_changed()


def _edit_query(workspace: str, query_id: str, key: str) -> None:
    if not state.may_write(workspace):
        return
    text = st.session_state.get(key, "").strip()
    if text:
        LabelStore(workspace).edit_query(query_id, text)
        state.labels_changed()


def hit_buttons(workspace: str, query: str, h: Hit, judgments: list[Judgment]) -> None:
    """Relevant / not relevant buttons under one result (the hit's lines as evidence), each as wide as its label (a
    narrow card wraps them to the next line, never cuts a label short)."""
    j = judgment_for(h.path, h.start_line, h.end_line, judgments)
    row = st.container(horizontal=True, vertical_alignment="center")
    row.button("Relevant", key=f"lab_hit_rel_{h.citation}", icon=":material/check:",
               on_click=_judge, args=(workspace, query, h.path, (h.start_line, h.end_line), None, 1))
    row.button("Not relevant", key=f"lab_hit_not_{h.citation}", icon=":material/close:",
               on_click=_judge, args=(workspace, query, h.path, (h.start_line, h.end_line), None, 0))
    if j is not None:
        row.markdown(f"{GRADE_BADGE.get(j.grade, GRADE_BADGE[1])} `{j.path}#L{j.start_line}-L{j.end_line}`",
                     width="content")


def render_pool(idx: MemoryIndex, query: str, cfg: RankConfig, now: float | None) -> None:
    """The query's pooled candidates, each with its evidence lines and two buttons; the judged list; undo."""
    workspace = str(idx.workspace)
    store = LabelStore(workspace)
    if st.session_state.get("lab_error"):
        st.error(st.session_state.pop("lab_error"), icon=":material/error:")
    configs = pool_configs(cfg)
    cands = state.retrieve(idx, query, state.pool_for(*configs.values()),
                           any(c.needs_vectors for c in configs.values()))
    items = pool(idx, cands, configs, now=now)
    tokens = cands.query_tokens
    labeled = store.find(query)
    judgments = store.judgments(labeled.id) if labeled else []
    left = unjudged(items, judgments)
    counts = store.counts()
    st.markdown(f"Judging for the query **{views.literal(query.strip())}** "
                + (f"(`{labeled.id}`)" if labeled else "(a new labeled query from the first judgment)"))
    c1, c2 = st.columns([5, 1])
    c1.caption(f"Pool: {counted(len(items), 'chunk')} from the top {POOL_DEPTH} of {', '.join(configs)} · "
               f"**{left} still unjudged** · this workspace: {counted(counts['labeled'], 'labeled query')}, "
               f"{counted(counts['judgments'], 'judgment')} in `{Path(store.dir).name}/`")
    undo = store.can_undo()
    c2.button("Undo", key="lab_undo", icon=":material/undo:", disabled=not undo, on_click=_undo, args=(workspace,),
              help=("Put this workspace's labels back as they were before their last change, whichever query it "
                    "was for and wherever it was made: here, in Agent queries, by `hybridmem labels`, in an earlier "
                    "session." if undo else "Nothing to undo: these labels have not changed."))
    for it in items:
        j = judgment_for(it.path, it.start_line, it.end_line, judgments)
        lines_key = _lines_key(query, it.citation)
        with st.container(border=True):
            a, b, c, d = st.columns([5, 1.6, 1.3, 1.6], vertical_alignment="center")
            runs = ", ".join(f"{n} #{r}" for n, r in sorted(it.runs.items(), key=lambda x: x[1]))
            badge = GRADE_BADGE.get(j.grade, GRADE_BADGE[1]) if j else ":gray-badge[unjudged]"
            a.markdown(f"`{it.citation}` {badge}  \n<small>{runs}</small>", unsafe_allow_html=True)
            short = it.text[:240] + ("…" if len(it.text) > 240 else "")
            a.markdown(f"<div style='font-size:0.85em;opacity:0.8'>{views.highlight(short, tokens)}</div>",
                       unsafe_allow_html=True)
            b.text_input("Evidence lines", value=f"{it.start_line}-{it.end_line}", key=lines_key,
                         help="The hit's lines by default; narrow them to the lines that answer the query.")
            c.button("Relevant", key=f"lab_rel_{it.citation}", icon=":material/check:", on_click=_judge,
                     args=(workspace, query, it.path, (it.start_line, it.end_line), lines_key, 1))
            d.button("Not relevant", key=f"lab_not_{it.citation}", icon=":material/close:", on_click=_judge,
                     args=(workspace, query, it.path, (it.start_line, it.end_line), lines_key, 0))
    render_judged(workspace, labeled.id if labeled else None, labeled.text if labeled else query, judgments)


def render_judged(workspace: str, query_id: str | None, text: str, judgments: list[Judgment]) -> None:
    """The query's judgments with a delete button each, and the query's edit and delete."""
    st.markdown(f"**Judged for this query** ({len(judgments)})")
    if not judgments:
        st.caption("Nothing judged yet: mark a pooled candidate or a result above.")
    for n, j in enumerate(judgments):
        a, b = st.columns([6, 1], vertical_alignment="center")
        span = "whole file" if j.whole_file else f"L{j.start_line}-L{j.end_line}"
        a.markdown(f"{GRADE_BADGE.get(j.grade, GRADE_BADGE[1])} `{j.path}` {span}")
        b.button("Delete", key=f"lab_del_{n}", icon=":material/delete:", on_click=_unjudge, args=(workspace, j))
    if query_id:
        with st.expander(f"Edit or delete query {query_id}"):
            st.text_input("Query text", value=text, key=f"lab_edit_{query_id}")
            c1, c2 = st.columns(2)
            c1.button("Save text", key="lab_edit_save", on_click=_edit_query,
                      args=(workspace, query_id, f"lab_edit_{query_id}"))
            c2.button("Delete query and its judgments", key="lab_query_delete", on_click=_delete_query,
                      args=(workspace, query_id))


def judgments_for(workspace: str, query: str) -> list[Judgment]:
    store = LabelStore(workspace)
    q = store.find(query)
    return store.judgments(q.id) if q else []
