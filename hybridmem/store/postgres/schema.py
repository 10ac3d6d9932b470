"""The PostgreSQL schema as numbered migrations (``hm_version`` records the last one applied).

One database holds many indexes: every row carries its namespace id (``hm_ns``) and generation. A namespace's
``live_gen`` names the generation searches read; a full reindex writes a new generation beside it and swaps
``live_gen`` in one transaction (see :meth:`~hybridmem.store.postgres.PostgresStore.publish`).
"""

from __future__ import annotations

SCHEMA_VERSION = 1
# the generation a statement reads: the pinned one (a reindex being built), else the namespace's live one
LIVE = "coalesce(%(gen)s::bigint, (SELECT live_gen FROM hm_ns WHERE id = %(ns)s))"
LOCK_CLASS = 72310  # first key of every advisory lock this schema takes (second: namespace id, 0 for migrations)

MIGRATIONS: list[tuple[int, str]] = [
    (
        1,
        """
        CREATE EXTENSION IF NOT EXISTS vector;
        CREATE TABLE IF NOT EXISTS hm_ns (
            id serial PRIMARY KEY, name text NOT NULL UNIQUE, live_gen bigint NOT NULL DEFAULT 1,
            next_gen bigint NOT NULL DEFAULT 2
        );
        CREATE TABLE IF NOT EXISTS hm_meta (
            ns int NOT NULL, gen bigint NOT NULL, key text NOT NULL, value text NOT NULL, PRIMARY KEY (ns, gen, key)
        );
        CREATE TABLE IF NOT EXISTS hm_files (
            ns int NOT NULL, gen bigint NOT NULL, path text COLLATE "C" NOT NULL, abspath text, source text NOT NULL,
            hash text NOT NULL, mtime float8 NOT NULL, size bigint NOT NULL, date float8,
            evergreen int NOT NULL DEFAULT 0, indexed_at float8 NOT NULL, PRIMARY KEY (ns, gen, path)
        );
        CREATE TABLE IF NOT EXISTS hm_chunks (
            id bigserial PRIMARY KEY, ns int NOT NULL, gen bigint NOT NULL, path text COLLATE "C" NOT NULL,
            source text NOT NULL, start_line int NOT NULL, end_line int NOT NULL, hash text NOT NULL,
            text text NOT NULL, tokens text NOT NULL, timestamp float8 NOT NULL, evergreen int NOT NULL,
            embedded int NOT NULL DEFAULT 0, length int NOT NULL, embedding vector
        );
        -- MAIN keeps a vector inside the row (text and tokens move to TOAST first), so an exact scan reads no TOAST
        ALTER TABLE hm_chunks ALTER COLUMN embedding SET STORAGE MAIN;
        CREATE INDEX IF NOT EXISTS hm_chunks_ns_path ON hm_chunks (ns, gen, path);
        CREATE TABLE IF NOT EXISTS hm_postings (
            ns int NOT NULL, gen bigint NOT NULL, term text COLLATE "C" NOT NULL, chunk bigint NOT NULL,
            tf int NOT NULL, dl int NOT NULL, PRIMARY KEY (ns, gen, term, chunk) INCLUDE (tf, dl)
        );
        CREATE INDEX IF NOT EXISTS hm_postings_chunk ON hm_postings (chunk);
        CREATE TABLE IF NOT EXISTS hm_stats (
            ns int NOT NULL, gen bigint NOT NULL, n_rows bigint NOT NULL DEFAULT 0, n_tokens bigint NOT NULL DEFAULT 0,
            PRIMARY KEY (ns, gen)
        );
        CREATE TABLE IF NOT EXISTS hm_cache (
            provider text NOT NULL, model text NOT NULL, provider_key text NOT NULL, hash text NOT NULL,
            dims int NOT NULL, embedding bytea NOT NULL, updated_at float8 NOT NULL,
            PRIMARY KEY (provider, model, provider_key, hash)
        );
        """,
    ),
]

TABLES = {"meta": "hm_meta", "files": "hm_files", "chunks": "hm_chunks", "chunks_fts": "hm_postings",
          "chunks_vec": "hm_chunks", "embedding_cache": "hm_cache"}
