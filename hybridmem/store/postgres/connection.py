"""One psycopg connection with reconnects: the driver is imported here and only here, when the engine is chosen.

Reads are retried on a fresh connection when the link broke (a restarted server, a dropped network): that is safe,
they change nothing. A write transaction whose link broke is not retried: the server rolled it back, and the caller
gets one sentence saying so (:class:`StoreConnectionError`).
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any, Callable, TypeVar

from hybridmem.errors import ConfigError, HybridMemError

T = TypeVar("T")


class StoreConnectionError(HybridMemError):
    """The PostgreSQL server could not be reached, or the connection broke in a write (which was rolled back)."""


def driver() -> Any:
    """The ``psycopg`` module, or an ImportError naming the install."""
    try:
        import psycopg
    except ImportError:
        raise ImportError("the postgres store backend needs psycopg: pip install 'hybridmem[postgres]'") from None
    return psycopg


def redact(url: str) -> str:
    """``url`` without its password, for messages."""
    url = re.sub(r"(://[^:/@]*):[^@]*@", r"\1:***@", url)  # a URL's user:password@
    return re.sub(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", r"\1***", url)  # a key=value string's password


# What a server that answered says when the URL names a database, role or password it will never accept (a server
# starting up, shutting down or out of connection slots says FATAL too, and is waited for).
_REFUSED = re.compile(r"FATAL:\s+(.*(?:does not exist|authentication failed|no pg_hba\.conf entry|"
                      r"not permitted to log in|permission denied).*)")


class PgLink:
    """A lock-guarded connection (autocommit; transactions are explicit) that reconnects for reads."""

    def __init__(self, url: str, reconnect_s: float = 20.0, on_connect: Callable[[Any], None] | None = None) -> None:
        self.url = url
        self.on_connect = on_connect
        self.reconnect_s = reconnect_s
        self.lock = threading.RLock()
        self.in_tx = False
        self.given_up_until = 0.0  # after waiting reconnect_s in vain, statements until then fail at once
        self.psycopg = driver()
        self.conn = self._connect(deadline=time.monotonic() + reconnect_s)

    def _connect(self, deadline: float) -> Any:
        delay = 0.1
        while True:
            try:
                return self.psycopg.connect(self.url, autocommit=True, connect_timeout=5)
            except self.psycopg.ProgrammingError:  # the URL itself does not parse: retrying cannot help
                # (libpq's own words repeat the URL, password and all: not shown)
                raise ConfigError(f"[store] url / HYBRIDMEM_STORE_URL {redact(self.url)!r} is not a PostgreSQL URL; "
                                  "expected postgresql://user:password@host:5432/dbname") from None
            except self.psycopg.OperationalError as exc:
                first = redact(str(exc).strip().splitlines()[0]) if str(exc).strip() else type(exc).__name__
                refused = _REFUSED.search(first)
                if refused:  # the server answered and said no: waiting cannot change that
                    raise StoreConnectionError(f"PostgreSQL at {redact(self.url)} refused the connection: "
                                               f"{refused.group(1)}; fix [store] url / HYBRIDMEM_STORE_URL") from None
                if time.monotonic() >= deadline:
                    raise StoreConnectionError(f"cannot reach PostgreSQL at {redact(self.url)} ({first}); start the "
                                               "server or fix [store] url / HYBRIDMEM_STORE_URL") from None
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def broken(self, exc: BaseException) -> bool:
        """True when ``exc`` means the link is gone (not an error of the statement)."""
        return isinstance(exc, self.psycopg.OperationalError) and (self.conn.closed or self.conn.broken)

    def read(self, fn: Callable[[Any], T]) -> T:
        """``fn(connection)``; on a broken link (outside a transaction) reconnect and run it once more."""
        with self.lock:
            try:
                return fn(self.conn)
            except self.psycopg.OperationalError as exc:
                if self.in_tx or not self.broken(exc):
                    if self.in_tx and self.broken(exc):
                        raise self.lost(exc) from None
                    raise
                self.reconnect()
                return fn(self.conn)

    def reconnect(self) -> None:
        try:
            self.conn.close()
        except Exception:  # noqa: BLE001 - it is already broken
            pass
        now = time.monotonic()
        try:  # one wait for the server per outage, not one per statement of a search (two waits took 41 s)
            self.conn = self._connect(deadline=now + (0.0 if now < self.given_up_until else self.reconnect_s))
        except StoreConnectionError:
            self.given_up_until = time.monotonic() + self.reconnect_s
            raise
        self.given_up_until = 0.0  # back: the next outage is waited for again
        if self.on_connect is not None:
            self.on_connect(self.conn)

    def lost(self, exc: BaseException) -> StoreConnectionError:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return StoreConnectionError(f"lost the connection to PostgreSQL at {redact(self.url)} during a write ({first});"
                                    " the server rolled the transaction back, nothing of it was saved: run it again")

    def close(self) -> None:
        with self.lock:
            self.conn.close()
