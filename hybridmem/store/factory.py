"""The one place that picks the store engine: ``[store] backend`` (``sqlite`` by default, or ``postgres``).

The PostgreSQL engine (and its driver, psycopg) is imported only when chosen, so the default install, a one-shot CLI
search and the MCP server's cold start never load it.
"""

from __future__ import annotations

import os
from pathlib import Path

from hybridmem.config import Settings
from hybridmem.errors import ConfigError
from hybridmem.store.base import IndexStore
from hybridmem.store.database import Store

URL_ENV = "HYBRIDMEM_STORE_URL"


def store_url(settings: Settings) -> str:
    """``[store] url``, else ``$HYBRIDMEM_STORE_URL``; a ConfigError when neither names a server."""
    url = settings.store.url or os.environ.get(URL_ENV, "")
    if not url:
        raise ConfigError(f'store.backend = "postgres" needs a server: set [store] url = "postgresql://..." or the '
                          f"environment variable {URL_ENV}")
    return url


def open_store(settings: Settings, path: str | Path) -> IndexStore:
    """Open the index of ``settings.store.backend``: the SQLite file at ``path``, or the PostgreSQL namespace
    ``settings.store.namespace`` (default: ``path`` itself, so each workspace keeps its own index).

    Example:
        >>> open_store(Settings(), ":memory:").backend
        'sqlite'
    """
    cfg = settings.store
    if cfg.backend == "postgres":
        from hybridmem.store.postgres import PostgresStore

        return PostgresStore(store_url(settings), cfg.namespace or str(path), hnsw_min_rows=cfg.pg_hnsw_min_rows,
                             ef_search=cfg.pg_ef_search)
    return Store(path, cfg.busy_timeout_ms)
