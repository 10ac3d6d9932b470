"""The index schema as numbered migrations (``PRAGMA user_version`` records the last one applied)."""

from __future__ import annotations

from hybridmem.tokenization import fts_tokenizer_spec

SCHEMA_VERSION = 2

MIGRATIONS: list[tuple[int, str]] = [
    (
        1,
        f"""
        CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE IF NOT EXISTS files (
            path TEXT PRIMARY KEY, abspath TEXT, source TEXT NOT NULL, hash TEXT NOT NULL,
            mtime REAL NOT NULL, size INTEGER NOT NULL, date REAL, evergreen INTEGER NOT NULL DEFAULT 0,
            indexed_at REAL NOT NULL
        );
        CREATE TABLE IF NOT EXISTS chunks (
            id INTEGER PRIMARY KEY, path TEXT NOT NULL REFERENCES files(path) ON DELETE CASCADE,
            source TEXT NOT NULL, start_line INTEGER NOT NULL, end_line INTEGER NOT NULL, hash TEXT NOT NULL,
            text TEXT NOT NULL, tokens TEXT NOT NULL, timestamp REAL NOT NULL, evergreen INTEGER NOT NULL,
            embedded INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX IF NOT EXISTS chunks_path ON chunks(path);
        CREATE INDEX IF NOT EXISTS chunks_hash ON chunks(hash);
        CREATE TABLE IF NOT EXISTS embedding_cache (
            provider TEXT NOT NULL, model TEXT NOT NULL, provider_key TEXT NOT NULL, hash TEXT NOT NULL,
            dims INTEGER NOT NULL, embedding BLOB NOT NULL, updated_at REAL NOT NULL,
            PRIMARY KEY (provider, model, provider_key, hash)
        );
        CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(tokens, tokenize="{fts_tokenizer_spec()}");
        """,
    ),
    (
        2,
        """
        CREATE INDEX IF NOT EXISTS chunks_source ON chunks(source);
        """,
    ),
]
