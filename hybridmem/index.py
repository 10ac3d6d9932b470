"""The facade agents, the CLI, the eval and the app use: :class:`MemoryIndex`.

It wires an index store (:func:`~hybridmem.store.open_store`: a SQLite file or a PostgreSQL namespace), a
:class:`~hybridmem.sync.Syncer` and a :class:`~hybridmem.retrieve.Retriever`; a search runs through
:mod:`hybridmem.searching` and the one ranking function, :func:`hybridmem.ranking.rank`. Callers use its methods,
never its parts (``store``, ``syncer`` and ``retriever`` are attributes for their own tests).

Example:
    >>> idx = MemoryIndex("datasets/demo-memory/workspace")          # doctest: +SKIP
    >>> idx.sync()                                                    # doctest: +SKIP
    >>> idx.search("retry backoff for payments").results[0].citation  # doctest: +SKIP
    'memory/2026-06-12.md#L14-L15'
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from hybridmem.config import RankConfig, Settings, load_settings, resolve_index_path, resolve_workspace
from hybridmem.embeddings import Embedder, LazyEmbedder
from hybridmem.errors import HybridMemError
from hybridmem.ranking import check_config, rank
from hybridmem.ranking.language import ask_in
from hybridmem.reader import read_memory
from hybridmem.records import Candidates, Document, LegHit, Ranking, SearchResponse
from hybridmem.retrieve import Retriever, Scope
from hybridmem.store import open_store
from hybridmem.sync import Progress, SyncReport, Syncer
from hybridmem.sync.census import chunk_languages
from hybridmem.searching import VectorCount, fallback_reason, plan_search, run_search, status_report

_AUTO = "auto"


class MemoryIndex:
    """A memory workspace (or a corpus of documents) and its index.

    Args:
        workspace: the folder holding ``MEMORY.md`` and ``memory/``; None for a documents-only index.
        index_path: the SQLite file; default ``store.path`` or ``<workspace>/.hybridmem/index.sqlite``.
        settings: all settings; default ``<workspace>/hybridmem.toml`` or the built-in defaults.
        embedder: an :class:`Embedder`, None for keyword-only, or ``"auto"`` to build one from settings lazily.
    """

    def __init__(self, workspace: str | Path | None = None, index_path: str | Path | None = None,
                 settings: Settings | None = None, embedder: Embedder | None | str = _AUTO) -> None:
        self.workspace: Path | None = resolve_workspace(workspace)
        self.settings = settings or load_settings(workspace=self.workspace)
        check_config(self.settings.ranking)  # a bad fusion name in hybridmem.toml fails every command, not only search
        self.index_path = resolve_index_path(index_path, self.workspace, self.settings)
        self.store = open_store(self.settings, self.index_path)
        if self.store.backend != "sqlite":  # the index is a namespace on a server, not the file
            self.index_path = self.store.path
        lazy = embedder == _AUTO
        self._embedder = LazyEmbedder(self.settings.embedding, None if lazy else embedder, lazy=lazy)  # type: ignore[arg-type]
        self._attach(self.store)
        self._lock = threading.RLock()
        self.dirty = False
        self.last_sync: SyncReport | None = None
        self._retired: list[Any] = []  # stores of index files deleted or replaced under this process

    def _attach(self, store: Any) -> None:
        self.store = store
        self.syncer = Syncer(store, self.settings, self.workspace, self._embedder)
        self.retriever = Retriever(store, self.settings, self._embedder, self.syncer.identity,
                                   on_provider_switch=lambda: setattr(self, "dirty", True))
        # ({"embedded": N, "total": M}, "vectors for N of M chunks ..." while embedding lags), once per generation
        self.vector_progress = VectorCount(store)

    def _reopen_if_lost(self) -> None:
        """The index file was deleted or replaced since this process opened it (someone removed it, and perhaps ran
        `hybridmem index`): open the file that is there now, made anew when there is none, so a long-lived process
        (a watcher, a server) goes on indexing into the index every other command reads. The old store stays open
        until :meth:`close` (a search may still be reading it)."""
        if self.store.backend != "sqlite" or not self.store.file_lost():
            return
        fresh = open_store(self.settings, self.index_path)  # may fail (what is there now is no index): nothing moves
        self._retired.append(self.store)
        self._attach(fresh)

    # -- lifecycle -----------------------------------------------------------------------------------------------
    def close(self) -> None:
        for old in self._retired:
            old.close()
        self.store.close()

    def __enter__(self) -> "MemoryIndex":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- embedder and settings -----------------------------------------------------------------------------------
    @property
    def embedder(self) -> Embedder | None:
        """The active embedder, loaded on first use; None means keyword-only."""
        return self._embedder.get()

    @property
    def fallback_reason(self) -> str | None:
        return fallback_reason(self._embedder, self.retriever, self.settings.embedding.provider)

    def settings_hash(self) -> str:
        return self.syncer.settings_hash()

    def built_keyword_only(self) -> bool:
        """True when the index was last built without an embedding model (its sync recorded provider ``none``:
        ``--keyword-only``, or ``[embedding] provider = "none"``); False for one never synced."""
        return self.store.get_meta("settings_hash") is not None and self.store.get_meta("provider") in ("none", "")

    def reload_settings(self, settings: Settings) -> bool:
        """Serve ``settings`` from the next call (a server's ``hybridmem.toml`` changed) and return True, when they
        leave the index's content, embedder and store as they are; else False, and nothing changes."""
        if (settings.index_hash() != self.settings.index_hash() or settings.embedding != self.settings.embedding
                or settings.store != self.settings.store):
            return False
        self.settings = self.syncer.settings = self.retriever.settings = settings
        return True

    # -- sync ----------------------------------------------------------------------------------------------------
    def indexing_elsewhere(self) -> bool:
        """True while another process holds this index's sync lock (it is indexing: search what it stored)."""
        return self.syncer.running_elsewhere()

    def sync_if_idle(self, **kwargs: Any) -> SyncReport | None:
        """:meth:`sync` now, unless a sync of this index already runs in this process (None then)."""
        if not self._lock.acquire(blocking=False):
            return None
        try:
            return self.sync(**kwargs)
        finally:
            self._lock.release()

    def sync(self, force: bool = False, progress: Progress | None = None, wait: bool = False,
             embed_limit: int | None = None, defer_sessions: bool = True) -> SyncReport:
        """Bring the index up to date with the workspace (new, changed and deleted files, by content hash); a
        settings change or ``force`` reindexes in full, atomically. See :meth:`hybridmem.sync.Syncer.sync`."""
        with self._lock:
            self._reopen_if_lost()
            report = self.syncer.sync(force=force, progress=progress, wait=wait, embed_limit=embed_limit,
                                      defer_sessions=defer_sessions)
            self.retriever.drop_caches()
            lost = self.store.file_lost()
            if lost:  # SQLite wrote into an unlinked file: nothing was saved
                raise HybridMemError(f"{lost} while indexing, so nothing was saved; run `hybridmem index` again")
            self.dirty = False
            self.last_sync = report
            return report

    def index_documents(self, documents: Iterable[Document], prune: bool = True,
                        progress: Progress | None = None) -> SyncReport:
        """Index in-memory documents (evaluation corpora) through the same pipeline as files."""
        with self._lock:
            report = self.syncer.index_documents(documents, prune, progress)
            self.retriever.drop_caches()
            self.last_sync = report
            return report

    # -- search --------------------------------------------------------------------------------------------------
    def retrieve(self, query: str, pool: int, keyword: bool = True, vector: bool = True, scope: Scope | None = None,
                 with_vectors: bool = False, query_vector: np.ndarray | None = None,
                 timings: dict[str, float] | None = None, align: bool = True) -> Candidates:
        """Both legs for ``query``, each up to ``pool`` long, plus chunk info. A leg set to False is not queried;
        ``align``: with the answer gate's token alignment (:meth:`align`)."""
        return self.retriever.retrieve(query, pool, keyword, vector, scope, with_vectors, query_vector, timings, align)

    def align(self, candidates: Candidates, always: bool = False) -> Candidates:
        """``candidates`` with the answer gate's token alignment (:mod:`hybridmem.retrieve.alignment`), when the
        embedder gives token states or its model's gate reads the alignment (or ``always``); see
        :meth:`~hybridmem.retrieve.retriever.Retriever.align`."""
        return self.retriever.align(candidates, always)

    def warm_alignment(self) -> None:
        """Load what a search's token alignment reads (a server's warm-up); see
        :meth:`~hybridmem.retrieve.retriever.Retriever.warm_alignment`."""
        self.retriever.warm_alignment()

    def search(self, query: str, config: RankConfig | None = None, source: str | None = None,
               path_prefix: str | None = None, session: str | None = None, now: float | None = None,
               **overrides: Any) -> SearchResponse:
        """Retrieve and rank ``query``. ``overrides`` change ranking settings for this call (``fusion="rrf"``);
        ``session``: one transcript (id or file name) of the configured session folders."""
        query, notice, cfg, scope = plan_search(query, self.settings, config, overrides, source, path_prefix, session,
                                                self.workspace)
        if self.dirty and self.settings.sync.sync_on_search and self.workspace is not None and not self.read_only:
            self.sync()
        return run_search(self.retriever, self._embedder, self.syncer.identity, query, cfg, scope, now, notice,
                          self.vector_progress, self.settings.embedding.provider, self.ask_in)

    def ask_in(self, query: str, ranking: Ranking) -> tuple[str, ...]:
        """Where ``ranking`` (of ``query``) refused: the languages other than the question's to ask again in, as a
        search's reply names them (:func:`hybridmem.ranking.language.ask_in`); empty where it answered."""
        if not ranking.abstained:
            return ()
        return ask_in(query, chunk_languages(self.store), [h.text for h in ranking.candidates])

    def rank(self, candidates: Candidates, config: RankConfig | None = None, now: float | None = None,
             full_mmr: bool = False) -> Ranking:
        """Rank what :meth:`retrieve` returned under ``config`` (default: the served one), as :meth:`search` does;
        the workbench ranks one retrieval under several configs. ``full_mmr``: see :func:`hybridmem.ranking.rank`."""
        return rank(candidates, config or self.settings.ranking, now=now, full_mmr=full_mmr)

    # -- the parts of a search one at a time, for the eval and the benchmarks -----------------------------------
    def keyword_search(self, in_memory: bool = True) -> Callable[..., list[LegHit]]:
        """The keyword leg as :meth:`retrieve` runs it now, a function of ``(query, pool, scope=None)``
        (``in_memory=False``: always FTS5, never the in-memory postings)."""
        return self.retriever.keyword_search(in_memory)

    def vectors(self) -> tuple:
        """``(ids, matrix, sources, paths)``: every chunk vector the index holds for its embedding model."""
        return self.retriever.vectors()

    def cached_query_vectors(self, texts: Sequence[str], embedder: Embedder) -> tuple[dict[str, np.ndarray], int]:
        """Vectors of ``texts`` as queries, through the index's embedding cache and the user-level one; and how many
        were embedded."""
        shared = self.syncer.shared_cache if getattr(embedder, "shared_cache", False) else None
        return self.retriever.cached_query_vectors(texts, embedder, shared)

    def wait_for_copies(self) -> None:
        """Block until the in-memory copies being built in the background are done (benchmarks, tests)."""
        self.retriever.wait_for_copies()

    # -- get -----------------------------------------------------------------------------------------------------
    def get(self, path: str, from_line: int | None = None, lines: int | None = None) -> dict[str, Any]:
        """Read lines of an indexed memory file or transcript. Refuses absolute paths, ``..``, links leading outside
        the configured memory places (the indexer's rule) and anything not indexed. Transcripts return their redacted
        ``User:``/``Assistant:`` lines."""
        return read_memory(path, self.indexed_file, self.workspace, self.settings.sources, from_line, lines)

    def indexed_file(self, path: str) -> dict[str, Any] | None:
        """The index's row for the file ``path`` (``abspath``, ``source``, ``size``...), None when not indexed."""
        return self.store.files().get(path)

    # -- status --------------------------------------------------------------------------------------------------
    def status(self, disk: bool = False) -> dict[str, Any]:
        """The index's counts, identity and health, how it searches, and where its last sync got. ``disk``: also
        ``changed_on_disk``, the files the next sync would read or drop (:meth:`Syncer.changed_on_disk`: a walk of the
        workspace and a stat of each file), and ``dirty`` true when there are any, not only when a watcher in this
        process saw a change."""
        report = status_report(self.store, self.retriever, self._embedder, self.vector_progress())
        started = float(self.store.get_meta("sync_started", "0") or 0)
        stopped = started > (report["last_sync"] or 0) and not self.indexing_elsewhere()
        changed = self.syncer.changed_on_disk() if disk else 0
        return {"workspace": str(self.workspace) if self.workspace else None, "index_path": str(self.index_path),
                **report, "sync_interrupted": stopped,
                "dirty": self.dirty or changed > 0, **({"changed_on_disk": changed} if disk else {}),
                "fallback_reason": self.fallback_reason if self._embedder.loaded else None,
                "last_sync_report": self.last_sync.to_dict() if self.last_sync else None}

    def check(self) -> list[str]:
        """Problems ``quick_check`` and the row counts find in the index file (empty when it is sound)."""
        return self.store.check()

    def files(self) -> list[dict[str, Any]]:
        """Indexed files with their chunk counts."""
        counts = self.store.file_chunk_counts()
        return [{**row, "chunks": counts.get(p, 0)} for p, row in self.store.files().items()]

    def counts(self) -> dict[str, int]:
        """How many files and chunks (and embedded chunks) the index holds."""
        return self.store.counts()

    def generation(self) -> str:
        """Changes whenever a sync changes the index, so copies of an older index can be told apart."""
        return str(self.store.get_meta("generation", "0"))

    @property
    def read_only(self) -> str | None:
        """Why the index can only be read (opened read-only), or None when it can be written."""
        return self.store.read_only

    def chunk_paths(self) -> dict[int, str]:
        """Chunk id -> file path (a document's id in an index of documents)."""
        return self.store.chunk_paths()
