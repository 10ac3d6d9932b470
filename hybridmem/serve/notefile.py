"""Appending to a note file from many threads, processes and hosts at once, and surviving a kill in mid-write.

Every append to ``memory/x.md`` holds two locks for the whole read-count-write: an in-process lock per file (threads
of one server) and an OS advisory lock (``fcntl.flock``) on the lock file ``memory/.x.md.lock`` beside it (other
processes; on NFS, Linux maps ``flock`` to byte-range locks, which other hosts honour; the in-process lock is what
keeps the threads of one process apart there). Under them the file's end is read, line numbers are counted, and
the note is appended in place (``O_APPEND``, then ``fsync``): an append costs the same whatever the file's size.

The lock file doubles as a journal. Before the append it records the file's size, the size after, the note's bytes
and their hash (synced to disk); after it, the new size, line count and mtime (so the next append need not count
lines again), unless another program appended meanwhile. An append that finds a journal still pending (its writer
was killed, or the machine lost power) cuts the file back to its size before that append when what follows that size
is the start of the note, so a note is in the file whole or not at all; when the file was changed in another way
since (another size or file, or bytes after the old end that are not the note's: a user's edit), it is left alone.
``recover`` does the same for every lock file under a folder when a server starts.

A file is known by its inode alone (hosts sharing a folder over NFS each see their own device number for it), and
the cached line count is trusted only while the file's size, mtime and ctime are those the journal recorded (an edit
in place that puts the mtime back still moves the ctime). A journal that is not one this module writes (edited by
hand, another version's) reads as empty. Neither a note nor its lock file is opened unless it is a regular file with
one link: a FIFO would block the writer, and a hard link would carry the append, or the journal, to a file that may
lie outside memory/.

Example:
    >>> append(Path("ws/memory/x.md"), lambda tail: (b"a note\\n", tail.lines + 1))   # doctest: +SKIP
    3
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: threads of one server are still kept apart
    fcntl = None  # type: ignore[assignment]

from hybridmem.durable import fsync_dir
from hybridmem.errors import HybridMemError, PathError
from hybridmem.sources import walk_capped

T = TypeVar("T")
LOCK_PREFIX, LOCK_SUFFIX = ".", ".lock"
_BLOCK = 1 << 20
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # a lock file or note planted as a link is not written through
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO planted as a note fails at once instead of blocking the writer
_JOURNAL_INTS = {"pending": ("size", "after"), "done": ("size", "mtime_ns", "ctime_ns", "breaks")}

_guard = threading.Lock()
_locks: dict[str, threading.Lock] = {}


@dataclass(frozen=True)
class Tail:
    """The file as an append finds it: its size, its line breaks, its last bytes."""

    size: int
    breaks: int
    last: bytes


def lock_path(path: Path) -> Path:
    """The lock (and journal) file of ``path``: ``.<name>.lock`` beside it."""
    return path.with_name(f"{LOCK_PREFIX}{path.name}{LOCK_SUFFIX}")


def breaks_in(data: bytes) -> int:
    """Line breaks in ``data`` (``\\r\\n``, ``\\r`` and ``\\n`` each count once)."""
    return data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n")


def _plain(st: os.stat_result) -> bool:
    """A regular file with one link: what a note and its lock file must be (see the module docstring)."""
    return stat.S_ISREG(st.st_mode) and st.st_nlink == 1


def refuse_odd(st: os.stat_result, name: str) -> None:
    """PathError unless ``st`` is a regular file with one link (see the module docstring)."""
    if _plain(st):
        return
    if not stat.S_ISREG(st.st_mode):
        raise PathError(f"{name} is not a regular file (a FIFO, socket or device), so no note is written to it")
    raise PathError(f"{name} has other hard links, and a note appended to it would change the files linked to it "
                    "too (which may lie outside memory/): write the note to another file (the file argument)")


def open_note(path: Path, flags: int) -> int:
    """A descriptor of ``path`` opened with ``flags``: never through a final symlink, never blocking on a FIFO, and
    PathError unless it is a regular file with one link."""
    fd = os.open(path, flags | _NOFOLLOW | _NONBLOCK, 0o666)
    try:
        refuse_odd(os.fstat(fd), path.name)
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextmanager
def locked(path: Path) -> Iterator[int]:
    """Hold ``path``'s in-process lock and its lock file's ``flock``; yields the lock file's descriptor. PathError
    when the lock file is a symlink, a hard link or not a regular file: its journal would be written to another
    file."""
    key = os.path.abspath(path)
    with _guard:
        lock = _locks.setdefault(key, threading.Lock())
    with lock:
        try:
            fd = os.open(lock_path(path), os.O_RDWR | os.O_CREAT | _NOFOLLOW, 0o644)
        except OSError:
            if os.path.islink(lock_path(path)):
                raise PathError(f"a note is never written through a symlink: its lock file {lock_path(path).name} "
                                "is one") from None
            raise
        try:
            if not _plain(os.fstat(fd)):
                raise PathError(f"{lock_path(path).name}, the lock file of {path.name}, is a hard link or not a "
                                "regular file, so it is not written: remove it and write the note again")
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            yield fd
        finally:
            os.close(fd)  # closing releases the flock


def _journal(fd: int) -> dict[str, Any]:
    try:
        raw = os.pread(fd, os.fstat(fd).st_size, 0)
        data = json.loads(raw) if raw.strip() else {}
    except (OSError, ValueError):
        return {}  # cut while being written: the append it announced had not started
    return data if _well_formed(data) else {}


def _well_formed(data: Any) -> bool:
    """Whether ``data`` is a journal this module writes (:func:`append`): a pending one names the note's bytes, which
    a recovery compares before it cuts anything."""
    if not isinstance(data, dict) or data.get("state") not in _JOURNAL_INTS:
        return False
    ints = [data.get(k) for k in _JOURNAL_INTS[data["state"]]]
    ident = data.get("id")
    if not (all(type(v) is int and v >= 0 for v in ints) and isinstance(ident, list)
            and all(type(v) is int for v in ident)):
        return False
    if data["state"] == "done":
        return True
    if not (data["size"] <= data["after"] and isinstance(data.get("sha256"), str)
            and isinstance(data.get("data"), str)):
        return False
    try:
        return len(base64.b64decode(data["data"], validate=True)) == data["after"] - data["size"]
    except ValueError:  # binascii.Error
        return False


def _set_journal(fd: int, data: dict[str, Any], durable: bool) -> None:
    os.ftruncate(fd, 0)
    raw, at = json.dumps(data, separators=(",", ":")).encode(), 0
    while at < len(raw):  # a short write (a full disk) goes on until it fails outright
        at += os.pwrite(fd, raw[at:], at)
    if durable:
        os.fsync(fd)


def _clear_journal(fd: int) -> None:
    """Empty the journal (nothing pending), as far as the disk allows: emptying it frees room, and a journal cut
    short reads as empty."""
    try:
        _set_journal(fd, {}, durable=True)
    except OSError:
        pass


def _identity(st: os.stat_result) -> list[int]:
    return [st.st_ino]  # not st_dev: each NFS client numbers the mount its own way


def _recover(path: Path, fd: int) -> str | None:
    """Undo a pending append of a writer that died (see the module docstring); what was done, or None."""
    j = _journal(fd)
    if j.get("state") != "pending" or path.is_symlink():
        return None
    try:
        nfd = open_note(path, os.O_RDONLY)
    except FileNotFoundError:
        _set_journal(fd, {}, durable=False)
        return None
    with os.fdopen(nfd, "rb") as fh:
        st = os.fstat(nfd)
        before, after = j["size"], j["after"]
        if _identity(st) != j["id"] or not before <= st.st_size <= after:
            _set_journal(fd, {}, durable=False)  # changed in another way since: not ours to touch
            return None
        fh.seek(before)
        written = fh.read(st.st_size - before)
    planned = base64.b64decode(j["data"])
    whole = st.st_size == after and hashlib.sha256(written).hexdigest() == j["sha256"]
    # what follows the old end is not a start of the note (a user's edit, another program's line): not ours to cut
    if whole or not written or planned[:len(written)] != written:
        _set_journal(fd, {}, durable=False)
        return None
    with os.fdopen(open_note(path, os.O_RDWR), "r+b") as fh:
        fh.truncate(before)
        os.fsync(fh.fileno())
    _set_journal(fd, {}, durable=True)
    return f"{path.name}: an append cut short was removed ({st.st_size - before} bytes)"


def _tail(path: Path, fd: int) -> Tail:
    try:
        nfd = open_note(path, os.O_RDONLY)
    except FileNotFoundError:
        return Tail(0, 0, b"")
    with os.fdopen(nfd, "rb") as fh:
        st = os.fstat(nfd)
        fh.seek(max(0, st.st_size - 4))
        last = fh.read(4)
        j = _journal(fd)
        if j.get("state") == "done" and j["id"] == _identity(st) and j["size"] == st.st_size \
                and j["mtime_ns"] == st.st_mtime_ns and j["ctime_ns"] == st.st_ctime_ns:
            return Tail(st.st_size, j["breaks"], last)
        fh.seek(0)
        breaks, prev = 0, b""
        while block := fh.read(_BLOCK):
            breaks += breaks_in(prev + block) - breaks_in(prev)  # a \r\n split across two blocks counts once
            prev = block[-1:]
        return Tail(st.st_size, breaks, last)


def append(path: Path, compose: Callable[[Tail], tuple[bytes, T]]) -> T:
    """Append what ``compose(tail)`` returns (bytes, and a result handed back) to ``path`` under its locks.

    ``compose`` sees the file as it is under the lock and may raise to refuse the append; nothing is written then.
    """
    new_dirs, d = [], path.parent
    while not d.exists():  # folders this append creates: their names are made durable with the note
        new_dirs.append(d)
        d = d.parent
    path.parent.mkdir(parents=True, exist_ok=True)
    with locked(path) as lfd:
        _recover(path, lfd)
        for _ in range(5):  # a writer that takes no lock (an editor) changed the file meanwhile: look again
            tail = _tail(path, lfd)
            data, result = compose(tail)
            created = tail.size == 0 and not path.exists()
            fd = open_note(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            start = os.fstat(fd)
            if start.st_size == tail.size:
                break
            os.close(fd)
        else:
            raise HybridMemError(f"{path.name} kept changing while the note was appended, so it was not; try again")
        try:
            _set_journal(lfd, {"state": "pending", "id": _identity(start), "size": start.st_size,
                               "after": start.st_size + len(data), "sha256": hashlib.sha256(data).hexdigest(),
                               "data": base64.b64encode(data).decode("ascii")},
                         durable=True)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
            st = os.fstat(fd)
        except BaseException:
            os.ftruncate(fd, start.st_size)  # a failed write (disk full) leaves nothing behind
            _clear_journal(lfd)
            raise
        finally:
            os.close(fd)
        if created:
            for folder in [path.parent, *(d.parent for d in new_dirs)]:
                fsync_dir(folder)
        if st.st_size != start.st_size + len(data):  # another program appended too: its lines are not counted
            _clear_journal(lfd)
            return result
        try:  # the note is saved: a journal the disk has no room for only costs the next append a count of lines
            breaks = tail.breaks + breaks_in(tail.last[-1:] + data) - breaks_in(tail.last[-1:])
            _set_journal(lfd, {"state": "done", "id": _identity(st), "size": st.st_size, "mtime_ns": st.st_mtime_ns,
                               "ctime_ns": st.st_ctime_ns, "breaks": breaks}, durable=False)
        except OSError:
            _clear_journal(lfd)
        return result


def recover(root: Path) -> list[str]:
    """Undo the appends cut short under ``root`` (run when a writing server starts); what was done."""
    done = []
    if not root.is_dir():
        return done
    for dirpath, _, names in walk_capped(root):  # no deeper than the index goes
        for name in names:
            if name.startswith(LOCK_PREFIX) and name.endswith(".md" + LOCK_SUFFIX):
                target = Path(dirpath) / name[len(LOCK_PREFIX) : -len(LOCK_SUFFIX)]
                try:
                    with locked(target) as fd:
                        msg = _recover(target, fd)
                except (PathError, OSError):
                    continue  # a link or special file, not a lock file this module made; or a file it cannot read
                if msg:
                    done.append(msg)
    return done


__all__ = ["LOCK_SUFFIX", "Tail", "append", "breaks_in", "lock_path", "locked", "open_note", "recover", "refuse_odd"]
