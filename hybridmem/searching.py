"""One search, from the raw query to the response, and the index's status report.

:func:`plan_search`: cap the query, apply the call's ranking overrides, scope a session. :func:`run_search`: load the embedding model outside the per-query timings, retrieve both legs, :func:`rank`, and,
while embedding lags behind the stored chunks (keyword first, :mod:`hybridmem.sync.pending`), fall back to the
keyword leg when the order or the answer gate would leave the answer empty (chunks still waiting for their vector
score 0 on the vector leg). :func:`status_report`: what ``hybridmem status`` and ``memory_status`` print.
:class:`VectorCount`: how many chunks have their vector, counted once per index generation.
"""

from __future__ import annotations

import time
import unicodedata
from dataclasses import replace
from typing import Any, Callable

from pathlib import Path

from hybridmem.config import RankConfig, Settings
from hybridmem.config.calibration import reads_language
from hybridmem.embeddings import LazyEmbedder
from hybridmem.ranking import rank
from hybridmem.ranking.language import preload as preload_language_identifier
from hybridmem.records import Ranking, SearchResponse
from hybridmem.retrieve import Retriever, Scope
from hybridmem.sessions import replace_surrogates
from hybridmem.sources import find_session
from hybridmem.sync.census import chunk_languages, unread_note
from hybridmem.sync.pending import vector_progress
from hybridmem.tokenization import cap_query, fts_tokenizer_spec

__all__ = ["VectorCount", "fallback_reason", "plan_search", "run_search", "status_report"]

Progress = tuple[dict[str, int] | None, str | None]


class VectorCount:
    """``({"embedded": N, "total": M}, note)`` of a store (see :func:`hybridmem.sync.pending.vector_progress`),
    counted again only when the store's generation moves."""

    def __init__(self, store: Any) -> None:
        self._counted, self._seen = store, (None, (None, None))

    def __call__(self, generation: str | None = None) -> Progress:
        """The progress at ``generation`` (a search's, read with its candidates), else at the store's current one."""
        gen = str(generation) if generation else str(self._counted.generation())
        if self._seen[0] != gen:
            counts = self._counted.counts()
            dims = int(self._counted.get_meta("dims", "0") or 0)
            self._seen = (gen, vector_progress(counts["embedded_chunks"], counts["chunks"], dims))
        return self._seen[1]


def plan_search(query: str, settings: Settings, config: RankConfig | None, overrides: dict[str, Any],
                source: str | None, path_prefix: str | None, session: str | None, workspace: Path | None
                ) -> tuple[str, str | None, RankConfig, Scope]:
    """``(query, notice, config, scope)`` of one call: the query capped first (nothing reads past the cap; the
    retriever cleans what is left; ``notice`` says it was capped), the served ranking settings with the call's
    ``overrides``, and the scope (``session``: one transcript, by id or file name, of the session folders)."""
    notice = None
    if isinstance(query, str):
        query, notice = cap_query(query, settings.tokenizer)
    cfg = config or settings.ranking
    if overrides:
        cfg = cfg.replace(**overrides)
    # a lone surrogate (a host cut a string inside an emoji) reaches no SQL or file system call: it matches nothing
    path_prefix = replace_surrogates(path_prefix)[0] if isinstance(path_prefix, str) else path_prefix
    session = replace_surrogates(session)[0] if isinstance(session, str) else session
    while path_prefix and path_prefix.startswith("./"):  # as typed in a shell: cited paths have no ./
        path_prefix = path_prefix[2:].lstrip("/")
    if session:
        path_prefix, held = find_session(session, workspace, settings.sources)
        source = "sessions"
        if held is False:  # a typo in a session id must not read as "nothing relevant"
            missing = (f"{NO_TRANSCRIPT} {session!r} in the session folders"
                       f" ({', '.join(settings.sources.session_paths)}), so nothing was searched")
            notice = f"{notice}; {missing}" if notice else missing
    return query, notice, cfg, Scope(source, path_prefix)


KEYWORD_INDEX = "the index was built keyword-only (it holds no vectors; `hybridmem index` embeds it): keyword-only"
NO_VECTORS_YET = "no chunk has its vector yet (`hybridmem index` embeds them): keyword-only"
NO_VECTOR_FOUND = ("the vector leg found no vector to search in scope (another process may still be embedding the notes):"
                   " keyword-only")
NO_FILES = "the index holds no memory files (add notes, then run `hybridmem index`), so nothing was searched"
NO_FILE_IN_SCOPE = ("no indexed file matches the search's scope (source, path prefix or session), so nothing was"
                    " searched")
NOTHING_SEARCHED = (NO_FILES, NO_FILE_IN_SCOPE)  # reasons an empty result states in full (tools.nothing_found)
NO_TRANSCRIPT = "no transcript"  # how plan_search's notice of a session id no folder holds begins


def missing_session(notice: str | None) -> str | None:
    """The part of a search's ``notice`` saying that its ``session`` names no transcript (None when it does not).

    Example:
        >>> missing_session("the query was cut to its first 9 of 12 characters; no transcript 's9' in the session"
        ...                 " folders (sessions), so nothing was searched")
        "no transcript 's9' in the session folders (sessions), so nothing was searched"
        >>> missing_session(None) is None
        True
    """
    return next((part for part in (notice or "").split("; ") if part.startswith(NO_TRANSCRIPT)), None)


def notice_beside_empty(notice: str | None) -> str | None:
    """What of an empty result's ``notice`` is left to say beside its sentence (:func:`tools.nothing_found` states a
    missing session itself).

    Example:
        >>> notice_beside_empty("no transcript 's9' in the session folders (sessions), so nothing was searched")
        >>> notice_beside_empty("the query was cut to its first 9 of 12 characters")
        'the query was cut to its first 9 of 12 characters'
    """
    missing = missing_session(notice)
    return "; ".join(part for part in notice.split("; ") if part != missing) or None if missing else notice


def keyword_only_note(vectors: dict[str, int] | None, retriever: Retriever, scope: Scope) -> str:
    """Why the vector leg had no vector to search (see :func:`run_search`): an empty index, a scope no indexed file
    matches, an index built keyword-only, or chunks in scope still waiting for their vector."""
    if vectors is not None and vectors["total"] == 0:
        return NO_FILES
    if (scope.source or scope.path_prefix) and not retriever.files_in_scope(scope):
        return NO_FILE_IN_SCOPE
    return KEYWORD_INDEX if vectors is None else NO_VECTORS_YET if vectors["embedded"] == 0 else NO_VECTOR_FOUND


def nothing_to_search(retriever: Retriever, scope: Scope, ranking: Ranking) -> str | None:
    """For a keyword-only search that found no candidate, why, when nothing was there to search: an empty index, or a
    scope no indexed file matches (a typo in a path prefix must not read as "nothing relevant")."""
    if ranking.candidates:
        return None
    if not retriever.files_in_scope(Scope()):
        return NO_FILES
    if (scope.source or scope.path_prefix) and not retriever.files_in_scope(scope):
        return NO_FILE_IN_SCOPE
    return None


def fallback_reason(embedder: LazyEmbedder, retriever: Retriever, provider: str) -> str | None:
    """Why a search runs keyword-only: no embedding provider could be loaded, or the vector leg failed."""
    if embedder.get() is None and provider != "none":
        return "no embedding provider available (" + "; ".join(embedder.skipped) + "): keyword-only"
    error = retriever.vector_error
    return "; ".join([*embedder.skipped, *([error] if error else [])]) or None


def stored_form(retriever: Retriever, scope: Scope) -> Scope:
    """``scope`` with its path prefix in the Unicode form the index holds its files' names in, when only the other
    form matches one: a folder typed composed (``Việt``) that the file system keeps decomposed, or back, as
    ``memory_get`` reads either form."""
    prefix = scope.path_prefix
    if not prefix or prefix.isascii() or retriever.files_in_scope(scope):
        return scope
    for form in ("NFC", "NFD"):
        other = replace(scope, path_prefix=unicodedata.normalize(form, prefix))
        if other.path_prefix != prefix and retriever.files_in_scope(other):
            return other
    return scope


def run_search(retriever: Retriever, embedder: LazyEmbedder, identity: Callable[[], tuple], query: str,
               cfg: RankConfig, scope: Scope, now: float | None, notice: str | None,
               progress: Callable[[str | None], Progress], provider: str,
               ask_again: Callable[[str, Ranking], tuple[str, ...]] = lambda query, ranking: ()) -> SearchResponse:
    """Retrieve and rank ``query`` under ``cfg`` within ``scope`` (see the module doc); ``notice`` comes from
    :func:`plan_search`, ``progress`` is a :class:`VectorCount`, ``provider`` the configured embedding provider,
    ``ask_again`` the languages a refusal says to ask again in (:meth:`hybridmem.index.MemoryIndex.ask_in`)."""
    timings: dict[str, float] = {}
    if cfg.vector_weight > 0 and not embedder.loaded:
        t0 = time.perf_counter()
        _ = embedder.get()  # load the model outside the per-query timings
        timings["model_load"] = (time.perf_counter() - t0) * 1000
    loaded = embedder.get() if cfg.vector_weight > 0 and cfg.text_weight > 0 else None
    if loaded is not None and reads_language(loaded.model):
        # rank() will ask which language the query is in: load it meanwhile
        preload_language_identifier(retriever.settings.embedding.shared_cache_dir)
    scope = stored_form(retriever, scope)
    t_all = time.perf_counter()
    cands = retriever.retrieve(query, cfg.pool, cfg.text_weight > 0, cfg.vector_weight > 0, scope,
                               cfg.needs_vectors, None, timings)
    t0 = time.perf_counter()
    vectors, vectors_note = progress(cands.generation or None)  # no second read of the generation
    # a vector leg that found nothing had no vector to search (an index built keyword-only, one no chunk of which has
    # its vector yet, or one read before the count above while another process was embedding): rank() leaves it out,
    # and the reply says the search was keyword-only, and why
    keyword_index = cands.vector_searched and (vectors is None or vectors["embedded"] == 0 or not cands.vector)
    if keyword_index:
        cands = replace(cands, vector_searched=False)
    ranking = rank(cands, cfg, now=now)
    if vectors_note and cands.vector_searched and not ranking.hits:
        ranking = rank(replace(cands, vector_searched=False), cfg, now=now)
    timings["rank"] = (time.perf_counter() - t0) * 1000
    timings["total"] = (time.perf_counter() - t_all) * 1000
    name, model, _, _ = identity()
    fallback = (cfg.vector_weight > 0 and not cands.vector_searched) or bool(embedder.skipped)
    return SearchResponse(  # the query as the retriever cleaned it: a lone surrogate never reaches the response
        query=cands.query, results=ranking.hits, ranking=ranking, provider=name, model=model, fallback=fallback,
        fallback_reason=(keyword_only_note(vectors, retriever, scope) if keyword_index
                         else fallback_reason(embedder, retriever, provider)
                         or nothing_to_search(retriever, scope, ranking)) if fallback else None,
        timings=timings, config=cfg, candidates=cands,
        notice=notice, vectors=vectors, vectors_note=vectors_note if cfg.vector_weight > 0 else None,
        ask_in=ask_again(cands.query, ranking))


def status_report(store: Any, retriever: Retriever, embedder: LazyEmbedder, progress: Progress) -> dict[str, Any]:
    """The store's counts and identity, how vectors are searched, how far embedding has got, and how many chunks are
    in scripts the model does not read (``unread_note``, only when some are)."""
    meta, loaded, counts = store.all_meta(), embedder.loaded, store.counts()
    languages = chunk_languages(store)
    embedded = meta.get("provider", "none") != "none"
    unread = unread_note(store, counts["chunks"], meta.get("model", "")) if embedded else None
    vectors, note = progress
    backend = "pgvector" if store.backend == "postgres" else "sqlite-vec" if store.vec_available else "numpy"
    return {
        **counts, "provider": meta.get("provider", "none"), "model": meta.get("model", ""),
        "dims": int(meta.get("dims", 0) or 0), "vector_backend": backend,
        "vector_search": retriever.vector_search_label(), "vec_error": store.vec_error, "driver": store.driver,
        "fts_tokenizer": meta.get("fts_tokenizer", fts_tokenizer_spec()), "settings_hash": meta.get("settings_hash"),
        "cache_entries": store.cache_count(),
        "last_sync": float(meta["last_sync"]) if "last_sync" in meta else None, "read_only": store.read_only,
        "query_embedding": getattr(embedder.current, "runtime", None) if loaded else None,
        "vectors": vectors, **({"vectors_note": note} if note else {}), **({"unread_note": unread} if unread else {}),
        "languages": languages,
    }
