"""Token alignment: how much of the query the best of its top passages says, read token by token by the encoder.

The answer gate's other signals read scores (a cosine, a BM25, how many query terms a chunk holds). They cannot tell
a passage about the thing asked from one about a neighbouring thing that shares its words or its topic; in a
language whose text shares many short tokens (Thai, Vietnamese) a question finds keyword matches in any article.
This reads the text: the encoder's last layer gives one vector per token of the query and of each top passage; each
query token's best cosine with any token of the passage says whether the passage holds that token's meaning in
context (the late interaction of ColBERT, with the embedding model's own states and no training of it). Per
passage, the mean of those best cosines (how much of the question the passage says) and their lower quartile (what
it leaves unsaid); the passage with the highest mean is the query's alignment.

Read over :data:`DEPTH` passages from the top of each leg (the same ones whichever ranking config runs), each cut to
its first :data:`MAX_TOKENS` tokens, the query to :data:`QUERY_TOKENS`. Only an embedder with
``token_states`` gives it (multilingual-e5-small's fast path); without one ``Candidates.alignment`` stays None and
the gate without it decides. Chosen on train splits, measured on test ones (``docs/ranking.md``).

Example:
    >>> import numpy as np
    >>> q = np.eye(3, dtype=np.float32)[:2]                        # two query tokens
    >>> align_scores(q, [np.eye(3, dtype=np.float32)[[0, 2]], np.eye(3, dtype=np.float32)])
    (1.0, 1.0)
    >>> align_scores(q, [np.eye(3, dtype=np.float32)[[0, 2]]])      # holds one of the two
    (0.5, 0.25)
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import replace
from typing import Callable, Sequence

import numpy as np

from hybridmem.records import Candidates

__all__ = ["DEPTH", "MAX_TOKENS", "QUERY_TOKENS", "Aligner", "align_scores", "top_passages"]

DEPTH = 3  # passages from the top of each leg
MAX_TOKENS = 200  # a passage's first tokens read
QUERY_TOKENS = 64
CACHE_PASSAGES = 512  # passages' token states kept (float16, up to ~150 KB each)

TokenStates = Callable[[Sequence[str], bool, int], "list[np.ndarray] | None"]


def top_passages(c: Candidates, depth: int = DEPTH) -> list[int]:
    """The chunk ids read: the top ``depth`` of the keyword leg, then of the vector leg, each once."""
    ids = [h.chunk_id for h in c.keyword[:depth]] + [h.chunk_id for h in c.vector[:depth]]
    return list(dict.fromkeys(i for i in ids if i in c.chunks))


def align_scores(query: np.ndarray, passages: Sequence[np.ndarray]) -> tuple[float, float]:
    """``(mean, lower quartile)`` over the query's tokens of each one's best cosine with a token of the passage whose
    mean is highest; ``(0.0, 0.0)`` when the query or every passage has no token. Rows are L2-normalized."""
    best: tuple[float, float] = (0.0, 0.0)
    if not len(query):
        return best
    for p in passages:
        if not len(p):
            continue
        m = (query @ p.T.astype(np.float32)).max(axis=1)
        mean = float(m.mean())
        if mean > best[0]:
            best = (mean, float(np.quantile(m, 0.25)))
    return best


class Aligner:
    """Computes ``Candidates.alignment`` with ``token_states`` (an embedder's), remembering recent passages' states
    (a memory's top passages recur across queries) up to :data:`CACHE_PASSAGES`."""

    def __init__(self, token_states: TokenStates, cache: int = CACHE_PASSAGES) -> None:
        self._states = token_states
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._size = cache
        self._lock = threading.Lock()
        self.passages_read = 0  # passages run through the encoder (cache misses)

    def _passages(self, texts: Sequence[str]) -> list[np.ndarray] | None:
        keys = [hashlib.blake2b(t.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest() for t in texts]
        with self._lock:
            have = {k: self._cache[k] for k in keys if k in self._cache}
            for k in have:
                self._cache.move_to_end(k)
        missing = list(dict.fromkeys(k for k in keys if k not in have))
        if missing:
            first = {k: t for k, t in zip(keys, texts)}
            got = self._states([first[k] for k in missing], False, MAX_TOKENS)
            if got is None:
                return None
            self.passages_read += len(missing)
            with self._lock:
                for k, s in zip(missing, got):
                    have[k] = self._cache[k] = s.astype(np.float16)
                while len(self._cache) > self._size:
                    self._cache.popitem(last=False)
        return [have[k] for k in keys]

    def scores(self, query: str, texts: Sequence[str]) -> tuple[float, float] | None:
        """:func:`align_scores` of ``query`` over ``texts``; None when the embedder cannot give token states."""
        q = self._states([query], True, QUERY_TOKENS)
        if q is None:
            return None
        passages = self._passages(texts) if texts else []
        return None if passages is None else align_scores(q[0], passages)

    def align(self, c: Candidates) -> Candidates:
        """``c`` with ``alignment`` set from its top passages (unchanged when token states are unavailable or the
        vector leg did not run)."""
        if not c.vector_searched or not c.query.strip():
            return c
        got = self.scores(c.query, [c.chunks[i].text for i in top_passages(c)])
        return c if got is None else replace(c, alignment=got)
