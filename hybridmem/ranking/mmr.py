"""Maximal Marginal Relevance re-ordering (Carbonell & Goldstein, "The use of MMR, diversity-based reranking for
reordering documents and producing summaries", SIGIR 1998).

Greedily pick ``argmax_i  lambda * rel_i - (1 - lambda) * max_{s in selected} sim(i, s)``; ties go to the earlier
candidate. ``lambda = 1`` is plain relevance order; lower values push near-duplicates of what was already picked down.

Each step scores every candidate left at once (numpy, in relevance order, so ``argmax`` breaks ties toward the
earlier one) and then brings every max-similarity up to date with one *column*, the similarities of all candidates
to the one just picked: :class:`TokenBits` gives the Jaccard column as a gather from the picked set's Jaccard row
(worked out once per query's pool), any other similarity is asked pair by pair. With ``lambda = 1`` no similarity
is computed at all. ``k`` / ``counts`` stop the selection early once enough counted candidates have been picked
(``rank()`` stops once its cut is settled). (Looking only at the prefix of candidates whose bound
``lambda * rel_i`` can still win was tried: with min-max relevance and lambda up to 0.9 the prefix held 168 of 175
candidates on average in the SciFact sweep, so it saved nothing.)

Example:
    >>> sets = [frozenset("ab"), frozenset("ab"), frozenset("xy")]
    >>> order, scores = mmr_select([1.0, 0.9, 0.5], lambda i, j: jaccard(sets[i], sets[j]), lam=0.5)
    >>> order
    [0, 2, 1]
"""

from __future__ import annotations

import math
from threading import Lock
from typing import AbstractSet, Callable, Container, Hashable, Mapping, NamedTuple, Sequence

import numpy as np

from hybridmem.records import ChunkInfo

__all__ = ["BitJaccard", "TokenBits", "chunk_similarity", "cosine", "jaccard", "mmr_select", "token_hashes"]

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


def token_hashes(tokens: AbstractSet[str]) -> np.ndarray:
    """The 64-bit hashes of ``tokens`` (Python's own string hash), remembered on a ``TokenSet``: a chunk shared by
    many queries' candidates (the eval's sweeps) hashes its tokens once."""
    cached = getattr(tokens, "hashes", None)
    if cached is not None:
        return cached()
    return np.fromiter(map(hash, tokens), dtype=np.int64, count=len(tokens))


class TokenBits:
    """Token sets of one candidate pool as a token-by-set matrix, so a Jaccard column is a gather.

    The matrix has a row for each token that at least two of the pool's sets hold (a token only one set holds never
    meets another set's; the sizes come from the sets) and a column for each set, numbered once for the whole pool:
    ``rank()`` keeps one ``TokenBits`` per query's candidates (``universe``: every candidate's tokens), and every
    MMR config of a sweep reads the same matrix (``universe`` maps each chunk id to its tokens, so ``rank()`` names
    its candidates by id: :meth:`similarity_of`). The intersections of set ``j`` with every set are the sums of the
    matrix rows of ``j``'s tokens; ``j``'s Jaccard row over the pool is worked out from them once, when MMR first
    picks ``j``, and every later column of ``j`` is a gather from it. Tokens are told apart by their 64-bit hash
    (:func:`token_hashes`), so the result is exactly :func:`jaccard`'s (the same intersection and union sizes,
    divided the same way) unless two of the pool's distinct tokens share a hash. A set outside the matrix (no
    universe, or a set the universe lacks) is added by numbering the pool again.

    Example:
        >>> bits = TokenBits()
        >>> bits.jaccard(frozenset("abc"), frozenset("bcd"))
        0.5
    """

    __slots__ = ("_universe", "_sets", "_row", "_key", "_pool", "_lock")

    def __init__(self, universe: Callable[[], Mapping[Hashable, AbstractSet[str]]] | None = None) -> None:
        self._universe = universe  # called once, when a similarity is first asked for: each set under its key
        self._sets: list[AbstractSet[str]] = []  # every set numbered so far (kept alive: rows are keyed by id())
        self._row: dict[int, int] = {}  # id(set) -> its number
        self._key: dict[Hashable, int] = {}  # a universe key -> its set's number
        self._pool = _Pool.build([])
        self._lock = Lock()  # two threads ranking one pool must not renumber it at once

    def numbers(self, token_sets: Sequence[AbstractSet[str]]) -> tuple["_Pool", np.ndarray]:
        """The pool's matrix and each set's number in it, in the order given (one set given twice has one number;
        its tokens held by no other set have no row, so its pairs with itself read its size)."""
        with self._lock:
            self._add_universe()
            row = self._row
            try:
                at = np.fromiter(map(row.__getitem__, map(id, token_sets)), dtype=np.intp, count=len(token_sets))
            except KeyError:
                self._add(token_sets)
                at = np.fromiter(map(row.__getitem__, map(id, token_sets)), dtype=np.intp, count=len(token_sets))
            return self._pool, at

    def _add_universe(self) -> None:
        if self._universe is not None:
            universe = self._universe()
            self._universe = None
            self._add(list(universe.values()))
            self._key = {key: self._row[id(t)] for key, t in universe.items()}

    def _add(self, token_sets: Sequence[AbstractSet[str]]) -> None:
        for t in token_sets:
            if id(t) not in self._row:
                self._row[id(t)] = len(self._sets)
                self._sets.append(t)
        self._pool = _Pool.build(self._sets)

    def jaccard(self, a: AbstractSet[str], b: AbstractSet[str]) -> float:
        """:func:`jaccard` of ``a`` and ``b`` through the matrix."""
        return self.similarity([a, b])(0, 1)

    def similarity(self, token_sets: Sequence[AbstractSet[str]]) -> "BitJaccard":
        """Jaccard over positions in ``token_sets``."""
        pool, at = self.numbers(token_sets)
        return BitJaccard(pool, at)

    def similarity_of(self, keys: Sequence[Hashable]) -> "BitJaccard":
        """Jaccard over positions in ``keys``, each naming its set in the universe (``rank()`` passes chunk ids:
        no set to look up per candidate).

        Raises:
            KeyError: a key the universe does not hold.
        """
        with self._lock:
            self._add_universe()
            key = self._key
            return BitJaccard(self._pool, np.fromiter(map(key.__getitem__, keys), dtype=np.intp, count=len(keys)))


class _Pool(NamedTuple):
    """What :class:`TokenBits` numbers: ``matrix[t, s]`` is 1 when set ``s`` holds shared token ``t``; set ``s``'s
    shared tokens are ``tokens[offsets[s]:offsets[s + 1]]``; ``sizes[s]`` is its size; ``rows`` keeps each set's
    Jaccard row once worked out (the sets MMR picks recur across a sweep's configs)."""

    matrix: np.ndarray
    tokens: np.ndarray
    offsets: np.ndarray
    sizes: np.ndarray
    rows: dict[int, np.ndarray]

    @classmethod
    def build(cls, token_sets: Sequence[AbstractSet[str]]) -> "_Pool":
        hashed = [token_hashes(t) for t in token_sets]
        lengths = np.fromiter(map(len, hashed), dtype=np.int64, count=len(hashed))
        flat = np.concatenate(hashed) if hashed else np.zeros(0, dtype=np.int64)
        _, index, counts = np.unique(flat, return_inverse=True, return_counts=True)
        shared = counts >= 2
        number = np.cumsum(shared) - 1  # a shared token's row; the others have none
        keep = shared[index]
        owner = np.repeat(np.arange(len(hashed)), lengths)[keep]  # in set order, so each set's tokens are a run
        tokens = number[index[keep]]
        matrix = np.zeros((int(shared.sum()), len(hashed)), dtype=np.uint8)
        matrix[tokens, owner] = 1
        offsets = np.zeros(len(hashed) + 1, dtype=np.int64)
        np.cumsum(np.bincount(owner, minlength=len(hashed)), out=offsets[1:])
        return cls(matrix, tokens, offsets, lengths, {})

    def jaccard_row(self, s: int) -> np.ndarray:
        """Jaccard of set ``s`` with every set of the pool (with itself: 1, or 0 when empty), as float64; read-only.

        The intersections are the sums of the matrix rows of ``s``'s shared tokens (with itself: its size, though
        its tokens no other set holds have no row); two empty sets have a union of 0 and an intersection of 0,
        which reads 0 as :func:`jaccard` does."""
        got = self.rows.get(s)
        if got is None:
            inter = self.matrix[self.tokens[self.offsets[s]:self.offsets[s + 1]]].sum(axis=0, dtype=np.int64)
            inter[s] = self.sizes[s]
            got = inter / np.maximum(self.sizes + self.sizes[s] - inter, 1)
            got.flags.writeable = False
            self.rows[s] = got
        return got


class BitJaccard:
    """:func:`jaccard` over positions of a list of token sets, through their numbers in a :class:`TokenBits`
    pool: ``sim(i, j)`` for a pair, ``sim.column(j)`` for every position against ``j`` at once (exactly the pairs'
    values)."""

    __slots__ = ("_pool", "_at")

    def __init__(self, pool: _Pool, at: np.ndarray) -> None:
        self._pool, self._at = pool, at  # ``at[i]``: position i's number in the pool

    def __call__(self, i: int, j: int) -> float:
        return float(self.column(j)[i])

    def ranged(self, order: np.ndarray) -> Callable[[int], np.ndarray]:
        """The positions renumbered by ``order`` (row ``r`` is position ``order[r]``), as ``sim(row)``: every row's
        similarity to row ``row`` (the column :func:`mmr_select` asks for after each pick)."""
        return BitJaccard(self._pool, self._at[order]).column

    def column(self, j: int) -> np.ndarray:
        """``[sim(i, j) for every position i]`` as float64 (a gather from ``j``'s set's Jaccard row)."""
        at = self._at
        return self._pool.jaccard_row(int(at[j]))[at]


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
    rel = np.asarray(relevance, dtype=np.float64)
    order = np.argsort(-rel, kind="stable")  # descending relevance, ties by index
    penalty = 1.0 - lam
    bound = lam * rel[order]  # each one's MMR score before any pick (its upper bound: similarities are >= 0)
    ranged = getattr(similarity, "ranged", None)
    sim = ranged(order) if ranged is not None else _PairColumns(similarity, order)
    maxsim = np.zeros(n)  # in relevance order: the largest similarity to a pick so far
    selected: list[int] = []
    scores: list[float] = []
    found = 0
    while len(selected) < n:
        score = bound - penalty * maxsim
        pos = int(np.argmax(score))  # the first of equal scores: the earlier in relevance order
        bound[pos] = -math.inf  # picked: it scores -inf from now on
        pick = int(order[pos])
        selected.append(pick)
        scores.append(float(score[pos]))
        if k is not None and (counts is None or pick in counts):
            found += 1
            if found >= k:
                break
        if penalty > 0.0 and len(selected) < n:
            np.maximum(maxsim, sim(pos), out=maxsim)
    return selected, scores


class _PairColumns:
    """A pairwise similarity over original positions as ``sim(row)``: every row's similarity to row ``row``, rows
    numbered in ``order``."""

    def __init__(self, similarity: Similarity, order: np.ndarray) -> None:
        self._sim, self._order = similarity, order.tolist()

    def __call__(self, row: int) -> np.ndarray:
        order, sim = self._order, self._sim
        j = order[row]
        return np.array([sim(i, j) for i in order], dtype=np.float64)
