"""Who is indexing an index: ``<index>.sync.lock``, an advisory ``flock`` a sync holds while it runs.

Syncs need not wait for each other (each file's rows are replaced in one SQLite transaction, so two syncs may
overlap); only ``hybridmem index`` waits for the lock (``wait=True``). The lock decides two things. The embedding
phase runs in the process that holds it: a second sync stores its chunks and FTS rows (searchable at once) and leaves
their vectors to the holder, whose loop picks up every chunk still pending, instead of embedding the same files a
second time. And a search whose sync is a courtesy (``hybridmem search``) skips it while another process holds the
lock (:func:`sync_running`), answering from what is stored (keywords for every stored chunk, vectors for the embedded
ones). The lock dies with its process: a killed sync never leaves it held. Where ``fcntl`` is missing (Windows)
every sync embeds its own chunks.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import Iterator

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

SUFFIX = ".sync.lock"
_HELD: set[tuple[str, int]] = set()  # (index path, thread) pairs holding their index's lock in this process


@contextlib.contextmanager
def try_sync_lock(index_path: str | None, wait: bool = False, grace_s: float = 0.5) -> Iterator[bool]:
    """Take the index's sync lock: ``wait`` until it is free, else try for ``grace_s`` (a :func:`sync_running` probe
    holds it for microseconds). Yields True while held (and for an index in memory, a private one (``None``), or a
    folder where the lock file cannot be made), False when another holder kept it."""
    if index_path is None or index_path == ":memory:" or fcntl is None:
        yield True
        return
    mine = (os.path.abspath(index_path), threading.get_ident())
    if mine in _HELD:  # this thread holds it already (a sync's embedding phase inside the sync)
        yield True
        return
    try:
        fd = os.open(f"{index_path}{SUFFIX}", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield True
        return
    try:
        if not _take(fd, wait, grace_s):
            yield False
            return
        _HELD.add(mine)
        try:
            yield True
        finally:
            _HELD.discard(mine)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _take(fd: int, wait: bool, grace_s: float) -> bool:
    if wait:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return True
    deadline = time.monotonic() + grace_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)


def sync_running(index_path: str) -> bool:
    """True while a sync (another process, or another index object on the same file) holds the index's lock."""
    with try_sync_lock(index_path, grace_s=0.0) as held:
        return not held
