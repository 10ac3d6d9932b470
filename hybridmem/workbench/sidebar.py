"""The shared sidebar: which data to use and the ranking config every page ranks with.

The widgets start from a preset of :data:`hybridmem.config.PRESETS`; nothing here repeats a default. Pages read the
result through :func:`hybridmem.workbench.state.rank_config` and change it through :func:`apply` (the sweeps page's
"apply best point" button).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import streamlit as st

from hybridmem.config import (
    BM25_NORMALIZATIONS,
    FUSION_METHODS,
    MMR_SIMILARITIES,
    PRESETS,
    VECTOR_NORMALIZATIONS,
    RankConfig,
    fusion_min_score,
)
from hybridmem.errors import ConfigError
from hybridmem.workbench import state

PRESET_KEY = "cfg_preset"
_KEPT_KEY = "sidebar_kept"  # a plain session key holding every sidebar widget's value (see _restore)
WORKSPACE_PRESET = "workspace"  # the chosen folder's own hybridmem.toml ranking, offered beside the presets
_PRESETS_KEY = "cfg_presets"
_LOADED_FOR_KEY = "cfg_loaded_for"
# The RankConfig fields the sidebar edits; each widget's session key is "cfg_<field>".
FIELDS = (
    "fusion", "vector_weight", "text_weight", "rrf_k", "bm25_norm", "vector_norm", "max_results",
    "candidate_multiplier", "min_score", "answer_threshold", "decay", "half_life_days", "mmr", "mmr_lambda",
    "mmr_similarity",
)
_FIELD_TYPES = {f.name: f.type for f in dataclasses.fields(RankConfig)}


def key(field: str) -> str:
    return f"cfg_{field}"


def _load(cfg: RankConfig) -> None:
    for f in FIELDS:
        st.session_state[key(f)] = getattr(cfg, f)


def _presets() -> dict[str, RankConfig]:
    return st.session_state.get(_PRESETS_KEY, PRESETS)


def _on_preset() -> None:
    _load(_presets()[st.session_state[PRESET_KEY]])


def _workspace_ranking(source: state.Source) -> RankConfig | None:
    """The ranking a memory folder's ``hybridmem.toml`` sets, or None (no such file, or not a memory folder)."""
    if source.kind != "folder" or not source.path or state.check_workspace(source.path):
        return None
    from pathlib import Path

    from hybridmem.config import load_settings
    from hybridmem.config.write import CONFIG_FILENAME

    if not (Path(source.path) / CONFIG_FILENAME).is_file():
        return None
    try:
        return load_settings(workspace=source.path).ranking
    except ConfigError as exc:
        st.sidebar.error(f"{CONFIG_FILENAME}: {exc}")
        return None


def _offer_workspace_preset(source: state.Source) -> None:
    """When a folder with its own ranking settings is chosen, the widgets start from them (preset "workspace")."""
    own = _workspace_ranking(source)
    presets = dict(PRESETS, **({WORKSPACE_PRESET: own} if own is not None else {}))
    st.session_state[_PRESETS_KEY] = presets
    if st.session_state.get(PRESET_KEY) not in presets:
        st.session_state[PRESET_KEY] = "default"
        _load(PRESETS["default"])
    if own is not None and st.session_state.get(_LOADED_FOR_KEY) != source.path:
        st.session_state[PRESET_KEY] = WORKSPACE_PRESET
        _load(own)
    st.session_state[_LOADED_FOR_KEY] = source.path if own is not None else None


def _coerce(field: str, value: Any) -> Any:
    kind = _FIELD_TYPES.get(field)
    if kind in ("int", int):
        return int(round(float(value)))
    if kind in ("float", float):
        return float(value)
    if kind in ("bool", bool):
        return bool(value)
    return value


def apply(changes: dict[str, Any]) -> None:
    """Set sidebar fields (use as an ``on_click`` callback so it runs before the widgets are drawn)."""
    for f, v in changes.items():
        if f not in FIELDS:
            raise ConfigError(f"the sidebar cannot set ranking.{f}: expected one of {', '.join(FIELDS)}")
        st.session_state[key(f)] = _coerce(f, v)


def render_source() -> state.Source:
    """The data choice; stores the :class:`state.Source` in session state and returns it."""
    st.sidebar.header("Data")
    kind = st.sidebar.selectbox(
        "Dataset or workspace", list(state.SOURCE_LABELS), format_func=state.SOURCE_LABELS.__getitem__,
        key=state.SOURCE_KIND_KEY, help="The demo memory workspace works offline on a fresh clone.",
    )
    path = ""
    if kind == "folder":
        path = st.sidebar.text_input(
            "Folder path", key=state.SOURCE_PATH_KEY, placeholder="~/agent/memory or a BEIR folder",
            help="A memory workspace (MEMORY.md, memory/**/*.md) or a BEIR directory (corpus.jsonl, queries.jsonl, "
                 "qrels/).",
        )
    source = state.make_source(kind, path)
    st.session_state[state.SOURCE_KEY] = source
    return source


def _on_fusion() -> None:
    """Switching fusion takes that method's preset min score, and keeps no cut (0) as no cut
    (:func:`hybridmem.config.fusion_min_score`)."""
    st.session_state[key("min_score")] = fusion_min_score(st.session_state[key("fusion")],
                                                          st.session_state[key("min_score")])


def render_ranking(rrf_side: bool = True) -> RankConfig:
    """The ranking widgets; stores the resulting :class:`RankConfig` in session state and returns it. ``rrf_side``:
    the page shows RRF beside the sidebar's fusion (the search inspector, fusion compare), so RRF k matters there
    under any fusion; elsewhere it is switched off unless the fusion is RRF."""
    presets = _presets()
    if key("fusion") not in st.session_state:
        st.session_state.setdefault(PRESET_KEY, "default")
        _load(presets[st.session_state[PRESET_KEY]])
    sb = st.sidebar
    sb.header("Ranking")
    sb.selectbox("Preset", list(presets), key=PRESET_KEY, on_change=_on_preset,
                 help="Load a preset from hybridmem.config; 'reference' reproduces the reference system; "
                      "'workspace' is the chosen folder's own hybridmem.toml.")
    sb.radio("Fusion", FUSION_METHODS, key=key("fusion"), horizontal=True, on_change=_on_fusion,
             format_func={"joint": "Joint model", "weighted": "Weighted sum", "rrf": "RRF"}.get,
             help="Joint model: one logistic model over both legs' scores, ranks and probabilities, fitted on train "
                  "splits (the default). Weighted sum: of each leg's normalized score. RRF: of ranks.")
    c1, c2 = sb.columns(2)
    c1.number_input("Vector weight", 0.0, 10.0, step=0.05, key=key("vector_weight"), format="%.2f")
    c2.number_input("Text weight", 0.0, 10.0, step=0.05, key=key("text_weight"), format="%.2f")
    rrf = st.session_state[key("fusion")] == "rrf"
    sb.slider("RRF k", 0, 200, key=key("rrf_k"), disabled=not (rrf or rrf_side),
              help="RRF's k: read by RRF only." + ("" if rrf else " This fusion ignores it; it sets the RRF side of "
                                                   "the search inspector's comparison and of fusion compare."))
    sb.slider("Max results", 1, 30, key=key("max_results"))
    sb.slider("Candidate multiplier", 1, 20, key=key("candidate_multiplier"),
              help="Each leg fetches max_results x multiplier candidates.")
    sb.number_input("Min score", 0.0, 1.0, step=0.01, key=key("min_score"), format="%.3f",
                    help="Final scores below this are cut. RRF scores are small (about 0.01-0.03).")
    sb.number_input("Answer threshold", 0.0, 0.99, step=0.01, key=key("answer_threshold"), format="%.3f",
                    help="The answer gate: below this probability that memory holds an answer, return nothing. "
                         "0 switches the gate off.")
    with sb.expander("Normalization, decay, MMR"):
        st.selectbox("BM25 normalization", BM25_NORMALIZATIONS, key=key("bm25_norm"),
                     help="Weighted sum only (RRF uses ranks).")
        st.selectbox("Vector normalization", VECTOR_NORMALIZATIONS, key=key("vector_norm"),
                     help="Weighted sum only (RRF uses ranks).")
        st.toggle("Temporal decay", key=key("decay"))
        st.slider("Half-life (days)", 1.0, 365.0, step=1.0, key=key("half_life_days"),
                  disabled=not st.session_state[key("decay")])
        st.toggle("MMR diversity", key=key("mmr"))
        st.slider("MMR lambda", 0.0, 1.0, step=0.05, key=key("mmr_lambda"), disabled=not st.session_state[key("mmr")])
        st.selectbox("MMR similarity", MMR_SIMILARITIES, key=key("mmr_similarity"),
                     disabled=not st.session_state[key("mmr")])
    base = presets[st.session_state[PRESET_KEY]]
    try:
        cfg = base.replace(**{f: _coerce(f, st.session_state[key(f)]) for f in FIELDS})
    except ConfigError as exc:
        sb.error(f"{exc}. Keeping the previous settings.")
        cfg = state.rank_config()
    st.session_state[state.RANK_CONFIG_KEY] = cfg
    sb.caption(f"Pool: {cfg.pool} candidates per leg.")
    return cfg


def _save(workspace: str, changes: dict[str, Any]) -> None:
    from hybridmem.config.write import write_ranking

    if not state.may_write(workspace):
        st.session_state["cfg_saved"] = (False, st.session_state.pop(state.WRITE_REFUSED_KEY))
        return
    if state.shipped(workspace):
        st.session_state["cfg_saved"] = (False, f"Nothing saved: {workspace} is the shipped demo data, whose settings "
                                                "the evaluation reads. Copy the folder to give it settings of its own.")
        return
    try:
        write_ranking(workspace, changes)
        st.session_state["cfg_saved"] = (True, f"Saved {len(changes)} setting(s) to {workspace}/hybridmem.toml")
    except ConfigError as exc:
        st.session_state["cfg_saved"] = (False, f"Not saved: {exc}")


def render_save(source: state.Source, cfg: RankConfig) -> None:
    """"Save as this workspace's settings": the sidebar's ranking into the folder's ``hybridmem.toml``, diff first."""
    if source.kind != "folder" or state.check_workspace(source.path) or source.labeled and not source.own_labels:
        return  # a memory folder only (not a shipped or BEIR dataset)
    from hybridmem.config.write import CONFIG_FILENAME, ranking_changes, ranking_update, unified_diff

    with st.sidebar.expander("Save as this workspace's settings", icon=":material/save:"):
        if "cfg_saved" in st.session_state:
            saved, message = st.session_state.pop("cfg_saved")
            (st.success if saved else st.error)(message)
        if state.shipped(source.path):
            st.caption("The shipped demo data's settings are the evaluation's: copy the folder to save settings "
                       "for it.")
            return
        try:
            changes = ranking_changes(cfg, source.path, FIELDS)
            old, new = ranking_update(f"{source.path}/{CONFIG_FILENAME}", changes)
        except ConfigError as exc:
            st.error(str(exc))
            return
        if not changes:
            st.caption(f"{CONFIG_FILENAME} already ranks this way: nothing to save.")
            return
        st.caption(f"Changes to {CONFIG_FILENAME} (other settings and comments are kept); the CLI and a running "
                   "MCP server use them from their next call.")
        st.code(unified_diff(old, new), language="diff")
        st.button("Save to hybridmem.toml", key="cfg_save", type="primary", on_click=_save,
                  args=(source.path, changes))


def _widget_keys() -> tuple[str, ...]:
    return (state.SOURCE_KIND_KEY, state.SOURCE_PATH_KEY, PRESET_KEY, *(key(f) for f in FIELDS))


def _restore() -> None:
    """Put back every sidebar value Streamlit dropped since the last run.

    ``st.switch_page`` (Agent queries' "Label in the inspector") reruns the app without the browser's widget values,
    and on that page change Streamlit drops the state of every widget, the sidebar's too (its script runner ends the
    old page with no widget ids). Without this the sidebar fell back to the demo and the default preset while the
    browser still showed the chosen folder. The copy lives in a plain session key, which Streamlit never drops; the
    restored values are sent to the browser with the widgets.
    """
    for k, v in st.session_state.get(_KEPT_KEY, {}).items():
        if k not in st.session_state:
            st.session_state[k] = v


def _keep() -> None:
    st.session_state[_KEPT_KEY] = {k: st.session_state[k] for k in _widget_keys() if k in st.session_state}


def render(rrf_side: bool = True) -> tuple[state.Source, RankConfig]:
    """Draw the whole sidebar (first putting back any of its values a page switch dropped); ``rrf_side``: the page
    shows RRF beside the sidebar's fusion (see :func:`render_ranking`)."""
    _restore()
    source = render_source()
    _offer_workspace_preset(source)
    cfg = render_ranking(rrf_side)
    _keep()
    render_save(source, cfg)
    return source, cfg
