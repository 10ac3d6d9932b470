"""Search inspector: one query, every candidate's scores, and the config beside another fusion; on a memory
workspace, labeling (each result and each pooled candidate marked relevant or not, see :mod:`.labeling`).

Retrieval runs once per query (cached); every ranking shown is a :meth:`hybridmem.MemoryIndex.rank` call on those
candidates, so changing the sidebar re-ranks instantly.
"""

from __future__ import annotations

import streamlit as st

from hybridmem.errors import HybridMemError
from hybridmem.tokenization import cap_query
from hybridmem.tools import ask_again
from hybridmem.workbench import labeling, state, views
from hybridmem.wording import counted

FUSION_NAMES = {"joint": "Joint model", "weighted": "Weighted sum", "rrf": "RRF"}
TYPED = "(type your own)"


def _follow_typed(texts: dict[str, str]) -> None:
    """The Query box changed: the labeled-query selector shows the labeled query of that text, else "type your own"
    (it never names a query other than the one searched, and labeled)."""
    typed = st.session_state.get("inspector_query", "").strip()
    label = next((label for label, text in texts.items() if text.strip() == typed), TYPED)
    st.session_state["inspector_labeled"] = label
    st.session_state["_inspector_default"] = texts.get(label, "")


def _query_picker(dataset) -> tuple[str, str | None]:  # noqa: ANN001
    """The query text and, for a labeled dataset's own query, its id."""
    qid = None
    default = ""
    texts: dict[str, str] = {}
    if dataset is not None:
        options = {f"{q.id} · {q.text}": q for q in dataset.queries}
        texts = {label: q.text for label, q in options.items()}
        known = st.session_state.get("_inspector_options")
        st.session_state["_inspector_options"] = tuple(options)
        if known is not None and known != tuple(options) and st.session_state.get("inspector_labeled") == TYPED:
            _follow_typed(texts)  # labels changed (the typed query was labeled, say): the picker names it if it is
        label = st.selectbox("Labeled query", [TYPED, *options], index=1 if options else 0,
                             key="inspector_labeled", help="Queries of the dataset, with their relevant units marked.")
        if label in options:
            qid, default = options[label].id, options[label].text
    if st.session_state.get("_inspector_default") != default:
        st.session_state["_inspector_default"] = default
        st.session_state["inspector_query"] = default
    query = st.text_input("Query", key="inspector_query", placeholder="e.g. retry backoff for the payment processor",
                          on_change=_follow_typed if texts else None, args=(texts,) if texts else None)
    if dataset is not None and query.strip() != default.strip():
        qid = None
    return query, qid


def render() -> None:
    st.title("Search inspector")
    source = state.current_source()
    cfg = state.rank_config()
    dataset, broken_labels = views.dataset_or_warning(source)
    idx = views.open_source(source, dataset)
    asked = st.session_state.pop(state.INSPECTOR_FOR_KEY, None)
    if asked and not state.same_folder(asked, idx.workspace):
        views.fail(f"Agent queries opened this query on {asked}, but the sidebar shows {source.label} "
                   f"({source.workspace}). Choose that folder in the sidebar to label it.")
    views.write_refused()
    query, qid = _query_picker(dataset)
    if not query.strip():
        st.info("Type a query to see its candidates.")
        return

    query, cut = cap_query(query, idx.settings.tokenizer)  # what every search reads (and the query log keeps)
    if cut:
        st.caption(f"Searched as the CLI and agents search it: {cut}.")
    other = views.other_fusion(cfg)
    try:
        with st.spinner("Loading the embedding model and retrieving…"):
            cands = state.retrieve(idx, query, state.pool_for(cfg, other), cfg.needs_vectors)
        now = dataset.reference_time if dataset is not None and dataset.reference_time else None
        main = idx.rank(cands, cfg, now=now, full_mmr=True)
        left, right = main, idx.rank(cands, other, now=now)
    except HybridMemError as exc:
        views.fail(state.error_text(exc))
    relevant = state.relevant_units(dataset, qid, main.candidates) if qid else None

    n_kw, n_vec = len(cands.keyword), len(cands.vector)
    caption = (f"{len(main.hits)} results from {len(main.candidates)} candidates "
               f"({n_kw} keyword, {n_vec} vector) · {FUSION_NAMES.get(cfg.fusion, cfg.fusion)}")
    if not cands.vector_searched:
        caption += " · keyword only (no embedding provider)"
    if main.rescued:
        caption += " · nothing passed the min score: keyword hits returned (rescue)"
    caption += views.gate_words(main, cfg.answer_threshold, cands.alignment)
    if relevant is not None:
        caption += (f" · {counted(len(dataset.qrels.get(qid, {})), 'judged unit')}, "
                    f"{counted(len(relevant), 'candidate chunk')} {'holds' if len(relevant) == 1 else 'hold'} one")
    st.caption(caption)

    workspace = str(idx.workspace) if idx.workspace is not None and not broken_labels else None  # where to label
    judged = labeling.judgments_for(workspace, query) if workspace else []
    pair = (FUSION_NAMES.get(cfg.fusion, cfg.fusion), FUSION_NAMES.get(other.fusion, other.fusion))
    names = ["Results", "All candidates", f"{pair[0]} vs {pair[1]}"] + (["Label (pooled)"] if workspace else [])
    tab_results, tab_table, tab_compare, *tab_label = st.tabs(names)
    with tab_results:
        col_hits, col_chart = st.columns([3, 2])
        with col_hits:
            if not main.hits and main.abstained:
                st.warning("No results: the answer gate judged that memory holds no answer to this query (see All "
                           "candidates). Lower the answer threshold to see them." + ask_again(idx.ask_in(query, main)))
            elif not main.hits:
                st.warning("No results: every candidate was cut (see All candidates). Try a lower min score.")
            for h in main.hits:
                mark = " :green-badge[relevant]" if relevant and h.chunk_id in relevant else ""
                with st.container(border=True):
                    st.markdown(f"**{h.position}. `{h.citation}`** · score {h.final_score:.3f}{mark}")
                    st.markdown(f"<div style='font-size:0.9em'>{views.highlight(h.snippet, cands.query_tokens)}</div>",
                                unsafe_allow_html=True)
                    if workspace:
                        labeling.hit_buttons(workspace, query, h, judged)
        with col_chart:
            parts = views.contributions(main)
            if parts.empty:
                st.info("Per-leg contributions exist for the weighted sum and RRF only (the joint model is one "
                        "logistic over both legs' features: see All candidates).")
            else:
                st.plotly_chart(views.contribution_chart(parts, "Vector and text contributions"),
                                key="inspector_chart")
    with tab_table:
        st.dataframe(views.candidates_frame(main, relevant), hide_index=True,
                     key="inspector_candidates")
        st.caption("Cut candidates say why: no_answer (the answer gate said memory holds no answer), min_score "
                   "(below the threshold after decay), max_results, char_budget (the injected-characters cap).")
    with tab_compare:
        c1, c2 = st.columns(2)
        for col, r, c in ((c1, left, cfg), (c2, right, other)):
            name = c.fusion
            with col:
                st.subheader(FUSION_NAMES.get(name, name))
                st.caption(f"min score {c.min_score:g}" + (f" · k = {c.rrf_k}" if name == "rrf" else
                                                           f" · weights {c.vector_weight:g}/{c.text_weight:g}"))
                for h in r.hits:
                    mark = " :green-badge[relevant]" if relevant and h.chunk_id in relevant else ""
                    st.markdown(f"{h.position}. `{h.citation}` · {h.final_score:.4f}{mark}")
        st.markdown(f"**Rank movements** ({pair[0]} → {pair[1]})")
        moves = views.movement_frame(left, right, relevant, names=(cfg.fusion, other.fusion))
        st.dataframe(views.style_moves(moves), hide_index=True, key="inspector_moves")
    if tab_label:
        with tab_label[0]:
            try:
                labeling.render_pool(idx, query, cfg, now)
            except HybridMemError as exc:
                views.fail(state.error_text(exc))


if __name__ == "__main__":
    render()
