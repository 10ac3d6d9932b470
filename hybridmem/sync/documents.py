"""Incremental indexing: documents in, chunks + FTS tokens + vectors out, by content hash.

Shared by workspace sync and by evaluation corpora (any iterable of :class:`~hybridmem.records.Document`), so both go
through the same chunking, tokenization, embedding cache and store code.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import numpy as np

from hybridmem.chunking import chunk_text
from hybridmem.config import Settings
from hybridmem.embeddings.base import Embedder
from hybridmem.ranking.adaptive import MAX_QUERY_LETTERS, foreign_letters
from hybridmem.records import Document
from hybridmem.sessions import keyword_text
from hybridmem.store import Store
from hybridmem.store.shared_cache import SharedCache
from hybridmem.sync.lock import try_sync_lock
from hybridmem.sync.pending import cached_vectors, embed_pending
from hybridmem.tokenization import tokenize

Progress = Callable[[str, int, int], None]
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
UNREAD_META = "unread_scripts"  # meta key: {path: {script: chunks}} of the files with chunks the model does not read


def unread_script(text: str, scripts: frozenset[str] | None) -> str | None:
    """The script most of ``text``'s letters are written in, where the embedding model does not read it (``scripts``,
    ``Embedder.scripts``: all-MiniLM-L6-v2 reads Latin alone; None, any); else None. Its first 400 letters are read
    as a query's are for the adaptive step (:func:`~hybridmem.ranking.adaptive.foreign_letters`). The model's vector
    of such a chunk is close to random: only the keyword leg finds it.

    Example:
        >>> unread_script("# 2026-11-05\\n- คุณยายไปตรวจความดันที่โรงพยาบาล (Siriraj)", frozenset({"LATIN"}))
        'THAI'
        >>> unread_script("Staging Redis listens on 6380 (ステージング)", frozenset({"LATIN"})) is None
        True
    """
    if scripts is None:
        return None
    if "LATIN" in scripts and not any(c.isalpha() for c in _NON_ASCII.findall(text, 0, 4 * MAX_QUERY_LETTERS)):
        return None  # letters in ASCII alone, the common case: found at C speed
    outside, letters = foreign_letters(text, scripts)
    return outside.most_common(1)[0][0] if 2 * outside.total() > letters else None


def unread_words(unread: Counter[str], total: int, model: str) -> str:
    """One sentence for ``hybridmem index``: how many of the ``total`` chunks a sync stored are written in scripts
    ``model`` does not read (``unread``: chunks per script, :func:`unread_script`), and what to do about it.

    Example:
        >>> print(unread_words(Counter({"THAI": 8, "ARABIC": 6}), 40, "all-MiniLM-L6-v2"))
        ... # doctest: +NORMALIZE_WHITESPACE
        14 of 40 chunks indexed are written mostly in scripts all-MiniLM-L6-v2 does not read (Thai 8, Arabic 6): its
        vectors of them are close to random, so only the keyword leg finds them; multilingual-e5-small, the default
        model, reads them ([embedding] provider = "e5").
    """
    named = ", ".join(f"{s if s == 'CJK' else s.title()} {n}" for s, n in unread.most_common())
    verb = "is" if unread.total() == 1 else "are"
    return (f"{unread.total():,} of {total:,} chunks indexed {verb} written mostly in scripts {model} does not read "
            f"({named}): its vectors of them are close to random, so only the keyword leg finds them; "
            'multilingual-e5-small, the default model, reads them ([embedding] provider = "e5").')


def unread_files(store: Store) -> dict[str, dict[str, int]]:
    """The index's files with chunks in scripts its model does not read (:func:`unread_script`), as the syncs that
    stored them recorded (:data:`UNREAD_META`): ``{path: {script: chunks}}``; empty when none, or unreadable."""
    try:
        got = json.loads(store.get_meta(UNREAD_META, "") or "{}")
    except ValueError:
        return {}
    return got if isinstance(got, dict) else {}


def unread_note(store: Store, chunks: int, model: str) -> str | None:
    """:func:`unread_words` over the whole index (``chunks`` in it), for ``hybridmem status`` and ``memory_status``;
    None when every chunk is in a script ``model`` reads."""
    unread: Counter[str] = Counter()
    for per in unread_files(store).values():
        unread.update(per)
    return unread_words(unread, chunks, model) if unread else None


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


def prepare(doc: Document, settings: Settings, doc_hash: str | None = None) -> PreparedDoc:
    """Chunk and tokenize one document (no I/O)."""
    chunks = []
    transcript = doc.source == "sessions" and doc.line_map is not None  # sessions.parse_transcript's lines
    for c in chunk_text(doc.text, settings.chunking, doc.line_map):
        chunks.append(
            {
                "start_line": c.start_line, "end_line": c.end_line, "hash": c.hash, "text": c.text,
                "tokens": " ".join(tokenize(keyword_text(c.text) if transcript else c.text, settings.tokenizer)),
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
    files_unread = unread_files(store)  # kept beside the rows, so that status can say it after this sync
    for path in deleted:
        with store.transaction():
            store.delete_file(path)
            if files_unread.pop(path, None):
                store.set_meta(UNREAD_META, json.dumps(files_unread, ensure_ascii=False))
            store.bump_generation()
    total = len(changed)
    scripts = getattr(embedder, "scripts", None)  # what the model reads (None: any script)
    unread: Counter[str] = Counter()  # chunks stored here in a script it does not read, per script
    stored = 0
    for start, stop in _batches(total, batch_files):
        batch = [(prepare(doc, settings, meta["hash"]), meta) for doc, meta in changed[start:stop]]
        stored += sum(len(p.chunks) for p, _ in batch)
        moved = False  # whether the batch changes files_unread
        for p, meta in batch:
            per = dict(Counter(s for c in p.chunks if (s := unread_script(c["text"], scripts))))
            unread.update(per)
            was = files_unread.pop(meta["path"], None)
            if per:
                files_unread[meta["path"]] = per
            moved = moved or (per or None) != was
        vectors: dict[str, np.ndarray] = {}
        if embedder is not None:
            hashes = list(dict.fromkeys(c["hash"] for p, _ in batch for c in p.chunks))
            vectors, _ = cached_vectors(store, embedder, hashes, shared)
            report.cache_hits += len(vectors)
        with store.transaction():
            for p, meta in batch:
                store.upsert_file(meta, p.chunks, [vectors.get(c["hash"]) for c in p.chunks])
            if moved:
                store.set_meta(UNREAD_META, json.dumps(files_unread, ensure_ascii=False))
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
