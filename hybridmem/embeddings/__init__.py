"""Embedding providers: an interface, the local default, and the factory that picks one from settings."""

from __future__ import annotations

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


def _make(name: str, cfg: EmbeddingConfig) -> Embedder:
    if name == "local":
        from hybridmem.embeddings.local import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder(cfg.model, cfg.batch_size, query_runtime=cfg.query_runtime)
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
