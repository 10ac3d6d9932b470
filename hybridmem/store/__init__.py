"""The SQLite index and its connections; every SQL string of hybridmem lives in this package."""

from hybridmem.store.connection import DRIVERS, Connection, connect
from hybridmem.store.database import Store
from hybridmem.store.schema import SCHEMA_VERSION

__all__ = ["DRIVERS", "SCHEMA_VERSION", "Connection", "Store", "connect"]
