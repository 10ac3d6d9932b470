"""Token alignment: how much of the query the best of its top passages says, read token by token by the encoder.

The answer gate's other signals read scores (a cosine, a BM25, how many query terms a chunk holds). They cannot tell
a passage about the thing asked from one about a neighbouring thing that shares its words or its topic; in a
language whose text shares many short tokens (Thai, Vietnamese) a question finds keyword matches in any article.
This reads the text:
the encoder's last layer gives one vector per token of the query and of each top passage; each query token's best
cosine with any token of the passage says whether the passage holds that token's meaning in context (the late
interaction of ColBERT, with the embedding model's own states and no training of it). Per passage:

- the mean of those best cosines (how much of the question the passage says) and their lower quartile (what it
  leaves unsaid); the passage with the highest mean gives the query's ``mean`` and ``q25``;
- the same mean with each query token weighted by its surprisal (``-log p`` of its piece in the tokenizer's unigram
  model, fitted on the model's multilingual training text: "▁the", "的", "của" weigh least, a name most), and the
  weighted share of query tokens whose best match is the same piece (the passage says the question's own rare
  words); the passage with the highest weighted mean gives the query's ``weighted`` and ``exact``;
- per query token, its best cosine less its mean cosine with the passage's tokens, averaged (how far the best match
  stands above the rest of the passage: where a language's token states all lie close together, any passage's best
  matches are high, and so is the rest of it); the highest over the passages is the query's ``centred``.

Read over :data:`DEPTH` passages from the top of each leg (the same ones whichever ranking config runs), each cut to
its first :data:`MAX_TOKENS` tokens (the encoder's whole window: an answer may lie late in a long chunk), the query
to :data:`QUERY_TOKENS`. The token states are e5's (its fast path): the embedder's own when it is e5, the bundled
e5's when the vector leg's model gives none but has an aligned gate (all-MiniLM-L6-v2; ``Retriever.align``);
otherwise ``Candidates.alignment`` stays None and the gate without it decides. A passage's states are kept in
memory (:class:`Aligner`) and, where the shared cache is on, in the user cache's ``tokens.sqlite``
(:mod:`hybridmem.store.shared_cache`), keyed by the model's weights and the passage's text, stored as the memory copy
holds them (float16), so a cached passage aligns exactly as a fresh one. Each read passage's own mean goes to
``Candidates.passage_alignment``, which the order reads (``align_lift``, :mod:`hybridmem.ranking.joint`). Chosen on
train splits, measured on test ones (``docs/ranking.md``).

Example:
    >>> import numpy as np
    >>> def text(ids, weights):                                  # token i's vector: the i-th unit vector
    ...     return TokenStates(np.eye(4, dtype=np.float32)[ids], np.array(ids), np.array(weights, np.float32))
    >>> q = text([0, 1], [1.0, 3.0])                             # a common token and a rare one
    >>> [round(x, 3) for x in align_scores(q, [text([0, 2], [1, 1]), text([0, 1, 2], [1, 1, 1])])]
    [1.0, 1.0, 1.0, 1.0, 0.667]
    >>> align_scores(q, [text([0, 2], [1, 1])])                    # holds the common one only
    (0.5, 0.25, 0.25, 0.25, 0.25)
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import replace
from typing import Callable, Sequence

import numpy as np

from hybridmem.embeddings.base import TokenStates, encoder_query
from hybridmem.records import Candidates
from hybridmem.store.shared_cache import CacheKey, SharedCache

__all__ = ["CACHE_BYTES", "CACHE_PASSAGES", "DEPTH", "EXACT_CREDIT", "MAX_TOKENS", "QUERY_TOKENS", "Aligner",
           "align_passages", "align_scores", "pack_states", "top_passages", "unpack_states"]

DEPTH = 3  # passages from the top of each leg
MAX_TOKENS = 510  # a passage's first tokens read: all e5 reads at once (512 positions less two markers)
QUERY_TOKENS = 64
# The share of a query token's shortfall from a perfect match that a passage holding its very piece is credited with,
# in the passage's own mean (the order's ``align_lift`` only; the gate's features read the cosines alone). Chosen with
# the lift's weight on train nDCG@10 (docs/ranking.md, "An identifier's own note"; eval/reports/exact_credit.py).
EXACT_CREDIT = 0.25
CACHE_PASSAGES = 512  # passages' token states kept (float16, 768 bytes a token: up to ~390 KB each)
CACHE_BYTES = 80 << 20  # and at most this many bytes of them

ReadTokens = Callable[[Sequence[str], bool, int], "list[TokenStates] | None"]


def top_passages(c: Candidates, depth: int = DEPTH) -> list[int]:
    """The chunk ids read: the top ``depth`` of the keyword leg, then of the vector leg, each once."""
    ids = [h.chunk_id for h in c.keyword[:depth]] + [h.chunk_id for h in c.vector[:depth]]
    return list(dict.fromkeys(i for i in ids if i in c.chunks))


def align_passages(query: TokenStates, passages: Sequence[TokenStates]
                   ) -> tuple[tuple[float, float, float, float, float], list[float]]:
    """:func:`align_scores` of ``query`` over ``passages``, and each passage's own mean (the order's ``align_lift``,
    :mod:`hybridmem.ranking.joint`; 0 for a passage or a query with no token), in which a query token whose piece the
    passage holds is credited :data:`EXACT_CREDIT` of its shortfall from 1. A passage's tokens are read in its context,
    so "uniq0037" in a short note read closer to the question "uniq0137" than "uniq0137" itself in a long one of code.

    Example:
        >>> import numpy as np
        >>> q = TokenStates(np.array([[1, 0], [0, 1]], np.float32), np.array([5, 6]), np.array([1, 1], np.float32))
        >>> same = TokenStates(np.array([[0.6, 0.8]], np.float32), np.array([5]), np.array([1], np.float32))
        >>> other = TokenStates(np.array([[0.6, 0.8]], np.float32), np.array([7]), np.array([1], np.float32))
        >>> [round(m, 3) for m in align_passages(q, [same, other])[1]]  # token 5 is credited 0.25 of its 0.4 short
        [0.75, 0.7]
    """
    plain: tuple[float, float] = (0.0, 0.0)
    weighted: tuple[float, float] = (0.0, 0.0)
    centred = 0.0
    means = [0.0] * len(passages)
    if not len(query.vectors):
        return (*plain, *weighted, centred), means
    w = query.weights.astype(np.float64)
    w = w / w.sum() if w.sum() > 0 else np.full(len(w), 1.0 / len(w))
    for i, p in enumerate(passages):
        if not len(p.vectors):
            continue
        sim = query.vectors @ p.vectors.T.astype(np.float32)
        j = sim.argmax(axis=1)
        m = sim[np.arange(len(j)), j]
        mean = float(m.mean())
        means[i] = mean + EXACT_CREDIT * float(((1.0 - m) * np.isin(query.ids, p.ids)).mean())
        centred = max(centred, mean - float(sim.mean()))
        if mean > plain[0]:
            plain = (mean, float(np.quantile(m, 0.25)))
        wmean = float(m @ w)
        if wmean > weighted[0]:
            weighted = (wmean, float(w @ (p.ids[j] == query.ids)))
    return (*plain, *weighted, centred), means


def align_scores(query: TokenStates,
                 passages: Sequence[TokenStates]) -> tuple[float, float, float, float, float]:
    """``(mean, q25, weighted, exact, centred)`` (see the module doc) over the query's tokens of each one's best cosine
    with a token of a passage: ``mean`` and ``q25`` from the passage whose mean is highest, ``weighted`` and ``exact``
    from the one whose surprisal-weighted mean is, ``centred`` the highest over the passages; zeros when the query or
    every passage has no token."""
    return align_passages(query, passages)[0]


def pack_states(states: TokenStates) -> bytes:
    """One passage's token states as bytes (token count and dimensions, ids, weights, float16 vectors), for the
    shared cache.

    Example:
        >>> s = TokenStates(np.eye(2, 3, dtype=np.float16), np.array([7, 9], np.int32), np.array([1.5, 2.0], np.float32))
        >>> back = unpack_states(pack_states(s))
        >>> back.vectors.tolist(), back.ids.tolist(), back.weights.tolist()
        ([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], [7, 9], [1.5, 2.0])
        >>> empty = s._replace(vectors=s.vectors[:0], ids=s.ids[:0], weights=s.weights[:0])
        >>> unpack_states(pack_states(empty)).vectors.shape
        (0, 3)
    """
    vectors = np.asarray(states.vectors)
    n = len(states.ids)  # a passage of punctuation alone ("...") has no token: (0, dims), not a reshape to make
    dims = vectors.shape[-1] if vectors.ndim == 2 else vectors.size // max(n, 1)
    return (np.array([n, dims], np.int32).tobytes() + np.asarray(states.ids, np.int32).tobytes()
            + np.asarray(states.weights, np.float32).tobytes() + np.asarray(states.vectors, np.float16).tobytes())


def unpack_states(blob: bytes) -> TokenStates:
    """:func:`pack_states` undone."""
    n, dims = (int(x) for x in np.frombuffer(blob, np.int32, 2))
    ids = np.frombuffer(blob, np.int32, n, 8)
    weights = np.frombuffer(blob, np.float32, n, 8 + 4 * n)
    return TokenStates(np.frombuffer(blob, np.float16, n * dims, 8 + 8 * n).reshape(n, dims), ids, weights)


class Aligner:
    """Computes ``Candidates.alignment`` with ``token_states`` (an embedder's), remembering recent passages' states
    (a memory's top passages recur across queries) up to :data:`CACHE_PASSAGES` of them and :data:`CACHE_BYTES`;
    ``shared``: the user cache's token file and the key of the model reading them (None: memory only), asked before
    the encoder and given what it reads."""

    def __init__(self, token_states: ReadTokens, cache: int = CACHE_PASSAGES, cache_bytes: int = CACHE_BYTES,
                 shared: tuple[SharedCache, CacheKey] | None = None) -> None:
        self._states = token_states
        self._cache: OrderedDict[str, TokenStates] = OrderedDict()
        self._size, self._budget, self.cached_bytes = cache, cache_bytes, 0
        self._lock = threading.Lock()
        self._shared = shared
        self.passages_read = 0  # passages run through the encoder (cache misses)

    def _passages(self, texts: Sequence[str]) -> list[TokenStates] | None:
        keys = [hashlib.blake2b(t.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest() for t in texts]
        with self._lock:
            have = {k: self._cache[k] for k in keys if k in self._cache}
            for k in have:
                self._cache.move_to_end(k)
        missing = list(dict.fromkeys(k for k in keys if k not in have))
        if missing:
            stored = {k: unpack_states(b) for k, b in self._shared[0].get_blobs(self._shared[1], missing).items()} \
                if self._shared else {}
            fresh = [k for k in missing if k not in stored]
            read: dict[str, TokenStates] = {}
            if fresh:
                first = {k: t for k, t in zip(keys, texts)}
                got = self._states([first[k] for k in fresh], False, MAX_TOKENS)
                if got is None:
                    return None
                self.passages_read += len(fresh)
                read = {k: s._replace(vectors=s.vectors.astype(np.float16)) for k, s in zip(fresh, got)}
                if self._shared:
                    self._shared[0].put_blobs(self._shared[1], {k: (len(s.ids), pack_states(s)) for k, s in read.items()})
            with self._lock:
                for k, s in {**stored, **read}.items():
                    if k in self._cache:  # read by another thread meanwhile
                        self.cached_bytes -= self._cache.pop(k).vectors.nbytes
                    have[k] = self._cache[k] = s
                    self.cached_bytes += s.vectors.nbytes
                while self._cache and (len(self._cache) > self._size or self.cached_bytes > self._budget):
                    self.cached_bytes -= self._cache.popitem(last=False)[1].vectors.nbytes
        return [have[k] for k in keys]

    def scores(self, query: str, texts: Sequence[str]) -> tuple[float, float, float, float, float] | None:
        """:func:`align_scores` of ``query`` over ``texts``; None when the embedder cannot give token states."""
        got = self.per_passage(query, texts)
        return None if got is None else got[0]

    def per_passage(self, query: str, texts: Sequence[str]
                 ) -> tuple[tuple[float, float, float, float, float], list[float]] | None:
        """:func:`align_passages` of ``query`` over ``texts``; None when the embedder cannot give token states."""
        q = self._states([encoder_query(query)], True, QUERY_TOKENS)
        if q is None:
            return None
        passages = self._passages(texts) if texts else []
        return None if passages is None else align_passages(q[0], passages)

    def align(self, c: Candidates) -> Candidates:
        """``c`` with ``alignment`` set from its top passages (unchanged when token states are unavailable or the
        vector leg did not run)."""
        if not c.vector_searched or not c.query.strip():
            return c
        read = top_passages(c)
        got = self.per_passage(c.query, [c.chunks[i].text for i in read])
        return c if got is None else replace(c, alignment=got[0], passage_alignment=dict(zip(read, got[1])))
