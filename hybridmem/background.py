"""Build a faster copy of something in the background, from the second time it is asked for.

Three in-memory copies follow this rule: the keyword postings (:mod:`hybridmem.retrieve.keywords`), the int8 copy of
the vector matrix (:mod:`hybridmem.retrieve.vectors`) and the ONNX copy of the query embedder
(:mod:`hybridmem.embeddings.local`). The first call is served by the slow path and builds nothing, so a one-shot CLI
search never pays for a copy; the second call starts the build in a thread, and no call ever waits for it: callers use
the copy once :attr:`SecondCallBuild.done` says it is there. Each copy has one setting that switches it off
(``store.keyword_memory``, ``store.int8_min_rows = 0``, ``embedding.query_runtime = "torch"``).

Threads are joined at interpreter exit (:func:`join_all`): a build thread torn down in the middle of native code
(numba, torch's exporter) aborts the process ("terminate called without an active exception").

Example:
    >>> b = SecondCallBuild("demo", lambda: None)
    >>> b.request(), b.request()
    (False, True)
    >>> b.wait(); b.done
    True
"""

from __future__ import annotations

import atexit
import threading
import weakref
from typing import Callable

_RUNNING: "weakref.WeakSet[threading.Thread]" = weakref.WeakSet()
_RUNNING_LOCK = threading.Lock()


class SecondCallBuild:
    """Runs ``build`` once, in a background thread started by the second :meth:`request`.

    Args:
        name: the thread's name (``hybridmem-<name>``), shown in tracebacks and profilers.
        build: the work; its exceptions are kept in :attr:`error` (the slow path keeps answering).
        enabled: False never builds (the copy's off switch).
    """

    def __init__(self, name: str, build: Callable[[], object], enabled: bool = True) -> None:
        self.name = name
        self._build = build
        self.enabled = enabled
        self._calls = 0
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.done = False
        self.error: BaseException | None = None

    def request(self) -> bool:
        """Count one call; True when this call started the build."""
        with self._lock:
            self._calls += 1
            if self._calls != 2 or not self.enabled or self._thread is not None:
                return False
            self._thread = threading.Thread(target=self._run, name=f"hybridmem-{self.name}", daemon=True)
            with _RUNNING_LOCK:
                _RUNNING.add(self._thread)
            self._thread.start()
            return True

    @property
    def started(self) -> bool:
        return self._thread is not None

    def _run(self) -> None:
        try:
            self._build()
        except Exception as exc:  # noqa: BLE001 - the slow path stays correct; the error is kept for status()
            self.error = exc
        finally:
            self.done = True

    def wait(self, timeout: float | None = None) -> None:
        """Block until a started build has finished (benchmarks and tests)."""
        if self._thread is not None:
            self._thread.join(timeout)


def join_all(timeout: float = 30.0) -> None:
    """Wait for running background builds (called at interpreter exit)."""
    with _RUNNING_LOCK:
        threads = list(_RUNNING)
    for t in threads:
        if t.is_alive() and t is not threading.current_thread():
            t.join(timeout)


atexit.register(join_all)
