"""The facade agents, the CLI, the eval and the app use: :class:`MemoryIndex`.

Example:
    >>> idx = MemoryIndex("datasets/demo-memory/workspace")          # doctest: +SKIP
    >>> idx.sync()                                                    # doctest: +SKIP
    >>> idx.search("retry backoff for payments").results[0].citation  # doctest: +SKIP
    'memory/2026-06-12.md#L14-L15'
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Iterable

import numpy as np

from hybridmem import sources as src
from hybridmem.chunking import split_lines
from hybridmem.config import INDEX_DIRNAME, INDEX_FILENAME, RankConfig, Settings, load_settings
from hybridmem.embeddings import Embedder, create_embedder
from hybridmem.errors import HybridMemError, PathError, ProviderError, WorkspaceError
from hybridmem.indexer import Progress, SyncReport, apply_documents, document_hash, file_row, sync_documents
from hybridmem.records import Candidates, Document, Hit, Ranking
from hybridmem.retrieve import Scope, build_candidates, chunk_infos, keyword_leg, vector_leg
from hybridmem.store import Store
from hybridmem.tokenization import fts_tokenizer_spec
from hybridmem.keywords import KeywordIndex
from hybridmem.vectors import VectorMatrix

_AUTO = "auto"


@dataclass(frozen=True)
class SearchResponse:
    """Results of one search, with the provider used and per-stage timings in milliseconds."""

    query: str
    results: tuple[Hit, ...]
    ranking: Ranking
    provider: str
    model: str
    fallback: bool
    fallback_reason: str | None
    timings: dict[str, float]
    config: RankConfig
    candidates: Candidates | None = field(default=None, repr=False)

    def to_dict(self, citations: bool = True) -> dict[str, Any]:
        results = []
        for h in self.results:
            item = {
                "path": h.path, "start_line": h.start_line, "end_line": h.end_line, "score": round(h.final_score, 6),
                "snippet": h.snippet, "source": h.source,
                "vector_score": None if h.vector_score is None else round(h.vector_score, 6),
                "text_score": None if h.text_score is None else round(h.text_score, 6),
                "vector_rank": h.vector_rank, "text_rank": h.text_rank, "fused_score": round(h.fused_score, 6),
                "decay_factor": round(h.decay_factor, 6),
            }
            if citations:
                item["citation"] = h.citation
            results.append(item)
        return {
            "query": self.query, "results": results, "provider": self.provider, "model": self.model,
            "fallback": self.fallback, "fallback_reason": self.fallback_reason, "rescued": self.ranking.rescued,
            "timings_ms": {k: round(v, 3) for k, v in self.timings.items()},
        }


def default_index_path(workspace: str | Path) -> Path:
    return Path(workspace) / INDEX_DIRNAME / INDEX_FILENAME


class MemoryIndex:
    """A memory workspace (or a corpus of documents) and its SQLite index.

    Args:
        workspace: the folder holding ``MEMORY.md`` and ``memory/``; None for a documents-only index.
        index_path: the SQLite file; default ``<workspace>/.hybridmem/index.sqlite``.
        settings: all settings; default ``<workspace>/hybridmem.toml`` or the built-in defaults.
        embedder: an :class:`Embedder`, None for keyword-only, or ``"auto"`` to build one from settings lazily.
    """

    def __init__(
        self,
        workspace: str | Path | None = None,
        index_path: str | Path | None = None,
        settings: Settings | None = None,
        embedder: Embedder | None | str = _AUTO,
    ) -> None:
        if workspace is not None:
            ws = Path(workspace)
            if not ws.exists():
                raise WorkspaceError(f"workspace not found: {ws}")
            if not ws.is_dir():
                raise WorkspaceError(f"workspace is not a folder: {ws}")
            self.workspace: Path | None = ws.absolute()
        else:
            self.workspace = None
        self.settings = settings or load_settings(workspace=self.workspace)
        if index_path is None and self.settings.store.path:
            configured = Path(self.settings.store.path).expanduser()
            index_path = configured if configured.is_absolute() or self.workspace is None else self.workspace / configured
        if index_path is None:
            if self.workspace is None:
                raise WorkspaceError("an index path is needed when there is no workspace")
            index_path = default_index_path(self.workspace)
        self.index_path = Path(index_path) if str(index_path) != ":memory:" else index_path
        self.store = Store(self.index_path, self.settings.store.busy_timeout_ms)
        self._embedder_arg = embedder
        self._embedder: Embedder | None = None if embedder == _AUTO else embedder  # type: ignore[assignment]
        self._embedder_loaded = embedder != _AUTO
        self._skipped: list[str] = []
        self._matrix: VectorMatrix | None = None
        self._matrix_gen: str | None = None
        self._keywords: tuple[str, KeywordIndex] | None = None  # (generation, in-memory FTS5 postings)
        self._keywords_gen: tuple[str, int] = ("", 0)  # (generation, keyword queries seen in it)
        self._keywords_thread: threading.Thread | None = None
        self._lock = threading.RLock()
        self.dirty = False
        self.last_sync: SyncReport | None = None
        self._vector_error: str | None = None
        self._failover = None

    # -- lifecycle -----------------------------------------------------------------------------------------------
    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> "MemoryIndex":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- embedder ------------------------------------------------------------------------------------------------
    @property
    def embedder(self) -> Embedder | None:
        """The active embedder, loaded on first use; None means keyword-only."""
        if not self._embedder_loaded:
            with self._lock:
                if not self._embedder_loaded:
                    try:
                        choice = create_embedder(self.settings.embedding)
                        self._embedder, self._skipped = choice.embedder, choice.skipped
                    except ProviderError as exc:
                        self._embedder, self._skipped = None, [str(exc)]
                    self._embedder_loaded = True
        return self._embedder

    @property
    def fallback_reason(self) -> str | None:
        if self.embedder is None and self.settings.embedding.provider != "none":
            return "no embedding provider available (" + "; ".join(self._skipped) + "): keyword-only"
        reasons = [*self._skipped, *([self._vector_error] if self._vector_error else [])]
        return "; ".join(reasons) or None

    def _embed_query(self, query: str) -> np.ndarray | None:
        """The query vector, or None (keyword-only for this query) when the provider fails. After repeated failures
        the next provider of the chain takes over and the index is marked dirty, so the next sync reindexes."""
        from hybridmem.backend import EmbedderFailover

        embedder = self.embedder
        try:
            qv = embedder.embed_query(query[:20000])  # type: ignore[union-attr]
        except Exception as exc:  # noqa: BLE001 - a failing provider must not break search
            self._vector_error = f"query embedding failed ({type(exc).__name__}: {exc}): keyword-only"
            if self._failover is None:
                self._failover = EmbedderFailover(self.settings.embedding)
            replacement = self._failover.record_error(embedder, exc)  # type: ignore[arg-type]
            if replacement is not False:
                with self._lock:
                    self._embedder = replacement  # type: ignore[assignment]
                    self._skipped = [*self._skipped, *self._failover.switched]
                    self._failover.switched.clear()
                    self._matrix = None
                    self.dirty = True
            return None
        if self._failover is not None:
            self._failover.record_success()
        self._vector_error = None
        return qv

    def _identity(self) -> tuple[str, str, str, int]:
        """(provider, model, provider_key, dims) of the embedder, without loading a local model when the index
        already records the same provider and model (so a warm sync or a keyword-only search stays fast)."""
        if not self._embedder_loaded:
            cfg = self.settings.embedding
            meta = self.store.all_meta()
            if cfg.provider == "none":
                return "none", "", "", 0
            if cfg.provider == "local" and meta.get("provider") == "local" and meta.get("model") == cfg.model:
                return "local", cfg.model, meta.get("provider_key", ""), int(meta.get("dims", 0) or 0)
        e = self.embedder
        if e is None:
            return "none", "", "", 0
        return e.name, e.model, e.provider_key, e.dims

    def settings_hash(self) -> str:
        name, model, key, dims = self._identity()
        base = self.settings.index_hash(dims)
        return hashlib.sha256(f"{base}|{name}|{model}|{key}|{dims}".encode()).hexdigest()[:16]

    # -- sync ----------------------------------------------------------------------------------------------------
    def _prepare_full_reindex(self) -> bool:
        """Clear the index when the settings hash changed; returns True when it did."""
        current = self.settings_hash()
        stored = self.store.get_meta("settings_hash")
        name, model, key, dims = self._identity()
        if stored == current and (dims == 0 or not self.store.vec_available or self.store.has_vec_table()):
            return False
        with self.store.transaction():
            self.store.clear()
        self.store.ensure_vec_table(dims)
        for k, v in {"settings_hash": current, "provider": name, "model": model, "provider_key": key, "dims": dims,
                     "fts_tokenizer": fts_tokenizer_spec()}.items():
            self.store.set_meta(k, v)
        return stored is not None

    def _needs_full_reindex(self) -> bool:
        """True when an existing index was built with other settings (model, dims, chunking, tokenizer)."""
        stored = self.store.get_meta("settings_hash")
        if stored is None:
            return False
        dims = self._identity()[3]
        return stored != self.settings_hash() or (dims > 0 and self.store.vec_available
                                                   and not self.store.has_vec_table())

    def _bump(self) -> None:
        gen = int(self.store.get_meta("generation", "0") or 0) + 1
        self.store.set_meta("generation", gen)
        self.store.set_meta("last_sync", time.time())
        self._matrix = None

    def sync(self, force: bool = False, progress: Progress | None = None) -> SyncReport:
        """Bring the index up to date with the workspace: new, changed and deleted files, by content hash.

        A settings change (model, chunking, tokenizer, dims) triggers a full reindex; ``force`` does too.
        """
        if self.workspace is None:
            raise WorkspaceError("this index has no workspace; use index_documents()")
        with self._lock:
            if (force or self._needs_full_reindex()) and str(self.index_path) != ":memory:":
                from hybridmem.reindex import atomic_reindex  # builds a temp index, then swaps it in atomically

                return atomic_reindex(self, progress)
            t0 = time.perf_counter()
            report = SyncReport()
            if force:
                self.store.set_meta("settings_hash", "forced")
            report.full_reindex = self._prepare_full_reindex() or force
            known = self.store.files()
            found = src.discover(self.workspace, self.settings.sources)
            seen: set[str] = set()
            changed: list[tuple[Document, dict]] = []
            for sf in found:
                seen.add(sf.path)
                old = known.get(sf.path)
                if old and old["mtime"] == sf.mtime and old["size"] == sf.size and old["abspath"] == sf.abspath:
                    report.unchanged += 1
                    continue
                if old and sf.source == "sessions" and _defer_session(sf, old, self.settings):
                    report.deferred += 1  # a growing transcript waits for 100 KB or 50 new messages
                    continue
                try:
                    loaded = src.load(sf, self.settings.sources)
                except OSError as exc:
                    report.warnings.append(f"{sf.path}: cannot read ({exc.strerror or exc})")
                    continue
                if loaded.warning:
                    report.warnings.append(f"{sf.path}: {loaded.warning}")
                if loaded.document is None:
                    seen.discard(sf.path)
                    continue
                h = document_hash(loaded.document)
                row = file_row(loaded.document, h, sf.abspath, sf.size, sf.mtime)
                if old and old["hash"] == h:
                    report.unchanged += 1
                    with self.store.transaction() as db:
                        db.execute("UPDATE files SET mtime = ?, size = ? WHERE path = ?", (sf.mtime, sf.size, sf.path))
                    continue
                if old:
                    report.changed += 1
                else:
                    report.added += 1
                changed.append((loaded.document, row))
            deleted = [p for p in known if p not in seen]
            report.deleted = len(deleted)
            embedder = self.embedder if changed else None
            apply_documents(self.store, self.settings, embedder, changed, deleted, report, progress)
            self._bump()
            counts = self.store.counts()
            report.files, report.chunks = counts["files"], counts["chunks"]
            report.seconds = time.perf_counter() - t0
            self.dirty = False
            self.last_sync = report
            return report

    def index_documents(
        self, documents: Iterable[Document], prune: bool = True, progress: Progress | None = None
    ) -> SyncReport:
        """Index in-memory documents (evaluation corpora) through the same pipeline as files."""
        with self._lock:
            full = self._prepare_full_reindex()
            report = sync_documents(self.store, self.settings, self.embedder, documents, prune, progress)
            report.full_reindex = full
            self._bump()
            self.last_sync = report
            return report

    # -- retrieval -----------------------------------------------------------------------------------------------
    def _vector_search(self):  # noqa: ANN202
        mode = self.settings.store.vector_search
        if mode == "sqlite-vec" and self.store.vec_available and self.store.has_vec_table():
            return self.store.vector_knn
        gen = self.store.get_meta("generation", "0")
        if self._matrix is None or self._matrix_gen != gen:
            name, model, key, _ = self._identity()
            ids, mat, sources, paths = self.store.load_vectors(name, model, key)
            st = self.settings.store
            self._matrix = VectorMatrix(ids, mat, sources, paths, int8_min_rows=st.int8_min_rows,
                                        rescore_min=st.rescore_min, rescore_factor=st.rescore_factor,
                                        prefilter_dims=st.prefilter_dims)
            self._matrix_gen = gen
        return self._matrix.search_quantized if mode == "quantized" else self._matrix.search

    def _vector_search_label(self) -> str:
        """How vector queries are served, for ``status()``: sqlite-vec, memory (exact; int8-bounded when the int8
        copy is in use), or quantized (int8 principal-subspace pre-filter)."""
        mode = self.settings.store.vector_search
        if mode == "sqlite-vec" and self.store.vec_available:
            return "sqlite-vec"
        if mode == "quantized":
            return "quantized"
        m = self._matrix
        return "memory (int8-bounded exact)" if m is not None and m.int8_built else "memory"

    def _keyword_memory(self) -> KeywordIndex | None:
        """The in-memory keyword index of the current generation (same scores as FTS5, ~10x faster), or None while
        there is none: FTS5 answers. It is built in a background thread from the second keyword query of a
        generation on (8 s at 100k chunks), so one-shot CLI searches never load it and no query waits for it."""
        gen = self.store.get_meta("generation", "0") or "0"
        ready = self._keywords
        if ready is not None and ready[0] == gen:
            return ready[1]
        seen_gen, count = self._keywords_gen
        count = count + 1 if seen_gen == gen else 1
        self._keywords_gen = (gen, count)
        if count == 2:
            rows = self.store.keyword_rows()

            def build() -> None:
                self._keywords = (gen, KeywordIndex.build(*rows))

            self._keywords_thread = threading.Thread(target=build, name="hybridmem-keywords", daemon=True)
            self._keywords_thread.start()
        return None

    def _vector_of(self, cid: int) -> np.ndarray | None:
        if self._matrix is not None:
            return self._matrix.vector(cid)
        return None

    def retrieve(
        self,
        query: str,
        pool: int,
        keyword: bool = True,
        vector: bool = True,
        scope: Scope | None = None,
        with_vectors: bool = False,
        query_vector: np.ndarray | None = None,
        timings: dict[str, float] | None = None,
    ) -> Candidates:
        """Both legs for ``query``, each up to ``pool`` long, plus chunk info. A leg set to False is not queried."""
        scope = scope or Scope()
        t = timings if timings is not None else {}
        if not isinstance(query, str):
            raise HybridMemError(f"query must be a string, not {type(query).__name__}")
        t0 = time.perf_counter()
        kw = keyword_leg(self.store, query, pool, self.settings.tokenizer, scope,
                         self._keyword_memory()) if keyword else []
        t["keyword"] = (time.perf_counter() - t0) * 1000
        vec: list = []
        vector_searched = False
        if vector and query.strip() and (query_vector is not None or self.embedder is not None):
            t0 = time.perf_counter()
            qv = query_vector if query_vector is not None else self._embed_query(query)
            t["embed"] = (time.perf_counter() - t0) * 1000
            t0 = time.perf_counter()
            search_fn = self._vector_search() if qv is not None else None
            if search_fn is not None and self._matrix is not None and len(self._matrix) and \
                    self._matrix.matrix.shape[1] != qv.shape[0]:
                self._vector_error = (f"the index holds {self._matrix.matrix.shape[1]}-dim vectors but the query "
                                      f"embedder gives {qv.shape[0]}: rebuild with `hybridmem index --rebuild`")
                search_fn = None
            if search_fn is not None:
                vec = vector_leg(search_fn, qv, pool, scope)
                vector_searched = True
            t["vector"] = (time.perf_counter() - t0) * 1000
        t0 = time.perf_counter()
        ids = [h.chunk_id for h in kw] + [h.chunk_id for h in vec]
        if with_vectors and self._matrix is None and self.embedder is not None:
            self._vector_search()
        chunks = chunk_infos(self.store, ids, self._vector_of if with_vectors else None)
        t["load"] = (time.perf_counter() - t0) * 1000
        kw = [h for h in kw if h.chunk_id in chunks]
        vec = [h for h in vec if h.chunk_id in chunks]
        return build_candidates(query, self.settings.tokenizer, kw, vec, chunks, pool, keyword, vector_searched)

    def search(
        self,
        query: str,
        config: RankConfig | None = None,
        source: str | None = None,
        path_prefix: str | None = None,
        session: str | None = None,
        now: float | None = None,
        **overrides: Any,
    ) -> SearchResponse:
        """Retrieve and rank ``query``. ``overrides`` change ranking settings for this call (``fusion="rrf"``)."""
        from hybridmem.ranking import rank

        cfg = (config or self.settings.ranking).replace(**overrides) if overrides else (config or self.settings.ranking)
        if self.dirty and self.settings.sync.sync_on_search and self.workspace is not None:
            self.sync()
        if session:
            source, path_prefix = "sessions", session_prefix(session)
        timings: dict[str, float] = {}
        if cfg.vector_weight > 0 and not self._embedder_loaded:
            t0 = time.perf_counter()
            _ = self.embedder  # load the model outside the per-query timings
            timings["model_load"] = (time.perf_counter() - t0) * 1000
        t_all = time.perf_counter()
        cands = self.retrieve(
            query, cfg.pool, keyword=cfg.text_weight > 0, vector=cfg.vector_weight > 0,
            scope=Scope(source, path_prefix), with_vectors=cfg.mmr and cfg.mmr_similarity == "cosine",
            timings=timings,
        )
        t0 = time.perf_counter()
        ranking = rank(cands, cfg, now=now)
        timings["rank"] = (time.perf_counter() - t0) * 1000
        timings["total"] = (time.perf_counter() - t_all) * 1000
        name, model, _, _ = self._identity()
        fallback = cfg.vector_weight > 0 and not cands.vector_searched
        return SearchResponse(
            query=query, results=ranking.hits, ranking=ranking, provider=name, model=model,
            fallback=fallback or bool(self._skipped),
            fallback_reason=(self.fallback_reason if (fallback or self._skipped) else None),
            timings=timings, config=cfg, candidates=cands,
        )

    def rank(self, candidates: Candidates, config: RankConfig | None = None, now: float | None = None,
             full_mmr: bool = False) -> Ranking:
        """Rank what :meth:`retrieve` returned under ``config`` (default: the served one), as :meth:`search` does;
        the workbench ranks one retrieval under several configs. ``full_mmr``: see :func:`hybridmem.ranking.rank`."""
        from hybridmem.ranking import rank

        return rank(candidates, config or self.settings.ranking, now=now, full_mmr=full_mmr)

    # -- get -----------------------------------------------------------------------------------------------------
    def get(self, path: str, from_line: int | None = None, lines: int | None = None) -> dict[str, Any]:
        """Read lines of an indexed memory file or transcript. Refuses absolute paths, ``..``, symlinks and
        anything not indexed. Transcripts return their redacted ``User:``/``Assistant:`` lines."""
        key = validate_relative(path)
        files = self.store.files()
        row = files.get(key)
        if row is None and self.workspace is not None:
            row = next(({"abspath": f.abspath, "source": f.source, "path": f.path}
                        for f in src.discover(self.workspace, self.settings.sources) if f.path == key), None)
        if row is None or not row.get("abspath"):
            raise PathError(f"not an indexed memory file: {path!r} (only MEMORY.md, memory/**/*.md, extra paths and "
                            "session transcripts can be read)")
        abspath = Path(row["abspath"])
        _refuse_symlinks(abspath, self.workspace)
        if from_line is not None and from_line < 1:
            raise PathError(f"from_line must be >= 1, got {from_line}")
        if lines is not None and lines < 1:
            raise PathError(f"lines must be >= 1, got {lines}")
        text, _ = src.read_text(abspath, self.settings.sources.max_file_bytes)
        if row["source"] == "sessions":
            from hybridmem.sessions import compile_redactions, parse_transcript

            tr = parse_transcript(split_lines(text), compile_redactions(self.settings.sources.redact_patterns))
            numbered = list(zip(tr.line_map, split_lines(tr.text)))
        else:
            numbered = list(enumerate(split_lines(text), start=1))
        start = from_line or 1
        selected = [(n, t) for n, t in numbered if n >= start]
        if lines is not None:
            selected = [(n, t) for n, t in selected if n < start + lines]
        return {
            "path": key, "from": start, "lines": len(selected), "total_lines": len(numbered),
            "text": "\n".join(t for _, t in selected),
            "line_numbers": [n for n, _ in selected] if row["source"] == "sessions" else None,
        }

    # -- status --------------------------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        meta = self.store.all_meta()
        counts = self.store.counts()
        vec_backend = "sqlite-vec" if self.store.vec_available else "numpy"
        return {
            "workspace": str(self.workspace) if self.workspace else None,
            "index_path": str(self.index_path),
            **counts,
            "provider": meta.get("provider", "none"),
            "model": meta.get("model", ""),
            "dims": int(meta.get("dims", 0) or 0),
            "vector_backend": vec_backend,
            "vector_search": self._vector_search_label(),
            "vec_error": self.store.vec_error,
            "driver": self.store.driver,
            "fts_tokenizer": meta.get("fts_tokenizer", fts_tokenizer_spec()),
            "settings_hash": meta.get("settings_hash"),
            "cache_entries": self.store.cache_count(),
            "last_sync": float(meta["last_sync"]) if "last_sync" in meta else None,
            "dirty": self.dirty,
            "fallback_reason": self.fallback_reason if self._embedder_loaded else None,
            "query_embedding": getattr(self._embedder, "runtime", None) if self._embedder_loaded else None,
            "last_sync_report": self.last_sync.to_dict() if self.last_sync else None,
        }

    def files(self) -> list[dict[str, Any]]:
        """Indexed files with their chunk counts."""
        counts = self.store.file_chunk_counts()
        return [{**row, "chunks": counts.get(p, 0)} for p, row in self.store.files().items()]


def _defer_session(sf: src.SourceFile, old: dict[str, Any], settings: Settings) -> bool:
    from hybridmem.sessions import defer_session_reindex

    return old["abspath"] == sf.abspath and defer_session_reindex(
        sf.abspath, int(old["size"]), sf.size, settings.sync.session_delta_bytes, settings.sync.session_delta_messages)


def session_prefix(session: str) -> str:
    """The path prefix of a session transcript given its id or file name."""
    s = session if session.endswith(".jsonl") else f"{session}.jsonl"
    return s if "/" in s else f"sessions/{s}"


def validate_relative(path: str) -> str:
    """A clean workspace-relative POSIX path, or PathError for absolute paths, ``..`` and odd input."""
    if not isinstance(path, str) or not path.strip():
        raise PathError("path is empty")
    if "\x00" in path:
        raise PathError("path contains a NUL byte")
    p = path.strip().replace("\\", "/")
    if p.startswith("/") or PurePosixPath(p).is_absolute() or (len(p) > 1 and p[1] == ":") or p.startswith("~"):
        raise PathError(f"absolute paths are refused: {path!r} (give a path relative to the workspace)")
    parts = [x for x in p.split("/") if x not in ("", ".")]
    if any(x == ".." for x in parts):
        raise PathError(f"path escapes the memory root: {path!r}")
    clean = "/".join(parts)
    if clean.startswith("~") or (len(clean) > 1 and clean[1] == ":"):  # "./C:/x", "./~/x"
        raise PathError(f"absolute paths are refused: {path!r} (give a path relative to the workspace)")
    return clean


def _refuse_symlinks(abspath: Path, workspace: Path | None) -> None:
    if abspath.is_symlink():
        raise PathError(f"symlinks are refused: {abspath.name}")
    if workspace is not None:
        try:
            rel = abspath.relative_to(workspace)
        except ValueError:
            return
        cur = workspace
        for part in rel.parts:
            cur = cur / part
            if cur.is_symlink():
                raise PathError(f"path goes through a symlink: {cur.relative_to(workspace).as_posix()}")
        if not os.path.realpath(abspath).startswith(os.path.realpath(workspace) + os.sep):
            raise PathError("path resolves outside the memory root")
