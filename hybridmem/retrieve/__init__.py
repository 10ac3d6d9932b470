"""Retrieval: the two legs for one query (keyword and vector) and the in-memory copies that serve them fast.

``Retriever.retrieve()`` returns plain-data :class:`~hybridmem.records.Candidates`; ``rank()`` does all scoring
afterwards, so a query is retrieved once and ranked as often as a sweep likes.
"""

from hybridmem.retrieve.legs import Scope, build_candidates, chunk_infos, keyword_leg, vector_leg
from hybridmem.retrieve.retriever import Retriever

__all__ = ["Retriever", "Scope", "build_candidates", "chunk_infos", "keyword_leg", "vector_leg"]
