"""Fusion compare: the sidebar's fusion against the others (joint model, weighted sum, RRF, keyword-only,
vector-only) on a labeled dataset.

Mean metrics with paired significance, a per-query scatter of one method against another, and one query's two
rankings with its relevant units marked. All configs rank the same retrieved candidates.
"""

from __future__ import annotations

import plotly.express as px
import streamlit as st

from hybridmem.workbench import labeled, state, views
from hybridmem.wording import counted


def render() -> None:
    st.title("Fusion compare")
    name, dataset = labeled.require_dataset()
    cfg = state.rank_config()
    configs = labeled.compare_configs(cfg)

    c1, c2, c3 = st.columns([1, 1, 2])
    split = c1.selectbox("Queries", [s for s in labeled.SPLITS if s == "all" or s in dataset.splits],
                         key="fusion_split")
    k = c2.select_slider("Cutoff k", [1, 3, 5, 10, 20, 50, 100], value=10, key="fusion_k")
    metrics = labeled.metric_names(dataset, k, cfg.max_injected_chars)
    c3.caption(f"{dataset.name}: {counted(len(dataset.queries), 'query')} ({dataset.kind} units). The "
               "sidebar's settings, with the fusion switched; keyword-only and vector-only take those presets' "
               "weights and min score.")

    labeled.evaluator(name)
    with st.spinner("Ranking every query under each method and scoring with ranx…"):
        result, comparison = labeled.evaluate(name, labeled.configs_key(configs), metrics, split, configs,
                                              baseline=cfg.fusion)
    means = labeled.means_frame(result)
    per_query = labeled.per_query_frame(result, dataset)
    info = {"depth": result.shallowest}  # the ranking the top-k metrics scored

    st.subheader("Mean scores")
    st.dataframe(means.style.format({m: "{:.3f}" for m in metrics}).highlight_max(subset=list(metrics),
                                                                                 color="#d3f0d8"),
                 hide_index=True, key="fusion_means")
    st.markdown(f"**Against the sidebar's fusion, {cfg.fusion}** (paired t-test over "
                f"{counted(len(result.query_ids), 'query')}, "
                f"significant at p ≤ {comparison.max_p})")
    sig = labeled.significance_frame(comparison)
    st.dataframe(sig.style.format({"mean": "{:.3f}", "baseline_mean": "{:.3f}", "delta": "{:+.3f}",
                                   "p_value": "{:.3g}"}), hide_index=True, key="fusion_sig")

    st.subheader("Per query")
    c1, c2, c3 = st.columns(3)
    x = c1.selectbox("x axis", list(configs), index=0, key="fusion_x")
    y = c2.selectbox("y axis", list(configs), index=1, key="fusion_y")
    metric = c3.selectbox("Metric", metrics, index=1, key="fusion_metric")
    wide = per_query.pivot_table(index=["query", "text", "category"], columns="config", values=metric).reset_index()
    fig = px.scatter(wide, x=x, y=y, color="category" if wide["category"].nunique() > 1 else None,
                     hover_data=["query", "text"], height=460, title=f"{metric}: {y} against {x} (one dot a query)")
    fig.add_shape(type="line", x0=0, y0=0, x1=1, y1=1, line=dict(dash="dot", color="grey"))
    fig.update_layout(margin=dict(l=10, r=10, t=50, b=10))
    st.plotly_chart(fig, key="fusion_scatter")
    better = int((wide[y] > wide[x]).sum())
    worse = int((wide[y] < wide[x]).sum())
    st.caption(f"{y} beats {x} on {counted(better, 'query')}, loses on {worse}, "
               f"ties on {len(wide) - better - worse}.")

    st.subheader("One query")
    wide["diff"] = wide[y] - wide[x]
    ordered = wide.reindex(wide["diff"].abs().sort_values(ascending=False).index)
    labels = {f"{r.query} · {r.text} ({x} {r[x]:.2f}, {y} {r[y]:.2f})": r.query for _, r in ordered.iterrows()}
    pick = st.selectbox("Query (largest differences first)", list(labels), key="fusion_query")
    qid = labels[pick]
    ranked = labeled.rankings(name, qid, {x: configs[x], y: configs[y]}, info["depth"])
    left, right = ranked[x], ranked[y]
    relevant = state.relevant_units(dataset, qid, [*left.candidates, *right.candidates])
    judged = dataset.qrels.get(qid, {})
    st.caption(f"Relevant units ({len(judged)}): " + ", ".join(f"`{u}`" for u in sorted(judged)))
    show = min(info["depth"], 10)
    trimmed = {n: r.__class__(hits=r.hits[:show], candidates=r.candidates, rescued=r.rescued)
               for n, r in ((x, left), (y, right))}
    moves = views.movement_frame(trimmed[x], trimmed[y], relevant, names=(x, y)) if x != y else None
    if moves is None:
        st.info("Pick two different methods.")
    else:
        st.dataframe(views.style_moves(moves), hide_index=True, key="fusion_moves")
        for n, r in ((x, left), (y, right)):
            note = views.nothing_returned(n, r, configs[n])
            if note:
                st.caption(note)


if __name__ == "__main__":
    render()
