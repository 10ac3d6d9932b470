"""The long-lived memory service behind ``hybridmem mcp``: one index, kept in sync, serving tool calls.

:class:`MemoryService` owns one :class:`~hybridmem.index.MemoryIndex` for the life of the server (the model and the
in-memory copies load once), a :class:`~hybridmem.watch.Watcher` that syncs it after file changes settle, and the
query log. Tool calls go through :class:`~hybridmem.tools.MemoryTools` (the one implementation of the handlers).

* Searches never wait for a sync: the watcher syncs on its own thread and the served settings have
  ``sync.sync_on_search`` off (a search would otherwise take the facade's sync lock when the index is dirty). The
  store's write transactions are short (embedding happens outside them) and readers never see one half done.
* ``hybridmem.toml`` is checked (mtime and size) before every call; a change takes effect on that call. Settings that
  change what the index holds open a new index with them, sync it and load its model in the background, and swap it
  in when it is ready: until then searches answer from the old index, with its model (both legs, no wait).
* The embedding model starts loading at once, in the background. A search waits for it up to ``serve.model_wait_s``
  (1 s; e5 loads in about 0.2 s), then runs keyword-only and says so (``fallback_reason``), so no answer waits for
  torch. Then the answer gate's token alignment loads (its encoder session), and a search waits for that up to
  ``serve.alignment_wait_s`` (3 s) before it goes without it: the first question of a fresh server is decided by
  the same gate as every later one.
* :meth:`MemoryService.close` waits (up to :data:`CLOSE_WAIT_S` in all) for the work it started in the background: the
  model loading, a re-index after a settings change. A process that exits while ONNX Runtime builds a session or
  embeds on another thread aborts ("terminate called without an active exception", SIGABRT), which a client that
  disconnects right after its first answer, or during a re-index, would otherwise see.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Callable

from hybridmem.config import Settings, load_settings
from hybridmem.errors import ConfigError, HybridMemError
from hybridmem.index import MemoryIndex
from hybridmem.querylog import QueryLog, log_path, ranking_hash
from hybridmem.ranking import check_config
from hybridmem.redaction import Redactor
from hybridmem.reader import cited_lines
from hybridmem.sessions import compile_redactions
from hybridmem.sync.lock import sync_running
from hybridmem.tools import GET_ARGS, RANKING_ARGS, SEARCH_ARGS, MemoryTools, parse_args

LOADING_REASON = "the embedding model is still loading: keyword-only"
CLOSE_WAIT_S = 30.0  # how long close() waits, in all, for the background work still running


class MemoryService:
    """Serve one workspace.

    Args:
        workspace: the memory workspace.
        config: settings TOML (default ``<workspace>/hybridmem.toml``); watched for changes.
        index_path: the index file (default ``<workspace>/.hybridmem/index.sqlite``).
        keyword_only: no embeddings at all.
        watch: keep the index in sync with a file watcher.
        debounce_s: the watcher's quiet time (default ``sync.watch_debounce_s``).
        preload: load the embedding model in the background at once.
    """

    def __init__(self, workspace: str | Path, config: str | Path | None = None, index_path: str | Path | None = None,
                 keyword_only: bool = False, watch: bool = True, debounce_s: float | None = None,
                 preload: bool = True) -> None:
        self.workspace = Path(workspace).absolute()
        self.config_path = Path(config) if config else self.workspace / "hybridmem.toml"
        self._explicit_config = config is not None
        self.keyword_only = keyword_only
        self.index_path = index_path
        self.debounce_s = debounce_s
        self.watch = watch
        self.settings_error: str | None = None
        self._config_stamp = self._stamp()
        self._lock = threading.Lock()
        self._workers: list[threading.Thread] = []  # what close() waits for
        self._workers_lock = threading.Lock()  # apart from _lock: refresh() starts workers while holding it
        self._retired: list[MemoryIndex] = []
        self._rebuilds = 0  # re-indexes started by settings changes: only the latest one is served
        # while a re-index for stricter redaction runs, the old index's text goes out through the new rules
        self.interim: Redactor | None = None
        # The served index, whether its model is ready and whether its token alignment is, swapped together (a search
        # reads them at once).
        self._serving: tuple[MemoryIndex, threading.Event, threading.Event] = (
            self._open(self._load()), threading.Event(), threading.Event())
        self.index.sync()
        self.log = self._make_log(self.index.settings)
        self.watcher = self._start_watcher(self.index)
        self.tools = MemoryTools(_Backend(self), citations="on")
        if preload:
            self._background(self._load_model, self.index, name="hybridmem-model")
        else:
            self._model_ready.set()
            self._serving[2].set()

    @property
    def index(self) -> MemoryIndex:
        """The index being served."""
        return self._serving[0]

    @property
    def _model_ready(self) -> threading.Event:
        return self._serving[1]

    # -- settings ------------------------------------------------------------------------------------------------
    def _stamp(self) -> tuple[int, int] | None:
        try:
            st = self.config_path.stat()
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def _load(self) -> Settings:
        settings = load_settings(self.config_path if self._explicit_config else None, workspace=self.workspace)
        overrides: dict[str, Any] = {"sync": {"sync_on_search": False}}  # the watcher syncs; searches never wait
        if self.keyword_only:
            overrides["embedding"] = {"provider": "none"}
        return settings.override(**overrides)

    def _open(self, settings: Settings) -> MemoryIndex:
        return MemoryIndex(self.workspace, index_path=self.index_path, settings=settings)

    def _make_log(self, settings: Settings) -> QueryLog:
        return QueryLog(log_path(self.workspace), settings.serve.query_log_max_bytes, settings.sources,
                        enabled=settings.serve.query_log)

    def _start_watcher(self, index: MemoryIndex) -> Any:
        if not self.watch:
            return None
        from hybridmem.watch import Watcher

        return Watcher(index, debounce_s=self.debounce_s).start()

    def _load_model(self, index: MemoryIndex) -> None:
        _, ready, aligned = self._serving  # this generation's, taken before a rebuild could swap others in
        try:
            embedder = index.embedder
        finally:
            ready.set()
        try:
            if embedder is not None:
                index.warm_alignment()  # the answer gate's token alignment
        finally:
            aligned.set()

    def refresh(self) -> None:
        """Apply a changed settings file (called before every tool call). A file that does not parse leaves the
        served settings as they are and is reported in ``memory_status``."""
        stamp = self._stamp()
        if stamp == self._config_stamp:
            return
        with self._lock:
            if stamp == self._config_stamp:
                return
            self._config_stamp = stamp
            try:
                settings = self._load()
                check_config(settings.ranking)  # a fusion or normalization rank() does not know, as at start
            except Exception as exc:  # noqa: BLE001 - keep serving what was applied; memory_status says why
                why = str(exc) if isinstance(exc, ConfigError) else f"{type(exc).__name__}: {exc}"
                self.settings_error = f"{self.config_path.name} not applied: {why}"
                return
            self.settings_error = None
            self._rebuilds += 1  # any re-index in flight was for settings the file no longer names
            self.interim = None
            self.log = self._make_log(settings)
            old_sources = self.index.settings.sources
            if self.index.reload_settings(settings):
                if settings.sources != old_sources:
                    self._resync(_narrowed(old_sources, settings.sources))
                return
            self.interim = _stricter(self.index.settings.sources, settings.sources)
            new = self._open(settings)
            self._background(self._replace, new, self._rebuilds, name="hybridmem-reindex")

    def _resync(self, narrowed: bool) -> None:
        """Sources changed in place (extra or session paths, ignores): watch what they name now and sync. When
        places were taken away (transcripts switched off, an extra path removed, a folder ignored), their files leave
        the index before this call searches (a quick sync: rows only, vectors left to the next)."""
        if narrowed:
            try:
                self.index.sync_if_idle(embed_limit=0)  # a sync running now (the watcher's) is not waited for
            except Exception as exc:  # noqa: BLE001 - keep serving; memory_status says why
                self.settings_error = f"{self.config_path.name}: the sync after it changed failed: {exc}"
        if self.watcher is not None:
            self.watcher.rearm()
        else:
            self.index.dirty = True
            self._background(self._sync_quietly, self.index, name="hybridmem-resync")

    def _background(self, target: Callable[..., None], *args: Any, name: str) -> None:
        """Run ``target(*args)`` on a daemon thread that :meth:`close` waits for."""
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        with self._workers_lock:  # started under the lock: another call prunes only threads that have ended
            thread.start()
            self._workers = [t for t in self._workers if t.is_alive()] + [thread]

    def _sync_quietly(self, index: MemoryIndex) -> None:
        try:
            index.sync()
        except Exception as exc:  # noqa: BLE001 - keep serving; memory_status says why
            self.settings_error = f"{self.config_path.name}: the sync after it changed failed: {exc}"

    def _replace(self, new: MemoryIndex, rebuild: int) -> None:
        """Sync an index opened with new content settings and load its model, then serve it: searches use the old
        index and its model meanwhile, at full quality. A re-index that a later settings change superseded (two edits
        in a row) is dropped, whichever ends first: the settings the file names now are the ones served."""
        try:
            new.sync()
            if new.embedder is not None:  # usually loaded by the sync already; never loaded after the swap
                new.warm_alignment()
        except Exception as exc:  # noqa: BLE001 - keep serving the old index and say why
            if rebuild == self._rebuilds:
                self.settings_error = f"{self.config_path.name} not applied: the re-index failed: {exc}"
            new.close()
            return
        with self._lock:
            if rebuild != self._rebuilds:
                new.close()
                return
            old, old_watcher = self.index, self.watcher
            if old_watcher is not None:
                old_watcher.stop()
            ready = threading.Event()
            ready.set()
            self._serving = (new, ready, ready)
            self.interim = None
            self.watcher = self._start_watcher(new)
            self._retired.append(old)  # closed at shutdown: a search may still be running on it
        try:  # what changed since new.sync() looked (a note a memory_write synced into the old index meanwhile)
            new.sync()
        except Exception as exc:  # noqa: BLE001 - the watcher or the next write syncs again; say why meanwhile
            self.settings_error = f"{self.config_path.name}: the sync after the re-index failed: {exc}"

    # -- calls ---------------------------------------------------------------------------------------------------
    @property
    def settings(self) -> Settings:
        return self.index.settings

    def search(self, query: str, client: str = "local", **kwargs: Any) -> dict[str, Any]:
        """``memory_search`` with raw arguments; raises HybridMemError on a bad one. Logged."""
        self.refresh()
        t0 = time.perf_counter()
        out = self.tools.memory_search({"query": query, **kwargs})
        ms = (time.perf_counter() - t0) * 1000
        args = parse_args({"query": query, **kwargs}, SEARCH_ARGS)
        args.pop("query")
        cfg = self.settings.ranking.replace(**{k: args[k] for k in RANKING_ARGS if k in args})
        hits = [(r.get("citation") or f"{r['path']}#L{r['start_line']}", r["score"]) for r in out["results"]]
        record = self.log.search(client, out["query"], args, ranking_hash(cfg), hits, ms,  # as searched (capped)
                                 sent=query if isinstance(query, str) else None)
        out["search_id"] = record["id"]
        if (rules := self.interim) is not None:
            for hit in out["results"]:
                hit["snippet"] = rules.redact(hit["snippet"])
        return out

    def get(self, path: str, client: str = "local", **kwargs: Any) -> dict[str, Any]:
        """``memory_get`` with raw arguments; raises HybridMemError on a bad one (an escape included). Logged."""
        self.refresh()
        out = self.tools.memory_get({"path": path, **kwargs})
        args = parse_args({"path": path, **kwargs}, GET_ARGS)
        _, first, count = cited_lines(path, args.get("from"), args.get("lines"))  # a citation's lines count as asked
        self.log.get(client, out.get("path", path), first, count)
        if (rules := self.interim) is not None and isinstance(out.get("text"), str):
            out["text"] = rules.redact(out["text"])
        return out

    def status(self) -> dict[str, Any]:
        """``memory_status``: files, chunks, model, last sync, whether a sync is running."""
        self.refresh()
        s = self.index.status(disk=True)
        watcher = self.watcher
        return {
            "workspace": s["workspace"], "files": s.get("files", 0), "chunks": s.get("chunks", 0),
            "provider": s["provider"], "model": s["model"], "model_loaded": self._model_ready.is_set(),
            "last_sync": _iso(s["last_sync"]), "sync_running": bool(watcher and watcher.coordinator.busy)
            or sync_running(str(s["index_path"])),
            "dirty": s["dirty"], "changed_on_disk": s["changed_on_disk"], "watching": watcher is not None,
            "settings_hash": s["settings_hash"],
            "ranking_hash": ranking_hash(self.settings.ranking), "query_log": str(self.log.path)
            if self.log.enabled else None, "settings_error": self.settings_error,
            "vectors": s.get("vectors"), "languages": s.get("languages", {}),
            **{k: s[k] for k in ("vectors_note", "unread_note") if s.get(k)},
        }

    def close(self) -> None:
        deadline = time.monotonic() + CLOSE_WAIT_S  # let background work finish before the process can exit
        with self._workers_lock:
            workers = list(self._workers)
        for thread in workers:
            thread.join(max(0.0, deadline - time.monotonic()))
        if self.watcher is not None:
            self.watcher.stop()
        for idx in (*self._retired, self.index):
            idx.close()

    def __enter__(self) -> "MemoryService":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _stricter(old: Any, new: Any) -> Redactor | None:
    """The rules sources settings ``new`` redact with, when they redact differently from ``old`` (a pattern added,
    redaction switched on): the text of an index built under ``old`` is passed through them until one built under
    ``new`` is served."""
    keys = ("redact_patterns", "redact_sessions", "redact_memory")
    if all(getattr(old, k) == getattr(new, k) for k in keys) or not (new.redact_sessions or new.redact_memory):
        return None
    return compile_redactions(new.redact_patterns)


def _narrowed(old: Any, new: Any) -> bool:
    """Whether sources settings ``new`` take places away that ``old`` indexed."""
    return bool(set(old.session_paths) - set(new.session_paths) or set(old.extra_paths) - set(new.extra_paths)
                or set(new.ignore_dirs) - set(old.ignore_dirs))


class _Backend:
    """What :class:`MemoryTools` searches: the service's current index, keyword-only while the model loads (after
    waiting ``serve.model_wait_s`` for it), without the token alignment while that loads (after waiting
    ``serve.alignment_wait_s`` for it)."""

    def __init__(self, service: MemoryService) -> None:
        self._service = service

    @property
    def settings(self) -> Settings:
        return self._service.index.settings

    def search(self, query: str, **kwargs: Any) -> Any:
        index, model_ready, aligned = self._service._serving
        settings = index.settings
        uses_model = settings.ranking.vector_weight > 0
        if uses_model and not model_ready.wait(settings.serve.model_wait_s):
            resp = index.search(query, vector_weight=0.0, text_weight=1.0, **kwargs)
            return _Loading(resp)
        if uses_model and settings.embedding.token_alignment and settings.embedding.provider != "none":
            aligned.wait(settings.serve.alignment_wait_s)
        return index.search(query, **kwargs)

    def get(self, path: str, from_line: int | None = None, lines: int | None = None) -> dict[str, Any]:
        return self._service.index.get(path, from_line=from_line, lines=lines)


class _Loading:
    """A keyword-only response given while the model loads, marked as a fallback."""

    def __init__(self, resp: Any) -> None:
        self._resp = resp

    def to_dict(self, citations: bool = True) -> dict[str, Any]:
        out = self._resp.to_dict(citations=citations)
        out["fallback"], out["fallback_reason"] = True, LOADING_REASON
        return out


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def guarded(fn: Callable[..., dict[str, Any]], *args: Any, **kwargs: Any) -> tuple[dict[str, Any], str | None]:
    """``(result, None)`` or ``({}, one-sentence error)``: nothing a tool call does raises past here."""
    try:
        return fn(*args, **kwargs), None
    except HybridMemError as exc:
        return {}, _sentence(str(exc))
    except Exception as exc:  # noqa: BLE001 - a tool call never raises into the transport
        return {}, _sentence(f"memory is unavailable: {type(exc).__name__}: {exc}")


def _sentence(text: str) -> str:
    text = " ".join(text.split())
    return text + ("" if text.endswith((".", "!", "?")) else ".")


__all__ = ["LOADING_REASON", "MemoryService", "guarded"]
