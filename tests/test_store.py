from __future__ import annotations

import numpy as np
import pytest

from hybridmem.embeddings.base import sanitize
from hybridmem.store import Store, connect
from hybridmem.retrieve.vectors import VectorMatrix


def _fill(store: Store, n: int, dims: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    mat = sanitize(rng.normal(size=(n, dims)))
    store.ensure_vec_table(dims)
    with store.transaction():
        for i in range(n):
            path = f"{'memory' if i % 3 else 'sessions'}/f{i:03d}.md"
            store.upsert_file(
                {"path": path, "abspath": None, "source": path.split("/")[0], "hash": str(i), "mtime": 0.0,
                 "size": 1, "date": None, "evergreen": 0},
                [{"start_line": 1, "end_line": 1, "hash": f"h{i}", "text": f"text {i}", "tokens": f"text t{i}",
                  "timestamp": 0.0, "evergreen": False}],
                [mat[i]],
            )
    store.cache_put("p", "m", "", {f"h{i}": mat[i] for i in range(n)})
    return mat


def test_driver_loads_sqlite_vec(tmp_path):
    conn = connect(tmp_path / "x.sqlite")
    assert conn.vec and conn.driver in ("sqlean", "pysqlite3", "sqlite3")
    assert conn.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_stdlib_without_extensions_falls_back(tmp_path):
    store = Store(tmp_path / "x.sqlite", drivers=("sqlite3",))
    # this machine's stdlib sqlite3 cannot load extensions: the store still opens, without sqlite-vec
    if store.vec_available:
        pytest.skip("this Python's sqlite3 can load extensions")
    assert store.vec_error and not store.ensure_vec_table(8)


def test_migrations_are_numbered_and_idempotent(tmp_path):
    Store(tmp_path / "x.sqlite").close()
    s = Store(tmp_path / "x.sqlite")
    assert s.pragma("user_version") == 2
    names = s.table_names()
    assert {"meta", "files", "chunks", "embedding_cache", "chunks_fts"} <= names


def test_knn_uses_match_k_and_equals_numpy_topk(tmp_path):
    store = Store(tmp_path / "x.sqlite")
    mat = _fill(store, 300, 16)
    ids, m, sources, paths = store.load_vectors("p", "m", "")
    vm = VectorMatrix(ids, m, sources, paths)
    rng = np.random.default_rng(1)
    for _ in range(10):
        q = sanitize(rng.normal(size=16))[0]
        knn = store.vector_knn(q, 10)
        exact = vm.search(q, 10)
        assert [i for i, _ in knn] == [i for i, _ in exact]
        assert np.allclose([s for _, s in knn], [s for _, s in exact], atol=1e-5)
        # scoped alike on both backends
        assert [i for i, _ in store.vector_knn(q, 5, source="sessions")] == [i for i, _ in vm.search(q, 5, source="sessions")]
        assert [i for i, _ in store.vector_knn(q, 5, path_prefix="memory/f1")] == [
            i for i, _ in vm.search(q, 5, path_prefix="memory/f1")]


def test_dims_change_rebuilds_vec_table(tmp_path):
    store = Store(tmp_path / "x.sqlite")
    _fill(store, 5, 8)
    assert store.ensure_vec_table(8)
    store.ensure_vec_table(12)
    assert store.get_meta("vec_dims") == "12"
    assert store.count_rows("chunks_vec") == 0


def test_delete_file_removes_fts_and_vec_rows(tmp_path):
    store = Store(tmp_path / "x.sqlite")
    _fill(store, 6, 8)
    with store.transaction():
        store.delete_file("memory/f001.md")
    counts = [store.count_rows(t) for t in ("chunks", "chunks_fts", "chunks_vec")]
    assert counts == [5, 5, 5]
    assert store.keyword_search('"t1"', 10) == []


def test_scoped_knn_through_rowid_constraint_matches(tmp_path):
    """The fallback used where sqlite-vec cannot range-filter text metadata gives the same neighbours."""
    store = Store(tmp_path / "x.sqlite")
    _fill(store, 200, 16)
    q = sanitize(np.random.default_rng(3).normal(size=16))[0]
    blob = np.asarray(q, dtype=np.float32).tobytes()
    for source, prefix in [("sessions", None), (None, "memory/f1"), ("memory", "memory/f0")]:
        direct = store.vector_knn(q, 7, source=source, path_prefix=prefix)
        via_rowids = [(i, 1.0 - d) for i, d in store._vector_knn_rowids(blob, 7, source, prefix)]
        assert [i for i, _ in direct] == [i for i, _ in via_rowids]


def test_a_second_store_on_an_open_index_keeps_the_first_ones_locks(tmp_path):
    """POSIX locks belong to a process: opening the index file again in a process that holds it (the MCP server
    opening it with new settings while the old index serves, the workbench's pages) and closing that descriptor, as
    the check for a file that is not an index did with ``open`` and the stdlib ``sqlite3``, dropped the locks of the
    store already open. Another process's connection then took itself for the last one, checkpointed and deleted the
    write-ahead log, and the first store's later commits went to the deleted file: no other process ever saw them."""
    import subprocess
    import sys

    from hybridmem.store.connection import driver, held

    path = tmp_path / "i.sqlite"
    first = Store(path)
    with first.transaction():
        first.set_meta("before", "1")
    assert held(path) and driver()[0] == first.driver  # one SQLite library for every index connection
    Store(path).close()  # a second store on the same file, opened and closed
    other = (f"import {driver()[1].__name__} as m; db = m.connect({str(path)!r}, isolation_level=None); "
             "db.execute(\"INSERT INTO meta(key, value) VALUES ('other', '1')\"); db.close()")
    subprocess.run([sys.executable, "-c", other], check=True)
    assert (tmp_path / "i.sqlite-wal").exists()  # the first store still holds the log: not deleted under it
    with first.transaction():
        first.set_meta("after", "1")
    read = (f"import {driver()[1].__name__} as m; print(sorted(k for k, in m.connect({str(path)!r}).execute("
            "'SELECT key FROM meta')))")
    seen = subprocess.run([sys.executable, "-c", read], check=True, capture_output=True, text=True).stdout
    assert {"before", "other", "after"} <= set(eval(seen))  # noqa: S307 - a list of strings printed above
    first.close()
    from hybridmem.store import connection

    assert not held(path) and connection._identity(path) not in connection._HELD  # closed: the file is forgotten


def test_a_store_another_thread_opens_while_one_checks_the_file_keeps_its_locks(tmp_path, monkeypatch):
    """The check for a file that is not an index opens and closes the file. Were another thread to open the same index
    meanwhile (after the check found no connection of this process to it), that close would drop the new connection's
    locks, as the test above describes; so a thread opening an index waits for a check under way to end."""
    import subprocess
    import sys
    import threading

    from hybridmem.store import connection

    path = tmp_path / "i.sqlite"
    Store(path).close()
    real_held, stores, opened = connection.held, [], threading.Event()

    def open_another() -> None:
        store = Store(path)
        with store.transaction():
            store.set_meta("other-thread", "1")
        stores.append(store)
        opened.set()

    def held_then_let_another_thread_open(p):  # noqa: ANN001, ANN202 - the check's first step, then another open
        out = real_held(p)
        if threading.current_thread() is threading.main_thread() and not stores:
            threading.Thread(target=open_another, daemon=True).start()
            opened.wait(1.0)  # waits in vain when the other thread cannot open meanwhile
        return out

    monkeypatch.setattr(connection, "held", held_then_let_another_thread_open)
    Store(path).close()
    assert opened.wait(10) and stores
    other = (f"import {connection.driver()[1].__name__} as m; db = m.connect({str(path)!r}, isolation_level=None); "
             "db.execute(\"INSERT INTO meta(key, value) VALUES ('other-process', '1')\"); db.close()")
    subprocess.run([sys.executable, "-c", other], check=True)
    assert (tmp_path / "i.sqlite-wal").exists()  # the other thread's store still holds the log
    with stores[0].transaction():
        stores[0].set_meta("after", "1")
    read = (f"import {connection.driver()[1].__name__} as m; print(sorted(k for k, in m.connect({str(path)!r}).execute("
            "'SELECT key FROM meta')))")
    seen = subprocess.run([sys.executable, "-c", read], check=True, capture_output=True, text=True).stdout
    assert {"other-thread", "other-process", "after"} <= set(eval(seen))  # noqa: S307 - a list printed above
    stores[0].close()
