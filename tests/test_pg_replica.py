"""A read replica answers searches (issue #25's 'read replicas for read scale'): a real streaming replica of a
private pgserver, made with pg_basebackup."""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import replace
from pathlib import Path

import pytest

from hybridmem.config import Settings
from hybridmem.embeddings.fake import HashEmbedder
from hybridmem.errors import HybridMemError
from hybridmem.index import MemoryIndex
from hybridmem.store.postgres import PostgresStore

pytest.importorskip("pgserver")
from pgserver_fixture import LocalServer, Replica  # noqa: E402

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("runuser"),
                                reason="the replica runs as the pgserver user: needs root and runuser")


def test_replica_serves_searches_and_refuses_writes(tmp_path: Path) -> None:
    primary = LocalServer()
    replica = None
    try:
        ws = tmp_path / "ws"
        (ws / "memory").mkdir(parents=True)
        (ws / "MEMORY.md").write_text("# Memory\n\nThe staging database moved to eu-west-2.\n")
        (ws / "memory" / "cars.md").write_text("# Cars\n\nThe mechanic swapped the timing belt.\n")
        s = Settings()
        on = lambda url: replace(s, store=replace(s.store, backend="postgres", url=url, namespace="team"))  # noqa: E731
        main = MemoryIndex(ws, settings=on(primary.url), embedder=HashEmbedder(dims=64))
        main.sync()
        replica = Replica(primary)
        (ws / "memory" / "new.md").write_text("# New\n\nWritten after the replica was made: zebra crossing.\n")
        main.sync()  # streams to the replica
        read = MemoryIndex(ws, settings=on(replica.url), embedder=HashEmbedder(dims=64))
        assert read.store.read_only and "read replica" in read.store.read_only
        for _ in range(100):  # replication lag: well under a second here
            if read.search("zebra crossing", min_score=0, answer_threshold=0).results:
                break
            time.sleep(0.05)
        for q in ("staging database", "timing belt", "zebra crossing"):
            a = main.search(q, min_score=0, answer_threshold=0).results
            b = read.search(q, min_score=0, answer_threshold=0).results
            assert [h.citation for h in a] == [h.citation for h in b] and a
        with pytest.raises(HybridMemError, match="read replica"):
            read.sync()
        with pytest.raises(HybridMemError, match="not on this replica"):
            PostgresStore(replica.url, "never-indexed")
        read.close()
        main.close()
    finally:
        if replica is not None:
            replica.stop()
        primary.destroy()
