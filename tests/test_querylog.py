"""The query log: redaction, linking a memory_get to the search it followed, rotation, the off switch."""

from __future__ import annotations

import json
from pathlib import Path

from hybridmem.config import DEFAULT_RANKING, SourcesConfig
from hybridmem.querylog import QueryLog, log_path, ranking_hash, read_log

SECRET = "sk-proj-AbCdEf0123456789AbCdEf0123456789AbCdEf01"


def test_search_record_is_redacted_and_complete(tmp_path: Path) -> None:
    log = QueryLog(log_path(tmp_path))
    rec = log.search("c1", f"why did {SECRET} leak", {"max_results": 2}, "abc", [("memory/a.md#L1-L3", 0.91234567)], 4.5)
    (line,) = log.path.read_text(encoding="utf-8").splitlines()
    assert json.loads(line) == rec
    assert SECRET not in line and rec["query"].startswith("why did ") and rec["query"].endswith(" leak")
    assert (rec["v"], rec["type"], rec["client"], rec["args"], rec["ranking_hash"], rec["ms"]) == (
        1, "search", "c1", {"max_results": 2}, "abc", 4.5)
    assert rec["results"] == [{"citation": "memory/a.md#L1-L3", "score": 0.912346}]
    assert rec["id"].startswith("s-") and rec["time"].endswith("Z")


def test_redaction_follows_the_sources_settings(tmp_path: Path) -> None:
    off = QueryLog(tmp_path / "q.jsonl", sources=SourcesConfig(redact_sessions=False))
    assert off.search("c", f"key {SECRET}", {}, "h", [])["query"] == f"key {SECRET}"
    extra = QueryLog(tmp_path / "r.jsonl", sources=SourcesConfig(redact_patterns=(r"ACME-\d+",)))
    assert "ACME-1234" not in extra.search("c", "ticket ACME-1234", {}, "h", [])["query"]


def test_get_links_to_the_search_of_the_same_client_that_returned_the_path(tmp_path: Path) -> None:
    log = QueryLog(tmp_path / "q.jsonl")
    s1 = log.search("a", "one", {}, "h", [("memory/x.md#L1-L2", 0.9), ("memory/y.md#L4-L9", 0.5)])
    s2 = log.search("a", "two", {}, "h", [("memory/z.md#L1-L2", 0.9)])
    log.search("b", "other client", {}, "h", [("memory/y.md#L1-L2", 0.9)])
    g = log.get("a", "memory/y.md", 4, 6)
    assert (g["after"], g["rank"], g["from"], g["lines"]) == (s1["id"], 2, 4, 6)
    g = log.get("a", "memory/unseen.md", None, None)
    assert (g["after"], g["rank"]) == (s2["id"], None)  # the client's latest search, not a hit of it
    assert log.get("nobody", "memory/x.md", 1, 1)["after"] is None


def test_rotation_keeps_one_old_file(tmp_path: Path) -> None:
    log = QueryLog(tmp_path / "q.jsonl", max_bytes=1024)
    ids = [log.search("c", f"query number {i}", {}, "h", [("memory/a.md#L1-L2", 0.5)])["id"] for i in range(30)]
    old = tmp_path / "q.1.jsonl"
    assert old.is_file() and log.path.stat().st_size <= 1024 and old.stat().st_size <= 1024
    kept = [r["id"] for r in read_log(log.path)]
    assert kept == ids[-len(kept):] and 0 < len(kept) < 30


def test_off_writes_nothing(tmp_path: Path) -> None:
    log = QueryLog(tmp_path / "q.jsonl", enabled=False)
    assert log.search("c", "q", {}, "h", [])["type"] == "search"
    assert not log.path.exists()


def test_ranking_hash_changes_with_any_ranking_setting() -> None:
    assert ranking_hash(DEFAULT_RANKING) == ranking_hash(DEFAULT_RANKING.replace())
    assert ranking_hash(DEFAULT_RANKING) != ranking_hash(DEFAULT_RANKING.replace(max_results=2))
    assert len(ranking_hash(DEFAULT_RANKING)) == 16


def test_a_get_by_citation_logs_the_lines_it_read(tmp_path: Path) -> None:
    """``memory_get`` of ``path#L2-L3`` logged ``from`` and ``lines`` as null: the raw arguments, not the citation."""
    from hybridmem.serve.service import MemoryService

    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "a.md").write_text("# a\n\none\ntwo\nthree\n", encoding="utf-8")
    service = MemoryService(tmp_path, keyword_only=True, watch=False)
    try:
        assert service.get("memory/a.md#L3-L4")["text"] == "one\ntwo"
        service.get("memory/a.md", **{"from": 5})
        service.get("memory/a.md")
    finally:
        service.close()
    gets = [r for r in read_log(log_path(tmp_path)) if r["type"] == "get"]
    assert [(r["path"], r["from"], r["lines"]) for r in gets] == [
        ("memory/a.md", 3, 2), ("memory/a.md", 5, None), ("memory/a.md", None, None)]
