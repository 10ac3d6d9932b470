"""The index and its connections; every SQL string of hybridmem lives in this package.

:class:`Store` is the SQLite engine (the default), ``hybridmem.store.postgres.PostgresStore`` the PostgreSQL one; both
implement :class:`IndexStore`, and :func:`open_store` is the one place that picks between them.
"""

from hybridmem.store.base import IndexStore
from hybridmem.store.connection import DRIVERS, Connection, connect
from hybridmem.store.database import Store
from hybridmem.store.factory import open_store
from hybridmem.store.schema import SCHEMA_VERSION

__all__ = ["DRIVERS", "SCHEMA_VERSION", "Connection", "IndexStore", "Store", "connect", "open_store"]
