"""Sync: sources -> chunks -> store, incrementally by content hash, or as an atomic full rebuild."""

from hybridmem.sync.documents import Progress, SyncReport
from hybridmem.sync.lock import sync_running
from hybridmem.sync.reindex import ReindexError, atomic_reindex
from hybridmem.sync.syncer import Syncer

__all__ = ["Progress", "ReindexError", "SyncReport", "Syncer", "atomic_reindex", "sync_running"]
