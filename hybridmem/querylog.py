"""The query log: what agents asked over MCP and what they read next, one JSON object a line.

It lives in the workspace (``<workspace>/.hybridmem/query-log.jsonl``), is on by default (``serve.query_log``) and is
capped at ``serve.query_log_max_bytes``: past the cap the file is renamed to ``query-log.1.jsonl`` (replacing the
previous one) and a new one starts, so at most twice the cap is kept. The labeling loop reads it.

Records (``v`` is the format version):

* ``{"v": 1, "type": "search", "id": "s-…", "time": ISO-8601 UTC, "client": "…", "query": "…" (secrets redacted as in
  transcripts), "args": {…the other arguments…}, "ranking_hash": "…", "results": [{"citation", "score"}…],
  "ms": …}``
* ``{"v": 1, "type": "get", "time": …, "client": …, "path": …, "from": …, "lines": …, "after": "s-…" | null,
  "rank": 1-based position of ``path`` in that search | null}``: ``after`` is the latest earlier search of the same
  client that returned a hit in ``path`` (else the client's latest search, with ``rank`` null).

Example:
    >>> log = QueryLog(Path("ws/.hybridmem/query-log.jsonl"))             # doctest: +SKIP
    >>> sid = log.search("stdio", "retry backoff", {}, "a1b2", [("memory/x.md#L1-L3", 0.8)])  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import secrets
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, Iterable

from hybridmem.config import INDEX_DIRNAME, RankConfig, SourcesConfig
from hybridmem.sessions import replace_surrogates
from hybridmem.sources import session_redactor

LOG_FILENAME = "query-log.jsonl"
FORMAT_VERSION = 1
_RECENT = 32  # searches remembered per client for linking a memory_get


def log_path(workspace: str | Path) -> Path:
    return Path(workspace) / INDEX_DIRNAME / LOG_FILENAME


def ranking_hash(config: RankConfig) -> str:
    """A short stable hash of every ranking setting (two searches with the same hash were ranked alike)."""
    blob = json.dumps(dataclasses.asdict(config), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


SPILL = 8192  # characters past a query's cut that its redaction for the log reads (a private key fits)


class QueryLog:
    """Append-only JSONL log with size-capped rotation; thread-safe.

    Args:
        path: the log file (its folder is created on the first write).
        max_bytes: rotate when the file would grow past this size.
        sources: the sources settings whose transcript redaction queries get.
        enabled: False writes nothing (every method still returns what it would have logged).
    """

    def __init__(self, path: str | Path, max_bytes: int = 4_000_000, sources: SourcesConfig | None = None,
                 enabled: bool = True) -> None:
        self.path = Path(path)
        self.max_bytes = max_bytes
        self.enabled = enabled
        self._redactor = session_redactor(sources)
        self._lock = threading.Lock()
        self._recent: dict[str, deque[tuple[str, dict[str, int]]]] = {}

    def search(self, client: str, query: str, args: dict[str, Any], config_hash: str,
               results: Iterable[tuple[str, float]], ms: float | None = None,
               sent: str | None = None) -> dict[str, Any]:
        """Log one ``memory_search``; returns the record (its ``id`` names the search). ``query`` is as searched
        (cut to ``tokenizer.max_query_chars``); ``sent``, the query as the client sent it, is redacted with the
        :data:`SPILL` characters after the cut first and then cut as long, so a secret the cut split in two (which
        no rule finds then) is not logged in part."""
        results = [(c, float(s)) for c, s in results]
        sid = "s-" + secrets.token_hex(6)
        if sent is not None and len(sent) > len(query):  # redacted with what follows the cut, a few KB of it only:
            # a 3 MB query redacted whole took seconds of CPU and held every other client's search back
            logged = self._redactor.redact(replace_surrogates(sent[:len(query) + SPILL])[0])[:len(query)]
        else:
            logged = self._redactor.redact(query)
        record = {"v": FORMAT_VERSION, "type": "search", "id": sid, "time": _now(), "client": client,
                  "query": logged,
                  "args": {k: self._redactor.redact(v) if isinstance(v, str) else v for k, v in args.items()},
                  "ranking_hash": config_hash,
                  "results": [{"citation": c, "score": round(s, 6)} for c, s in results],
                  "ms": None if ms is None else round(ms, 3)}
        ranks: dict[str, int] = {}
        for i, (citation, _) in enumerate(results, 1):
            ranks.setdefault(citation.split("#", 1)[0], i)
        with self._lock:
            self._recent.setdefault(client, deque(maxlen=_RECENT)).append((sid, ranks))
        self._write(record)
        return record

    def get(self, client: str, path: str, from_line: int | None, lines: int | None) -> dict[str, Any]:
        """Log one ``memory_get`` and link it to the search of the same client it followed."""
        after, rank = None, None
        with self._lock:
            recent = list(self._recent.get(client, ()))
        for sid, ranks in reversed(recent):
            if path in ranks:
                after, rank = sid, ranks[path]
                break
        if after is None and recent:
            after = recent[-1][0]
        record = {"v": FORMAT_VERSION, "type": "get", "time": _now(), "client": client, "path": path,
                  "from": from_line, "lines": lines, "after": after, "rank": rank}
        self._write(record)
        return record

    def _write(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        line = (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                size = self.path.stat().st_size
            except FileNotFoundError:
                size = 0
            if size and size + len(line) > self.max_bytes:
                os.replace(self.path, self.path.with_name(self.path.stem + ".1" + self.path.suffix))
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)


def read_log(path: str | Path) -> list[dict[str, Any]]:
    """Every record, oldest first (the rotated file, then the current one); unreadable lines are skipped."""
    p = Path(path)
    out = []
    for f in (p.with_name(p.stem + ".1" + p.suffix), p):
        if not f.is_file():
            continue
        for line in f.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out


def _now() -> str:
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"
