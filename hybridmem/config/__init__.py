"""Every default hybridmem uses, in one place.

Settings are frozen dataclasses grouped by concern. Load them from TOML with :func:`load_settings`, override any field
per call with :meth:`Settings.override` (``settings.override(ranking={"fusion": "rrf"})``) or
:meth:`RankConfig.replace`. The CLI, the app, the eval and the notebooks read defaults from here.

Two ranking presets exist: ``reference`` reproduces the reference system exactly (weighted sum of raw cosine and the
BM25 rank transform ``r / (1 + r)``, min score 0.35, no MMR, no decay); ``default`` is the engine's own choice,
measured on labeled data (see the comment on :data:`DEFAULT_RANKING`).

Example:
    >>> s = Settings()
    >>> s.ranking.vector_weight
    0.5
    >>> s.override(ranking={"fusion": "rrf"}).ranking.fusion
    'rrf'
"""

from hybridmem.config.base import (
    BACKEND_RETRY_AFTER_S, BM25_NORMALIZATIONS, DEFAULT_BATCH_SIZE, DEFAULT_MODEL, DEFAULT_PROVIDER, DOCUMENT_RUNTIMES, FAILOVER_ERRORS,
    FUSION_METHODS, INDEX_DIRNAME, INDEX_FILENAME, LABELS_DIRNAME, MAX_QUERY_CHARS, MMR_SIMILARITIES, PROVIDERS, QUERY_MODES,
    PROVIDER_MODELS, QUERY_RUNTIMES, TOKENIZER_VERSION, VECTOR_NORMALIZATIONS, VECTOR_SEARCH_MODES, provider_model,
)
from hybridmem.config.paths import default_index_path, resolve_index_path, resolve_workspace
from hybridmem.config.ranking import (
    CALIBRATED_MIN_SCORE, CALIBRATED_RANKING, DEFAULT_EVAL_CONFIGS, DEFAULT_RANKING, MINMAX_RANKING, PRESETS, REFERENCE_RANKING, fusion_min_score, preset, RankConfig,
)
from hybridmem.config.sections import (
    DEFAULT_STORE, DOCUMENT_CHUNKING, ChunkingConfig, EmbeddingConfig, ServeConfig, SourcesConfig, StoreConfig,
    SyncConfig, TokenizerConfig,
)
from hybridmem.config.settings import (
    load_settings, Settings, settings_from_dict,
)

__all__ = [
    "BACKEND_RETRY_AFTER_S", "BM25_NORMALIZATIONS", "CALIBRATED_MIN_SCORE", "CALIBRATED_RANKING", "MINMAX_RANKING", "ChunkingConfig", "DEFAULT_BATCH_SIZE", "DEFAULT_EVAL_CONFIGS", "DOCUMENT_RUNTIMES",
    "DEFAULT_MODEL", "DEFAULT_PROVIDER", "DEFAULT_RANKING", "DEFAULT_STORE", "DOCUMENT_CHUNKING", "EmbeddingConfig",
    "FAILOVER_ERRORS", "FUSION_METHODS", "INDEX_DIRNAME", "INDEX_FILENAME", "LABELS_DIRNAME", "MAX_QUERY_CHARS", "MMR_SIMILARITIES",
    "PRESETS", "PROVIDER_MODELS", "PROVIDERS", "QUERY_MODES", "QUERY_RUNTIMES", "REFERENCE_RANKING", "RankConfig", "ServeConfig",
    "Settings", "SourcesConfig", "StoreConfig", "SyncConfig", "TOKENIZER_VERSION", "TokenizerConfig",
    "VECTOR_NORMALIZATIONS", "VECTOR_SEARCH_MODES", "default_index_path", "fusion_min_score", "load_settings", "preset",
    "provider_model", "resolve_index_path", "resolve_workspace", "settings_from_dict",
]
