"""The expensive half of search: both legs for one query, from the store or from in-memory copies of it.

:class:`Retriever` embeds the query (with provider failover), runs the keyword leg (FTS5, or the in-memory postings
once built) and the vector leg (the in-memory matrix, its int8 copy, the quantized pre-filter, or sqlite-vec), and
returns plain-data :class:`~hybridmem.records.Candidates` for ``rank()``, with the answer gate's token alignment of
the query with its top passages (:mod:`hybridmem.retrieve.alignment`). It holds no ranking logic.

In-memory copies belong to one index *generation* (a counter the sync bumps): a copy of an older generation is never
used. Each is built from the second call that could use it (:mod:`hybridmem.background`), so a one-shot search pays
for none of them.
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import replace
from typing import Callable, Sequence

import numpy as np

from hybridmem.background import SecondCallBuild
from hybridmem.config import MAX_QUERY_CHARS, Settings
from hybridmem.config.calibration import has_aligned_gate
from hybridmem.embeddings import Embedder, LazyEmbedder, encoder_query, sanitize
from hybridmem.errors import HybridMemError, IndexCorruptError
from hybridmem.records import Candidates, LegHit
from hybridmem.retrieve.alignment import MAX_TOKENS, Aligner, ReadTokens
from hybridmem.retrieve.failover import EmbedderFailover, is_input_error
from hybridmem.retrieve.keywords import KeywordIndex
from hybridmem.retrieve.legs import (
    Scope,
    build_candidates,
    chunk_infos,
    keyword_leg,
    loaded,
    term_doc_counts,
    vector_leg,
)
from hybridmem.retrieve.vectors import VectorMatrix
from hybridmem.sessions import replace_surrogates
from hybridmem.store import IndexStore
from hybridmem.store.connection import is_corruption
from hybridmem.store.shared_cache import CacheKey, SharedCache, open_shared_cache

_OPTIMISTIC_TRIES = 3  # lock-free attempts before a search reads inside one transaction
Identity = Callable[[], tuple[str, str, str, int]]  # (provider, model, provider_key, dims) the index was built with
VectorSearch = Callable[[np.ndarray, int, "str | None", "str | None"], list[tuple[int, float]]]


class Retriever:
    """Both legs over one :class:`Store`.

    Args:
        store: the index.
        settings: tokenizer, embedding and store settings are read from it.
        embedder: the (lazily loaded) embedder shared with the sync.
        identity: the provider, model, key and dims whose vectors the index holds.
        on_provider_switch: called when failover replaced the embedding provider (the index needs a reindex).
    """

    def __init__(
        self,
        store: IndexStore,
        settings: Settings,
        embedder: LazyEmbedder,
        identity: Identity,
        on_provider_switch: Callable[[], None] = lambda: None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.embedder = embedder
        self._identity = identity
        self._on_switch = on_provider_switch
        self._failover: EmbedderFailover | None = None
        self.vector_error: str | None = None
        self._lock = threading.Lock()
        self._matrix: VectorMatrix | None = None
        self._matrix_gen: str | None = None
        self._keywords: tuple[str, KeywordIndex] | None = None  # (generation, in-memory FTS5 postings)
        self._keywords_build: tuple[str, SecondCallBuild] | None = None
        self._aligner: tuple[object, Aligner] | None = None  # (the embedder whose token states it reads, the aligner)

    def drop_caches(self) -> None:
        """Forget the in-memory copies (after a sync or reindex changed the index)."""
        self._matrix = None

    # -- query embedding -----------------------------------------------------------------------------------------
    def embed_query(self, query: str) -> np.ndarray | None:
        """The query vector, or None (keyword-only for this query) when the provider fails. After repeated failures
        the next provider of the chain takes over and ``on_provider_switch`` is called. An error the query's own text
        caused (see :func:`~hybridmem.retrieve.failover.is_input_error`) answers keyword-only and counts for nothing."""
        embedder = self.embedder.get()
        try:
            qv = embedder.embed_query(  # type: ignore[union-attr]
                encoder_query(query[: self.settings.tokenizer.max_query_chars]))
        except Exception as exc:  # noqa: BLE001 - a failing provider must not break search
            self.vector_error = f"query embedding failed ({type(exc).__name__}: {exc}): keyword-only"
            if is_input_error(exc):
                return None  # this query's text, not the provider: nothing to count, nothing to switch
            if self._failover is None:
                self._failover = EmbedderFailover(self.settings.embedding)
            replacement = self._failover.record_error(embedder, exc)  # type: ignore[arg-type]
            if replacement is not False:
                self.embedder.replace(replacement, list(self._failover.switched))  # type: ignore[arg-type]
                self._failover.switched.clear()
                self._matrix = None
                self._on_switch()
            return None
        if self._failover is not None:
            self._failover.record_success()
        self.vector_error = None
        return qv

    # -- in-memory copies ----------------------------------------------------------------------------------------
    def _generation(self) -> str:
        return self.store.get_meta("generation", "0") or "0"

    def vector_search(self) -> VectorSearch:
        """The vector search function of the configured mode, over the current generation."""
        mode = self.settings.store.vector_search
        if mode == "sqlite-vec" and self.store.vec_available and self.store.has_vec_table():
            return self.store.vector_knn
        if self.store.backend == "postgres" and mode in ("auto", "sqlite-vec"):
            return self.store.vector_knn  # pgvector: exact below store.pg_hnsw_min_rows, HNSW above
        matrix = self.matrix()
        return matrix.search_quantized if mode == "quantized" else matrix.search

    def matrix(self) -> VectorMatrix:
        """The in-memory vector matrix of the current generation, loaded now if needed."""
        ready, ready_gen = self._matrix, self._matrix_gen
        if ready is not None and ready_gen == self._generation():
            return ready
        name, model, key, _ = self._identity()
        with self.store.snapshot():  # the label and the vectors from one committed state
            gen = self._generation()
            ids, mat, sources, paths = self.store.load_vectors(name, model, key)
        store_cfg = self.settings.store
        matrix = VectorMatrix(ids, mat, sources, paths, int8_min_rows=store_cfg.int8_min_rows,
                              rescore_min=store_cfg.rescore_min, rescore_factor=store_cfg.rescore_factor,
                              prefilter_dims=store_cfg.prefilter_dims)
        with self._lock:  # never held while the store is read (a search in a read transaction holds the store)
            self._matrix, self._matrix_gen = matrix, gen
        return matrix

    def vector_search_label(self) -> str:
        """How vector queries are served, for ``status()``: sqlite-vec, memory (exact; int8-bounded when the int8
        copy is in use), or quantized (int8 principal-subspace pre-filter)."""
        mode = self.settings.store.vector_search
        if self.store.backend == "postgres" and mode in ("auto", "sqlite-vec"):
            return "pgvector"
        if mode == "sqlite-vec" and self.store.vec_available:
            return "sqlite-vec"
        if mode == "quantized":
            return "quantized"
        m = self._matrix
        return "memory (int8-bounded exact)" if m is not None and m.int8_built else "memory"

    def keyword_memory(self, gen: str | None = None) -> KeywordIndex | None:
        """The in-memory keyword index of the current generation (same scores as FTS5, ~10x faster), or None while
        there is none: FTS5 answers. Built in the background from a generation's second keyword query (8 s at 100k
        chunks), so one-shot CLI searches never load it and no query waits for it. On PostgreSQL too: every host's
        writes bump the namespace's generation, which each query reads first, so a copy never answers for a
        generation it was not built from (until it is rebuilt, BM25 runs in SQL on the server). ``gen``: the
        generation the caller just read (one round trip less on a server)."""
        gen = gen if gen is not None else self._generation()
        ready = self._keywords
        if ready is not None and ready[0] == gen:
            return ready[1]
        with self._lock:
            pending = self._keywords_build
            if pending is None or pending[0] != gen:

                def build() -> None:
                    with self.store.snapshot():  # the label and the rows from one committed state
                        label, rows = self._generation(), self.store.keyword_rows()
                    self._keywords = (label, KeywordIndex.build(*rows))

                pending = (gen, SecondCallBuild("keywords", build, enabled=self.settings.store.keyword_memory))
                self._keywords_build = pending
        pending[1].request()
        return None

    def _vector_of(self, cid: int) -> np.ndarray | None:
        return self._matrix.vector(cid) if self._matrix is not None else None

    def wait_for_copies(self) -> None:
        """Block until started background builds are done (benchmarks and tests)."""
        if self._keywords_build is not None:
            self._keywords_build[1].wait()
        if self._matrix is not None:
            _ = self._matrix.int8  # waits for (or does) the int8 build

    def keyword_search(self, in_memory: bool = True) -> Callable[..., list[LegHit]]:
        """The keyword leg alone as :meth:`retrieve` runs it now, as a function of ``(query, pool, scope=None)``: over
        the in-memory postings while the current generation has them, else FTS5 (``in_memory=False``: FTS5 always)."""
        memory, tok = (self.keyword_memory() if in_memory else None), self.settings.tokenizer
        return lambda query, pool, scope=None: keyword_leg(self.store, query, pool, tok, scope or Scope(), memory)

    def files_in_scope(self, scope: Scope) -> bool:
        """Whether the index holds a file that ``scope`` (a source and/or a path prefix) takes in."""
        return any((not scope.source or f["source"] == scope.source) and path.startswith(scope.path_prefix or "")
                   for path, f in self.store.files().items())

    def vectors(self) -> tuple:
        """``(ids, matrix, sources, paths)``: every chunk vector the index holds for its embedding identity."""
        name, model, key, _ = self._identity()
        return self.store.load_vectors(name, model, key)

    def cached_query_vectors(self, texts: Sequence[str], embedder: Embedder,
                             shared: object | None = None) -> tuple[dict[str, np.ndarray], int]:
        """Vectors of query texts by ``embedder``, from the index's embedding cache, then ``shared`` (the user-level
        :class:`~hybridmem.store.shared_cache.SharedCache`, None for none), or embedded in batches (then cached in
        both), and how many were embedded."""
        read = {t: encoder_query(t) for t in texts}  # what the model reads, and what the cache is keyed by
        key = {t: hashlib.sha256(f"query\0{r}".encode("utf-8", "surrogatepass")).hexdigest() for t, r in read.items()}
        hashes = {key[t]: r for t, r in read.items()}
        e = embedder
        cached = self.store.cache_get(e.name, e.model, e.provider_key, list(hashes))
        missing = [h for h in hashes if h not in cached]
        shared_key = (e.name, e.model, e.provider_key, getattr(e, "weights_hash", ""))
        if missing and shared is not None:
            found = shared.get(shared_key, missing)  # type: ignore[attr-defined]
            self.store.cache_put(e.name, e.model, e.provider_key, found)
            cached.update(found)
            missing = [h for h in missing if h not in found]
        for i in range(0, len(missing), e.batch_size):
            batch = missing[i: i + e.batch_size]
            mat = sanitize(e.embed_batch([hashes[h][:MAX_QUERY_CHARS] for h in batch], is_query=True))
            fresh = dict(zip(batch, mat))
            self.store.cache_put(e.name, e.model, e.provider_key, fresh)
            if shared is not None:
                shared.put(shared_key, fresh)  # type: ignore[attr-defined]
            cached.update(fresh)
        return {t: cached[h] for t, h in key.items()}, len(missing)

    # -- retrieval -----------------------------------------------------------------------------------------------
    def retrieve(
        self,
        query: str,
        pool: int,
        keyword: bool = True,
        vector: bool = True,
        scope: Scope | None = None,
        with_vectors: bool = False,
        query_vector: np.ndarray | None = None,
        timings: dict[str, float] | None = None,
        align: bool = True,
    ) -> Candidates:
        """Both legs for ``query``, each up to ``pool`` long, plus chunk info. A leg set to False is not queried;
        ``align``: add the answer gate's token alignment (:meth:`align`)."""
        if not isinstance(query, str):
            raise HybridMemError(f"query must be a string, not {type(query).__name__}")
        t = timings if timings is not None else {}
        try:
            cands = self._retrieve(clean_query(query), pool, keyword, vector, scope or Scope(), with_vectors,
                                   query_vector, t)
        except Exception as exc:
            if not is_corruption(exc):
                raise
            raise IndexCorruptError(f"the index {self.store.path} is corrupt ({exc}); rebuild it with "
                                    "`hybridmem index --rebuild`") from None
        if align:
            t0 = time.perf_counter()
            cands = self.align(cands)
            if cands.alignment is not None:
                t["align"] = (time.perf_counter() - t0) * 1000
        return cands

    def align(self, cands: Candidates, always: bool = False) -> Candidates:
        """``cands`` with ``alignment`` (:mod:`hybridmem.retrieve.alignment`) when the vector leg ran,
        ``embedding.token_alignment`` is on and :meth:`_states_source` gives token states; else unchanged."""
        if not self.settings.embedding.token_alignment or not cands.vector_searched:
            return cands
        owner, states = self._states_source(cands.vector_model, always)
        if states is None:
            return cands
        with self._lock:
            if self._aligner is None or self._aligner[0] is not owner:
                self._aligner = (owner, Aligner(states, shared=self._token_cache(owner)))
            aligner = self._aligner[1]
        return aligner.align(cands)

    def warm_alignment(self) -> None:
        """Load what a search's token alignment reads (a server's warm-up, so the first searches need not go without
        it), when ``embedding.token_alignment`` is on and there is an embedder (without one no search aligns)."""
        if self.settings.embedding.token_alignment and self.embedder.get() is not None:
            _, states = self._states_source(self._identity()[1], False)
            if states is not None:
                states(["warm up"], True, 8)

    def _token_cache(self, owner: object) -> tuple[SharedCache, CacheKey] | None:
        """The user cache's token file and ``owner``'s key in it (its model, build and weights, and how much of a
        passage is read), or None where the shared cache is off or cannot be opened."""
        cache = open_shared_cache(self.settings.embedding, tokens=True)
        if cache is None or not cache.available:
            return None
        key = (f"{getattr(owner, 'name', 'tokens')}-tokens", str(getattr(owner, "model", "")),
               f"{getattr(owner, 'provider_key', '')}/{MAX_TOKENS}", str(getattr(owner, "weights_hash", "")))
        return cache, key

    def _states_source(self, model: str, always: bool) -> tuple[object, ReadTokens | None]:
        """``(owner, token_states)``: the embedder's own when it gives them; else the bundled e5's
        (:func:`~hybridmem.embeddings.e5.shared_token_reader`) when ``model`` (the vector leg's) has a gate that reads
        the alignment, or ``always`` (collecting the rows that fit one); else ``(None, None)``."""
        owner = self.embedder.get()
        states = getattr(owner, "token_states", None)
        if states is None and (always or has_aligned_gate(model)):
            from hybridmem.embeddings.e5 import shared_token_reader

            states = shared_token_reader(self.settings.embedding.document_runtime,
                                         self.settings.embedding.shared_cache_dir)
            owner = getattr(states, "__self__", None)
        return (owner, states) if states is not None else (None, None)

    def _retrieve(self, query: str, pool: int, keyword: bool, vector: bool, scope: Scope, with_vectors: bool,
                  query_vector: np.ndarray | None, t: dict[str, float]) -> Candidates:
        qv = query_vector
        if vector and qv is None and query.strip() and self.embedder.get() is not None:
            t0 = time.perf_counter()
            qv = self.embed_query(query)
            t["embed"] = (time.perf_counter() - t0) * 1000
        # One generation from the first read to the last: chunk ids from the legs must name the chunks loaded after
        # them. Every commit that changes chunks bumps the generation (and it never goes back), so an unchanged
        # generation proves no commit fell in between; after a few collisions with a busy writer, one read
        # transaction holds the state still.
        for _ in range(_OPTIMISTIC_TRIES):
            gen = self._generation()
            cands = self._retrieve_at_one_generation(query, pool, keyword, vector, scope, with_vectors, qv, t, gen)
            if self._generation() == gen:
                return replace(cands, generation=gen)
        with self.store.snapshot():
            gen = self._generation()
            cands = self._retrieve_at_one_generation(query, pool, keyword, vector, scope, with_vectors, qv, t, gen)
            return replace(cands, generation=gen)

    def _retrieve_at_one_generation(
        self, query: str, pool: int, keyword: bool, vector: bool, scope: Scope, with_vectors: bool,
        qv: np.ndarray | None, t: dict[str, float], gen: str,
    ) -> Candidates:
        tok = self.settings.tokenizer
        t0 = time.perf_counter()
        memory = self.keyword_memory(gen) if keyword else None
        kw = keyword_leg(self.store, query, pool, tok, scope, memory) if keyword else []
        t["keyword"] = (time.perf_counter() - t0) * 1000
        vec: list = []
        vector_searched = False
        if vector and qv is not None and query.strip():
            t0 = time.perf_counter()
            search_fn = self.vector_search()
            if self._matrix is not None and len(self._matrix) and self._matrix.matrix.shape[1] != qv.shape[0]:
                self.vector_error = (f"the index holds {self._matrix.matrix.shape[1]}-dim vectors but the query "
                                     f"embedder gives {qv.shape[0]}: rebuild with `hybridmem index --rebuild`")
                search_fn = None
            if search_fn is not None:
                vec = vector_leg(search_fn, qv, pool, scope)
                vector_searched = True
            t["vector"] = (time.perf_counter() - t0) * 1000
        t0 = time.perf_counter()
        ids = [h.chunk_id for h in kw] + [h.chunk_id for h in vec]
        if with_vectors and self._matrix is None and self.embedder.get() is not None:
            self.vector_search()  # loads the matrix (except in sqlite-vec mode, where cosine MMR has no vectors)
        chunks = chunk_infos(self.store, ids, self._vector_of if with_vectors else None)
        t["load"] = (time.perf_counter() - t0) * 1000
        kw, vec = loaded(kw, chunks), loaded(vec, chunks, readable=True)
        cands = build_candidates(query, tok, kw, vec, chunks, pool, keyword, vector_searched)
        if keyword and cands.query_tokens:
            n_rows, docs = term_doc_counts(self.store, cands.query_tokens, memory)
            cands = replace(cands, doc_count=n_rows, term_docs=docs)
        if vector_searched:
            cands = replace(cands, vector_model=self._identity()[1])
        scripts = getattr(self.embedder.current, "scripts", None)  # the model's coverage, for the adaptive fusion
        return replace(cands, vector_scripts=scripts) if scripts is not None else cands


def clean_query(query: str) -> str:
    """``query`` with lone surrogates replaced by U+FFFD, so neither leg (nor the embedder) meets text no UTF-8
    encoder accepts."""
    return replace_surrogates(query)[0]
