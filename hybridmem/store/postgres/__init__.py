"""The PostgreSQL engine of the store (``[store] backend = "postgres"``): psycopg and pgvector, imported only here."""

from hybridmem.store.postgres.connection import StoreConnectionError
from hybridmem.store.postgres.database import PostgresStore, indexed_namespaces

__all__ = ["PostgresStore", "StoreConnectionError", "indexed_namespaces"]
