"""Crash-safe full reindex: build a new index beside the live one, then swap it in atomically.

Steps (the reference system's ``runSafeReindex``):

1. remove leftovers of an interrupted reindex (``index.sqlite.reindex-tmp`` and ``index.sqlite.bak`` with their
   ``-wal``/``-shm`` files);
2. create the temporary database and seed its embedding cache from the live one, so unchanged text is not embedded
   again;
3. index the whole workspace into it and check it (chunks = FTS rows, embedded chunks = vector rows, ``quick_check``);
4. copy the live database to ``index.sqlite.bak``;
5. swap: the new content replaces the live database's in one SQLite write transaction (the online backup API), which
   the ``-wal`` journals like any other commit;
6. check the live database; on failure copy the backup back (rollback); finally delete the temporary and backup files.

Why step 5 copies pages instead of renaming files: renaming a database while other processes hold connections to it is
unsafe in SQLite (a connection that closes later deletes the ``-wal`` *by name*, which by then belongs to the new
file). Copying inside one transaction gives the same atomicity (a ``kill -9`` at any moment leaves the old or the new
index, never a mix: ``tests/test_faults.py`` kills a reindex at 20 moments), and readers in any process keep working
throughout: they see the old content until the commit, the new content after it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable, TypeVar

from hybridmem.errors import HybridMemError, IndexCorruptError
from hybridmem.store import Store
from hybridmem.store.health import problems
from hybridmem.sync.documents import SyncReport

T = TypeVar("T")

TMP_SUFFIX = ".reindex-tmp"
BAK_SUFFIX = ".bak"
# A reindex's new copy nothing has written for this long is a killed one's (a live build commits every 128 chunks,
# a minute or two apart at the slowest embedding seen here), and a sync holding the index's lock deletes it.
STALE_BUILD_S = 600.0
_SIDECARS = ("", "-wal", "-shm", "-journal")


class ReindexError(HybridMemError):
    """A full reindex failed; the previous index was kept (or restored)."""


def remove_db_files(path: str | Path) -> None:
    """Delete a database file and its ``-wal``/``-shm``/``-journal`` sidecars, ignoring missing ones."""
    for suffix in _SIDECARS:
        try:
            os.remove(f"{path}{suffix}")
        except FileNotFoundError:
            pass


def leftovers(index_path: str | Path) -> list[str]:
    """Files an interrupted reindex left beside ``index_path``."""
    out = []
    for base in (f"{index_path}{TMP_SUFFIX}", f"{index_path}{BAK_SUFFIX}"):
        out += [f"{base}{s}" for s in _SIDECARS if os.path.exists(f"{base}{s}")]
    return out


def check(store: Store) -> dict[str, Any]:
    """The store's consistency counts; raises ReindexError when they disagree."""
    c = store.consistency()
    found = problems(c)
    if found:
        raise ReindexError(f"index {store.path} is inconsistent: {'; '.join(found)}")
    return c


def atomic_reindex(live: Store, build: Callable[[Store], SyncReport], keep_backup: bool = True) -> SyncReport:
    """Rebuild the index ``live`` without ever exposing a half-built index.

    Args:
        live: the live index.
        build: indexes the whole workspace into the empty temporary store it is given, and returns its report.
        keep_backup: copy the live database to ``<index>.bak`` before the swap, for rollback.

    Returns:
        The report of the build, with ``full_reindex=True``. Callers drop their in-memory copies of the old index.

    Raises:
        ReindexError: building or swapping failed; the live index is unchanged (or restored from the backup).
    """
    if getattr(live, "backend", "sqlite") == "postgres":
        return generation_reindex(live, build)
    t0 = time.perf_counter()
    path = Path(live.path)
    tmp_path, bak_path = Path(f"{path}{TMP_SUFFIX}"), Path(f"{path}{BAK_SUFFIX}")
    remove_db_files(tmp_path)
    remove_db_files(bak_path)
    # A live index that fails its check (garbage written inside the file) is rebuilt over: no backup of broken pages,
    # and its embedding cache is reused only as far as it can be read.
    healthy = live.healthy()
    keep_bak = False  # True once the backup is the only good copy left: then it must survive
    tmp = Store(tmp_path)
    try:
        try:
            tmp.cache_insert_rows(live.cache_rows())
        except Exception:  # noqa: BLE001 - a corrupt live index: embed again rather than fail the recovery
            if healthy:
                raise
        report = build(tmp)
        check(tmp)
        bak: Store | None = None
        if keep_backup and healthy:
            bak = Store(bak_path)
            live.copy_into(bak)
        # read last, just before the swap: the generation never goes back, so a reader comparing generations never
        # takes the new content for the old (see Retriever.retrieve)
        tmp.set_meta("generation", max(_generation(live), tmp.generation()) + 1)
        tmp.checkpoint()
        try:
            tmp.copy_into(live)
            check(live)
        except Exception as exc:
            if bak is not None:
                try:
                    bak.copy_into(live)
                except Exception as exc2:  # noqa: BLE001 - report both; the backup file is kept for a manual restore
                    keep_bak = True
                    raise ReindexError(f"reindex swap failed ({exc}) and the rollback failed too ({exc2}); the "
                                       f"previous index is kept in {bak_path}: copy it over {path} to restore "
                                       "it") from exc
            raise ReindexError(f"reindex swap failed, previous index restored: {exc}") from exc
        finally:
            if bak is not None:
                bak.close()
    except ReindexError:
        raise
    except HybridMemError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure while building leaves the live index untouched
        raise ReindexError(f"full reindex failed, the previous index is unchanged: {type(exc).__name__}: {exc}") from exc
    finally:
        tmp.close()
        remove_db_files(tmp_path)
        if not keep_bak:
            remove_db_files(bak_path)
    return _finish(live, report, t0)


def generation_reindex(live: Any, build: Callable[[Any], SyncReport]) -> SyncReport:
    """The full reindex of a store that keeps generations (PostgreSQL): build a new generation beside the live one,
    check it, and swap it in with one transaction (``live.publish``); searches answer from the old one until then.
    A failed build leaves an unpublished generation that no search reads and the next reindex removes."""
    t0 = time.perf_counter()
    tmp = live.new_generation()
    try:
        report = build(tmp)
        check(tmp)
        live.publish(tmp)
    except HybridMemError:
        raise
    except Exception as exc:  # noqa: BLE001 - the live generation is untouched
        raise ReindexError(f"full reindex failed, the previous index is unchanged: {type(exc).__name__}: {exc}") from exc
    finally:
        tmp.close()
    return _finish(live, report, t0)


def _finish(live: Any, report: SyncReport, t0: float) -> SyncReport:
    """A full reindex's report, once the new index is live: its counts, time, and the last-sync mark."""
    live.set_meta("last_sync", time.time())
    report.full_reindex = True
    counts = live.counts()
    report.files, report.chunks = counts["files"], counts["chunks"]
    report.seconds = time.perf_counter() - t0
    return report


def _generation(store: Store) -> int:
    try:
        return int(store.get_meta("generation", "0") or 0)
    except Exception:  # noqa: BLE001 - an unreadable meta page: the rebuilt index starts a new count above 0
        return 0


def quarantine(index_path: str | Path) -> Path | None:
    """Move a corrupt index (and its sidecars) aside to ``<index>.corrupt-<time>``; returns the new path.

    Used by ``hybridmem index --rebuild`` when the index cannot be opened, so a fresh one can be built.
    """
    path = Path(index_path)
    if not path.exists():
        return None
    dest = Path(f"{path}.corrupt-{int(time.time())}")
    for suffix in _SIDECARS:
        src = Path(f"{path}{suffix}")
        if src.exists():
            os.replace(src, f"{dest}{suffix}")
    return dest


def open_or_quarantine(open_index: Callable[[], T], index_path: str | Path,
                       unsound: Callable[[T], str | None] | None = None) -> T:
    """``open_index()``; when the file is corrupt, move it aside (see :func:`quarantine`) and open a fresh one.

    ``unsound(opened)``: why an index that opened is still damaged (a page ``quick_check`` cannot read: the header
    and schema survived, a later page did not), or None; such an index is moved aside too. This is what
    ``hybridmem index --rebuild`` does, so a rebuild always works, whatever state the file is in.
    """
    try:
        opened = open_index()
    except IndexCorruptError:
        quarantine(index_path)
        return open_index()
    if unsound is None:
        return opened
    try:
        why = unsound(opened)
    except BaseException:
        opened.close()  # type: ignore[attr-defined]
        raise
    if why is None:
        return opened
    opened.close()  # type: ignore[attr-defined]
    quarantine(index_path)
    return open_index()
