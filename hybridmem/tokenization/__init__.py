"""The one Unicode-aware tokenizer: used for indexing, for querying and for MMR's Jaccard similarity.

Rules, applied to runs of word characters found in the original text (so spans point into it):

* NFKC, case folding, and folding of Latin/Greek/Cyrillic diacritics (``thanh toán`` -> ``thanh toan``, ``đ`` -> ``d``),
  as SQLite's ``unicode61`` tokenizer does; the marks that carry vowels in Thai or Devanagari are kept. A word that
  folding changes is indexed twice, folded and accented; a query searches the form it was typed in (see
  :func:`token_spans`).
* Scripts written without spaces (Han, Kana, Hangul, Thai, Lao, Khmer, Myanmar): overlapping n-grams of grapheme
  clusters (bigrams by default), the usual dictionary-free approach of CJK search engines (e.g. Lucene's
  CJKBigramFilter); a note's Han and Hangul characters are also indexed alone (``tokenizer.cjk_unigrams``), so a
  one-character word is findable. A Traditional Chinese character is read as its Simplified form
  (``tokenizer.fold_chinese``, on by default; OpenCC's character table), so ``會議`` and ``会议`` are one term.
* Spellings a writer chooses freely are one term, in every form of a word: Arabic harakat and tatweel dropped, the
  alef forms (أ إ آ ٱ) read as ا, ى and Persian ی as ي, Persian ک as ك, ة as ه (Lucene's Arabic and Persian
  normalizers); a soft hyphen, zero-width space or (non-)joiner inside a word dropped; Turkish ``İ`` read as ``i``;
  the tone mark of a Vietnamese open ``oa``/``oe``/``uy`` syllable placed on its second vowel (``hòa`` = ``hoà``).
* Code identifiers: ``payment_processor`` and ``paymentProcessor`` both give ``paymentprocessor``, ``payment`` and
  ``processor``, so the whole name and its parts are findable across naming conventions.
* Stemming: English Snowball (PyStemmer) of ASCII words (``tokenizer.stem``, on by default), the ``porter`` of FTS5's
  ``porter unicode61``; with ``tokenizer.stem_scripts`` (off by default) also Arabic light stemming (light10, as
  Lucene's ArabicStemmer) of Arabic-script words and Snowball Greek, Russian and Hindi of Greek, Cyrillic and
  Devanagari words. Other scripts are not stemmed.

The FTS5 index stores these tokens joined by spaces, and :func:`fts_query` turns a user's query into a MATCH
expression that cannot contain FTS5 syntax (every term is a quoted token of letters, marks and digits; a term the
query repeats is repeated, log-scaled, see :func:`query_terms`).

Example:
    >>> tokenize("Fix paymentProcessor retries")
    ['fix', 'paymentprocessor', 'payment', 'processor', 'retri']
    >>> tokenize("thanh toán")
    ['thanh', 'toan', 'toán']
    >>> query_terms("thanh toan"), query_terms("thanh toán")
    (['thanh', 'toan'], ['thanh', 'toán'])
    >>> query_terms("會議室"), query_terms("会议室")
    (['会议', '议室'], ['会议', '议室'])
"""

from __future__ import annotations

import math
import re
import unicodedata
from functools import lru_cache
from typing import Iterator, Sequence

from hybridmem.config import TokenizerConfig
from hybridmem.tokenization.scripts import han_fold, stem_other, stemmer

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
# Invisible characters that sit inside words without ending them (a subset of Unicode's Default_Ignorable_Code_Point,
# which NFKC_Casefold removes): a soft hyphen, zero-width space and joiners (Persian writes a zero-width non-joiner
# inside words, and many type the word without it), word joiner, byte order mark. A word is read without them.
_IGNORABLE = "\u00ad\u034f\u200b-\u200d\u2060\ufeff"
_RUN_RE = re.compile(
    rf"(?P<ns>[{_NOSPACE}]+)|(?P<w>(?:(?![{_NOSPACE}])[\w{_MARKS}{_IGNORABLE}])+)"
)
# Pieces of an identifier-like run: ACRONYM followed by Word, Word, lower, digits.
_PIECE_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+|[^\W\d_A-Za-z]+[\w]*?(?=_|$|[A-Z])|[^_\W]+")
# Applied to every form of a word, accented or folded, as Lucene's Arabic and Persian normalizers do: the optional
# vowel marks (harakat) and the tatweel dropped, the alef forms with hamza or madda read as a bare alef, alef maqsura
# and the Persian yeh as yeh, the Persian keheh as kaf, teh marbuta as heh; the invisible characters above dropped.
# (A writer types these either way; none of them tells two words apart.)
_ALWAYS = str.maketrans({**{chr(c): None for c in (*range(0x064B, 0x0660), 0x0670, 0x0640, 0x00AD, 0x034F, 0x200B,
                                                   0x200C, 0x200D, 0x2060, 0xFEFF)},
                         "\u0622": "\u0627", "\u0623": "\u0627", "\u0625": "\u0627", "\u0671": "\u0627",
                         "\u0649": "\u064a", "\u06cc": "\u064a", "\u06a9": "\u0643", "\u0629": "\u0647"})
# Vietnamese writes the tone of an open "oa", "oe", "uy" syllable on either vowel (hòa / hoà, thủy / thuỷ): the mark
# is read after the second vowel (in NFD, where a tone is a combining mark after its letter).
_VI_TONE = re.compile("(?<=[ou])([\u0300\u0301\u0303\u0309\u0323])([aey])$")
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


# What ``stem`` holds below: bit flags of the stemmers that apply (``tokenizer.stem``, ``tokenizer.stem_scripts``).
STEM_ENGLISH, STEM_SCRIPTS = 1, 2


def stem_mode(config: TokenizerConfig) -> int:
    """The stemmers ``config`` switches on, as :data:`STEM_ENGLISH` | :data:`STEM_SCRIPTS` bits."""
    return (STEM_ENGLISH if config.stem else 0) | (STEM_SCRIPTS if config.stem_scripts else 0)


@lru_cache(maxsize=65536)
def _norm_word(piece: str, fold: bool, stem: int) -> str:
    # "İ" casefolds to "i" and a combining dot, which is the capital's, not an accent
    s = unicodedata.normalize("NFKC", piece).translate(_ALWAYS).casefold().replace("i\u0307", "i")
    if not s.isascii():
        d = unicodedata.normalize("NFD", s)
        moved = _VI_TONE.sub(r"\2\1", d)
        if moved != d:
            s = unicodedata.normalize("NFC", moved)
    if fold:
        s = s.translate(_FOLD_EXTRA)
        if not s.isascii():
            s = unicodedata.normalize("NFC", _LATINISH_MARKS.sub("", unicodedata.normalize("NFD", s)))
    s = s[:MAX_TOKEN_CHARS]
    if stem:
        s = " ".join(_stem(w, stem) for w in s.split(" ")) if " " in s else _stem(s, stem)
    return s


def _stem(s: str, mode: int) -> str:
    if s.isascii():
        return stemmer()(s) if mode & STEM_ENGLISH and len(s) > 3 and s.isalpha() else s
    if not mode & STEM_SCRIPTS or not all(c.isalpha() or unicodedata.category(c)[0] == "M" for c in s):
        return s  # Devanagari writes its vowels as marks; a word with digits or symbols is not stemmed
    return stem_other(s)


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


# Combining marks inside the space-less scripts (Thai, Lao, Myanmar and Khmer vowel signs and tone marks, kana voicing
# marks): each belongs to the character before it, so n-grams count such clusters, not code points.
_NOSPACE_MARK_CHARS = "".join(
    chr(c) for lo, hi in ((0x0E00, 0x0EFF), (0x1000, 0x109F), (0x1780, 0x17FF), (0x3099, 0x309A))
    for c in range(lo, hi + 1) if unicodedata.category(chr(c))[0] == "M")
_NOSPACE_MARKS = re.compile(f"[{_NOSPACE_MARK_CHARS}]")
# Every combining mark a word holds, for a regular-expression class: a word of Hindi or Thai runs on past its vowel
# signs, which Python's \w does not match (ranking.language counts a question's words with it).
WORD_MARKS = _MARKS + _NOSPACE_MARK_CHARS


# Han and Hangul characters, each of which may be a word alone (猫, 車, 집): indexed alone as well (cjk_unigrams)
_UNIGRAM_CHARS = "\u3005-\u3007\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7a3\uf900-\ufaff\U00020000-\U0003134f"
_UNIGRAM = re.compile(f"[{_UNIGRAM_CHARS}]")
_UNIGRAMS_ONLY = re.compile(f"[{_UNIGRAM_CHARS}]+")


def _ngrams(start: int, run: str, n: int) -> Iterator[tuple[str, int, int]]:
    """Overlapping n-grams of grapheme clusters (a character and the combining marks after it).

    Han, Kana and Hangul have no such marks: their clusters are characters (CJK bigrams as Lucene's CJKBigramFilter).
    Thai writes vowels and tone marks as combining marks: code-point bigrams such as a consonant and its tone mark
    match nearly every sentence. Cluster bigrams scored nDCG@10 0.800 on XQuAD-R Thai (first 300 questions) where
    code-point bigrams scored 0.788 and a plain FTS5 trigram index 0.807.
    """
    if _NOSPACE_MARKS.search(run) is None:
        cuts = list(range(len(run) + 1))
    else:
        cuts = [i for i in range(len(run)) if i == 0 or not _NOSPACE_MARKS.match(run, i)] + [len(run)]
    if len(cuts) - 1 <= n:
        yield run, start, start + len(run)
        return
    for i in range(len(cuts) - n):
        a, b = cuts[i], cuts[i + n]
        yield run[a:b], start + a, start + b


def bm25_idf(n_rows: int, n_hit: int) -> float:
    """FTS5's BM25 IDF (``fts5Bm25Function`` in ``ext/fts5/fts5_aux.c``): ``log((N - nHit + 0.5) / (nHit + 0.5))``,
    or 1e-6 when that is <= 0. The in-memory keyword copy scores with it and the answer gate weighs query terms by it.

    Example:
        >>> round(bm25_idf(100, 0), 2), round(bm25_idf(100, 10), 2), bm25_idf(100, 90)
        (5.3, 2.15, 1e-06)
    """
    idf = math.log((n_rows - n_hit + 0.5) / (n_hit + 0.5))
    return idf if idf > 0.0 else 1e-6


def runs(text: str) -> Iterator[tuple[str, int]]:
    """The runs of word characters :func:`token_spans` reads, each with its start: a text's token spans are each
    run's own spans shifted by its start (a run is tokenized alone).

    Example:
        >>> list(runs("Đã thay nhớt, 東京!"))
        [('Đã', 0), ('thay', 3), ('nhớt', 8), ('東京', 14)]
    """
    for m in _RUN_RE.finditer(text):
        yield m.group(), m.start()


def token_spans(text: str, config: TokenizerConfig | None = None, query: bool = False) -> list[tuple[str, int, int]]:
    """Every token of ``text`` with the ``[start, end)`` span in ``text`` it came from.

    With ``keep_accented`` (the default), a word that diacritic folding changes gives its folded token and, right
    after it with the same span, its accented one (``toán`` -> ``toan``, ``toán``). ``query=True`` tokenizes a query:
    such a word searches its accented token only, so ``má`` no longer matches ``mà`` or ``ma`` (on XQuAD-R Vietnamese
    nDCG@10 0.875 against 0.865 folded), while a query typed without diacritics still finds accented notes.

    Example:
        >>> token_spans("retry_backoff_ms")[:2]
        [('retrybackoffms', 0, 16), ('retri', 0, 5)]
    """
    cfg = config or _DEFAULT
    fold, stem, n, han = cfg.fold_diacritics, stem_mode(cfg), cfg.cjk_ngram, cfg.fold_chinese
    unigrams = cfg.cjk_unigrams and not query and n > 1
    out: list[tuple[str, int, int]] = []
    for m in _RUN_RE.finditer(text):
        run, base = m.group(), m.start()
        if m.lastgroup == "ns":
            folded = unicodedata.normalize("NFKC", run).casefold()
            if han:
                folded = folded.translate(han_fold())
            alone = unigrams and len(folded) > 1 and _UNIGRAM.search(folded) is not None  # not a lone character twice
            if len(folded) != len(run) or " " in folded:  # compatibility forms changed it: n-gram the normalized run
                out.extend((g, base, base + len(run)) for piece in folded.split() for g, _, _ in _ngrams(0, piece, n))
                if alone:
                    out.extend((c, base, base + len(run)) for c in _UNIGRAM.findall(folded))
            elif not alone:
                out.extend(_ngrams(base, folded, n))
            elif _UNIGRAMS_ONLY.fullmatch(folded):  # Chinese or Korean: each character a cluster, each indexed alone
                last = len(folded) - n
                if last < 0:
                    out.append((folded, base, base + len(folded)))
                for i, ch in enumerate(folded):
                    if i <= last:
                        out.append((folded[i:i + n], base + i, base + i + n))
                    out.append((ch, base + i, base + i + 1))
            else:  # mixed with kana: each gram before the character it starts with
                grams = [*_ngrams(base, folded, n),
                         *((u.group(), base + u.start(), base + u.end()) for u in _UNIGRAM.finditer(folded))]
                out.extend(sorted(grams, key=lambda g: (g[1], -g[2])))
            continue
        twins = 0 if not (fold and cfg.keep_accented) else 2 if query else 1
        out.extend((tok, base + s, base + e) for tok, s, e in _word_tokens(run, fold, stem, cfg.split_identifiers,
                                                                               twins))
    return out


def _forms(piece: str, fold: bool, stem: int, twins: int) -> list[str]:
    """The tokens of one piece: folded; with ``twins`` 1 also the accented form where folding changed it (index),
    with 2 the accented form instead (query)."""
    # NFKC can expand one character into words with spaces (U+FDFA is a four-word phrase): each is a token
    folded = _norm_word(piece, fold, stem).split()
    if not twins:
        return folded
    accented = _norm_word(piece, False, stem).split()
    if accented == folded or len(accented) != len(folded):
        return folded
    if twins == 2:
        return accented
    return [t for pair in zip(folded, accented) for t in (pair if pair[0] != pair[1] else pair[:1])]


@lru_cache(maxsize=262144)
def _word_tokens(run: str, fold: bool, stem: int, split: bool, twins: int = 0) -> tuple[tuple[str, int, int], ...]:
    """The tokens of one word run with spans relative to it: the whole identifier (when it splits) and its parts.
    Cached: words repeat, and this is most of what indexing spends outside the embedding model."""
    parts = _split_identifier(run) if split else [(0, len(run))]
    out: list[tuple[str, int, int]] = []
    if len(parts) > 1:
        out.extend((w, 0, len(run)) for w in _forms(run.replace("_", ""), fold, 0, twins))
    for s, e in parts:
        out.extend((tok, s, e) for tok in _forms(run[s:e], fold, stem, twins))
    return tuple(out)


def tokenize(text: str, config: TokenizerConfig | None = None) -> list[str]:
    """The normalized tokens of ``text``, in order (duplicates kept)."""
    return [t for t, _, _ in token_spans(text, config)]


def query_terms(query: str, config: TokenizerConfig | None = None) -> list[str]:
    """The terms a query searches for, in order of first occurrence: stopwords dropped (unless that leaves none),
    at most ``max_query_terms`` distinct terms, and with ``query_term_frequency`` a term that occurs ``n`` times
    repeated ``1 + floor(log2(n))`` times (FTS5's bm25 sums every occurrence of a term in a MATCH, as Lucene does).

    Why repeats, and why log-scaled: a long query says what matters by repeating it. On SciFact abstracts used as
    paragraph-length queries for their titles (first 300 of 5,183), nDCG@10 was 0.896 with distinct terms, 0.889
    with every repeat, 0.911 log-scaled; short queries rarely repeat a term, so they are unchanged.

    Example:
        >>> query_terms("retry the retry of a retry, then retry")
        ['retri', 'retri', 'retri']
    """
    cfg = config or _DEFAULT
    query = query[: cfg.max_query_chars]
    counts: dict[str, int] = {}
    kept: dict[str, int] = {}
    for tok, s, e in token_spans(query, cfg, query=True):
        counts[tok] = counts.get(tok, 0) + 1
        if not (cfg.query_stopwords and query[s:e].casefold() in ENGLISH_STOPWORDS):
            kept[tok] = kept.get(tok, 0) + 1
    chosen = list((kept or counts).items())[: cfg.max_query_terms]
    if not cfg.query_term_frequency:
        return [t for t, _ in chosen]
    return [t for t, n in chosen for _ in range(n.bit_length())]


def cap_query(query: str, config: TokenizerConfig | None = None) -> tuple[str, str | None]:
    """``query`` cut to ``tokenizer.max_query_chars`` characters, and a sentence saying so (None when it was whole).

    Every search cuts its query here first, before it is tokenized, redacted for the query log or embedded; past the
    cut, :func:`query_terms` keeps at most ``max_query_terms`` distinct terms.

    Example:
        >>> cap_query("retry backoff " * 2, TokenizerConfig(max_query_chars=13))
        ('retry backoff', 'the query was cut to its first 13 of 28 characters (tokenizer.max_query_chars)')
    """
    limit = (config or _DEFAULT).max_query_chars
    if len(query) <= limit:
        return query, None
    return query[:limit], (f"the query was cut to its first {limit} of {len(query)} characters "
                           "(tokenizer.max_query_chars)")


def fts_query(query: str, config: TokenizerConfig | None = None) -> str | None:
    """A safe FTS5 MATCH expression for ``query``, or None when it has no searchable term.

    Terms are quoted tokens of letters, marks and digits joined by OR (default) or AND, so user-typed FTS5 syntax
    (quotes, NEAR, ``*``, ``-``, ``column:``, parentheses, AND/OR) is searched as plain words, never interpreted. A
    term FTS5's tokenizer reads as nothing (:func:`fts_tokens`: a run of Thai or Khmer punctuation such as ``๏``,
    which the space-less scripts' n-grams keep) is left out: as a phrase of no token it would match no row.

    Example:
        >>> fts_query('NEAR("x" y) OR title:z*')
        '"near" OR "x" OR "y" OR "titl" OR "z"'
        >>> fts_query("๏"), fts_query("๏ payment")
        (None, '"payment"')
    """
    return fts_match(fts_terms(query, config), config)


def fts_match(terms: Sequence[str], config: TokenizerConfig | None = None) -> str | None:
    """The MATCH expression of :func:`fts_terms` already read (a caller that needs the terms too reads them once)."""
    if not terms:
        return None
    joiner = " AND " if (config or _DEFAULT).query_mode == "and" else " OR "
    return joiner.join('"' + t.replace('"', '""') + '"' for t in terms)


def fts_terms(query: str, config: TokenizerConfig | None = None) -> list[str]:
    """The :func:`query_terms` that FTS5's tokenizer reads as at least one token: what :func:`fts_query` searches.

    Example:
        >>> fts_terms("๏ payment")
        ['payment']
    """
    return [t for t in query_terms(query, config) if fts_tokens(t)]


def fts_tokenizer_spec() -> str:
    """The FTS5 tokenizer for the pre-tokenized column: split on spaces only, keep marks, no further folding."""
    return "unicode61 remove_diacritics 0 categories 'L* N* Co M*'"


@lru_cache(maxsize=200_000)
def fts_tokens(term: str) -> tuple[str, ...]:
    """What FTS5's ``unicode61 remove_diacritics 0 categories 'L* N* Co M*'`` makes of one stored token: pieces
    split on any other character, lower-cased (``1⁄4``, with U+2044 FRACTION SLASH, is the two tokens 1 and 4)."""
    if term.isalnum():
        return (term.lower(),)
    pieces, cur = [], []
    for ch in term:
        if unicodedata.category(ch)[0] in "LNM" or unicodedata.category(ch) == "Co":
            cur.append(ch)
        elif cur:
            pieces.append("".join(cur).lower())
            cur = []
    if cur:
        pieces.append("".join(cur).lower())
    return tuple(pieces)
