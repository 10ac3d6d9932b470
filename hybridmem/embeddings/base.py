"""The embedding provider interface and the vector hygiene every provider shares."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Callable, NamedTuple, Sequence

import numpy as np

from hybridmem.config import DEFAULT_BATCH_SIZE
from hybridmem.errors import ProviderError


def sanitize(vectors: np.ndarray) -> np.ndarray:
    """float32, NaN and inf set to 0, each row L2-normalized (all-zero rows stay zero).

    Example:
        >>> sanitize(np.array([[3.0, 4.0], [np.nan, 0.0]])).tolist()
        [[0.6000000238418579, 0.800000011920929], [0.0, 0.0]]
    """
    mat = np.nan_to_num(np.asarray(vectors, dtype=np.float32), nan=0.0, posinf=0.0, neginf=0.0)
    if mat.ndim == 1:
        mat = mat[None, :]
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (mat / norms).astype(np.float32, copy=False)


SHOUTED_WORDS = 3  # an all-capitals query of this many words or more is read in lower case (see encoder_query)


def encoder_query(query: str) -> str:
    """The text an embedding model reads for ``query``: the query itself, except that one written all in capitals
    (caps lock, a shouted question) is read in lower case. Encoders are cased and read capitals as rare pieces (on the
    demo set's 80 questions in capitals, e5's vector leg scored nDCG@10 0.784 against 0.815 as written and 0.818 in
    lower case). Fewer than :data:`SHOUTED_WORDS` words of two letters or more are kept as typed (``DBS``,
    ``AWS IAM``, ``ERR_CONN_RESET``: acronyms and identifiers), and so is a question in a script without case that
    names an acronym. The keyword leg folds case anyway.

    Example:
        >>> encoder_query("WHERE DID WE PUT THE BACKUP KEYS?"), encoder_query("AWS IAM"), encoder_query("Mẹ ĐI ĐÂU?")
        ('where did we put the backup keys?', 'AWS IAM', 'Mẹ ĐI ĐÂU?')
        >>> encoder_query("ΠΟΥ ΕΙΝΑΙ ΤΟ ΓΡΑΦΕΙΟ;"), encoder_query("叶绿体 DNA 的同义词是什么？")
        ('που ειναι το γραφειο;', '叶绿体 DNA 的同义词是什么？')
    """
    letters = [c for c in query if c.isalpha()]
    if not letters or not all(c.isupper() for c in letters):  # a letter of a script without case is not upper
        return query
    words = sum(1 for w in query.split() if sum(c.isalpha() for c in w) >= 2)
    return query.lower() if words >= SHOUTED_WORDS else query


class TokenStates(NamedTuple):
    """One text's content tokens as the encoder's last layer reads them (``token_states`` of an embedder that has
    one: :meth:`hybridmem.embeddings.e5fast.FastE5.token_states`)."""

    vectors: np.ndarray  # (tokens, dims), each row L2-normalized
    ids: np.ndarray  # (tokens,) int32: the vocabulary's piece ids
    weights: np.ndarray  # (tokens,) float32: each piece's surprisal, -log p in the tokenizer's unigram model (>= 0.5)


class Embedder(ABC):
    """An embedding provider. Subclasses implement :meth:`embed_batch`; the rest is shared.

    ``provider_key`` distinguishes settings that change vectors without changing the model name (a server URL, a
    task type); it never contains a secret. Vectors are cached by (name, model, provider_key, sha256 of the text).
    """

    name: str = "base"
    model: str = ""
    batch_size: int = DEFAULT_BATCH_SIZE
    # The Unicode scripts (first word of a letter's Unicode name: LATIN, THAI, CJK...) the model was trained on; None
    # when it claims them all or nobody said. The adaptive fusion shrinks the vector leg's weight for queries
    # written in other scripts (ranking/adaptive.py).
    scripts: frozenset[str] | None = None

    @property
    @abstractmethod
    def dims(self) -> int:
        """Vector dimensionality."""

    # Whether vectors go to the user-level cache shared by every workspace (store/shared_cache.py). The test
    # embedders say False: their vectors are free, and a test counting embed calls must not see another test's.
    shared_cache: bool = True

    @property
    def provider_key(self) -> str:
        return ""

    @property
    def weights_hash(self) -> str:
        """A hash of the model file the vectors come from (the shared cache's key), or "" when unknown."""
        return ""

    @abstractmethod
    def embed_batch(self, texts: Sequence[str], is_query: bool = False) -> np.ndarray:
        """Raw vectors for one batch of texts, shape ``(len(texts), dims)``."""

    def embed_documents(
        self, texts: Sequence[str], progress: Callable[[int, int], None] | None = None
    ) -> np.ndarray:
        """Sanitized vectors for ``texts`` (in their order), in batches of ``batch_size``; ``progress(done, total)``
        after each.

        Batches are cut from the texts sorted longest first, as ``SentenceTransformer.encode`` does: a batch is padded
        to its longest text, so mixing lengths in file order wasted 10-20% of the model's work on padding.
        """
        if not texts:
            return np.zeros((0, self.dims), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out: np.ndarray | None = None
        for i in range(0, len(texts), self.batch_size):
            rows = order[i : i + self.batch_size]
            vectors = sanitize(self.embed_batch([texts[r] for r in rows]))
            if out is None:  # sized by the first answer: a remote provider's dims are known only after a call
                out = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
            if vectors.shape != (len(rows), out.shape[1]):
                raise ProviderError(f"{self.name} returned vectors of shape {vectors.shape} for {len(rows)} texts; "
                                    f"expected ({len(rows)}, {out.shape[1]})")
            out[rows] = vectors
            if progress is not None:
                progress(min(i + self.batch_size, len(texts)), len(texts))
        assert out is not None
        return out

    def embed_query(self, text: str) -> np.ndarray:
        """The sanitized vector of one query."""
        return sanitize(self.embed_batch([text], is_query=True))[0]

    def describe(self) -> dict[str, object]:
        return {"provider": self.name, "model": self.model, "dims": self.dims, "provider_key": self.provider_key}
