"""Shared workbench state: the chosen data source, the sidebar's ranking config, and cached resources.

Everything expensive is cached here: the :class:`~hybridmem.MemoryIndex` (and with it the embedding model) with
``st.cache_resource``, and each query's retrieved :class:`~hybridmem.Candidates`, so every ranking change is a
``rank()`` call over data already in memory (retrieve once, rank many).

Example:
    >>> src = Source("folder", "datasets/demo-memory/workspace")    # doctest: +SKIP
    >>> idx = get_index(src.workspace)                             # doctest: +SKIP
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import streamlit as st

from hybridmem.config import DEFAULT_RANKING, RankConfig, Settings, load_settings
from hybridmem.embeddings import Embedder, create_embedder
from hybridmem.errors import HybridMemError, ProviderError, WorkspaceError
from hybridmem.index import MemoryIndex
from hybridmem.records import Candidates, Hit

ROOT = Path(__file__).resolve().parents[2]
DATASETS_DIR = Path(os.environ.get("HYBRIDMEM_DATASETS", ROOT / "datasets"))
DEMO_DIR = DATASETS_DIR / "demo-memory"

# Sidebar choices: key -> label. "folder" asks for a path (a memory workspace or a BEIR directory).
SOURCE_LABELS: dict[str, str] = {
    "demo": "Demo memory (labeled)",
    "locomo": "LoCoMo (labeled)",
    "scifact": "SciFact (labeled, BEIR)",
    "folder": "Your folder or BEIR directory",
}

RANK_CONFIG_KEY = "rank_config"
SOURCE_KEY = "source"
SOURCE_KIND_KEY = "src_kind"  # the sidebar's two source widgets: the choice, and the folder path for "folder"
SOURCE_PATH_KEY = "src_path"
INSPECTOR_FOR_KEY = "inspector_for"  # the workspace Agent queries opened the inspector on
WRITE_REFUSED_KEY = "write_refused"  # why a click that would write into a workspace saved nothing (shown once)


@dataclass(frozen=True)
class Source:
    """What the sidebar points at.

    Attributes:
        kind: a key of :data:`SOURCE_LABELS`.
        path: the dataset or folder path (for ``demo`` the dataset root holding ``workspace/``).
    """

    kind: str
    path: str

    @property
    def label(self) -> str:
        return SOURCE_LABELS.get(self.kind, self.kind)

    @property
    def workspace(self) -> str:
        """The folder :class:`MemoryIndex` opens."""
        if self.kind == "demo":
            return str(Path(self.path) / "workspace")
        return self.path

    @property
    def labeled(self) -> bool:
        """True when the source has queries and judgments."""
        if self.kind in ("demo", "locomo", "scifact"):
            return True
        p = Path(self.path)
        return (p / "queries.jsonl").is_file() or (p / "corpus.jsonl").is_file() or self.own_labels

    @property
    def own_labels(self) -> bool:
        """True for a memory folder with labels of its own (``.hybridmem-labels/``, a relevant judgment at least)."""
        from hybridmem.eval.labels import has_labels

        return self.kind == "folder" and bool(self.path) and has_labels(self.path)


def default_source() -> Source:
    return Source("demo", str(DEMO_DIR))


def dataset_path(kind: str) -> str:
    """Where a shipped dataset lives."""
    return str({"demo": DEMO_DIR, "locomo": DATASETS_DIR / "locomo", "scifact": DATASETS_DIR / "scifact"}[kind])


def make_source(kind: str, path: str = "") -> Source:
    """The source the sidebar's fields describe: a shipped dataset, or the folder at ``path`` (``~`` expanded)."""
    if kind != "folder":
        return Source(kind, dataset_path(kind))
    path = path.strip()
    return Source("folder", str(Path(path).expanduser()) if path else "")


def current_source() -> Source:
    """The source this run's pages were drawn for (set by the sidebar each run)."""
    return st.session_state.get(SOURCE_KEY) or default_source()


def shown_source() -> Source:
    """The source the sidebar's widgets hold now.

    In a button's callback these are the values the browser showed when the button was clicked, which can differ
    from :func:`current_source` (the source the button was drawn for) if the two ever fall out of step.
    """
    kind = st.session_state.get(SOURCE_KIND_KEY)
    if kind not in SOURCE_LABELS:
        return current_source()
    return make_source(kind, str(st.session_state.get(SOURCE_PATH_KEY) or ""))


def same_folder(a: str | Path | None, b: str | Path | None) -> bool:
    """True when ``a`` and ``b`` name the same folder (neither empty)."""
    if not a or not b:
        return False
    return Path(a).expanduser().resolve() == Path(b).expanduser().resolve()


def may_write(workspace: str) -> bool:
    """Whether a click may write into ``workspace`` (labels, ``hybridmem.toml``): only when it is the workspace the
    sidebar shows. Otherwise nothing is written and :data:`WRITE_REFUSED_KEY` says why (pages show it with
    :func:`hybridmem.workbench.views.write_refused`). Call it first in every callback that writes."""
    shown = shown_source()
    if same_folder(workspace, shown.workspace):
        return True
    where = shown.workspace or "no folder"
    st.session_state[WRITE_REFUSED_KEY] = (
        f"Nothing saved: the page was drawn for {workspace}, but the sidebar shows {shown.label} ({where}). "
        "Check the sidebar's data choice, then click again.")
    return False


def shipped(workspace: str) -> bool:
    """Whether ``workspace`` is part of the data this repository ships (``datasets/``): its settings are the
    evaluation's, so the workbench never saves a ``hybridmem.toml`` there (labels go to a git-ignored folder)."""
    from hybridmem.eval.datasets.base import REPO_ROOT

    try:
        return Path(workspace).resolve().is_relative_to((REPO_ROOT / "datasets").resolve())
    except OSError:
        return False


def rank_config() -> RankConfig:
    """The sidebar's ranking config (the engine default before the sidebar has run)."""
    return st.session_state.get(RANK_CONFIG_KEY) or DEFAULT_RANKING


# -- resources -------------------------------------------------------------------------------------------------------
@st.cache_resource(show_spinner=False)
def shared_embedder() -> Embedder | None:
    """The default embedding model, loaded once per process and shared by every index and evaluator.

    None when it cannot be loaded (keyword-only); the index opened without it then says why in ``status()``.
    """
    try:
        return create_embedder(Settings().embedding).embedder
    except ProviderError:
        return None


def open_index(workspace: str) -> MemoryIndex:
    """Open the index of ``workspace`` with its own settings (``hybridmem.toml`` or the defaults).

    With the default embedding settings the shared model is used. Tests replace this factory to use a fake
    embedder and a temporary index.

    Raises:
        WorkspaceError: the folder does not exist or is not a folder.
        ConfigError: the workspace's ``hybridmem.toml`` is invalid.
    """
    settings = load_settings(workspace=workspace)
    if settings.embedding == Settings().embedding:
        embedder = shared_embedder()
        if embedder is not None:
            return MemoryIndex(workspace, settings=settings, embedder=embedder)
    return MemoryIndex(workspace, settings=settings)


def make_evaluator(dataset: Any) -> Any:
    """An :class:`hybridmem.eval.Evaluator` for ``dataset`` with the shared model (tests replace this factory)."""
    from hybridmem.eval import Evaluator

    return Evaluator(dataset, embedder=shared_embedder(), progress=False)


def labels_key(name: str) -> str:
    """A version of dataset ``name``'s own labels when it is a labeled workspace ("" otherwise): cached datasets and
    evaluators are keyed by it, so a new label is used at once."""
    from hybridmem.eval.labels import labels_dir, labels_version

    return labels_version(name) if (labels_dir(name) / "queries.jsonl").is_file() else ""


def get_evaluator(name: str) -> Any:
    """The cached evaluator of dataset ``name``: its index and retrieved candidates live as long as the process (or
    until a labeled workspace's labels change)."""
    return _get_evaluator(name, labels_key(name))


@st.cache_resource(show_spinner=False, max_entries=4)
def _get_evaluator(name: str, version: str) -> Any:
    return make_evaluator(load_dataset(name))


@st.cache_resource(show_spinner=False, max_entries=4)
def get_index(workspace: str) -> MemoryIndex:
    """The cached index (and its embedding model) for ``workspace``; one per process."""
    return open_index(workspace)


def code(text: str | Path) -> str:
    """``text`` as a Markdown code span: a path or a file pattern shown as typed (Markdown would eat its ``*`` and
    ``_`` pairs; messages in the page are Markdown).

    Example:
        >>> code("memory/**/*.md")
        '`memory/**/*.md`'
    """
    text = str(text)
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def check_workspace(path: str) -> str | None:
    """A message (Markdown) saying what is wrong with ``path`` as a memory workspace, or None when it looks usable."""
    if not path.strip():
        return (f"Enter the path of a folder: a memory workspace ({code('MEMORY.md')}, {code('memory/*.md')}) or a "
                "BEIR directory.")
    p = Path(path).expanduser()
    if not p.exists():
        return f"Folder not found: {code(path)}. Check the path (relative paths start at {code(Path.cwd())})."
    if not p.is_dir():
        return f"Not a folder: {code(path)}. Point at the folder holding {code('MEMORY.md')} and {code('memory/')}."
    return None


def without_memory(path: str) -> str | None:
    """A message when the folder ``path`` holds no memory file and no index yet (so opening it would only create an
    empty ``.hybridmem/`` in a folder the user may have chosen by mistake), else None."""
    from hybridmem.config import resolve_index_path
    from hybridmem.sources import discover

    ws = Path(path).expanduser()
    try:
        settings = load_settings(workspace=ws)
    except HybridMemError:
        return None  # opening it says what is wrong with its settings
    index = resolve_index_path(None, ws.absolute(), settings)
    if (not isinstance(index, Path) or not index.exists()) and not discover(ws, settings.sources):
        return no_memory_text(path)
    return None


def no_memory_text(path: str) -> str:
    return (f"No Markdown memory files in {code(path)}: expected {code('MEMORY.md')}, {code('memory.md')} or "
            f"{code('memory/**/*.md')} (or {code('sessions/*.jsonl')}). Add notes there, or choose another folder in "
            "the sidebar.")


def generation(idx: MemoryIndex) -> str:
    """Changes whenever the index is synced, so cached retrievals of an older index are not reused."""
    return idx.generation()


@st.cache_resource(show_spinner=False, max_entries=256)
def _retrieve_cached(_idx: MemoryIndex, index_key: str, gen: str, query: str, pool: int,
                     with_vectors: bool) -> Candidates:
    return _idx.retrieve(query, pool, with_vectors=with_vectors)


def retrieve(idx: MemoryIndex, query: str, pool: int, with_vectors: bool = False) -> Candidates:
    """Both legs for ``query`` at ``pool`` per leg, cached per index file and generation (immutable plain data)."""
    return _retrieve_cached(idx, str(idx.index_path), generation(idx), query, pool, with_vectors)


def pool_for(*configs: RankConfig) -> int:
    """The largest pool any of ``configs`` asks for: retrieve at this size once, rank each config on a prefix."""
    return max(c.pool for c in configs)


def error_text(exc: BaseException) -> str:
    """A one-paragraph message for an error shown in the page."""
    if isinstance(exc, WorkspaceError):
        return f"{exc}. Choose another folder in the sidebar."
    if isinstance(exc, HybridMemError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


# -- labeled data ----------------------------------------------------------------------------------------------------
def dataset_name(source: Source) -> str:
    """What :func:`hybridmem.eval.datasets.load_dataset` takes for ``source``."""
    return source.kind if source.kind in ("demo", "locomo", "scifact") else source.path


def load_dataset(name: str) -> Any:
    """The labeled :class:`hybridmem.eval.datasets.Dataset` (imported lazily: keeps eval off the first paint)."""
    return _load_dataset(name, labels_key(name))


@st.cache_resource(show_spinner=False, max_entries=8)
def _load_dataset(name: str, version: str) -> Any:
    from hybridmem.eval.datasets import load_dataset as load

    return load(name)


def labels_changed() -> None:
    """Call after writing labels: computed tables (``st.cache_data``) are dropped; datasets and evaluators follow
    :func:`labels_key` by themselves."""
    st.cache_data.clear()


def dataset_for(source: Source) -> Any | None:
    """The labeled dataset behind ``source``, or None when it has no labels."""
    if not source.labeled:
        return None
    return load_dataset(dataset_name(source))


def relevant_units(dataset: Any, query_id: str, hits: Iterable[Hit]) -> dict[int, str]:
    """``{chunk_id: "unit, unit"}`` for the hits that hold judged units of ``query_id`` (eval's unit mapping)."""
    from hybridmem.eval.units import judged_units

    judged = dataset.qrels.get(query_id, {})
    out: dict[int, str] = {}
    for h in hits:
        _, found = judged_units([h.path], [h.chunk_id], [h.start_line], [h.end_line], judged, dataset.evidence,
                                dataset.kind)
        if found:
            out[h.chunk_id] = ", ".join(sorted(found))
    return out
