"""Index: status of the chosen workspace's index, a sync button, and the indexed files with their chunk counts."""

from __future__ import annotations

from datetime import datetime

import pandas as pd
import streamlit as st

from hybridmem.errors import HybridMemError
from hybridmem.wording import counted
from hybridmem.workbench import state, views


def _when(ts: float | None) -> str:
    return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S") if ts else "never"


def _served(vector_search: str) -> str:
    """Where vector queries are answered, in words ("memory" is the vectors' in-RAM copy, not the memory files)."""
    return "in-RAM copy" + vector_search[len("memory"):] if vector_search.startswith("memory") else vector_search


def _embedded_by(runtime: str) -> str:
    """What embeds a query (a provider's runtime; e5's names queries and documents itself)."""
    return f"embedding: {runtime}" if " for queries" in runtime else f"queries embedded by {runtime}"


def render() -> None:
    st.title("Index")
    source = state.current_source()
    dataset, _ = views.dataset_or_warning(source)
    idx = views.open_source(source, dataset)
    documents = idx.workspace is None
    if documents:
        st.info(f"{dataset.name} is a document dataset: its index is built from the dataset's documents by the "
                "evaluator (cached on disk) and is read-only here.", icon=":material/info:")
    elif st.button("Sync now", icon=":material/sync:",
                   help="Re-index new, changed and deleted files (by content hash)."):
        try:
            views.sync(idx, "Syncing")
        except HybridMemError as exc:
            views.fail(state.error_text(exc))
    status = idx.status(disk=not documents)
    st.caption(f"`{status['workspace'] or dataset.name}` → `{status['index_path']}`")
    if status.get("changed_on_disk"):
        st.info(f"{counted(status['changed_on_disk'], 'file')} changed on disk since the last sync: **Sync now** (or a "
                "search, which syncs first) picks them up.", icon=":material/sync_problem:")
    cols = st.columns(4)
    cols[0].metric("Files", status["files"])
    cols[1].metric("Chunks", status["chunks"])
    cols[2].metric("Embedding cache", status["cache_entries"], help="Cached embeddings (provider, model, text hash).")
    cols[3].metric("Dims", status["dims"])
    cols = st.columns(4)
    cols[0].metric("Provider", status["provider"])
    cols[1].metric("Vector backend", status["vector_backend"], help=f"search: {status['vector_search']}, "
                                                                   f"driver: {status['driver']}")
    cols[2].metric("Vector search", _served(status["vector_search"]),
                   help="in-RAM copy: an exact scan of the vectors copied into RAM (int8-bounded: int8 rows with "
                        "error bounds, the close ones rescored in float, still exact); sqlite-vec: KNN in SQLite; "
                        "quantized: an int8 pre-filter; pgvector: on the PostgreSQL server")
    st.markdown(f"**Model** `{status['model'] or '—'}`")  # a metric cuts a model's name short
    st.caption(f"Last sync {_when(status['last_sync'])} · FTS tokenizer `{status['fts_tokenizer']}` · "
               f"settings hash `{status['settings_hash']}`"
               + (f" · {_embedded_by(status['query_embedding'])}" if status.get("query_embedding") else ""))
    if status.get("vec_error"):
        st.warning(f"sqlite-vec unavailable ({status['vec_error']}): exact numpy search is used instead.")
    if status.get("fallback_reason"):
        st.warning(status["fallback_reason"])
    report = status.get("last_sync_report")
    if report:
        st.caption(f"Last sync in this session: added {report['added']}, changed {report['changed']}, deleted "
                   f"{report['deleted']}, unchanged {report['unchanged']}; embedded {report['embedded']}, cache hits "
                   f"{report['cache_hits']} in {report['seconds']:.2f}s")
        for w in report.get("warnings", []):
            st.warning(w)

    st.subheader("Indexed files")
    files = pd.DataFrame(idx.files())
    if files.empty:
        st.info("Nothing indexed yet.")
        return
    files["date"] = pd.to_datetime(files["date"], unit="s").dt.strftime("%Y-%m-%d").fillna("")
    # a dataset's documents have no file time (0): blank, not 1970-01-01
    files["modified"] = pd.to_datetime(files["mtime"].where(files["mtime"] > 0), unit="s").dt.strftime(
        "%Y-%m-%d %H:%M").fillna("")
    files["evergreen"] = files["evergreen"].astype(bool)
    view = files[["path", "source", "chunks", "size", "date", "evergreen", "modified"]].sort_values("path")
    st.dataframe(view, hide_index=True, key="index_files",
                 column_config={"size": st.column_config.NumberColumn("bytes")})


if __name__ == "__main__":
    render()
