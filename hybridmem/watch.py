"""Keeping the index fresh on its own: a file watcher with debounce, an optional interval, coalesced syncs.

* :class:`SyncCoordinator` runs syncs on one worker thread. Requests that arrive while a sync runs are coalesced into
  exactly one more sync afterwards, so at most one sync runs at a time and none is lost.
* :class:`Watcher` watches the workspace (and extra paths) with ``watchdog``. A change to a ``.md`` or ``.jsonl`` file
  marks the index dirty at once (so a search made before the debounce ends syncs first, when ``sync.sync_on_search``
  is on) and (re)starts a debounce timer (``sync.watch_debounce_s``, 1.5 s by default); when it fires, a sync is
  requested. A file that never stops changing (an agent's live transcript) does not hold the others back: a sync
  starts at most ``sync.watch_max_wait_s`` (10 s) after the first change it has not seen. With
  ``sync.interval_s > 0`` a sync is also requested periodically. It watches the workspace and every
  configured memory place outside it; :meth:`Watcher.rearm` re-reads them after a settings reload.
* ``hybridmem watch [WORKSPACE]`` runs a first sync, then watches until interrupted, printing one line per sync.

Example:
    >>> with Watcher(MemoryIndex("ws")) as w:      # doctest: +SKIP
    ...     ...                                     # edits to ws/memory/*.md are indexed 1.5 s after they stop
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any, Callable

from hybridmem.sources import source_roots, within
from hybridmem.sync.syncer import ReadOnlyIndexError
from hybridmem.sync.documents import SyncReport

WATCHED_SUFFIXES = (".md", ".jsonl")


RETRY_S = (2.0, 120.0)  # after a failed sync: the first wait before trying again, and the longest (doubling)
KEPT_ERRORS = 50  # the latest failures kept in SyncCoordinator.errors


class SyncCoordinator:
    """One worker thread; :meth:`request` asks for a sync, coalescing requests made while one runs.

    A sync that fails (the PostgreSQL server is down, the disk is full) is tried again on its own after ``retry_s[0]``
    seconds, doubling up to ``retry_s[1]`` while it keeps failing: a note saved during an outage is indexed once the
    store is back, not at the next unrelated change. A read replica's refusal is not retried (it cannot change).
    """

    def __init__(self, sync: Callable[[], SyncReport], on_report: Callable[[SyncReport], None] | None = None,
                 on_error: Callable[[BaseException], None] | None = None,
                 retry_s: tuple[float, float] = RETRY_S) -> None:
        self._sync = sync
        self._on_report = on_report
        self._on_error = on_error
        self._retry_s = retry_s
        self._retry_wait = 0.0  # the wait before the next retry, 0 while syncs succeed
        self._retry: threading.Timer | None = None
        self.retries = 0
        self._cond = threading.Condition()
        self._pending = False
        self._running = False
        self._stop = False
        self.syncs = 0
        self.requests = 0
        self.max_concurrent = 0
        self._concurrent = 0
        self.errors: list[str] = []
        self._thread = threading.Thread(target=self._loop, name="hybridmem-sync", daemon=True)
        self._thread.start()

    def request(self) -> None:
        with self._cond:
            self.requests += 1
            self._pending = True
            self._cond.notify_all()

    @property
    def busy(self) -> bool:
        with self._cond:
            return self._pending or self._running

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stop:
                    self._cond.wait()
                if self._stop:
                    return
                self._pending = False
                self._running = True
            self._concurrent += 1
            self.max_concurrent = max(self.max_concurrent, self._concurrent)
            try:
                report = self._sync()
                self.syncs += 1
                self._retry_wait = 0.0
                if self._on_report:
                    self._on_report(report)
            except Exception as exc:  # noqa: BLE001 - a failed sync is reported; the watcher keeps running
                self.errors = [*self.errors[-(KEPT_ERRORS - 1):], f"{type(exc).__name__}: {exc}"]
                if not isinstance(exc, ReadOnlyIndexError):
                    self._retry_later()
                if self._on_error:
                    self._on_error(exc)
            finally:
                self._concurrent -= 1
                with self._cond:
                    self._running = False
                    self._cond.notify_all()

    def _retry_later(self) -> None:
        with self._cond:
            if self._stop:
                return
            self._retry_wait = min(max(self._retry_wait * 2, self._retry_s[0]), self._retry_s[1])
            if self._retry is not None:
                self._retry.cancel()
            self._retry = threading.Timer(self._retry_wait, self._retry_now)
            self._retry.daemon = True
            self._retry.start()

    def _retry_now(self) -> None:
        self.retries += 1
        self.request()

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Block until no sync is pending or running; False on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._pending or self._running:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            if self._retry is not None:
                self._retry.cancel()
            self._cond.notify_all()
        self._thread.join(timeout=60)


class Watcher:
    """Watch a :class:`~hybridmem.index.MemoryIndex`'s workspace and sync it after changes settle.

    Args:
        index: the index to keep fresh (must have a workspace).
        debounce_s: quiet time after the last change before syncing (default ``sync.watch_debounce_s``).
        interval_s: also sync every this many seconds; 0 disables (default ``sync.interval_s``).
        on_report: called with each :class:`~hybridmem.sync.documents.SyncReport`.
        on_error: called with each exception a sync raised.
    """

    def __init__(self, index: Any, debounce_s: float | None = None, interval_s: float | None = None,
                 on_report: Callable[[SyncReport], None] | None = None,
                 on_error: Callable[[BaseException], None] | None = None) -> None:
        if index.workspace is None:
            from hybridmem.errors import WorkspaceError

            raise WorkspaceError("only an index with a workspace can be watched")
        self.index = index
        sync_cfg = index.settings.sync
        self.debounce_s = sync_cfg.watch_debounce_s if debounce_s is None else debounce_s
        self.max_wait_s = max(self.debounce_s, sync_cfg.watch_max_wait_s)
        self._first_change: float | None = None  # monotonic time of the first change no sync has started on
        self.interval_s = sync_cfg.interval_s if interval_s is None else interval_s
        self.coordinator = SyncCoordinator(index.sync, on_report, on_error)
        self.events = 0
        self._timer: threading.Timer | None = None
        self._timer_lock = threading.Lock()
        self._observer: Any = None
        self._handler: Any = None
        self._stop = threading.Event()
        self._interval_thread: threading.Thread | None = None
        ignore = set(index.settings.sources.ignore_dirs)
        self._ignore = ignore
        self._watched: tuple[str, ...] = ()
        self._watch_roots([Path(index.workspace)])

    # -- events ----------------------------------------------------------------------------------------------------
    def relevant(self, path: str, is_directory: bool = False, event_type: str = "modified") -> bool:
        """Whether a file-system event at ``path`` can change the index."""
        # only folders below a watched root are ignored: a workspace inside a folder named node_modules is watched
        below = next((path[len(r) + 1:] for r in self._watched if path.startswith(r + os.sep)), path)
        parts = Path(below).parts
        if any(p in self._ignore for p in parts):
            return False
        if is_directory:
            return event_type in ("deleted", "moved")
        return path.lower().endswith(WATCHED_SUFFIXES)

    def notify(self, path: str = "", is_directory: bool = False, event_type: str = "modified") -> None:
        """Record a change: mark the index dirty and restart the debounce timer."""
        if path and not self.relevant(path, is_directory, event_type):
            return
        self.events += 1
        self.index.dirty = True
        with self._timer_lock:
            now = time.monotonic()
            if self._first_change is None:
                self._first_change = now
            if self._timer is not None:
                self._timer.cancel()
            delay = min(self.debounce_s, max(0.0, self._first_change + self.max_wait_s - now))
            self._timer = threading.Timer(delay, self._fire)
            self._timer.daemon = True
            self._timer.start()

    def _fire(self) -> None:
        with self._timer_lock:
            self._timer = None
            self._first_change = None
        self.coordinator.request()

    def _interval_loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.coordinator.request()

    # -- lifecycle -------------------------------------------------------------------------------------------------
    def roots(self) -> list[Path]:
        """The folders to watch: the workspace, and every configured memory place outside it (a linked ``memory/``
        folder's target, extra paths, session folders: :func:`hybridmem.sources.source_roots`)."""
        ws = Path(self.index.workspace)
        watched = (os.path.realpath(ws),)
        out = [ws]
        for root in source_roots(ws, self.index.settings.sources):
            target = root if os.path.isdir(root) else os.path.dirname(root)
            if os.path.isdir(target) and not within(target, watched):
                watched += (target,)
                out.append(Path(target))
        return out

    def rearm(self) -> None:
        """Watch what the index's settings name now (a settings reload changed extra or session paths), and sync."""
        self._ignore = set(self.index.settings.sources.ignore_dirs)
        if self._observer is not None:
            self._observer.unschedule_all()
            self._schedule()
        self.notify()

    def start(self) -> "Watcher":
        from watchdog.events import FileSystemEventHandler
        from watchdog.observers import Observer

        watcher = self

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event: Any) -> None:
                if event.event_type in ("opened", "closed_no_write"):
                    return
                for p in (event.src_path, getattr(event, "dest_path", "")):
                    if p and watcher.relevant(os.fsdecode(p), event.is_directory, event.event_type):
                        watcher.notify()
                        return

        self._handler = Handler()
        self._observer = Observer()
        self._schedule()
        self._observer.start()
        if self.interval_s > 0:
            self._interval_thread = threading.Thread(target=self._interval_loop, name="hybridmem-interval",
                                                     daemon=True)
            self._interval_thread.start()
        return self

    def _schedule(self) -> None:
        roots = self.roots()
        self._watch_roots(roots)
        for root in roots:
            self._observer.schedule(self._handler, str(root), recursive=True)

    def _watch_roots(self, roots: list[Path]) -> None:
        """Remember ``roots`` (as given and resolved, the longest first) for :meth:`relevant`."""
        names = {str(Path(os.path.abspath(r))).rstrip(os.sep) for r in roots}
        names |= {os.path.realpath(r).rstrip(os.sep) for r in roots}
        self._watched = tuple(sorted(names, key=len, reverse=True))

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Block until no debounce timer is armed and no sync is pending or running."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._timer_lock:
                armed = self._timer is not None
            if not armed and not self.coordinator.busy:
                return True
            time.sleep(0.02)
        return False

    def stop(self) -> None:
        self._stop.set()
        with self._timer_lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=10)
        self.coordinator.stop()

    def __enter__(self) -> "Watcher":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
