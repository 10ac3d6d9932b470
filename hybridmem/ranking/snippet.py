"""Snippets and citations for ranked hits.

A snippet is at most ``max_chars`` characters of a chunk's text. When the query's tokens occur in the chunk, the
window is centred on the densest run of matches (most distinct query tokens, then most matches, within one window;
a one-fragment version of how search highlighters score fragments), cut at word boundaries, and elisions are marked
with "…". Otherwise the snippet is the start of the text.

Matching uses :func:`hybridmem.tokenization.token_spans`, so stemming, case and diacritic folding, identifier
splitting and CJK bigrams match exactly as in search. Tokenizing a whole 1600-char chunk costs about a millisecond,
so for ASCII text only the words that can possibly match are tokenized: a case-insensitive scan for a short prefix of
each query token (a stem's first letters are the word's first letters) finds them, and each word found is checked
with the real tokenizer. Results are memoized by ``(text, query tokens, max_chars)``, which makes the thousands of
``rank()`` calls of a parameter sweep over the same candidates cheap.

Example:
    >>> citation("memory/2026-05-01.md", 5, 20)
    'memory/2026-05-01.md#L5-L20'
    >>> citation("MEMORY.md", 5, 5)
    'MEMORY.md#L5'
    >>> lead_snippet("alpha beta gamma delta", 13)
    'alpha beta…'
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import AbstractSet, Sequence

from hybridmem.tokenization import runs, token_spans

__all__ = ["ELLIPSIS", "citation", "lead_snippet", "make_snippet", "match_spans", "truncate_snippet"]

ELLIPSIS = "…"
_SPACE = re.compile(r"\s")
_WORD_END = re.compile(r"\w*")


def citation(path: str, start_line: int, end_line: int) -> str:
    """``path#Lstart-Lend``, or ``path#Lstart`` for a single line."""
    if start_line == end_line:
        return f"{path}#L{start_line}"
    return f"{path}#L{start_line}-L{end_line}"


def lead_snippet(text: str, max_chars: int) -> str:
    """The start of ``text`` in at most ``max_chars`` characters, cut at a word boundary, "…" marking the cut.

    Example:
        >>> lead_snippet("short", 10)
        'short'
    """
    if len(text) <= max_chars:
        return text
    if max_chars <= 1:
        return ELLIPSIS[:max_chars]
    cut = text[: max_chars - 1]
    if not text[max_chars - 1].isspace():
        k = max(cut.rfind(" "), cut.rfind("\n"), cut.rfind("\t"))
        if k > max_chars // 2:
            cut = cut[:k]
    return cut.rstrip() + ELLIPSIS


def truncate_snippet(snippet: str, limit: int) -> str:
    """``snippet`` shortened to at most ``limit`` characters (word boundary, "…"); unchanged when it fits."""
    return lead_snippet(snippet, limit)


def _probe(token: str) -> str:
    # Stemming only rewrites the end of an ASCII word of 4+ letters, so the first letters of a stem are the first
    # letters of every word that stems to it ("retri" <- "retrying", "sky" <- "skies").
    if token.isalpha():
        if len(token) > 4:
            return token[:4]
        if len(token) >= 3:
            return token[: len(token) - 1]
    return token


@lru_cache(maxsize=1024)
def _probe_regex(query_tokens: tuple[str, ...]) -> re.Pattern[str] | None:
    probes = sorted({_probe(t) for t in query_tokens if t and t.isascii()}, key=len, reverse=True)
    if not probes:
        return None
    return re.compile("|".join(re.escape(p) for p in probes), re.IGNORECASE)


@lru_cache(maxsize=65536)
def _word_spans(word: str) -> tuple[tuple[str, int, int], ...]:
    """:func:`~hybridmem.tokenization.token_spans` of one word (a run of word characters), cached: the same words
    recur in every chunk a query's terms match, and tokenizing them again was most of ``rank()``'s time on long
    chunks."""
    return tuple(token_spans(word))


def match_spans(text: str, query_tokens: Sequence[str]) -> list[tuple[int, int, str]]:
    """``(start, end, token)`` of every token of ``text`` that is one of ``query_tokens``, by start.

    Example:
        >>> match_spans("Retrying the payment_processor", ("retri", "processor"))
        [(0, 8, 'retri'), (21, 30, 'processor')]
    """
    wanted = set(query_tokens)
    if not wanted:
        return []
    if not text.isascii():  # run by run (each is tokenized alone), each run's tokens cached
        return [(base + s, base + e, t) for run, base in runs(text) for t, s, e in _word_spans(run) if t in wanted]
    pattern = _probe_regex(tuple(sorted(wanted)))
    if pattern is None:
        return []
    out: list[tuple[int, int, str]] = []
    done: set[int] = set()
    for m in pattern.finditer(text):
        a = m.start()
        while a > 0 and (text[a - 1].isalnum() or text[a - 1] == "_"):
            a -= 1
        if a in done:
            continue
        done.add(a)
        b = _WORD_END.match(text, m.start()).end()
        out.extend((a + s, a + e, t) for t, s, e in _word_spans(text[a:b]) if t in wanted)
    out.sort()
    return out


def make_snippet(
    text: str,
    query_tokens: Sequence[str],
    max_chars: int,
    chunk_tokens: AbstractSet[str] | None = None,
) -> str:
    """At most ``max_chars`` characters of ``text``, centred on the densest matches of ``query_tokens``.

    Args:
        text: the chunk's text.
        query_tokens: normalized query tokens (as produced by the tokenizer).
        max_chars: the snippet's maximum length, ellipses included.
        chunk_tokens: the chunk's token set, when known; if it shares no token with the query the (cheap) lead of
            the text is returned without tokenizing.

    Example:
        >>> text = "intro " * 50 + "the timing belt was replaced " + "outro " * 50
        >>> make_snippet(text, ("time", "belt"), 40)
        '…intro the timing belt was replaced…'
    """
    if len(text) <= max_chars:
        return text
    if not query_tokens or (chunk_tokens is not None and chunk_tokens.isdisjoint(query_tokens)):
        return lead_snippet(text, max_chars)
    return _centred_snippet(text, tuple(query_tokens), max_chars)


@lru_cache(maxsize=4096)
def _centred_snippet(text: str, query_tokens: tuple[str, ...], max_chars: int) -> str:
    spans = match_spans(text, query_tokens)
    if not spans:
        return lead_snippet(text, max_chars)
    width = max_chars - 2 * len(ELLIPSIS)
    i0, j0 = _densest(spans, width)
    ms = spans[i0][0]
    me = max(spans[j0 - 1][1], ms) if j0 > i0 else spans[i0][1]
    if me - ms > width:
        me = ms + width
    start = ms - (width - (me - ms)) // 2
    start = max(0, min(start, len(text) - width))
    end = min(len(text), start + width)
    if start > 0 and not text[start - 1].isspace():
        m = _SPACE.search(text, start, ms)
        if m is not None:
            start = m.end()
    if end < len(text) and not text[end].isspace():
        k = max(text.rfind(" ", me, end), text.rfind("\n", me, end), text.rfind("\t", me, end))
        if k > me:
            end = k
    body = text[start:end].strip()
    return (ELLIPSIS if start > 0 else "") + body + (ELLIPSIS if end < len(text) else "")


def _densest(spans: list[tuple[int, int, str]], width: int) -> tuple[int, int]:
    """Indices ``[i, j)`` of the window of matches fitting in ``width`` chars with most distinct tokens, then most
    matches; the earliest such window wins."""
    best = (0, 0)
    best_i = best_j = 0
    counts: dict[str, int] = {}
    j = 0
    n = len(spans)
    for i in range(n):
        if j < i:
            j = i
        while j < n and spans[j][1] - spans[i][0] <= width:
            tok = spans[j][2]
            counts[tok] = counts.get(tok, 0) + 1
            j += 1
        key = (len(counts), j - i)
        if key > best:
            best, best_i, best_j = key, i, j
        if j > i:
            tok = spans[i][2]
            left = counts[tok] - 1
            if left:
                counts[tok] = left
            else:
                del counts[tok]
    if best == (0, 0):
        return 0, 0
    return best_i, best_j
