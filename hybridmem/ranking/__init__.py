"""Ranking: normalize, fuse, decay, MMR and cut one query's candidates; pure functions, no I/O.

``rank(candidates, config, now)`` is the single entry point every caller uses (``memo=RankMemo(candidates)`` shares
one query's config-independent work across the calls of a sweep); the building blocks are exported
for notebooks, tests and the workbench. ranx is imported only when a ranx fusion method is used.
"""

from hybridmem.ranking.decay import age_days, decay_factor
from hybridmem.ranking.fusion import (
    FUSIONS,
    LEG_TERMS,
    RANX_FUSIONS,
    ScoredLeg,
    fusion_names,
    get_fusion,
    ranx_fusion,
    rrf_fusion,
    weighted_fusion,
)
from hybridmem.ranking.mmr import chunk_similarity, cosine, jaccard, mmr_select
from hybridmem.ranking.normalize import (
    BM25_NORMALIZERS,
    VECTOR_NORMALIZERS,
    bm25_minmax,
    bm25_reference,
    get_normalizer,
    minmax,
    rank_reciprocal,
    vector_minmax,
    vector_raw,
)
from hybridmem.ranking.pipeline import MIN_TRUNCATED_SNIPPET, RankMemo, check_config, rank
from hybridmem.ranking.snippet import citation, lead_snippet, make_snippet, match_spans, truncate_snippet

__all__ = [
    "BM25_NORMALIZERS",
    "FUSIONS",
    "LEG_TERMS",
    "MIN_TRUNCATED_SNIPPET",
    "RANX_FUSIONS",
    "RankMemo",
    "VECTOR_NORMALIZERS",
    "ScoredLeg",
    "age_days",
    "check_config",
    "bm25_minmax",
    "bm25_reference",
    "chunk_similarity",
    "citation",
    "cosine",
    "decay_factor",
    "fusion_names",
    "get_fusion",
    "get_normalizer",
    "jaccard",
    "lead_snippet",
    "make_snippet",
    "match_spans",
    "minmax",
    "mmr_select",
    "rank",
    "rank_reciprocal",
    "ranx_fusion",
    "rrf_fusion",
    "truncate_snippet",
    "vector_minmax",
    "vector_raw",
    "weighted_fusion",
]
