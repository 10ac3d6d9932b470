"""Agent queries: what agents asked over MCP (the query log), newest first, labeled or not.

Beside each query, the results the agent went on to read with ``memory_get`` are offered as suggested relevant; they
are judgments only once a person accepts them. "Label in the inspector" opens the query in the search inspector.
UI only: the log is read by :func:`hybridmem.eval.labelsources.logged_queries`.
"""

from __future__ import annotations

import streamlit as st

from hybridmem.eval.labels import LabelStore, judgment_for
from hybridmem.eval.labelsources import Suggestion, logged_queries
from hybridmem.querylog import log_path
from hybridmem.workbench import state, views
from hybridmem.wording import counted

SHOWN = 100


def _accept(workspace: str, query: str, s: Suggestion) -> None:
    if not state.may_write(workspace):
        return
    LabelStore(workspace).judge(query, s.path, s.start_line, s.end_line, grade=1, source="log")
    state.labels_changed()


def _open_in_inspector(workspace: str, query: str) -> None:
    st.session_state["inspector_labeled"] = "(type your own)"
    st.session_state["_inspector_default"] = ""
    st.session_state["inspector_query"] = query
    st.session_state["open_inspector"] = workspace


def render() -> None:
    st.title("Agent queries")
    source = state.current_source()
    if source.kind not in ("folder", "demo") or not source.workspace:
        views.fail("Choose a memory workspace in the sidebar: the query log lives in the workspace.")
    problem = state.check_workspace(source.workspace)
    if problem:
        views.fail(problem)
    workspace = source.workspace
    target = st.session_state.pop("open_inspector", None)
    if target:
        # the inspector checks that it searches this workspace (the sidebar keeps its choice across the switch)
        st.session_state[state.INSPECTOR_FOR_KEY] = target
        st.switch_page("hybridmem/workbench/search.py")
    views.write_refused()
    logged = logged_queries(workspace)
    store = LabelStore(workspace)
    if not logged:
        st.info(f"No logged queries in {log_path(workspace)}. Serve this workspace to an agent with "
                "`hybridmem mcp` (the query log is on by default); its searches and reads appear here.",
                icon=":material/info:")
        return
    labeled = {q.text.strip(): q for q in store.queries()}
    n_labeled = sum(q.query.strip() in labeled for q in logged)
    show = st.radio("Show", ["all", "not labeled", "labeled"], horizontal=True, key="qlog_filter")
    st.caption(f"{len(logged)} logged searches, {n_labeled} of them labeled · newest first · suggestions are what the "
               "agent read next with memory_get: nothing is saved until you accept it")
    judgments = store.judgments()
    shown = 0
    for n, q in enumerate(logged):
        lq = labeled.get(q.query.strip())
        if (show == "labeled" and lq is None) or (show == "not labeled" and lq is not None) or shown >= SHOWN:
            continue
        shown += 1
        js = [j for j in judgments if lq is not None and j.query_id == lq.id]
        with st.container(border=True):
            badge = (f":green-badge[labeled: {sum(j.grade > 0 for j in js)} relevant]" if lq is not None
                     else ":gray-badge[not labeled]")
            st.markdown(f"**{views.literal(q.query)}** {badge}  \n<small>{views.literal(q.time)} · "
                        f"{views.literal(q.client)} · {counted(len(q.results), 'result')}</small>",
                        unsafe_allow_html=True)
            for k, s in enumerate(q.suggestions):
                a, b = st.columns([5, 1], vertical_alignment="center")
                j = judgment_for(s.path, s.start_line, s.end_line, js)
                rank = f"result #{s.rank}" if s.rank else "not among its results"
                state_txt = (":green-badge[accepted]" if j and j.grade > 0 else ":red-badge[judged not relevant]"
                             if j else ":orange-badge[suggested relevant]")
                a.markdown(f"read `{s.citation}` ({rank}) {state_txt}")
                if j is None:
                    b.button("Accept", key=f"qlog_accept_{n}_{k}", icon=":material/check:", on_click=_accept,
                             args=(workspace, q.query, s))
            st.button("Label in the inspector", key=f"qlog_label_{n}", icon=":material/label:",
                      on_click=_open_in_inspector, args=(workspace, q.query))


if __name__ == "__main__":
    render()
