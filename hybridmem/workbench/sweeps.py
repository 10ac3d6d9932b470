"""Sweeps: one or two ranking parameters over a range, the chosen metric as a line or heatmap, the best point marked,
and a button that applies it to the sidebar.

Every point is scored by :func:`hybridmem.eval.sweeps.sweep` over candidates the cached evaluator retrieved once, so a
new range costs ranking and scoring only.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from hybridmem.config import RankConfig
from hybridmem.errors import HybridMemError
from hybridmem.workbench import labeled, sidebar, state
from hybridmem.wording import counted

# name -> (label, slider bounds, integer?)
PARAMS: dict[str, tuple[str, tuple[float, float], bool]] = {
    "mmr_lambda": ("MMR lambda", (0.0, 1.0), False),
    "half_life_days": ("Decay half-life (days)", (1.0, 365.0), False),
    "candidate_multiplier": ("Candidate multiplier", (1, 20), True),
    "vector_weight": ("Vector weight (text = 1 - vector)", (0.0, 1.0), False),
    "rrf_k": ("RRF k", (0, 200), True),
    "min_score": ("Min score", (0.0, 1.0), False),
}
BATCH = 5  # points scored per progress step


def changes_for(param: str, value: float) -> dict[str, Any]:
    """The sidebar fields one parameter value sets (:func:`hybridmem.eval.sweeps.param_changes`: MMR on for its
    lambda, decay on for a half-life, text weight ``1 - w`` for a vector weight)."""
    from hybridmem.eval.sweeps import param_changes

    return param_changes(param, int(round(value)) if PARAMS[param][2] else round(float(value), 4))


def sweep_base(base: RankConfig, params: list[str]) -> tuple[RankConfig, dict[str, Any]]:
    """The config a sweep starts from, and the sidebar changes that come with it: sweeping RRF k switches the sidebar
    config to RRF (with that preset's min score), since k means nothing to the weighted sum."""
    if "rrf_k" in params and base.fusion != "rrf":
        rrf = base.with_fusion("rrf")
        return rrf, {"fusion": rrf.fusion, "min_score": rrf.min_score}
    return base, {}


def grid(param: str, lo: float, hi: float, n: int) -> list[float]:
    """``n`` evenly spaced values from ``lo`` to ``hi`` (integers deduplicated)."""
    values = np.linspace(lo, hi, n)
    if PARAMS[param][2]:
        return sorted({int(round(v)) for v in values})
    return [round(float(v), 4) for v in values]


def _axis(prefix: str, default: str, allow_none: bool = False) -> tuple[str | None, list[float]]:
    options = (["(none)"] if allow_none else []) + list(PARAMS)
    param = st.selectbox("Parameter", options, index=options.index(default), key=f"{prefix}_param",
                         format_func=lambda p: PARAMS[p][0] if p in PARAMS else p)
    if param not in PARAMS:
        return None, []
    _, (lo, hi), is_int = PARAMS[param]
    rng = st.slider("Range", lo, hi, (lo, hi), key=f"{prefix}_range_{param}", step=1 if is_int else None)
    n = st.slider("Points", 2, 25, 11 if not allow_none else 5, key=f"{prefix}_n")
    return param, grid(param, rng[0], rng[1], n)


def _run(name: str, base: RankConfig, axes: list[tuple[str, list[float]]], metrics: tuple[str, ...],
         split: str) -> pd.DataFrame:
    """:func:`hybridmem.eval.sweeps.sweep` in slices of the first axis (about ``BATCH`` points each), with progress."""
    first, values = axes[0]
    per_value = len(axes[1][1]) if len(axes) > 1 else 1
    step = max(1, BATCH // per_value)
    total = len(values) * per_value
    bar = st.progress(0.0, text=f"Scoring {total} points…")
    frames, done = [], 0
    for i in range(0, len(values), step):
        params = {first: tuple(values[i: i + step]), **{p: tuple(v) for p, v in axes[1:]}}
        frames.append(_sweep(name, labeled.configs_key({"base": base}), params, metrics, split, base))
        done += len(frames[-1])
        bar.progress(done / total, text=f"Scored {done}/{total} points")
    bar.empty()
    return pd.concat(frames, ignore_index=True)


@st.cache_data(show_spinner=False, max_entries=512)
def _sweep(name: str, key: str, params: dict[str, tuple], metrics: tuple[str, ...], split: str,
           _base: RankConfig) -> pd.DataFrame:
    from hybridmem.eval.sweeps import sweep

    return sweep(state.get_evaluator(name), {p: list(v) for p, v in params.items()}, _base, list(metrics),
                 split=None if split == "all" else split)


def _split_picker(name: str, dataset: Any) -> str:
    """Which queries choose the best point: train when the dataset has a train split (as ``hybridmem sweep`` and
    ``--optimize`` choose, so the test queries stay unseen), else all of them; the default again on another dataset."""
    options = [s for s in ("train", "all", "test") if s == "all" or s in dataset.splits]  # the default first
    if st.session_state.get("_sweep_split_for") != name or st.session_state.get("sweep_split") not in options:
        st.session_state["_sweep_split_for"] = name
        st.session_state.pop("sweep_split", None)
    return st.selectbox("Queries", options, key="sweep_split",
                        help="The best point is chosen on these queries. Train keeps the test queries unseen, so the "
                             "evaluation's test scores of the applied point stay fair.")


def _split_note(dataset: Any, split: str) -> str:
    """Which queries the best point was chosen on, and what that means for the evaluation afterwards."""
    n = len(dataset.select(None if split == "all" else split).queries)
    if split == "train":
        return f"Best point chosen on the {counted(n, 'train query')} (the test queries stay unseen)"
    which = f"all queries ({counted(n, 'query')})" if split == "all" else f"the {counted(n, f'{split} query')}"
    if "train" not in dataset.splits:
        return (f"Best point chosen on {which}: this dataset has no train split, so the same queries that chose it "
                "score it afterwards")
    return (f"Best point chosen on {which}{', test included' if split == 'all' else ''}: the evaluation's test scores "
            "of the applied point are optimistic (choose train to keep the test queries unseen)")


def render() -> None:
    st.title("Sweeps")
    name, dataset = labeled.require_dataset()
    base = state.rank_config()
    c1, c2, c3 = st.columns([2, 2, 1])
    with c1:
        st.markdown("**First parameter**")
        p1, v1 = _axis("sweep1", "vector_weight")
    with c2:
        st.markdown("**Second parameter** (optional: heatmap)")
        p2, v2 = _axis("sweep2", "(none)", allow_none=True)
    with c3:
        split = _split_picker(name, dataset)
        k = st.select_slider("Cutoff k", [1, 3, 5, 10, 20, 50, 100], value=10, key="sweep_k")
        metrics = labeled.metric_names(dataset, k, base.max_injected_chars)
        metric = st.selectbox("Metric", metrics, index=1, key="sweep_metric")
    if p2 == p1:
        st.error("Pick two different parameters (or none for the second).")
        return
    axes = [(p1, v1)] + ([(p2, v2)] if p2 else [])
    base, switched = sweep_base(base, [p for p, _ in axes])
    if switched:
        st.caption("Sweeping RRF k: the points use RRF (min score from the RRF preset).")
    labeled.evaluator(name)
    try:
        t0 = time.perf_counter()
        df = _run(name, base, axes, metrics, split)
        elapsed = time.perf_counter() - t0
    except HybridMemError as exc:
        st.error(f"{exc}. Change the range or the sidebar settings.")
        return
    best = df.loc[df[metric].idxmax()]
    best_changes: dict[str, Any] = dict(switched)
    for p, _ in axes:
        best_changes.update(changes_for(p, best[p]))
    if p2 is None:
        fig = go.Figure(go.Scatter(x=df[p1], y=df[metric], mode="lines+markers", name=metric))
        fig.add_scatter(x=[best[p1]], y=[best[metric]], mode="markers+text", name="best",
                        marker=dict(symbol="star", size=18, color="#d62728"),
                        text=[f"best {best[metric]:.3f}"], textposition="top center")
        current = getattr(base, p1, None)
        if isinstance(current, (int, float)) and not isinstance(current, bool):
            fig.add_vline(x=current, line=dict(dash="dot", color="grey"), annotation_text=f"sidebar {current:g}",
                          annotation_position="bottom right")
        lo, hi = float(df[metric].min()), float(df[metric].max())
        pad = max(0.01, (hi - lo) * 0.15)  # the metrics lie in [0, 1]: a flat line at 1 is not drawn on a 0-2 axis
        fig.update_layout(xaxis_title=PARAMS[p1][0], yaxis_title=metric,
                          yaxis_range=[max(0.0, lo - pad), min(1.0 + pad / 2, hi + pad)])
    else:
        table = df.pivot_table(index=p2, columns=p1, values=metric)
        fig = go.Figure(go.Heatmap(z=table.values, x=table.columns, y=table.index, colorscale="Viridis",
                                   colorbar=dict(title=metric)))
        fig.add_scatter(x=[best[p1]], y=[best[p2]], mode="markers", name="best",
                        marker=dict(symbol="star", size=20, color="#d62728", line=dict(color="white", width=1)))
        fig.update_layout(xaxis_title=PARAMS[p1][0], yaxis_title=PARAMS[p2][0])
    fig.update_layout(height=460, margin=dict(l=10, r=10, t=30, b=10), showlegend=False,
                      title=f"{metric} on {dataset.name} ({split} queries)")
    st.plotly_chart(fig, key="sweep_chart")
    point = ", ".join(f"{PARAMS[p][0]} = {best[p]:g}" for p, _ in axes)
    c1, c2 = st.columns([3, 1])
    if df[metric].max() - df[metric].min() <= 1e-12:  # a flat line: no point is better than another
        c1.info(f"Every point scores {metric} {best[metric]:.4f} ({len(df)} points): these queries cannot tell the "
                "settings apart. Label queries that some settings get wrong, or sweep another parameter.")
        c2.button("Apply the first point to the sidebar", on_click=sidebar.apply, args=(best_changes,),
                  key="sweep_apply")
    else:
        c1.success(f"Best: {point} → {metric} {best[metric]:.4f} ({len(df)} points)", icon=":material/star:")
        c2.button("Apply best point to the sidebar", on_click=sidebar.apply, args=(best_changes,), key="sweep_apply",
                  type="primary")
    st.caption(_split_note(dataset, split) + ".")
    with st.expander("All points"):
        st.dataframe(df, hide_index=True, key="sweep_table")
    st.caption(f"{len(df)} points ranked and scored in {elapsed:.2f}s over candidates retrieved once "
               "(cached points are instant).")


if __name__ == "__main__":
    render()
