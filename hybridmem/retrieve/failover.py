"""Embedding provider failover at query time: after repeated errors the next provider of the chain takes over.

After ``threshold`` consecutive provider-level errors (connection, timeout, load error; never an error one input
caused, see :func:`is_input_error`) of the active provider, :class:`EmbedderFailover` picks the next one of
:func:`~hybridmem.embeddings.provider_chain` (local, then the configured remote providers, then keyword-only). The
index's settings hash then changes, so the next sync is a full (atomic) reindex with the new provider.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hybridmem.config import FAILOVER_ERRORS, EmbeddingConfig
from hybridmem.embeddings import Embedder, make_provider, provider_chain
from hybridmem.errors import ProviderError

# Errors a bad *input* causes (a lone surrogate the tokenizer cannot encode, a text the model rejects): they say
# nothing about the provider's health, so they never count toward failover.
INPUT_ERRORS: tuple[type[BaseException], ...] = (UnicodeError, ValueError, TypeError, KeyError, IndexError)


def is_input_error(exc: BaseException) -> bool:
    """True when ``exc`` was caused by the text embedded, not by the provider (connection, timeout, load error)."""
    return isinstance(exc, INPUT_ERRORS) and not isinstance(exc, (ProviderError, OSError))


@dataclass
class EmbedderFailover:
    """Counts consecutive errors of the active embedding provider and picks the next one of the chain.

    ``record_error`` returns the replacement (an :class:`Embedder`, or None for keyword-only) once ``threshold``
    consecutive errors happened, else ``False`` (keep the current one).
    """

    config: EmbeddingConfig
    threshold: int = FAILOVER_ERRORS
    consecutive: int = 0
    switched: list[str] = field(default_factory=list)

    def record_success(self) -> None:
        self.consecutive = 0

    def chain_after(self, name: str) -> list[str]:
        """Providers to try after ``name``: the rest of :func:`~hybridmem.embeddings.provider_chain`."""
        chain = provider_chain(self.config)
        if name in chain:
            return chain[chain.index(name) + 1:]
        return [p for p in chain if p != name]

    def record_error(self, current: Embedder, exc: BaseException) -> Embedder | None | bool:
        if is_input_error(exc):
            return False  # one bad query must not switch the provider off for everyone
        self.consecutive += 1
        if self.consecutive < self.threshold:
            return False
        reason = f"{current.name}: switched off after {self.consecutive} consecutive errors ({type(exc).__name__}: {exc})"
        self.switched.append(reason)
        self.consecutive = 0
        for name in self.chain_after(current.name):
            try:
                return make_provider(name, self.config)
            except ProviderError as err:
                self.switched.append(f"{name}: {err}")
        return None
