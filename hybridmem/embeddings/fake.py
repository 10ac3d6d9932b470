"""A deterministic, dependency-free embedder for tests: hashed bag of tokens. Counts every text it embeds."""

from __future__ import annotations

import hashlib
from typing import Sequence

import numpy as np

from hybridmem.embeddings.base import Embedder
from hybridmem.tokenization import tokenize


class HashEmbedder(Embedder):
    """Feature-hashing embedder: texts sharing tokens get similar vectors. ``calls`` and ``embedded`` count work."""

    name = "hash"
    shared_cache = False  # free vectors; tests count embed calls per index

    def __init__(self, dims: int = 64, model: str = "hash-v1") -> None:
        self.model = model
        self._dims = dims
        self.calls = 0
        self.embedded = 0

    @property
    def dims(self) -> int:
        return self._dims

    def embed_batch(self, texts: Sequence[str], is_query: bool = False) -> np.ndarray:
        self.calls += 1
        self.embedded += len(texts)
        out = np.zeros((len(texts), self._dims), dtype=np.float32)
        for row, text in enumerate(texts):
            for tok in tokenize(text):
                h = int.from_bytes(hashlib.blake2b(tok.encode(), digest_size=8).digest(), "little")
                out[row, h % self._dims] += 1.0 if (h >> 32) & 1 else -1.0
        return out
