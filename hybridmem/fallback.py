"""Search backends with a fallback: an external engine first, the builtin index when it fails.

:class:`BackendManager` wraps a primary search backend (any object with ``search(query, **kw)``, e.g. an external
engine) and the builtin :class:`~hybridmem.index.MemoryIndex`, after the reference system's ``FallbackMemoryManager``:

* the primary serves searches while it works;
* when it raises, the manager records the error, closes and drops it (the reference's cache eviction), and answers from
  the builtin backend, created lazily;
* after ``retry_after_s`` the next search builds a fresh primary and tries it again (self-healing);
* when every backend fails, ``search`` returns an :class:`Unavailable` result instead of raising into the agent;
* :meth:`BackendManager.probe` is meant for start-up, so a misconfigured primary shows up before the first question.

The same idea for embedding providers at run time is :class:`hybridmem.retrieve.failover.EmbedderFailover`.

Example:
    >>> mgr = BackendManager(lambda: Broken(), lambda: Echo())          # doctest: +SKIP
    >>> mgr.search("q").results                                         # doctest: +SKIP
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from hybridmem.config import BACKEND_RETRY_AFTER_S



class SearchBackend(Protocol):
    """What the manager needs from a backend."""

    def search(self, query: str, **kwargs: Any) -> Any: ...  # pragma: no cover

    def close(self) -> None: ...  # pragma: no cover


@dataclass(frozen=True)
class Unavailable:
    """The answer when no backend could search: empty results and the reason, never an exception."""

    query: str
    error: str
    results: tuple = ()
    unavailable: bool = True
    fallback: bool = True

    @property
    def fallback_reason(self) -> str:
        return self.error

    def to_dict(self, citations: bool = True) -> dict[str, Any]:  # noqa: ARG002 - same signature as SearchResponse
        return {"query": self.query, "results": [], "unavailable": True, "fallback": True, "error": self.error}


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


@dataclass
class BackendManager:
    """Primary backend with the builtin one behind it. See the module docstring.

    Args:
        primary_factory: builds the primary backend; None means builtin only.
        builtin_factory: builds the builtin backend (built on first need).
        retry_after_s: how long after a failure the primary is tried again.
        clock: seconds, monotonic (injectable for tests).
    """

    primary_factory: Callable[[], SearchBackend] | None
    builtin_factory: Callable[[], SearchBackend]
    retry_after_s: float = BACKEND_RETRY_AFTER_S
    clock: Callable[[], float] = time.monotonic
    primary_failed: bool = False
    last_error: str | None = None
    failures: int = 0
    _primary: SearchBackend | None = field(default=None, repr=False)
    _builtin: SearchBackend | None = field(default=None, repr=False)
    _failed_at: float = field(default=0.0, repr=False)

    # -- state -----------------------------------------------------------------------------------------------------
    def _fail(self, exc: BaseException) -> None:
        self.primary_failed = True
        self.failures += 1
        self.last_error = _describe(exc)
        self._failed_at = self.clock()
        if self._primary is not None:  # evict: the next retry builds a fresh instance
            try:
                self._primary.close()
            except Exception:  # noqa: BLE001 - a broken backend may fail to close too
                pass
            self._primary = None

    def _get_primary(self) -> SearchBackend | None:
        if self.primary_factory is None:
            return None
        if self.primary_failed and self.clock() - self._failed_at < self.retry_after_s:
            return None
        if self._primary is None:
            try:
                self._primary = self.primary_factory()
            except Exception as exc:  # noqa: BLE001 - misconfiguration must not break search
                self._fail(exc)
                return None
        return self._primary

    def _get_builtin(self) -> SearchBackend:
        if self._builtin is None:
            self._builtin = self.builtin_factory()
        return self._builtin

    @property
    def active(self) -> str:
        """``primary`` or ``builtin``: which backend the next search will try first."""
        if self.primary_factory is None:
            return "builtin"
        if self.primary_failed and self.clock() - self._failed_at < self.retry_after_s:
            return "builtin"
        return "primary"

    # -- API -------------------------------------------------------------------------------------------------------
    def search(self, query: str, **kwargs: Any) -> Any:
        """Search the primary, else the builtin backend, else return :class:`Unavailable`."""
        primary = self._get_primary()
        if primary is not None:
            try:
                result = primary.search(query, **kwargs)
            except Exception as exc:  # noqa: BLE001 - any primary failure switches to the builtin backend
                self._fail(exc)
            else:
                self.primary_failed = False
                return result
        try:
            return self._get_builtin().search(query, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the agent gets a clear answer, never a traceback
            reason = f"memory search unavailable: builtin backend failed ({_describe(exc)})"
            if self.last_error:
                reason += f"; primary backend failed earlier ({self.last_error})"
            return Unavailable(query=query, error=reason)

    def get(self, path: str, from_line: int | None = None, lines: int | None = None) -> dict[str, Any]:
        """Read memory lines through the builtin backend: the files on disk are the source of truth either way."""
        return self._get_builtin().get(path, from_line=from_line, lines=lines)  # type: ignore[attr-defined]

    def probe(self) -> dict[str, Any]:
        """Start-up check: build the primary and run its ``probe()`` (or a one-word search). Never raises."""
        if self.primary_factory is None:
            return {"backend": "builtin", "ok": True, "error": None}
        try:
            primary = self._primary or self.primary_factory()
            self._primary = primary
            check = getattr(primary, "probe", None)
            if callable(check):
                check()
            else:
                primary.search("probe")
        except Exception as exc:  # noqa: BLE001
            self._fail(exc)
            return {"backend": "builtin", "ok": False, "error": self.last_error}
        return {"backend": "primary", "ok": True, "error": None}

    def status(self) -> dict[str, Any]:
        retry_in = None
        if self.primary_failed:
            retry_in = max(0.0, self.retry_after_s - (self.clock() - self._failed_at))
        return {"active": self.active, "primary_failed": self.primary_failed, "failures": self.failures,
                "last_error": self.last_error, "retry_in_s": retry_in}

    def close(self) -> None:
        for b in (self._primary, self._builtin):
            if b is not None:
                try:
                    b.close()
                except Exception:  # noqa: BLE001
                    pass
        self._primary = self._builtin = None
