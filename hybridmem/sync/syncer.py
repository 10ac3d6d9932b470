"""Keeping a :class:`~hybridmem.store.Store` in step with a workspace: discover, diff, index, or rebuild atomically.

:class:`Syncer` owns the incremental loop (new, changed and deleted files by mtime, size and content hash; growing
transcripts deferred until they grew enough), the settings hash that decides when everything must be rebuilt, and
the hand-over to :func:`~hybridmem.sync.reindex.atomic_reindex` for a full rebuild of an on-disk index.
"""

from __future__ import annotations

import hashlib
import os
import socket
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from hybridmem import sources as src
from hybridmem.config import DEFAULT_PROVIDER, Settings, provider_model
from hybridmem.embeddings import LazyEmbedder, embedder_identity, known_provider_key
from hybridmem.errors import HybridMemError, WorkspaceError
from hybridmem.records import Document
from hybridmem.sessions import defer_session_reindex
from hybridmem.store import Store
from hybridmem.textfiles import BINARY_HEAD, skipped_as_binary
from hybridmem.sync.documents import (
    Progress,
    SyncReport,
    apply_documents,
    document_hash,
    file_row,
    sync_documents,
)
from hybridmem.store.shared_cache import SharedCache
from hybridmem.sync.census import Census
from hybridmem.sync.lock import sync_running, try_sync_lock
from hybridmem.store.shared_cache import open_shared_cache
from hybridmem.sync.reindex import BAK_SUFFIX, STALE_BUILD_S, TMP_SUFFIX, atomic_reindex, leftovers, remove_db_files
from hybridmem.tokenization import fts_tokenizer_spec


_SKIPPED = object()  # Syncer._load: the file is no memory file any more (binary, empty after redaction...)


class _LazyDocs(Sequence):
    """The changed files of a sync: those already read, then new files read only when their write batch is cut
    (``docs[start:stop]``), so the first batch is searchable before the last file is even read. A file that turns
    out unreadable drops out of its batch."""

    def __init__(self, loaded: list[tuple[Document, dict]], files: list[src.SourceFile],
                 load: Callable[[src.SourceFile], Any]) -> None:
        self._loaded, self._files, self._load = loaded, files, load

    def __len__(self) -> int:
        return len(self._loaded) + len(self._files)

    def __getitem__(self, index: Any) -> Any:
        if not isinstance(index, slice):
            return self[index : index + 1][0]
        start, stop, _ = index.indices(len(self))
        out = self._loaded[start:stop]
        n = len(self._loaded)
        for sf in self._files[max(start - n, 0) : max(stop - n, 0)]:
            item = self._load(sf)
            if isinstance(item, tuple):
                out.append(item)
        return out


class ReadOnlyIndexError(HybridMemError):
    """The index cannot be written (a read-only file, folder or mount); it can still be searched."""


def _describe(provider: str, model: str, key: str) -> str:
    if provider in ("", "none"):
        return "no embeddings (keyword-only)"
    return " ".join(x for x in (provider, model, key) if x)


class Syncer:
    """Indexes a workspace's sources (or in-memory documents) into ``store``.

    Args:
        store: the index to write.
        settings: sources, chunking, tokenizer and embedding settings.
        workspace: the folder holding ``MEMORY.md`` and ``memory/``; None for a documents-only index.
        embedder: the (lazily loaded) embedder for documents; shared with the retriever.
    """

    def __init__(self, store: Store, settings: Settings, workspace: Path | None, embedder: LazyEmbedder) -> None:
        self.store = store
        self.settings = settings
        self.workspace = workspace
        self.embedder = embedder
        self._shared: SharedCache | None | bool = False  # False: not opened yet
        # None: a private store (a rebuild's new copy) takes no lock, nor does PostgreSQL (not a file: its writers
        # serialize on the server's advisory lock, and a host embedding a chunk another host embedded skips it)
        self.lock_path: str | None = None if getattr(store, "backend", "sqlite") == "postgres" else store.path
        self.embed_limit: int | None = None  # the running sync's (see sync())
        self.defer_sessions = True  # the running sync's (see sync())
        self._appended: dict[str, tuple[int, str, bytes]] = {}  # transcripts whose indexed prefix passed (see below)

    def running_elsewhere(self) -> bool:
        """True while another process holds this index's sync lock (it is indexing: search what it stored)."""
        return self.lock_path is not None and sync_running(str(self.lock_path))

    @property
    def shared_cache(self) -> SharedCache | None:
        """The user-level embedding cache (opened on first use), or None when the settings switch it off."""
        if self._shared is False:
            self._shared = open_shared_cache(self.settings.embedding)
        return self._shared  # type: ignore[return-value]

    def identity(self) -> tuple[str, str, str, int]:
        """(provider, model, provider_key, dims) of the embedder, without loading a local model when the index
        already records the same provider and model (so a warm sync or a keyword-only search stays fast)."""
        if not self.embedder.loaded:
            cfg = self.settings.embedding
            if cfg.provider == "none":
                return "none", "", "", 0
            meta = self.store.all_meta()
            provider = DEFAULT_PROVIDER if cfg.provider == "auto" else cfg.provider
            model = provider_model(provider, cfg.model)
            if meta.get("provider") == provider and meta.get("model") == model:
                key = known_provider_key(provider, meta.get("provider_key", ""))
                if key is not None:
                    return provider, model, key, int(meta.get("dims", 0) or 0)
        return embedder_identity(self.embedder.get())

    def rebuild_reason(self) -> str | None:
        """Why the next sync re-embeds everything, when the index was built with another embedder (said once: the
        rebuilt index records the new one)."""
        meta = self.store.all_meta()
        if self.store.get_meta("settings_hash") is None or "provider" not in meta:
            return None
        old = (meta.get("provider", ""), meta.get("model", ""), meta.get("provider_key", ""))
        name, model, key, _ = self.identity()
        if old == (name, model, key):
            return None
        return (f"the index was built with {_describe(*old)}; re-embedding every chunk with "
                f"{_describe(name, model, key)} (embedding settings changed)")

    def settings_hash(self) -> str:
        name, model, key, dims = self.identity()
        base = self.settings.index_hash(dims)
        return hashlib.sha256(f"{base}|{name}|{model}|{key}|{dims}".encode()).hexdigest()[:16]

    def needs_full_reindex(self) -> bool:
        """True when an existing index was built with other settings (model, dims, chunking, tokenizer)."""
        stored = self.store.get_meta("settings_hash")
        if stored is None:
            return False
        dims = self.identity()[3]
        return stored != self.settings_hash() or (dims > 0 and self.store.vec_available
                                                   and not self.store.has_vec_table())

    def prepare_full_reindex(self) -> bool:
        """Clear the index when the settings hash changed; returns True when it did."""
        current = self.settings_hash()
        stored = self.store.get_meta("settings_hash")
        name, model, key, dims = self.identity()
        if stored == current and (dims == 0 or not self.store.vec_available or self.store.has_vec_table()):
            return False
        with self.store.transaction():
            self.store.clear()
            Census.reset(self.store)  # every file is stored again, and counted again
            self.store.bump_generation()
        self.store.ensure_vec_table(dims)
        for k, v in {"settings_hash": current, "provider": name, "model": model, "provider_key": key, "dims": dims,
                     "fts_tokenizer": fts_tokenizer_spec()}.items():
            self.store.set_meta(k, v)
        return stored is not None

    def _bump(self) -> None:
        with self.store.transaction():
            self.store.bump_generation()
        self.store.set_meta("last_sync", time.time())

    # -- workspace -----------------------------------------------------------------------------------------------
    def sync(self, force: bool = False, progress: Progress | None = None, wait: bool = False,
             embed_limit: int | None = None, defer_sessions: bool = True) -> SyncReport:
        """Bring the index up to date with the workspace. A settings change (model, chunking, tokenizer, dims) or
        ``force`` rebuilds everything: atomically for an index on disk, in place for ``:memory:``. Keyword first:
        chunks are stored (and searchable) before they are embedded; the sync holding the index's lock embeds
        (:mod:`hybridmem.sync.lock`; ``wait``: wait for that lock, as ``hybridmem index`` does). ``embed_limit``:
        leave the vectors to a later sync when more chunks than this wait for one (a search's quick sync).
        ``defer_sessions``: False reads every grown transcript now (``hybridmem index``); a watcher's or a search's
        sync waits until one grew by ``sync.session_delta_bytes`` or ``session_delta_messages``."""
        if self.workspace is None:
            raise WorkspaceError("this index has no workspace; use index_documents()")
        if self.store.read_only:
            raise ReadOnlyIndexError(f"cannot sync: {self.store.read_only}; searches still work on the index as it is")
        self.embed_limit, self.defer_sessions = embed_limit, defer_sessions
        try:
            with try_sync_lock(self.lock_path, wait=wait) as held:
                self.store.set_meta("sync_started", time.time())  # a sync that never reaches _bump was stopped
                return self._sync(force, progress, holds_lock=held and self.lock_path is not None)
        finally:
            self.embed_limit, self.defer_sessions = None, True

    def _sync(self, force: bool, progress: Progress | None, holds_lock: bool = False) -> SyncReport:
        """``holds_lock``: this sync holds the index's lock (a reindex's builder never does)."""
        full = force or self.needs_full_reindex()
        reason = self.rebuild_reason() if full else None
        if full and self.store.path != ":memory:":
            report = atomic_reindex(self.store, lambda tmp: self._build(tmp, progress))
            if reason:
                report.warnings.insert(0, reason)
            if not self.needs_full_reindex():
                # A file written while the new index was built (a memory_write after the build read it) is out of
                # date in it; one incremental pass re-reads just the files whose mtime or size moved since.
                catch_up = self._incremental(SyncReport(), False, None, catch_up=True)
                report.added += catch_up.added
                report.changed += catch_up.changed
                report.deleted += catch_up.deleted
                report.warnings += [w for w in catch_up.warnings if w not in report.warnings]
                report.files, report.chunks = catch_up.files, catch_up.chunks
                report.seconds += catch_up.seconds
            return report
        report = SyncReport()
        if reason:
            report.warnings.append(reason)
        if holds_lock and self.store.path != ":memory:":
            self._remove_interrupted_build(report)
        return self._incremental(report, force, progress)

    def _remove_interrupted_build(self, report: SyncReport) -> None:
        """Delete the new copy a killed full reindex left beside the index (as large as the index) once nothing has
        written it for :data:`STALE_BUILD_S`. This sync holds the index's lock, which a reindex in another process
        holds too unless it is a search's quick sync that found the lock taken: the age tells that one apart. A
        backup (``.bak``) is left to the next full reindex: after a failed swap it may be the only good copy."""
        stale = [f for f in leftovers(self.store.path) if not f.startswith(f"{self.store.path}{BAK_SUFFIX}")]
        try:
            if not stale or time.time() - max(os.path.getmtime(f) for f in stale) < STALE_BUILD_S:
                return
            size = sum(os.path.getsize(f) for f in stale)
        except OSError:  # removed meanwhile
            return
        remove_db_files(f"{self.store.path}{TMP_SUFFIX}")
        report.warnings.append(f"removed {os.path.basename(stale[0])} ({size / 1e6:.1f} MB), the unfinished new index "
                               "of a full reindex that was stopped; the index in use was not affected")

    def _shared_for(self, embedder: Any) -> SharedCache | None:
        """The shared cache for this embedder's vectors (not opened, so not created, for one that keeps out)."""
        return self.shared_cache if embedder is not None and embedder.shared_cache else None

    def _build(self, tmp: Store, progress: Progress | None) -> SyncReport:
        """Index the whole workspace into ``tmp`` (a full reindex's new copy; this sync's lock covers it)."""
        builder = Syncer(tmp, self.settings, self.workspace, self.embedder)
        builder._shared = self._shared if self._shared is not False else self.shared_cache
        builder.lock_path = None
        builder.embed_limit = self.embed_limit  # a search's rebuild stores every chunk but leaves the vectors to index
        return builder._sync(False, progress)

    def _incremental(self, report: SyncReport, force: bool, progress: Progress | None,
                     catch_up: bool = False) -> SyncReport:
        """The incremental sync (``catch_up``: right after a full reindex, so a pass that changes nothing leaves the
        generation as it is)."""
        t0 = time.perf_counter()
        if force:
            self.store.set_meta("settings_hash", "forced")
        report.full_reindex = self.prepare_full_reindex() or force
        known = self.store.files()
        found = src.discover(self.workspace, self.settings.sources, report.warnings)
        seen: set[str] = set()
        changed: list[tuple[Document, dict]] = []
        fresh: list[src.SourceFile] = []  # new files: read batch by batch while writing (keyword first)
        for sf in found:
            seen.add(sf.path)
            old = known.get(sf.path)
            if old and self._unchanged(sf, old):
                report.unchanged += 1
                continue
            if old and sf.source == "sessions" and self.defer_sessions and self._defer_session(sf, old):
                report.deferred += 1  # a growing transcript waits for 100 KB or 50 new messages
                continue
            if not old:
                fresh.append(sf)
                continue
            item = self._load(sf, old, report)
            if item is None:
                continue
            if item is _SKIPPED:
                seen.discard(sf.path)
                continue
            changed.append(item)  # type: ignore[arg-type]
        if fresh:
            changed = _LazyDocs(changed, fresh, lambda sf: self._load(sf, None, report))  # type: ignore[assignment]
        deleted = [p for p in known if p not in seen]
        report.deleted = len(deleted)
        self._note_where_from(len(deleted), len(known), report)
        # pending: chunks stored without a vector by a sync that was stopped mid-embed (keyword first): resumed here
        pending = not changed and self.identity()[3] > 0 and self.store.pending_count() > 0
        embedder = self.embedder.get() if changed or pending else None
        apply_documents(self.store, self.settings, embedder, changed, deleted, report, progress,
                        shared=self._shared_for(embedder), lock_path=self.lock_path,
                        embed_limit=self.embed_limit)
        if not catch_up or changed or deleted:
            self._bump()
        counts = self.store.counts()
        report.files, report.chunks = counts["files"], counts["chunks"]
        report.seconds = time.perf_counter() - t0
        return report

    def _note_where_from(self, deleted: int, known: int, report: SyncReport) -> None:
        """Record which folder on which host syncs this index, and warn when a sync from another one deletes most of
        its files: two folders given one PostgreSQL namespace (or one ``--index``) replace each other's files at
        every sync, which a report of "deleted 49" alone did not say. One folder shared by many hosts (each with its
        own mount path) deletes nothing it did not delete on disk, so it is never warned about."""
        here = f"{socket.gethostname()}:{os.path.realpath(self.workspace)}"
        before = self.store.get_meta("synced_from")
        if before and before != here and deleted and deleted * 2 > known:
            report.warnings.append(
                f"{self.store.path}: this sync deleted {deleted} of its {known} files, last synced from {before}: two "
                "folders on one index replace each other's files at every sync; give each its own [store] namespace "
                "(or --index)")
        if before != here:
            self.store.set_meta("synced_from", here)

    def _load(self, sf: src.SourceFile, old: dict[str, Any] | None,
              report: SyncReport) -> tuple[Document, dict] | object | None:
        """Read, redact and hash one new or changed file: ``(document, file row)`` to write, None when there is
        nothing to write (unreadable, or the same content), :data:`_SKIPPED` when it is no memory file any more."""
        try:
            loaded = src.load(sf, self.settings.sources)
        except OSError as exc:
            report.warnings.append(f"{sf.path}: cannot read ({exc.strerror or exc})")
            return None
        if loaded.warning:
            report.warnings.append(f"{sf.path}: {loaded.warning}")
        if loaded.document is None:
            return _SKIPPED
        h = document_hash(loaded.document)
        stamp = self._stamp(sf)
        row = file_row(loaded.document, h, sf.abspath, sf.size, stamp)
        if old and old["hash"] == h:
            report.unchanged += 1
            self.store.touch_file(sf.path, stamp, sf.size, sf.abspath)
            return None
        if old:
            report.changed += 1
        else:
            report.added += 1
        return loaded.document, row

    def changed_on_disk(self) -> int:
        """How many files the next sync would read or drop: new, changed (stamp, size or place, as the sync compares
        them) or deleted since the index read them. Only a new file's first bytes are read, to leave out what the sync
        would skip too (a binary file named ``.md``); nothing is written. 0 for an index of documents without a workspace."""
        if self.workspace is None:
            return 0
        known = self.store.files()
        count = 0
        for sf in src.discover(self.workspace, self.settings.sources):
            old = known.pop(sf.path, None)
            if old is None:
                try:
                    with open(sf.abspath, "rb") as fh:
                        count += not skipped_as_binary(fh.read(BINARY_HEAD))
                except OSError:
                    count += 1
            elif not self._unchanged(sf, old):
                count += 1
        return count + len(known)

    def _unchanged(self, sf: src.SourceFile, old: dict[str, Any]) -> bool:
        """Whether ``sf`` is the file its row ``old`` was read from, as far as its stamp, size and place (a local index
        only: see :meth:`_stamp`) tell."""
        return old["mtime"] == self._stamp(sf) and old["size"] == sf.size \
            and (old["abspath"] == sf.abspath or self.store.backend != "sqlite")

    def _stamp(self, sf: src.SourceFile) -> float:
        """What the files table keeps to tell a file changed: a local index its change stamp (mtime or inode change
        time, the later: an edit whose mtime was put back), and compares its place too (a workspace moved). A
        server's index is shared by hosts (docs/postgres.md) whose mount points and inode times are their own, so
        there mtime alone, and the place is not compared: hosts would re-read every file on every sync."""
        return sf.stamp if self.store.backend == "sqlite" else sf.mtime

    def _defer_session(self, sf: src.SourceFile, old: dict[str, Any]) -> bool:
        sync = self.settings.sync
        return old["abspath"] == sf.abspath and defer_session_reindex(
            sf.abspath, int(old["size"]), sf.size, sync.session_delta_bytes, sync.session_delta_messages
        ) and self._grew_by_appending(sf, old)

    def _grew_by_appending(self, sf: src.SourceFile, old: dict[str, Any]) -> bool:
        """Whether the transcript's first bytes, as many as were indexed, still read as the document that was indexed:
        a grown file waits only when lines were appended. One rewritten longer (a client that saves the whole session
        again) is read now: waiting served text no longer in the file, cited at lines that now say something else.
        The prefix's bytes are hashed on every sync; it is parsed again only when they changed since it last passed."""
        size = int(old["size"])
        if size > self.settings.sources.max_file_bytes:
            return False
        try:
            with open(sf.abspath, "rb") as fh:
                digest = hashlib.sha256(fh.read(size)).digest()
            if self._appended.get(sf.path) == (size, old["hash"], digest):
                return True
            loaded = src.load(sf, self.settings.sources, max_bytes=size)
        except OSError:
            return False
        if loaded.document is None or document_hash(loaded.document) != old["hash"]:
            return False
        self._appended[sf.path] = (size, old["hash"], digest)
        return True

    # -- documents -----------------------------------------------------------------------------------------------
    def index_documents(
        self, documents: Iterable[Document], prune: bool = True, progress: Progress | None = None
    ) -> SyncReport:
        """Index in-memory documents (evaluation corpora) through the same pipeline as files."""
        full = self.prepare_full_reindex()
        embedder = self.embedder.get()
        report = sync_documents(self.store, self.settings, embedder, documents, prune, progress,
                                shared=self._shared_for(embedder))
        report.full_reindex = full
        self._bump()
        return report
