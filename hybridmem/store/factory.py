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


def missing_index(settings: Settings, path: str | Path) -> str | None:
    """One sentence when a reading command would open an index no sync has built (opening it would create an empty
    one and report nothing, as if the memory were empty), else None: the SQLite file at ``path`` does not exist, or
    no sync has written the PostgreSQL namespace (a mistyped ``[store] namespace``; the ones that exist are named)."""
    if settings.store.backend == "postgres":
        from hybridmem.store.postgres import indexed_namespaces

        namespace = settings.store.namespace or str(path)
        names = indexed_namespaces(store_url(settings))
        if namespace in names:
            return None
        listed = ", ".join(repr(n) for n in names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
        there = f"the namespaces indexed there: {listed}" if names else "nothing is indexed there yet"
        return (f"no index in the PostgreSQL namespace {namespace!r} ({there}): `hybridmem index` builds it, or fix "
                "[store] namespace")
    if str(path) != ":memory:" and not os.path.exists(path):
        from hybridmem.store.connection import refuse_non_index

        refuse_non_index(path)  # a file where its folder should be: say so, not "index builds it"
        return f"no index at {path}: `hybridmem index` builds it"
    return None
