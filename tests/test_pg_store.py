"""The PostgreSQL engine against a real server: FTS5's BM25 to the bit, namespaces, generations, pgvector exact and
HNSW, the lazy driver import and one-sentence errors."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
import unicodedata
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hybridmem.config import Settings, TokenizerConfig
from hybridmem.errors import ConfigError
from hybridmem.store import IndexStore, Store, open_store
from hybridmem.store.postgres import PostgresStore, StoreConnectionError
from hybridmem.store.postgres.bm25 import parse_match
from hybridmem.tokenization import fts_query, fts_tokens, query_terms, tokenize

ROOT = Path(__file__).resolve().parent.parent

TEXTS = [
    "Linh prefers dark mode. Thanh toán hóa đơn bị lỗi khi thử lại.",
    "thanh toan hoa don: the payment_processor retries with retry_backoff_ms = 250",
    "支付处理器的重试策略已更新。支付失败时重试三次。",
    "決済サービスの再試行を修正した。決済は成功した。",
    "การชำระเงินล้มเหลวเมื่อวานนี้ ระบบลองใหม่อีกครั้ง",
    "فشل الدفع أمس وأعاد النظام المحاولة بعد دقيقة",
    "class PaymentProcessor: def retryBackoff(self): return HTTPServer.retry_backoff_ms",
    "The mechanic swapped the timing belt on the Civic in March; retry the payment next week.",
    "Notes about deployments: kubectl rollout restart, retry budget, backoff jitter.",
    "thanh toán thanh toán thanh toán retry retry payment payment payment",
]
QUERIES = ["thanh toán", "thanh toan", "hóa đơn lỗi", "支付重试", "決済の再試行", "การชำระเงิน", "الدفع المحاولة",
           "paymentProcessor retry_backoff_ms", "HTTPServer", "timing belt civic", "retry payment backoff",
           "payment payment retry", "nothing matches zzzz", "deployments kubectl rollout"]


def _chunks(texts: list[str], path: str) -> list[dict]:
    return [{"start_line": i + 1, "end_line": i + 1, "hash": f"{path}-{i}", "text": t, "tokens": " ".join(tokenize(t)),
             "timestamp": 0.0, "evergreen": True} for i, t in enumerate(texts)]


def _fill(store: IndexStore, texts: list[str], vectors: np.ndarray | None = None, files: int = 3) -> None:
    store.ensure_vec_table(0 if vectors is None else vectors.shape[1])
    per = math.ceil(len(texts) / files)
    with store.transaction():
        for f in range(files):
            part = texts[f * per:(f + 1) * per]
            vecs = [None] * len(part) if vectors is None else list(vectors[f * per:(f + 1) * per])
            path = f"memory/{'topics/' if f == 1 else ''}f{f}.md"
            store.upsert_file({"path": path, "abspath": None, "source": "sessions" if f == 2 else "memory",
                               "hash": path, "mtime": 0.0, "size": 0, "date": None, "evergreen": 1},
                              _chunks(part, path), vecs)
        store.bump_generation()


@pytest.fixture
def pg(pg_url: str, pg_namespace: str):
    store = PostgresStore(pg_url, pg_namespace)
    yield store
    store.close()


def _by_text(store: IndexStore, rows: list[tuple[int, float]]) -> list[tuple[str, float]]:
    info = store.chunk_rows([i for i, _ in rows])
    return [(info[i][4], s) for i, s in rows]


@pytest.mark.parametrize("mode", ["or", "and"])
def test_bm25_equals_fts5_bit_for_bit_on_multilingual_text(pg: PostgresStore, mode: str) -> None:
    sqlite = Store(":memory:")
    texts = TEXTS * 3  # repeats: ties that only the id order breaks
    _fill(sqlite, texts)
    _fill(pg, texts)
    tok = TokenizerConfig(query_mode=mode)
    checked = 0
    for q in QUERIES:
        match = fts_query(q, tok)
        for scope in ({}, {"source": "memory"}, {"path_prefix": "memory/topics/"}):
            a = _by_text(sqlite, sqlite.keyword_search(match, 7, **scope))
            b = _by_text(pg, pg.keyword_search(match, 7, **scope))
            assert [t for t, _ in a] == [t for t, _ in b], (q, scope)
            assert [s for _, s in a] == [s for _, s in b], (q, scope)  # the same doubles, not merely close
            checked += len(a)
        terms = [p for t in query_terms(q, tok) for p in fts_tokens(t)]
        assert sqlite.keyword_doc_counts(terms) == pg.keyword_doc_counts(terms), q  # the gate's IDF counts
    assert checked > 100


def test_parse_match_reads_the_query_builder_back() -> None:
    for q in QUERIES + ['say "hi" NEAR(x y) OR title:z*', "retry the retry of a retry"]:
        for mode in ("or", "and"):
            tok = TokenizerConfig(query_mode=mode)
            match = fts_query(q, tok)
            if match is None:
                continue
            terms, require_all = parse_match(match)
            assert require_all == (mode == "and" and len(terms) > 1)
            assert terms == [fts_tokens(t)[0] for t in query_terms(q, tok)]


def test_namespaces_are_separate_on_both_legs(pg_url: str) -> None:
    a, b = PostgresStore(pg_url, f"a-{uuid.uuid4().hex}"), PostgresStore(pg_url, f"b-{uuid.uuid4().hex}")
    rng = np.random.default_rng(1)
    va, vb = rng.standard_normal((3, 8)).astype(np.float32), rng.standard_normal((3, 8)).astype(np.float32)
    _fill(a, ["alpha payment", "alpha retry", "alpha belt"], va)
    _fill(b, ["beta payment", "beta retry", "beta belt"], vb)
    for store, word in ((a, "alpha"), (b, "beta")):
        kw = _by_text(store, store.keyword_search('"payment" OR "alpha" OR "beta"', 10))
        assert kw and all(word in t for t, _ in kw)
        vec = _by_text(store, store.vector_knn(va[0], 10))
        assert len(vec) == 3 and all(word in t for t, _ in vec)
        assert store.counts()["chunks"] == 3
    a.close(), b.close()


def test_vector_knn_exact_matches_numpy_and_scopes(pg: PostgresStore) -> None:
    rng = np.random.default_rng(7)
    mat = rng.standard_normal((30, 16)).astype(np.float32)
    _fill(pg, [f"row {i}" for i in range(30)], mat)
    q = rng.standard_normal(16).astype(np.float32)
    got = pg.vector_knn(q, 5)
    cos = (mat @ q) / (np.linalg.norm(mat, axis=1) * np.linalg.norm(q))
    want = np.argsort(-cos)[:5]
    assert [t for t, _ in _by_text(pg, got)] == [f"row {i}" for i in want]
    assert np.allclose([s for _, s in got], cos[want], atol=1e-5)
    scoped = _by_text(pg, pg.vector_knn(q, 50, source="sessions"))
    assert len(scoped) == 10 and all(int(t.split()[1]) >= 20 for t, _ in scoped)


def test_hnsw_above_the_threshold_recall_against_exact(pg_url: str, pg_namespace: str) -> None:
    store = PostgresStore(pg_url, pg_namespace, hnsw_min_rows=1000, ef_search=100)
    rng = np.random.default_rng(3)
    mat = rng.standard_normal((1500, 32)).astype(np.float32)
    _fill(store, [f"v{i}" for i in range(1500)], mat, files=15)
    assert store.ann_ready(32)
    assert "hm_chunks_hnsw" in store.explain_vector(mat[0])  # the ANN path really reads the index
    recall = []
    for _ in range(20):
        q = rng.standard_normal(32).astype(np.float32)
        exact = {i for i, _ in store.vector_knn(q, 10, exact=True)}
        ann = {i for i, _ in store.vector_knn(q, 10)}
        recall.append(len(exact & ann) / 10)
    assert np.mean(recall) >= 0.8, np.mean(recall)
    store.close()


def test_full_reindex_builds_a_new_generation_and_swaps_it_in_one_transaction(pg: PostgresStore) -> None:
    _fill(pg, ["old payment note", "old retry note"], files=1)
    before = pg.generation()
    new = pg.new_generation()
    _fill(new, ["new payment note"], files=1)
    # while it is built the live generation answers, unchanged
    assert [t for t, _ in _by_text(pg, pg.keyword_search('"payment"', 10))] == ["old payment note"]
    assert pg.counts()["chunks"] == 2
    pg.publish(new)
    new.close()
    assert [t for t, _ in _by_text(pg, pg.keyword_search('"payment"', 10))] == ["new payment note"]
    assert pg.generation() > before
    assert pg.generations() == [pg.live_generation()]  # the old rows are gone
    assert pg.check() == []


def test_stored_tokens_are_the_generation_being_written(pg: PostgresStore) -> None:
    """A sync takes the tokens of chunks its index holds already; a full reindex's new generation holds none of the
    live one's (its tokenizer may differ), only its own."""
    _fill(pg, ["old payment note", "old retry note"], files=1)
    path = "memory/f0.md"
    assert pg.stored_tokens([path, "memory/none.md"]) == {
        (path, f"{path}-0"): ("old payment note", "old payment note", 1),
        (path, f"{path}-1"): ("old retry note", "old retri note", 1)}
    new = pg.new_generation()
    assert new.stored_tokens([path]) == {}
    _fill(new, ["new payment note"], files=1)
    assert new.stored_tokens([path]) == {(path, f"{path}-0"): ("new payment note", "new payment note", 1)}
    assert pg.stored_tokens([]) == {}
    new.close()
    # a chunk repeated is counted; one hash held by two texts (a note's NFC and NFD forms) has no one text
    chunks = _chunks(["same note", "same note", "Hoá đơn", unicodedata.normalize("NFD", "Hoá đơn")], path)
    for c, h in zip(chunks, ("a", "a", "b", "b")):
        c["hash"] = h
    with pg.transaction():
        pg.upsert_file({"path": path, "abspath": None, "source": "memory", "hash": "h2", "mtime": 0.0, "size": 0,
                        "date": None, "evergreen": 1}, chunks, [None] * 4)
    got = pg.stored_tokens([path])
    assert (got[(path, "a")], got[(path, "b")][::2], len(got)) == (("same note", "same note", 2), (None, 2), 2)


def test_an_unpublished_generation_is_never_read_and_the_next_reindex_removes_it(pg: PostgresStore) -> None:
    _fill(pg, ["live note"], files=1)
    dead = pg.new_generation()
    _fill(dead, ["half built"], files=1)
    dead.close()  # its writer died before publish
    assert [t for t, _ in _by_text(pg, pg.keyword_search('"note" OR "half"', 10))] == ["live note"]
    assert len(pg.generations()) == 2
    pg.new_generation().close()
    assert pg.generations() == [pg.live_generation()]


def test_open_store_picks_the_engine_in_one_place(pg_url: str, pg_namespace: str, tmp_path: Path) -> None:
    s = Settings()
    assert isinstance(open_store(s, tmp_path / "i.sqlite"), Store)
    pgs = open_store(replace(s, store=replace(s.store, backend="postgres", url=pg_url, namespace=pg_namespace)), "x")
    assert isinstance(pgs, PostgresStore) and isinstance(pgs, IndexStore) and pgs.namespace == pg_namespace
    pgs.close()


def test_postgres_without_a_url_is_one_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HYBRIDMEM_STORE_URL", raising=False)
    s = Settings()
    with pytest.raises(ConfigError, match="HYBRIDMEM_STORE_URL"):
        open_store(replace(s, store=replace(s.store, backend="postgres")), "x")
    with pytest.raises(ConfigError, match="store.backend"):
        replace(s.store, backend="mysql")


def test_unreachable_server_is_one_sentence() -> None:
    with pytest.raises(StoreConnectionError) as err:
        PostgresStore("postgresql://nobody:secret@127.0.0.1:1/none", "x", reconnect_s=0.5)
    msg = str(err.value)
    assert "cannot reach PostgreSQL" in msg and "secret" not in msg and "\n" not in msg


@pytest.mark.parametrize("url", ["not a url", "host=127.0.0.1 port=5432 password=secret dbname", "postgresql://u:secret@h:5432/db?sslmode=nope=x",
                                 "mysql://x:secret@localhost/db"])
def test_malformed_url_is_one_sentence(url: str) -> None:
    """A URL psycopg cannot parse is the user's setting to fix, said once, without the password; not a traceback."""
    with pytest.raises((ConfigError, StoreConnectionError)) as err:
        PostgresStore(url, "x", reconnect_s=0.5)
    msg = str(err.value)
    assert "secret" not in msg and "\n" not in msg and "HYBRIDMEM_STORE_URL" in msg


def test_a_database_or_role_the_server_does_not_have_fails_at_once(pg_url: str) -> None:
    """The server answered "does not exist": waiting 20 s for it (as for a server that is down) cannot help, and "start
    the server" is the wrong advice."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(pg_url)
    no_db = urlunsplit(parts._replace(path="/hm_no_such_db"))
    user = parts.netloc.rsplit("@", 1)[0].split(":")[0]
    no_role = urlunsplit(parts._replace(netloc=parts.netloc.replace(user, "hm_no_such_role", 1)))
    for url, said in ((no_db, 'database "hm_no_such_db" does not exist'), (no_role, 'role "hm_no_such_role" does not exist')):
        t0 = time.monotonic()
        with pytest.raises(StoreConnectionError) as err:
            PostgresStore(url, "x", reconnect_s=10.0)
        msg = str(err.value)
        assert time.monotonic() - t0 < 5.0 and "refused the connection" in msg and said in msg, msg
        assert "start the server" not in msg and "\n" not in msg


def test_password_is_redacted_in_both_forms() -> None:
    from hybridmem.store.postgres.connection import redact

    assert redact("postgresql://me:s3cret@db:5432/mem") == "postgresql://me:***@db:5432/mem"
    assert redact("host=db password=s3cret dbname=mem") == "host=db password=*** dbname=mem"
    assert redact("host=db password = 'it\\'s secret' dbname=mem") == "host=db password = *** dbname=mem"  # libpq quoting


def test_default_cli_search_and_mcp_start_do_not_import_psycopg(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n\nThe payment retries with backoff.\n")
    code = f"""
import sys
from hybridmem.cli import main
assert main(["search", "payment", {str(ws)!r}, "--json"]) in (0, None)
import hybridmem.serve.service, hybridmem.serve.server
bad = sorted(m for m in sys.modules if m.split(".")[0] in ("psycopg", "pgvector", "pgserver", "psycopg_binary"))
print("LOADED", bad)
"""
    env = {"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300, env=env)
    assert '"path": "MEMORY.md"' in out.stdout, out.stdout + out.stderr  # the search ran and found the note
    assert "LOADED []" in out.stdout, out.stdout + out.stderr


def test_mcp_service_serves_a_postgres_index(pg_url: str, pg_namespace: str, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from hybridmem.serve.service import MemoryService

    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n\nThe payment retries with backoff.\n")
    (ws / "hybridmem.toml").write_text(f'[store]\nbackend = "postgres"\nnamespace = "{pg_namespace}"\n')
    monkeypatch.setenv("HYBRIDMEM_STORE_URL", pg_url)
    with MemoryService(ws, keyword_only=True, watch=False, preload=False) as svc:
        out = svc.search("payment backoff")
        assert isinstance(svc.index.store, PostgresStore)
    assert "MEMORY.md" in json.dumps(out)


def test_bm25_stays_equal_after_files_are_replaced_and_deleted(pg: PostgresStore) -> None:
    sqlite = Store(":memory:")
    for store in (sqlite, pg):
        _fill(store, TEXTS * 2)
        with store.transaction():  # replace one file's chunks, delete another: document frequencies move
            store.upsert_file({"path": "memory/f0.md", "abspath": None, "source": "memory", "hash": "x", "mtime": 1.0,
                               "size": 1, "date": None, "evergreen": 1}, _chunks(TEXTS[3:7], "memory/f0.md"), [None] * 4)
            store.delete_file("memory/topics/f1.md")
            store.bump_generation()
    for q in QUERIES:
        match = fts_query(q)
        a = _by_text(sqlite, sqlite.keyword_search(match, 10))
        b = _by_text(pg, pg.keyword_search(match, 10))
        assert a == b, q
    assert pg.counts() == sqlite.counts() and pg.check() == []


def test_a_long_lived_index_keeps_a_keyword_copy_that_another_hosts_write_retires(pg_url: str, pg_namespace: str,
                                                                                    tmp_path: Path) -> None:
    """The in-memory keyword copy on PostgreSQL (what brings a server's search near SQLite's) answers only for the
    namespace generation it was built from: a write from another host (here another index object on its own
    workspace folder and connection) bumps the generation, and the next search sees the new note at once."""
    from hybridmem.index import MemoryIndex

    settings = Settings().override(store={"backend": "postgres", "url": pg_url, "namespace": pg_namespace},
                                   embedding={"provider": "none"})
    a, b = tmp_path / "host-a", tmp_path / "host-b"
    for ws in (a, b):
        (ws / "memory").mkdir(parents=True)
        (ws / "MEMORY.md").write_text("# Memory\n\nThe payment retries with backoff.\n")
    server = MemoryIndex(a, settings=settings, embedder=None)
    server.sync()
    for _ in range(2):  # a generation's second keyword query starts the copy's build
        assert server.search("payment backoff", answer_threshold=0.0).results
    server.wait_for_copies()
    assert server.retriever.keyword_memory() is not None  # the copy answers now
    (b / "memory" / "new.md").write_text("# Zanzibar\n\nThe zanzibar ferry leaves at nine.\n")
    other = MemoryIndex(b, settings=settings, embedder=None)
    other.sync()
    other.close()
    hits = server.search("zanzibar ferry", answer_threshold=0.0).results
    assert [h.path for h in hits][:1] == ["memory/new.md"]
    server.close()


class _Conn:
    def close(self) -> None:
        pass


def _flaky_link(monkeypatch, up: list[bool]) -> tuple[Any, list[float], list[float]]:
    """A PgLink with no server behind it, on a fake clock: ``(link, waits, clock)``; ``waits`` collects how long each
    reconnect may wait; a reconnect succeeds while ``up[0]``, else waits to its deadline and fails."""
    from hybridmem.store.postgres.connection import PgLink, StoreConnectionError

    link = PgLink.__new__(PgLink)
    link.url, link.reconnect_s, link.given_up_until, link.on_connect = "postgresql://x@nowhere/db", 20.0, 0.0, None
    link.conn = _Conn()
    waits: list[float] = []
    clock = [1000.0]
    monkeypatch.setattr("hybridmem.store.postgres.connection.time.monotonic", lambda: clock[0])

    def connect(deadline: float) -> _Conn:
        waits.append(round(deadline - clock[0], 3))
        if up[0]:
            return _Conn()
        clock[0] = deadline  # the wait runs to its deadline
        raise StoreConnectionError("cannot reach PostgreSQL")

    monkeypatch.setattr(link, "_connect", connect)
    return link, waits, clock


def test_a_server_that_stays_down_is_waited_for_once_not_per_statement(monkeypatch) -> None:
    """A search reads the generation, then runs its statements; with the server down each broken read reconnected
    and waited reconnect_s (20 s) again, so a search took 41 s to fail. After one wait in vain, the next reconnects
    within reconnect_s try once; later ones wait again (a server coming back is still waited for)."""
    from hybridmem.store.postgres.connection import StoreConnectionError

    link, waits, clock = _flaky_link(monkeypatch, [False])
    for _ in range(3):
        with pytest.raises(StoreConnectionError):
            link.reconnect()
    assert waits == [20.0, 0.0, 0.0]
    clock[0] += 21.0  # a while later: waited for again
    with pytest.raises(StoreConnectionError):
        link.reconnect()
    assert waits[-1] == 20.0


def test_a_server_that_comes_back_is_waited_for_again_at_its_next_outage(monkeypatch) -> None:
    from hybridmem.store.postgres.connection import StoreConnectionError

    up = [False]
    link, waits, clock = _flaky_link(monkeypatch, up)
    with pytest.raises(StoreConnectionError):
        link.reconnect()
    clock[0] += 1.0
    up[0] = True
    link.reconnect()  # back within reconnect_s: one try, and it answers
    up[0] = False
    with pytest.raises(StoreConnectionError):
        link.reconnect()  # a new outage soon after: waited for in full again
    assert waits == [20.0, 0.0, 20.0]


def test_reading_a_namespace_no_sync_wrote_is_an_error_naming_the_ones_that_exist(
        pg_url: str, pg_namespace: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A mistyped `[store] namespace` read as an empty index ("built keyword-only", "nothing relevant"), where a
    missing SQLite file is an error; `status` and `search --no-sync` now say so and name the namespaces indexed there,
    and create nothing."""
    from hybridmem.cli import main
    from hybridmem.store.postgres import indexed_namespaces

    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "a.md").write_text("The payment service retries with backoff.\n")
    (ws / "hybridmem.toml").write_text(f'[embedding]\nprovider = "none"\n[store]\nbackend = "postgres"\n'
                                       f'url = "{pg_url}"\nnamespace = "{pg_namespace}"\n')
    assert main(["index", str(ws)]) == 0
    assert main(["status", str(ws)]) == 0
    typo = ws.parent / "typo"
    typo.mkdir()
    (typo / "hybridmem.toml").write_text((ws / "hybridmem.toml").read_text().replace(pg_namespace, pg_namespace + "x"))
    capsys.readouterr()
    for argv in (["status", str(typo)], ["search", "payment", str(typo), "--no-sync"]):
        code = main(argv)
        err = capsys.readouterr().err
        assert code == 2 and f"no index in the PostgreSQL namespace '{pg_namespace}x'" in err, err
        assert f"'{pg_namespace}'" in err and err.count("\n") == 1
    assert pg_namespace in indexed_namespaces(pg_url) and pg_namespace + "x" not in indexed_namespaces(pg_url)


def test_a_file_stored_again_keeps_the_rows_of_the_chunks_it_still_holds(pg: PostgresStore) -> None:
    """As on SQLite (tests/test_index.py): the rows of the chunks a file still holds keep their ids, postings and
    vectors, and take the new timestamp; the chunk that changed is replaced, and the keyword statistics and postings
    are what writing the file afresh gives."""
    path = "sessions/s.jsonl"
    texts = [f"step {i}: the staging redis port moved to {6000 + i}" for i in range(6)]
    file = {"path": path, "abspath": None, "source": "sessions", "hash": "h1", "mtime": 0.0, "size": 0, "date": None,
            "evergreen": 0}
    vectors = list(np.eye(5, 8, dtype=np.float32))
    pg.ensure_vec_table(8)
    with pg.transaction():
        pg.upsert_file(file, _chunks(texts[:5], path), vectors)
        pg.bump_generation()
    rows = "SELECT id, hash, text, timestamp, embedded FROM hm_chunks WHERE ns = %(ns)s AND path = %(path)s ORDER BY id"
    before = pg._q(rows, pg._p(path=path))
    again = _chunks(texts[:4] + [texts[5]], path)  # the fifth chunk's text changed (the same lines and hash)
    for c in again:
        c["timestamp"] = 9.0
    with pg.transaction():
        pg.upsert_file({**file, "hash": "h2"}, again, vectors[:4] + [None])
        pg.bump_generation()
    after = pg._q(rows, pg._p(path=path))
    assert [r[:3] for r in after[:4]] == [r[:3] for r in before[:4]]  # kept: the same ids
    assert after[4][0] not in {r[0] for r in before} and after[4][2] == texts[5] and after[4][4] == 0
    assert {r[3] for r in after} == {9.0}
    postings = "SELECT chunk, count(*), sum(tf) FROM hm_postings WHERE ns = %(ns)s GROUP BY chunk ORDER BY chunk"
    got = [tuple(r) for r in pg._q(postings, pg._p())]
    fresh = pg.new_generation()
    with fresh.transaction():
        fresh.upsert_file({**file, "hash": "h2"}, again, vectors[:4] + [None])
    want = [tuple(r) for r in fresh._q(postings.replace("ns = %(ns)s", "ns = %(ns)s AND gen = %(gen)s"), fresh._p())]
    assert [r[1:] for r in got] == [r[1:] for r in want] and [r[0] for r in got] == [r[0] for r in after]
    c = pg.consistency()
    assert (c["chunks"], c["fts_rows"], c["embedded"], c["vec_rows"]) == (5, 5, 4, 4) and pg.check() == []
    assert [cid for cid, _ in pg.keyword_search('"6005"', 5)] == [after[4][0]]
    assert pg.keyword_search('"6004"', 5) == []
    fresh.close()
