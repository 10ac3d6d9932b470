"""Incremental indexing: documents in, chunks + FTS tokens + vectors out, by content hash.

Shared by workspace sync and by evaluation corpora (any iterable of :class:`~hybridmem.records.Document`), so both go
through the same chunking, tokenization, embedding cache and store code.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from hybridmem.chunking import chunk_text
from hybridmem.config import Settings
from hybridmem.embeddings.base import Embedder
from hybridmem.records import Document
from hybridmem.sessions import keyword_text
from hybridmem.store import Store
from hybridmem.store.shared_cache import SharedCache
from hybridmem.sync.census import Census, unread_words
from hybridmem.sync.lock import try_sync_lock
from hybridmem.sync.pending import cached_vectors, embed_pending
from hybridmem.tokenization import tokenize

Progress = Callable[[str, int, int], None]


@dataclass
class SyncReport:
    """What a sync did."""

    files: int = 0
    chunks: int = 0
    added: int = 0
    changed: int = 0
    deleted: int = 0
    unchanged: int = 0
    deferred: int = 0  # session transcripts that grew less than the sync.session_delta_* thresholds
    embedded: int = 0
    cache_hits: int = 0
    full_reindex: bool = False
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def document_hash(doc: Document) -> str:
    """Content hash of a document plus the fields that change its chunks' metadata."""
    h = hashlib.sha256(doc.text.encode("utf-8", "surrogatepass"))
    h.update(f"\0{doc.source}\0{doc.date}\0{doc.evergreen}\0{doc.line_map}".encode())
    return h.hexdigest()


@dataclass
class PreparedDoc:
    doc: Document
    hash: str
    chunks: list[dict]


Stored = Mapping[tuple[str, str], tuple["str | None", str, int]]  # Store.stored_tokens: (path, hash) -> (text, ...)


def prepare(doc: Document, settings: Settings, doc_hash: str | None = None,
            stored: Stored | None = None) -> PreparedDoc:
    """Chunk and tokenize one document (no I/O). ``stored``: ``(path, chunk hash) -> (text, tokens, chunks)`` of
    chunks the index holds already (:meth:`~hybridmem.store.Store.stored_tokens`): a chunk of the same file with the
    same text (not only the same hash, which is of its NFC form) takes its tokens as they are. A transcript that
    grew, or a long note edited in one place, is mostly chunks it held before."""
    chunks = []
    known = stored or {}
    transcript = doc.source == "sessions" and doc.line_map is not None  # sessions.parse_transcript's lines
    for c in chunk_text(doc.text, settings.chunking, doc.line_map):
        held = known.get((doc.path, c.hash))
        if held is not None and held[0] == c.text:
            tokens = held[1]
        else:
            tokens = " ".join(tokenize(keyword_text(c.text) if transcript else c.text, settings.tokenizer))
        chunks.append(
            {
                "start_line": c.start_line, "end_line": c.end_line, "hash": c.hash, "text": c.text,
                "tokens": tokens,
                "timestamp": doc.timestamp,
                "evergreen": doc.evergreen,
            }
        )
    return PreparedDoc(doc, doc_hash or document_hash(doc), chunks)


def apply_documents(
    store: Store,
    settings: Settings,
    embedder: Embedder | None,
    changed: Sequence[tuple[Document, dict]],
    deleted: Iterable[str],
    report: SyncReport,
    progress: Progress | None = None,
    batch_files: int = 256,
    shared: SharedCache | None = None,
    lock_path: str | None = None,
    embed_limit: int | None = None,
) -> None:
    """Write changed documents (with their file rows), remove deleted paths, then embed what has no vector yet.

    Keyword first: each batch of files is stored with its chunks and FTS rows in one transaction, with the vectors the
    caches already hold; chunks without one are pending, and :func:`~hybridmem.sync.pending.embed_pending` embeds
    them after every file is searchable by keyword. A crash leaves either the old or the new rows of a file, and
    pending chunks that the next sync embeds.
    """
    census = Census(store, getattr(embedder, "scripts", None))  # each file's counts, kept beside its rows
    deleted = list(deleted)
    if census.missing and store.counts()["files"]:  # an index from before the counts
        with store.transaction():
            census.count_stored(store, skip={doc.path for doc, _ in changed} | set(deleted))
            census.write(store)
    for start, stop in _batches(len(deleted), batch_files):
        with store.transaction():  # a batch of deletions, their counts and one generation in one commit
            for path in deleted[start:stop]:
                store.delete_file(path)
                census.drop(path)
            census.write(store)
            store.bump_generation()
    total = len(changed)
    unread: Counter[str] = Counter()  # chunks stored here in a script the model does not read, per script
    stored = 0
    for start, stop in _batches(total, batch_files):
        docs = changed[start:stop]
        known = store.stored_tokens([meta["path"] for _, meta in docs])  # files stored before: their chunks' tokens
        batch = [(prepare(doc, settings, meta["hash"], known), meta) for doc, meta in docs]
        stored += sum(len(p.chunks) for p, _ in batch)
        before = _stored_texts(known)
        for p, meta in batch:
            unread.update(census.count(meta["path"], (c["text"] for c in p.chunks), before.get(meta["path"], {})))
        vectors: dict[str, np.ndarray] = {}
        if embedder is not None:
            hashes = list(dict.fromkeys(c["hash"] for p, _ in batch for c in p.chunks))
            vectors, _ = cached_vectors(store, embedder, hashes, shared)
            report.cache_hits += len(vectors)
        with store.transaction():
            for p, meta in batch:
                store.upsert_file(meta, p.chunks, [vectors.get(c["hash"]) for c in p.chunks])
            census.write(store)
            store.bump_generation()  # in the same commit: a reader that sees one generation sees one content
        if progress:
            progress("index", stop, total)
    if embedder is None:
        return
    if unread:
        report.warnings.append(unread_words(unread, stored, embedder.model))
    waiting = store.pending_count()
    if embed_limit is not None and waiting > embed_limit:
        report.warnings.append(f"{waiting:,} chunks wait for their vector (searchable by keyword now); "
                               "`hybridmem index` embeds them")
        return
    with try_sync_lock(lock_path) as held:  # held already when this sync took it; else free again, or another's
        if not held:
            if waiting:
                report.warnings.append(f"another process is indexing {store.path}: it embeds the {waiting:,} "
                                       "chunks still without a vector (searchable by keyword now)")
            return
        n_embedded, hits = embed_pending(store, embedder, shared, progress)
    report.embedded += n_embedded
    report.cache_hits += hits


def _stored_texts(known: Stored) -> dict[str, dict[str, int] | None]:
    """Per stored file, its chunks' texts and how many of each (None where one hash's texts differ: count it whole)."""
    out: dict[str, dict[str, int] | None] = {}
    for (path, _), (text, _, n) in known.items():
        if text is None:
            out[path] = None
        elif (texts := out.setdefault(path, {})) is not None:
            texts[text] = n
    return out


def _batches(total: int, size: int, first: int = 16) -> list[tuple[int, int]]:
    """``(start, stop)`` of the write batches: ``first`` files, doubling up to ``size`` (the first keyword answers
    come after one small commit; later batches amortize their transactions)."""
    out, start, n = [], 0, min(first, size)
    while start < total:
        out.append((start, min(start + n, total)))
        start += n
        n = min(2 * n, size)
    return out


def file_row(doc: Document, doc_hash: str, abspath: str | None, size: int, mtime: float) -> dict:
    return {
        "path": doc.path, "abspath": abspath, "source": doc.source, "hash": doc_hash, "mtime": mtime, "size": size,
        "date": doc.date, "evergreen": int(doc.evergreen),
    }


def sync_documents(
    store: Store,
    settings: Settings,
    embedder: Embedder | None,
    documents: Iterable[Document],
    prune: bool = True,
    progress: Progress | None = None,
    shared: SharedCache | None = None,
) -> SyncReport:
    """Index an iterable of in-memory documents incrementally (by document hash); delete missing ones if ``prune``."""
    t0 = time.perf_counter()
    report = SyncReport()
    known = store.files()
    seen: set[str] = set()
    changed: list[tuple[Document, dict]] = []
    for doc in documents:
        if doc.path in seen:
            report.warnings.append(f"duplicate document path {doc.path!r} skipped")
            continue
        seen.add(doc.path)
        h = document_hash(doc)
        if doc.path in known and known[doc.path]["hash"] == h:
            report.unchanged += 1
            continue
        if doc.path in known:
            report.changed += 1
        else:
            report.added += 1
        changed.append((doc, file_row(doc, h, None, len(doc.text), doc.mtime)))
    deleted = [p for p in known if p not in seen] if prune else []
    report.deleted = len(deleted)
    apply_documents(store, settings, embedder, changed, deleted, report, progress, shared=shared)
    counts = store.counts()
    report.files, report.chunks = counts["files"], counts["chunks"]
    report.seconds = time.perf_counter() - t0
    return report
