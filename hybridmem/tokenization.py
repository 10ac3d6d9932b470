"""The one Unicode-aware tokenizer: used for indexing, for querying and for MMR's Jaccard similarity.

Rules, applied to runs of word characters found in the original text (so spans point into it):

* NFKC, case folding, and folding of Latin/Greek/Cyrillic diacritics (``thanh toán`` -> ``thanh toan``, ``đ`` -> ``d``),
  as SQLite's ``unicode61`` tokenizer does; the marks that carry vowels in Thai or Devanagari are kept.
* Scripts written without spaces (Han, Kana, Hangul, Thai, Lao, Khmer, Myanmar): overlapping character n-grams
  (bigrams by default), the usual dictionary-free approach of CJK search engines (e.g. Lucene's CJKBigramFilter).
* Code identifiers: ``payment_processor`` and ``paymentProcessor`` both give ``paymentprocessor``, ``payment`` and
  ``processor``, so the whole name and its parts are findable across naming conventions.
* Optional English Snowball stemming (PyStemmer) of ASCII words, the ``porter`` of FTS5's ``porter unicode61``.

The FTS5 index stores these tokens joined by spaces, and :func:`fts_query` turns a user's query into a MATCH
expression that cannot contain FTS5 syntax (every term is a quoted token of letters, marks and digits).

Example:
    >>> tokenize("Fix paymentProcessor retries")
    ['fix', 'paymentprocessor', 'payment', 'processor', 'retri']
    >>> tokenize("thanh toán") == tokenize("thanh toan")
    True
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import Iterator

from hybridmem.config import TokenizerConfig

_DEFAULT = TokenizerConfig()
MAX_TOKEN_CHARS = 64

# Scripts written without spaces between words.
_NOSPACE = (
    "\u1100-\u11ff\u2e80-\u2fdf\u3005-\u3007\u3021-\u3029\u3031-\u3035\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f"
    "\u0e00-\u0e7f\u0e80-\u0eff\u1000-\u109f\u1780-\u17ff"
)
# Combining marks that Python's \w does not match but that belong inside words.
_MARKS = (
    "\u0300-\u036f\u0483-\u0489\u0591-\u05bd\u05bf\u05c1\u05c2\u05c4\u05c5\u05c7\u0610-\u061a\u064b-\u065f\u0670"
    "\u06d6-\u06dc\u06df-\u06e4\u06e7\u06e8\u06ea-\u06ed\u0900-\u0903\u093a-\u094f\u0951-\u0957\u0962\u0963"
    "\u0981-\u0983\u09bc-\u09d7\u0a01-\u0a03\u0a3c-\u0a51\u0b01-\u0b03\u0bbe-\u0bcd\u0c00-\u0c04\u0c3e-\u0c56"
    "\u0d00-\u0d03\u0d3e-\u0d4d\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"
)
_RUN_RE = re.compile(
    rf"(?P<ns>[{_NOSPACE}]+)|(?P<w>(?:(?![{_NOSPACE}])[\w{_MARKS}])+)"
)
# Pieces of an identifier-like run: ACRONYM followed by Word, Word, lower, digits.
_PIECE_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+|[^\W\d_A-Za-z]+[\w]*?(?=_|$|[A-Z])|[^_\W]+")
_FOLD_EXTRA = str.maketrans({"đ": "d", "Đ": "d", "ø": "o", "ł": "l", "ı": "i", "ß": "ss", "æ": "ae", "œ": "oe"})
_LATINISH_MARKS = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")

ENGLISH_STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below between both
    but by can could did do does doing down during each few for from further had has have having he her here hers
    herself him himself his how i if in into is it its itself just me more most my myself no nor not now of off on once
    only or other our ours ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves""".split()
)


@lru_cache(maxsize=1)
def _stemmer():  # noqa: ANN202
    try:
        import Stemmer  # PyStemmer

        return Stemmer.Stemmer("english").stemWord
    except ImportError:  # pragma: no cover - PyStemmer is a core dependency
        import snowballstemmer

        return snowballstemmer.stemmer("english").stemWord


@lru_cache(maxsize=65536)
def _norm_word(piece: str, fold: bool, stem: bool) -> str:
    s = unicodedata.normalize("NFKC", piece).casefold()
    if fold:
        s = s.translate(_FOLD_EXTRA)
        if not s.isascii():
            s = unicodedata.normalize("NFC", _LATINISH_MARKS.sub("", unicodedata.normalize("NFD", s)))
    s = s[:MAX_TOKEN_CHARS]
    if stem and len(s) > 3 and s.isascii() and s.isalpha():
        s = _stemmer()(s)
    return s


def _split_identifier(run: str) -> list[tuple[int, int]]:
    """Spans of the parts of ``run`` split on underscores and case changes (camelCase, HTTPServer)."""
    spans: list[tuple[int, int]] = []
    pos = 0
    for part in run.split("_"):
        if part:
            if part.islower() or part.isupper() or part[1:].islower() or not any(c.isupper() for c in part[1:]):
                spans.append((pos, pos + len(part)))
            else:
                for m in _PIECE_RE.finditer(part):
                    spans.append((pos + m.start(), pos + m.end()))
        pos += len(part) + 1
    return spans


def _ngrams(start: int, run: str, n: int) -> Iterator[tuple[str, int, int]]:
    if len(run) <= n:
        yield run, start, start + len(run)
        return
    for i in range(len(run) - n + 1):
        yield run[i : i + n], start + i, start + i + n


def token_spans(text: str, config: TokenizerConfig | None = None) -> list[tuple[str, int, int]]:
    """Every token of ``text`` with the ``[start, end)`` span in ``text`` it came from.

    Example:
        >>> token_spans("retry_backoff_ms")[:2]
        [('retrybackoffms', 0, 16), ('retri', 0, 5)]
    """
    cfg = config or _DEFAULT
    fold, stem, n = cfg.fold_diacritics, cfg.stem, cfg.cjk_ngram
    out: list[tuple[str, int, int]] = []
    for m in _RUN_RE.finditer(text):
        run, base = m.group(), m.start()
        if m.lastgroup == "ns":
            folded = unicodedata.normalize("NFKC", run).casefold()
            if len(folded) != len(run) or " " in folded:  # compatibility forms changed it: n-gram the normalized run
                out.extend((g, base, base + len(run)) for piece in folded.split() for g, _, _ in _ngrams(0, piece, n))
            else:
                out.extend(_ngrams(base, folded, n))
            continue
        out.extend((tok, base + s, base + e) for tok, s, e in _word_tokens(run, fold, stem, cfg.split_identifiers))
    return out


@lru_cache(maxsize=262144)
def _word_tokens(run: str, fold: bool, stem: bool, split: bool) -> tuple[tuple[str, int, int], ...]:
    """The tokens of one word run with spans relative to it: the whole identifier (when it splits) and its parts.
    Cached: words repeat, and this is most of what indexing spends outside the embedding model."""
    parts = _split_identifier(run) if split else [(0, len(run))]
    out: list[tuple[str, int, int]] = []
    if len(parts) > 1:
        whole = _norm_word(run.replace("_", ""), fold, False)
        out.extend((w, 0, len(run)) for w in whole.split())
    for s, e in parts:
        # NFKC can expand one character into words with spaces (U+FDFA is a four-word phrase): each is a token
        out.extend((tok, s, e) for tok in _norm_word(run[s:e], fold, stem).split())
    return tuple(out)


def tokenize(text: str, config: TokenizerConfig | None = None) -> list[str]:
    """The normalized tokens of ``text``, in order (duplicates kept)."""
    return [t for t, _, _ in token_spans(text, config)]


def token_set(text: str, config: TokenizerConfig | None = None) -> frozenset[str]:
    """The set of tokens, for Jaccard similarity."""
    return frozenset(tokenize(text, config))


def query_terms(query: str, config: TokenizerConfig | None = None) -> list[str]:
    """The distinct terms a query searches for, stopwords dropped (unless that leaves none), capped in number."""
    cfg = config or _DEFAULT
    if len(query) > 100_000:
        query = query[:100_000]
    terms: list[str] = []
    seen: set[str] = set()
    kept: list[str] = []
    for tok, s, e in token_spans(query, cfg):
        if tok in seen:
            continue
        seen.add(tok)
        terms.append(tok)
        if not (cfg.query_stopwords and query[s:e].casefold() in ENGLISH_STOPWORDS):
            kept.append(tok)
    chosen = kept if kept else terms
    return chosen[: cfg.max_query_terms]


def fts_query(query: str, config: TokenizerConfig | None = None) -> str | None:
    """A safe FTS5 MATCH expression for ``query``, or None when it has no searchable term.

    Terms are quoted tokens of letters, marks and digits joined by OR (default) or AND, so user-typed FTS5 syntax
    (quotes, NEAR, ``*``, ``-``, ``column:``, parentheses, AND/OR) is searched as plain words, never interpreted.

    Example:
        >>> fts_query('NEAR("x" y) OR title:z*')
        '"near" OR "x" OR "y" OR "titl" OR "z"'
    """
    cfg = config or _DEFAULT
    terms = query_terms(query, cfg)
    if not terms:
        return None
    joiner = " AND " if cfg.query_mode == "and" else " OR "
    return joiner.join('"' + t.replace('"', '""') + '"' for t in terms)


def fts_tokenizer_spec() -> str:
    """The FTS5 tokenizer for the pre-tokenized column: split on spaces only, keep marks, no further folding."""
    return "unicode61 remove_diacritics 0 categories 'L* N* Co M*'"
