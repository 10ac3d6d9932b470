"""hybridmem: hybrid (BM25 + vector) memory search for AI agents."""

from hybridmem.config import RankConfig, Settings, load_settings
from hybridmem.errors import HybridMemError
from hybridmem.index import MemoryIndex, SearchResponse
from hybridmem.records import Candidates, Document, Hit, Ranking

__all__ = [
    "Candidates", "Document", "Hit", "HybridMemError", "MemoryIndex", "RankConfig", "Ranking", "SearchResponse",
    "Settings", "load_settings",
]
__version__ = "0.1.0"
