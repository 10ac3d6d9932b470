"""Many writers and searchers on one PostgreSQL namespace: no error, no wrong answer, no duplicate, nothing lost.

Scaled for CI (4 clients x 40 searches while 3 writers sync 4 rounds each); the issue's 16 x 1,000 with 4 writers runs
by hand with ``python tests/pg_load.py`` (numbers in docs/postgres.md).
"""

from __future__ import annotations

from pathlib import Path

from pg_load import make_workspace, run_load


def test_searches_stay_right_while_writers_sync(pg_url: str, pg_namespace: str, tmp_path: Path) -> None:
    out = run_load(pg_url, pg_namespace, make_workspace(tmp_path), writers=3, clients=4, searches=40, rounds=4)
    assert out["searches"] == 160
    assert out["errors"] == 0, out["error_examples"]
    assert out["wrong"] == 0, out["wrong_examples"]
    assert out["writer_errors"] == [] and out["writer_syncs"] == 12
    assert out["duplicate_chunks"] == 0
    assert out["lost_updates"] == []
    assert out["check"] == []
