"""Maximal Marginal Relevance re-ordering (Carbonell & Goldstein, "The use of MMR, diversity-based reranking for
reordering documents and producing summaries", SIGIR 1998).

Greedily pick ``argmax_i  lambda * rel_i - (1 - lambda) * max_{s in selected} sim(i, s)``; ties go to the earlier
candidate. ``lambda = 1`` is plain relevance order; lower values push near-duplicates of what was already picked down.

The selection is *lazy* but exact: similarities are never negative here, so ``lambda * rel_i`` bounds a candidate's
MMR score from above; scanning candidates in relevance order stops as soon as that bound cannot beat the best score
found, and a candidate's max-similarity is brought up to date only when it is looked at. With ``lambda = 1`` no
similarity is computed at all. ``k`` / ``counts`` stop the selection early once enough counted candidates have been
picked (``rank()`` stops once its cut is settled).

Example:
    >>> sets = [frozenset("ab"), frozenset("ab"), frozenset("xy")]
    >>> order, scores = mmr_select([1.0, 0.9, 0.5], lambda i, j: jaccard(sets[i], sets[j]), lam=0.5)
    >>> order
    [0, 2, 1]
"""

from __future__ import annotations

import math
from functools import reduce
from operator import or_
from threading import Lock
from typing import AbstractSet, Callable, Container, Sequence

import numpy as np

from hybridmem.records import ChunkInfo

__all__ = ["TokenBits", "chunk_similarity", "cosine", "jaccard", "mmr_select"]

Similarity = Callable[[int, int], float]


def jaccard(a: AbstractSet[str], b: AbstractSet[str]) -> float:
    """Jaccard similarity ``|a & b| / |a | b|`` of two token sets; 0.0 when both are empty.

    Example:
        >>> jaccard(frozenset("abc"), frozenset("bcd"))
        0.5
    """
    if not a or not b:
        return 0.0
    inter = len(a & b) if len(a) <= len(b) else len(b & a)
    return inter / (len(a) + len(b) - inter)


def cosine(u: np.ndarray, v: np.ndarray) -> float:
    """Cosine similarity of two vectors; 0.0 when either has zero length.

    Example:
        >>> cosine(np.array([1.0, 0.0]), np.array([1.0, 1.0]))  # doctest: +ELLIPSIS
        0.7071067811...
    """
    nu = float(np.linalg.norm(u))
    nv = float(np.linalg.norm(v))
    if nu == 0.0 or nv == 0.0:
        return 0.0
    return float(np.dot(u, v)) / (nu * nv)


class TokenBits:
    """Token sets of one candidate pool as Python int bitsets, so Jaccard is an AND and two popcounts.

    Each distinct token gets the next bit, so the ints stay as wide as the pool's vocabulary (a query's candidates
    share a few thousand tokens). Frozensets are encoded once and remembered: ``rank()`` keeps one ``TokenBits`` per
    query's candidates, and every MMR config of a sweep reuses the codes. The result is exactly :func:`jaccard`'s:
    the same intersection and union sizes, divided the same way.

    Example:
        >>> bits = TokenBits()
        >>> bits.jaccard(frozenset("abc"), frozenset("bcd"))
        0.5
    """

    __slots__ = ("_bit", "_codes", "_lock")

    def __init__(self) -> None:
        self._bit: dict[str, int] = {}  # token -> 1 << (its index)
        self._codes: dict[AbstractSet[str], int] = {}  # frozenset -> bitset
        self._lock = Lock()  # two threads must never give two tokens one bit

    def code(self, tokens: AbstractSet[str]) -> int:
        """The bitset of ``tokens`` (remembered when ``tokens`` is hashable: a frozenset or a ``TokenSet``)."""
        try:
            return self._codes[tokens]  # type: ignore[index]
        except KeyError:
            pass
        except TypeError:  # a plain set: encode, don't remember
            return self._encode(tokens)
        code = self._codes[tokens] = self._encode(tokens)  # type: ignore[index]
        return code

    def _encode(self, tokens: AbstractSet[str]) -> int:
        bit = self._bit
        with self._lock:
            for t in tokens:
                if t not in bit:
                    bit[t] = 1 << len(bit)
        return reduce(or_, map(bit.__getitem__, tokens), 0)

    def jaccard(self, a: AbstractSet[str], b: AbstractSet[str]) -> float:
        """:func:`jaccard` of ``a`` and ``b`` through their bitsets."""
        return self.similarity([a, b])(0, 1)

    def similarity(self, token_sets: Sequence[AbstractSet[str]]) -> Similarity:
        """Jaccard over positions in ``token_sets``; each set is encoded when a pair first needs it."""
        n = len(token_sets)
        codes: list[int | None] = [None] * n
        sizes = [0] * n
        code = self.code

        def sim(i: int, j: int) -> float:
            a = codes[i]
            if a is None:
                a = codes[i] = code(token_sets[i])
                sizes[i] = len(token_sets[i])
            b = codes[j]
            if b is None:
                b = codes[j] = code(token_sets[j])
                sizes[j] = len(token_sets[j])
            inter = (a & b).bit_count()
            return inter / (sizes[i] + sizes[j] - inter) if inter else 0.0

        return sim


def chunk_similarity(chunks: Sequence[ChunkInfo], kind: str = "jaccard", bits: TokenBits | None = None) -> Similarity:
    """A similarity over positions in ``chunks``: Jaccard of ``chunk.tokens``, or cosine of ``chunk.vector``.

    For ``kind == "cosine"`` a pair where either chunk has no vector falls back to Jaccard. Negative cosines count
    as 0 (unrelated), which keeps MMR's penalty non-negative. MMR asks for ``sim(candidate, selected)``, so the
    cosine row of each selected chunk is computed once, as one matrix-vector product. Jaccard goes through ``bits``
    (default: a fresh :class:`TokenBits`); pass the same one for every ranking of a candidate pool to encode each
    chunk's tokens once.
    """
    token_jaccard = (bits or TokenBits()).similarity([c.tokens for c in chunks])
    if kind != "cosine":
        return token_jaccard
    rows = [i for i, c in enumerate(chunks) if c.vector is not None]
    if not rows:
        return token_jaccard
    matrix = np.stack([np.asarray(chunks[i].vector, dtype=np.float64).ravel() for i in rows])
    norms = np.linalg.norm(matrix, axis=1)
    norms[norms == 0.0] = np.inf  # zero vectors: similarity 0
    unit = matrix / norms[:, None]
    where = dict(zip(rows, range(len(rows))))
    cache: dict[int, list[float]] = {}  # row b of the cosine matrix, computed when b is first needed

    def sim(i: int, j: int) -> float:
        a = where.get(i)
        b = where.get(j)
        if a is None or b is None:
            return token_jaccard(i, j)
        row = cache.get(b)
        if row is None:
            row = cache[b] = np.maximum(unit @ unit[b], 0.0).tolist()
        return row[a]

    return sim


def mmr_select(
    relevance: Sequence[float],
    similarity: Similarity,
    lam: float,
    *,
    k: int | None = None,
    counts: Container[int] | None = None,
) -> tuple[list[int], list[float]]:
    """MMR order of candidates ``0 .. n-1`` (Carbonell & Goldstein 1998).

    Args:
        relevance: relevance per candidate (``rank()`` passes decayed scores min-max normalized to [0, 1]).
            Candidates are considered in descending relevance, ties by index.
        similarity: ``similarity(i, j)`` in [0, 1] for candidate positions.
        lam: lambda in [0, 1]; 1 is pure relevance, 0 pure diversity.
        k: stop once ``k`` counted candidates are selected (None: order everything).
        counts: which candidates count towards ``k`` (None: all).

    Returns:
        ``(order, scores)``: selected positions in MMR order and the MMR score each had when picked. Candidates not
        reached because of ``k`` are absent.

    Example:
        >>> mmr_select([0.2, 1.0, 0.6], lambda i, j: 0.0, lam=1.0)
        ([1, 2, 0], [1.0, 0.6, 0.2])
    """
    n = len(relevance)
    if k is not None and k <= 0:
        return [], []
    remaining = sorted(range(n), key=lambda i: -relevance[i])
    penalty = 1.0 - lam
    maxsim = [0.0] * n
    seen = [0] * n  # how many selected items maxsim[i] already covers
    selected: list[int] = []
    scores: list[float] = []
    found = 0
    while remaining:
        best = -math.inf
        best_pos = -1
        n_sel = len(selected)
        for pos, i in enumerate(remaining):
            bound = lam * relevance[i]
            if bound <= best:
                break  # relevance is non-increasing from here on, and ties keep the earlier candidate
            if penalty > 0.0 and seen[i] < n_sel:
                m = maxsim[i]
                for s in selected[seen[i]:]:
                    v = similarity(i, s)
                    if v > m:
                        m = v
                maxsim[i] = m
                seen[i] = n_sel
            score = bound - penalty * maxsim[i]
            if score > best:
                best = score
                best_pos = pos
        pick = remaining.pop(best_pos)
        selected.append(pick)
        scores.append(best)
        if k is not None and (counts is None or pick in counts):
            found += 1
            if found >= k:
                break
    return selected, scores
