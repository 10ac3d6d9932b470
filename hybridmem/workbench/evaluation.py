"""Evaluation: metrics of saved configs on the chosen dataset, significance against a baseline, a filterable
per-query table, per-category scores, and the report as Markdown, JSON or CSV.

Saved configs are the presets of :mod:`hybridmem.config`, the sidebar's current config, and any config saved here
during the session.
"""

from __future__ import annotations

import json

import plotly.express as px
import streamlit as st

from hybridmem.config import DEFAULT_EVAL_CONFIGS, PRESETS, RankConfig
from hybridmem.errors import HybridMemError
from hybridmem.workbench import labeled, state

SAVED_KEY = "saved_configs"
SIDEBAR = "sidebar"


def _saved() -> dict[str, RankConfig]:
    return st.session_state.setdefault(SAVED_KEY, {})


def _save_current() -> None:
    name = st.session_state.get("eval_save_name", "").strip()
    if name:
        _saved()[name] = state.rank_config()
        st.session_state["eval_configs"] = [*st.session_state.get("eval_configs", []), name]
        st.session_state["eval_save_name"] = ""


def _all_by_default(container, label: str, options: list[str], key: str) -> list[str]:  # noqa: ANN001
    """A multiselect over ``options`` with every one chosen, and chosen again whenever the options change (another
    dataset in the sidebar, other configs above): a choice made among other options would filter every row out."""
    seen = f"_{key}_options"
    if st.session_state.get(seen) != options or key not in st.session_state:
        st.session_state[seen] = options
        st.session_state[key] = list(options)
    return container.multiselect(label, options, key=key)


def render() -> None:
    st.title("Evaluation")
    name, dataset = labeled.require_dataset()
    from hybridmem.eval import DEFAULT_METRICS, EVIDENCE_METRICS

    available = {**PRESETS, SIDEBAR: state.rank_config(),
                 **_saved()}
    st.session_state.setdefault("eval_configs", [*DEFAULT_EVAL_CONFIGS, SIDEBAR])
    st.session_state["eval_configs"] = [c for c in st.session_state["eval_configs"] if c in available]
    metric_options = list(DEFAULT_METRICS) + (list(EVIDENCE_METRICS) if dataset.kind == "evidence" else [])
    c1, c2 = st.columns([3, 1])
    chosen = c1.multiselect("Configs", list(available), key="eval_configs",
                            help="Presets from hybridmem.config, the sidebar's config, and configs saved below.")
    split = c2.selectbox("Queries", [s for s in labeled.SPLITS if s == "all" or s in dataset.splits],
                         key="eval_split")
    c1, c2 = st.columns([3, 1])
    metrics = c1.multiselect("Metrics", metric_options, default=["ndcg@10", "recall@10", "mrr@100"]
                             + (["budget_recall@4000"] if dataset.kind == "evidence" else []), key="eval_metrics")
    baselines = chosen or ["(none)"]
    baseline = c2.selectbox("Baseline", baselines, index=baselines.index("weighted") if "weighted" in baselines else 0,
                            key="eval_baseline")
    with st.expander("Save the sidebar's config"):
        st.text_input("Name", key="eval_save_name", placeholder="e.g. rrf-k30-mmr")
        st.button("Save", on_click=_save_current, key="eval_save")
    if not chosen or not metrics:
        st.info("Pick at least one config and one metric.")
        return

    configs = {c: available[c] for c in chosen}
    labeled.evaluator(name)
    try:
        with st.spinner(f"Scoring {len(configs)} configs on {dataset.name}…"):
            result, comparison = labeled.evaluate(name, labeled.configs_key(configs), tuple(metrics), split, configs,
                                                  baseline=baseline)
    except HybridMemError as exc:
        st.error(state.error_text(exc))
        return

    st.caption(f"{dataset.name}, {split} queries: {len(result.query_ids)}; ranked to {result.depth_words()}; "
               f"retrieval {result.timings.get('retrieve', 0):.1f}s (once), ranking and scoring "
               f"{result.timings.get('rank_and_score', 0):.2f}s.")
    means = labeled.means_frame(result)
    st.dataframe(means.style.format({m: "{:.4f}" for m in metrics}).highlight_max(subset=list(metrics),
                                                                                 color="#d3f0d8"),
                 hide_index=True, key="eval_means")
    if len(configs) > 1:
        st.markdown(f"**Against `{comparison.baseline}`** (paired t-test, p ≤ {comparison.max_p})")
        sig = labeled.significance_frame(comparison)
        st.dataframe(sig.style.format({"mean": "{:.4f}", "baseline_mean": "{:.4f}", "delta": "{:+.4f}",
                                       "p_value": "{:.3g}"}), hide_index=True, key="eval_sig")

    tab_q, tab_cat, tab_abstain, tab_export = st.tabs(["Per query", "Per category", "Abstention", "Export"])
    with tab_abstain:  # tabs render eagerly: the no-answer sets are indexed and asked only when asked for
        if st.toggle("Show abstention: each config's table and the curve over the answer gate's threshold (asks "
                     "every no-answer set of this dataset; the first time takes minutes)", key="eval_abstain_on"):
            _abstention(name, chosen, available, split)
    per_query = labeled.per_query_frame(result, dataset)
    with tab_q:
        c1, c2, c3 = st.columns(3)
        show_cfg = _all_by_default(c1, "Configs", list(chosen), "eval_q_configs")
        show_cat = _all_by_default(c2, "Categories", sorted(per_query["category"].unique()), "eval_q_cats")
        text = c3.text_input("Query text contains", key="eval_q_text")
        c1, c2 = st.columns(2)
        metric = c1.selectbox("Filter metric", metrics, key="eval_q_metric")
        top = c2.slider(f"Show queries with {metric} at most", 0.0, 1.0, 1.0, 0.05, key="eval_q_max")
        view = per_query[per_query["config"].isin(show_cfg) & per_query["category"].isin(show_cat)
                         & (per_query[metric] <= top + 1e-12)]
        if text:
            view = view[view["text"].str.contains(text, case=False, regex=False)]
        st.dataframe(view, hide_index=True, key="eval_per_query",
                     column_config={m: st.column_config.ProgressColumn(m, min_value=0.0, max_value=1.0, format="%.3f")
                                    for m in metrics})
        st.caption(f"{len(view)} rows of {len(per_query)}.")
    with tab_cat:
        by_cat = result.by_category()
        if len(by_cat) <= 1:
            st.info("This dataset's queries have a single category.")
        else:
            metric_c = st.selectbox("Metric", metrics, key="eval_cat_metric")
            rows = [{"category": cat or "(none)", "config": cfg, metric_c: vals[metric_c]}
                    for cat, per in by_cat.items() for cfg, vals in per.items()]
            import pandas as pd

            frame = pd.DataFrame(rows)
            counts = per_query[per_query["config"] == chosen[0]].groupby("category").size()
            fig = px.bar(frame, x="category", y=metric_c, color="config", barmode="group", height=420)
            fig.update_layout(margin=dict(l=10, r=10, t=30, b=10))
            st.plotly_chart(fig, key="eval_cat_chart")
            table = frame.pivot_table(index="category", columns="config", values=metric_c)
            table.insert(0, "queries", [int(counts.get(c if c != "(none)" else "", 0)) for c in table.index])
            st.dataframe(table.style.format({c: "{:.4f}" for c in table.columns if c != "queries"}),
                         key="eval_cat_table")
    with tab_export:
        from hybridmem.eval.report import markdown, result_json

        by_category = len(result.by_category()) > 1
        md = markdown(result, comparison, dataset, by_category=by_category)
        js = json.dumps(result_json(result, comparison, dataset, by_category=by_category), indent=2,
                        ensure_ascii=False)
        stem = f"hybridmem-{dataset.name}-{split}"
        c1, c2, c3 = st.columns(3)
        c1.download_button("Markdown report", md, f"{stem}.md", "text/markdown", key="eval_dl_md")
        c2.download_button("JSON report", js, f"{stem}.json", "application/json", key="eval_dl_json")
        c3.download_button("Per-query CSV", per_query.to_csv(index=False), f"{stem}.csv", "text/csv",
                           key="eval_dl_csv")
        with st.expander("Preview the Markdown report"):
            st.markdown(md)


@st.cache_data(show_spinner=False, max_entries=16)
def _table(name: str, key: str, split: str, _configs: dict[str, RankConfig]) -> dict[str, dict[str, float]]:
    from hybridmem.eval.abstention import abstention_table

    return abstention_table(state.get_evaluator(name), _configs, split=None if split == "all" else split)


@st.cache_data(show_spinner=False, max_entries=16)
def _curve(name: str, key: str, split: str, _config: RankConfig) -> list[dict[str, float]]:
    from hybridmem.eval.abstention import abstention_curve

    return abstention_curve(state.get_evaluator(name), _config, split=None if split == "all" else split)


def _abstention(name: str, chosen: list[str], available: dict[str, RankConfig], split: str) -> None:
    """Every chosen config's abstention on the no-answer sets beside the answerable queries' nDCG@10, recall@5 and
    false abstention (a query that returns nothing scores 0), then the curve over one config's answer gate threshold
    (or its min score, for a config without a gate); computed by hybridmem.eval.abstention."""
    import pandas as pd

    configs = {n: available[n] for n in chosen}
    with st.spinner("Asking every no-answer set…"):
        table = _table(name, labeled.configs_key(configs), split, configs)
    frame = pd.DataFrame.from_dict(table, orient="index")
    frame.index.name = "config"
    st.dataframe(frame.style.format("{:.4f}"), key="eval_abstain_table")
    cfg_name = st.selectbox("Config", chosen, key="eval_abstain_config")
    config = available[cfg_name]
    knob = "answer_threshold" if config.answer_threshold > 0 else "min_score"
    with st.spinner(f"Ranking every query at each {knob}…"):
        rows = _curve(name, labeled.configs_key({cfg_name: config}), split, config)
    frame = pd.DataFrame(rows).melt(id_vars=knob, var_name="metric", value_name="value")
    fig = px.line(frame, x=knob, y="value", color="metric", markers=True, height=420)
    now = getattr(config, knob)
    fig.add_vline(x=now, line_dash="dot", annotation_text=f"{cfg_name}: {now:g}")
    fig.update_layout(margin=dict(l=10, r=10, t=30, b=10), yaxis_range=[0, 1])
    st.plotly_chart(fig, key="eval_abstain_chart")
    st.caption("abstain:<set> is the share of no-answer queries that return nothing (higher is better); "
               "false_abstention the share of answerable ones that do (lower is better).")


if __name__ == "__main__":
    render()
