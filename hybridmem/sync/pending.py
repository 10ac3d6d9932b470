"""Keyword first, vectors after: the embedding phase of a sync, and the caches in front of the embedder.

A sync stores every changed chunk with its FTS row first (with a vector only when a cache already holds it), so the
keyword leg answers within seconds of ``hybridmem index`` starting. Then :func:`embed_pending` embeds the chunks still
without a vector, ``batch`` at a time; each batch's vectors go to the caches and the index in one transaction that
bumps the generation. A search meanwhile uses the vectors that exist (the vector leg only sees embedded chunks) and
says so (:func:`vector_progress`). A sync killed mid-embed leaves a consistent index whose pending chunks the next sync
embeds, from where it stopped.

Caches, nearest first: the index's own ``embedding_cache``, then the user-level shared cache
(:class:`~hybridmem.store.shared_cache.SharedCache`), then the embedder.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from hybridmem.embeddings.base import Embedder
from hybridmem.store import Store
from hybridmem.store.shared_cache import SharedCache

Progress = Callable[[str, int, int], None]
EMBED_BATCH = 128  # pending chunks embedded (and committed) together: ~20-60 s of e5 on 2 busy cores, so "vectors for N of M" moves
TOKENS_STAGE = "embed-tokens"  # progress(TOKENS_STAGE, tokens, 0): tokens embedded so far in this sync


def cached_vectors(
    store: Store, embedder: Embedder, hashes: list[str], shared: SharedCache | None = None
) -> tuple[dict[str, np.ndarray], int]:
    """Vectors the caches already hold for ``hashes`` (index cache first, then the shared one, whose hits are copied
    into the index's cache). Returns ``(vectors, found in the shared cache)``."""
    key = (embedder.name, embedder.model, embedder.provider_key)
    dims = embedder.dims
    found = {h: v for h, v in store.cache_get(*key, hashes).items() if v.shape[0] == dims}
    missing = [h for h in hashes if h not in found]
    from_shared = 0
    if missing and shared is not None and shared.available and embedder.shared_cache:
        got = {h: v for h, v in shared.get((*key, embedder.weights_hash), missing).items() if v.shape[0] == dims}
        if got:
            store.cache_put(*key, got)
            found.update(got)
            from_shared = len(got)
    return found, from_shared


def embed_texts(
    store: Store, embedder: Embedder, texts_by_hash: dict[str, str], shared: SharedCache | None = None,
    progress: Callable[[int], None] | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], int]:
    """Vectors for every hash: cached ones reused, the rest embedded and written to the user-level cache. Returns
    ``(vectors, fresh, cache_hits)``: ``fresh`` the ones embedded now, which the caller writes to the index's cache
    in the transaction that stores them. ``progress(done)``: texts embedded so far in this call."""
    key = (embedder.name, embedder.model, embedder.provider_key)
    vectors, _ = cached_vectors(store, embedder, list(texts_by_hash), shared)
    missing = [h for h in texts_by_hash if h not in vectors]
    fresh: dict[str, np.ndarray] = {}
    if missing:
        cb = (lambda done, _total: progress(done)) if progress else None
        mat = embedder.embed_documents([texts_by_hash[h] for h in missing], progress=cb)
        fresh = {h: mat[i] for i, h in enumerate(missing)}
        if shared is not None and embedder.shared_cache:
            shared.put((*key, embedder.weights_hash), fresh)
        vectors.update(fresh)
    return vectors, fresh, len(texts_by_hash) - len(missing)


def embed_pending(
    store: Store, embedder: Embedder, shared: SharedCache | None = None, progress: Progress | None = None,
    batch: int = EMBED_BATCH,
) -> tuple[int, int]:
    """Embed every chunk stored without a vector, ``batch`` chunks a transaction (vectors, caches and a generation
    bump together). Returns ``(texts embedded, cache hits)``."""
    total = store.pending_count()
    if total == 0:
        return 0, 0
    tokens0 = getattr(embedder, "tokens_embedded", None)  # providers that count tokens (e5's fast path)
    embedded = hits = done = 0
    after, passes, skipped = 0, 1, False

    def report(n: int) -> None:
        assert progress is not None
        progress("embed", min(n, total), total)
        if tokens0 is not None:  # tokens run so far, for a rate beside the chunks' (total 0: not a bar of its own)
            progress(TOKENS_STAGE, embedder.tokens_embedded - tokens0, 0)  # type: ignore[attr-defined]

    while True:
        rows = store.pending_chunks(batch, after)
        if not rows and skipped and passes < 3:  # a chunk stored meanwhile under an id already passed: once more
            after, passes, skipped = 0, passes + 1, False
            rows = store.pending_chunks(batch, after)
        if not rows:
            break
        after = rows[-1][0]
        texts = {h: t for _, h, t in rows}
        cb = (lambda n, base=done: report(base + n)) if progress else None
        vectors, fresh, n_hits = embed_texts(store, embedder, texts, shared, cb)
        embedded += len(fresh)
        hits += n_hits
        with store.transaction():  # a kill before this commit leaves the batch pending, its cache rows unwritten
            if fresh:
                store.cache_put(embedder.name, embedder.model, embedder.provider_key, fresh)
            skipped |= store.set_vectors([(cid, h, vectors[h]) for cid, h, _ in rows]) < len(rows)
            store.bump_generation()  # a reader that sees one generation sees one set of vectors
        done += len(rows)
        if progress:
            report(done)
    return embedded, hits


def vector_progress(embedded: int, total: int, dims: int) -> tuple[dict[str, int] | None, str | None]:
    """``({"embedded": N, "total": M}, note)`` for an index with vectors (None, None for a keyword-only one); the
    note is None once every chunk has its vector.

    Example:
        >>> vector_progress(1200, 5300, 384)[1]
        'vectors for 1,200 of 5,300 chunks (embedding in progress or interrupted; `hybridmem index` finishes it): the vector leg searched those'
    """
    if dims <= 0:
        return None, None
    info = {"embedded": int(embedded), "total": int(total)}
    if embedded >= total:
        return info, None
    return info, (f"vectors for {embedded:,} of {total:,} chunks (embedding in progress or interrupted; "
                  "`hybridmem index` finishes it): the vector leg searched those")
