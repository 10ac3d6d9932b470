"""The sync lifecycle: coalesced syncs, debounce, the watchdog watcher, sync on search, interval, `hybridmem watch`."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hybridmem.embeddings.fake import HashEmbedder
from hybridmem.index import MemoryIndex
from hybridmem.sync.documents import SyncReport
from hybridmem.watch import SyncCoordinator, Watcher

ROOT = Path(__file__).resolve().parents[1]


def wait_for(cond, timeout: float = 10.0) -> bool:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return False


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    (root / "MEMORY.md").write_text("# Memory\nThe payment service retries with exponential backoff.\n")
    return root


def test_requests_during_a_sync_coalesce_into_one_more() -> None:
    started, release = threading.Event(), threading.Event()
    calls: list[float] = []

    def slow_sync() -> SyncReport:
        calls.append(time.monotonic())
        started.set()
        release.wait(5)
        return SyncReport()

    co = SyncCoordinator(slow_sync)
    co.request()
    assert started.wait(5)
    threads = [threading.Thread(target=co.request) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    release.set()
    assert co.wait_idle(10)
    co.stop()
    assert (co.requests, co.syncs, co.max_concurrent) == (21, 2, 1)


def test_sync_errors_are_reported_and_the_worker_survives() -> None:
    results = iter([RuntimeError("disk full"), SyncReport(files=3)])
    seen: list[int] = []

    def sync() -> SyncReport:
        r = next(results)
        if isinstance(r, Exception):
            raise r
        return r

    co = SyncCoordinator(sync, on_report=lambda r: seen.append(r.files))
    co.request()
    assert co.wait_idle(5)
    co.request()
    assert co.wait_idle(5)
    co.stop()
    assert co.errors == ["RuntimeError: disk full"] and seen == [3]


def test_a_failed_sync_is_tried_again_on_its_own_until_it_succeeds() -> None:
    """A note saved while the store was down (PostgreSQL restarting) was indexed only at the next unrelated change:
    nothing requested another sync. A failed sync is now retried after a wait that doubles while it keeps failing."""
    from hybridmem.sync.syncer import ReadOnlyIndexError

    results = iter([RuntimeError("cannot reach PostgreSQL"), RuntimeError("cannot reach PostgreSQL"), SyncReport(files=1)])
    seen: list[int] = []
    calls: list[float] = []

    def sync() -> SyncReport:
        calls.append(time.monotonic())
        r = next(results)
        if isinstance(r, Exception):
            raise r
        return r

    co = SyncCoordinator(sync, on_report=lambda r: seen.append(r.files), retry_s=(0.1, 1.0))
    co.request()  # one request: the two retries come on their own
    assert wait_for(lambda: seen == [1], 5)
    time.sleep(0.4)  # a success schedules no more
    co.stop()
    assert len(calls) == 3 and co.retries == 2 and len(co.errors) == 2
    assert calls[1] - calls[0] >= 0.1 and calls[2] - calls[1] >= 0.2  # the wait doubles (a timer never fires early)

    def replica() -> SyncReport:
        calls.append(time.monotonic())
        raise ReadOnlyIndexError("cannot sync: served by a read replica")

    calls.clear()
    co = SyncCoordinator(replica, retry_s=(0.05, 0.1))
    co.request()
    time.sleep(0.4)
    co.stop()
    assert len(calls) == 1 and co.retries == 0  # a replica's refusal cannot change: not retried


def test_debounce_gives_one_sync_after_changes_settle(ws: Path) -> None:
    idx = MemoryIndex(ws, embedder=HashEmbedder())
    reports: list[float] = []
    w = Watcher(idx, debounce_s=0.3, interval_s=0, on_report=lambda r: reports.append(time.monotonic()))
    last = 0.0
    for i in range(5):
        (ws / "memory" / f"n{i}.md").write_text(f"note {i}\n")
        w.notify(str(ws / "memory" / f"n{i}.md"))
        last = time.monotonic()
        time.sleep(0.1)
    assert idx.dirty
    assert w.wait_idle(10)
    assert len(reports) == 1 and reports[0] - last >= 0.3
    assert idx.status()["files"] == 6 and not idx.dirty
    w.stop()
    idx.close()


def test_a_file_that_never_stops_changing_does_not_hold_a_sync_back(ws: Path) -> None:
    """A live transcript changes every second; a debounce alone restarted on each change and never synced (a QA run:
    a new note written beside it was not searchable for 28 s). A sync starts at most watch_max_wait_s after the first
    change it has not seen."""
    from hybridmem.config import Settings

    settings = Settings().override(sync={"watch_debounce_s": 0.3, "watch_max_wait_s": 1.0})
    idx = MemoryIndex(ws, embedder=HashEmbedder(), settings=settings)
    synced: list[float] = []
    w = Watcher(idx, interval_s=0, on_report=lambda r: synced.append(time.monotonic()))
    start = time.monotonic()
    (ws / "memory" / "important.md").write_text("the vault code is 4417\n")
    w.notify(str(ws / "memory" / "important.md"))
    log = ws / "memory" / "log.md"
    while time.monotonic() - start < 3.0:  # a change every 0.1 s, under the debounce
        with log.open("a") as fh:
            fh.write("tick\n")
        w.notify(str(log))
        time.sleep(0.1)
    assert synced and synced[0] - start < 1.6, [t - start for t in synced]  # 1.0 s and the sync itself
    assert 2 <= len(synced) <= 4  # about one a second while it goes on, not one per change
    assert w.wait_idle(10)
    assert idx.search("vault code", min_score=0.0, answer_threshold=0.0).results[0].path == "memory/important.md"
    w.stop()
    idx.close()
    with pytest.raises(Exception, match="watch_max_wait_s"):
        Settings().override(sync={"watch_debounce_s": 5, "watch_max_wait_s": 2})


def test_relevant_filters_events(ws: Path) -> None:
    idx = MemoryIndex(ws, embedder=HashEmbedder())
    w = Watcher(idx, debounce_s=0.1)
    assert w.relevant(str(ws / "memory" / "a.md"))
    assert w.relevant(str(ws / "sessions" / "s1.jsonl"))
    assert not w.relevant(str(ws / "memory" / "a.txt"))
    assert not w.relevant(str(ws / ".hybridmem" / "index.sqlite-wal"))
    assert not w.relevant(str(ws / ".git" / "x.md"))
    assert w.relevant(str(ws / "memory" / "old"), is_directory=True, event_type="deleted")
    assert not w.relevant(str(ws / "memory" / "new"), is_directory=True, event_type="created")
    w.stop()
    idx.close()


def test_watchdog_sees_create_modify_delete(ws: Path) -> None:
    idx = MemoryIndex(ws, embedder=HashEmbedder())
    idx.sync()
    with Watcher(idx, debounce_s=0.2, interval_s=0) as w:
        note = ws / "memory" / "2026-06-01.md"
        note.write_text("The mechanic replaced the timing belt.\n")
        assert wait_for(lambda: "memory/2026-06-01.md" in idx.store.files())
        assert w.wait_idle(10)
        assert idx.search("timing belt", min_score=0.0, answer_threshold=0.0).results[0].path == "memory/2026-06-01.md"
        note.write_text("The mechanic replaced the brake pads.\n")
        assert wait_for(lambda: bool(idx.search("brake pads", min_score=0.0, vector_weight=0.0).results))
        note.unlink()
        assert wait_for(lambda: "memory/2026-06-01.md" not in idx.store.files())
        assert w.wait_idle(10)
        assert w.coordinator.errors == [] and w.coordinator.max_concurrent == 1
    idx.close()


def test_search_syncs_first_when_the_watcher_marked_the_index_dirty(ws: Path) -> None:
    idx = MemoryIndex(ws, embedder=HashEmbedder())
    idx.sync()
    with Watcher(idx, debounce_s=30, interval_s=0) as w:  # the debounce never fires during this test
        (ws / "memory" / "fresh.md").write_text("Kafka consumer lag alert threshold is 5000.\n")
        assert wait_for(lambda: w.events > 0)
        assert idx.dirty
        resp = idx.search("kafka consumer lag", min_score=0.0, answer_threshold=0.0)
        assert resp.results and resp.results[0].path == "memory/fresh.md"
        assert not idx.dirty
    idx.close()


def test_interval_sync(ws: Path) -> None:
    idx = MemoryIndex(ws, embedder=HashEmbedder())
    with Watcher(idx, debounce_s=10, interval_s=0.15) as w:
        assert wait_for(lambda: w.coordinator.syncs >= 3, timeout=5)
    idx.close()


def test_cli_watch(ws: Path) -> None:
    (ws / "hybridmem.toml").write_text('[embedding]\nprovider = "none"\n')
    code = "import sys; from hybridmem.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.Popen([sys.executable, "-c", code, "watch", str(ws), "--json", "--debounce", "0.2",
                             "--duration", "4"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    first = json.loads(proc.stdout.readline())  # type: ignore[union-attr]
    assert (first["files"], first["added"]) == (1, 1)
    time.sleep(0.5)  # the observer is running by now
    (ws / "memory" / "new.md").write_text("A new note.\n")
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    later = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert later and later[0]["added"] == 1 and later[-1]["files"] == 2
