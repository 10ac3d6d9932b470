"""Is the index file still there, and is it sound: file identity, ``quick_check`` and row counts."""

from __future__ import annotations

import os
from typing import Any, Mapping


class HealthMixin:
    """:class:`~hybridmem.store.Store`'s checks (``path``, ``_identity`` and ``consistency`` come from the store)."""

    path: str
    _identity: tuple[int, int] | None
    consistency: Any
    pragma: Any

    def _file_identity(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_dev, st.st_ino

    def file_lost(self) -> str | None:
        """Why the file this store opened is gone (deleted, or replaced by another file), or None."""
        if self.path == ":memory:" or self._identity is None:
            return None
        now = self._file_identity()
        if now is None:
            return f"the index file {self.path} was deleted"
        return None if now == self._identity else f"the index file {self.path} was replaced by another file"

    def healthy(self) -> bool:
        """True when ``quick_check`` passes and the row counts agree (see :meth:`check`)."""
        return not self.check()

    def check(self) -> list[str]:
        """Problems found by ``quick_check`` and the row counts (chunks = FTS rows, embedded = vector rows), read
        from one committed state (:meth:`consistency`)."""
        try:
            c = self.consistency()
        except Exception as exc:  # noqa: BLE001 - a page too broken to count is a finding, not a crash
            found = [f"cannot read the index ({type(exc).__name__}: {exc})"]
            try:  # what quick_check makes of the broken pages, where it can run at all
                first = self.pragma("quick_check")
            except Exception:  # noqa: BLE001
                return found
            return found if first == "ok" else [f"quick_check failed: {first}", *found]
        return problems(c)


def problems(c: Mapping[str, Any]) -> list[str]:
    """What a store's :meth:`~HealthMixin.consistency` counts say is wrong (empty when the index is sound).

    Example:
        >>> problems({"chunks": 3, "fts_rows": 2, "embedded": 3, "vec_rows": -1, "quick_check": True})
        ['3 chunks but 2 FTS rows']
    """
    out = []
    if not c["quick_check"]:
        report = str(c.get("integrity") or "")
        out.append(f"quick_check failed: {report}" if report and report != "ok" else "quick_check failed")
    if c["chunks"] != c["fts_rows"]:
        out.append(f"{c['chunks']} chunks but {c['fts_rows']} FTS rows")
    if c["vec_rows"] >= 0 and c["vec_rows"] != c["embedded"]:
        out.append(f"{c['embedded']} embedded chunks but {c['vec_rows']} vector rows")
    return out
