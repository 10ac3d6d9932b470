"""Exact vector search over an in-memory float32 matrix: the hot copy of the vectors sqlite-vec persists.

A matrix-vector product over 100k x 384 float32 reads 153.6 MB a query, so it runs at about the machine's memory
bandwidth (DESIGN.md: 4.3 ms, against 42 ms for sqlite-vec's KNN); long-lived processes serve queries from here.
Results equal sqlite-vec's exact KNN (cosine similarity of unit vectors, ties broken by chunk id).

:meth:`VectorMatrix.search_quantized` is the faster path: a **binary pre-filter** (one sign bit per dimension of the
mean-centred vectors, 48 bytes a row at 384 dims, 32x less to read) ranks every row by Hamming distance to the query's
code, and the closest rows (at least ``rescore`` of them, plus every row tied with the last) are **rescored exactly**
in float32. Whatever it returns carries the exact cosine and exact order; it equals the exact top-k whenever the
exact top-k survive the pre-filter (recall@10 against exact is measured by ``hybridmem bench``). Binary codes of
centred vectors follow Charikar's sign random-projection estimate of the angle (STOC 2002); rescoring a short list of
binary candidates with full vectors is the usual production recipe (e.g. Yamada et al., "Efficient Passage
Retrieval with Hashing", ACL 2021).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import numpy as np

# Rows rescored exactly after the binary pre-filter: max(RESCORE_MIN, RESCORE_FACTOR * k). Measured on SciFact's 8,860
# real all-MiniLM-L6-v2 chunk vectors and 1,105 claims (eval/bench/): recall@10 against exact 0.9995 with these
# defaults, 0.996 rescoring 5% of the rows, 0.951 rescoring 1% (the share 1,000 rows is of 100k). At 100k x 384 the
# whole path reads 6.3 MB instead of 153.6 MB. Not yet a setting in config.py: the engine serves exact search.
RESCORE_MIN = 1000
RESCORE_FACTOR = 20


@dataclass
class BinaryCodes:
    """Sign bits of mean-centred rows, packed 64 to a word and stored word-major (``words[w]`` is contiguous)."""

    mean: np.ndarray
    words: np.ndarray  # (n_words, n_rows) uint64

    @classmethod
    def build(cls, matrix: np.ndarray, block: int = 16384) -> "BinaryCodes":
        n, dims = matrix.shape
        mean = matrix.mean(axis=0, dtype=np.float64).astype(np.float32) if n else np.zeros(dims, np.float32)
        n_words = (dims + 63) // 64
        packed = np.zeros((n, n_words * 8), dtype=np.uint8)
        for i in range(0, n, block):
            part = matrix[i : i + block] > mean
            packed[i : i + block, : (dims + 7) // 8] = np.packbits(part, axis=1)
        words = np.ascontiguousarray(packed.view(np.uint64).T) if n else np.zeros((n_words, 0), np.uint64)
        return cls(mean=mean, words=words)

    def encode(self, query: np.ndarray) -> np.ndarray:
        """The query's code, one uint64 per word."""
        packed = np.zeros(self.words.shape[0] * 8, dtype=np.uint8)
        bits = np.packbits(np.asarray(query, dtype=np.float32) > self.mean)
        packed[: bits.shape[0]] = bits
        return packed.view(np.uint64)

    def hamming(self, query: np.ndarray) -> np.ndarray:
        """Hamming distance (uint16) from the query's code to every row.

        One word at a time over contiguous rows with reused buffers: about 2x faster than one xor/popcount over the
        whole code matrix, whose temporaries fall out of cache.
        """
        code = self.encode(query)
        words = self.words
        n = words.shape[1]
        acc = np.bitwise_count(words[0] ^ code[0]).astype(np.uint16)
        buf = np.empty(n, dtype=np.uint64)
        cnt = np.empty(n, dtype=np.uint8)
        for w in range(1, words.shape[0]):
            np.bitwise_xor(words[w], code[w], out=buf)
            np.bitwise_count(buf, out=cnt)
            np.add(acc, cnt, out=acc)
        return acc


def shortlist(distances: np.ndarray, at_least: int) -> np.ndarray:
    """Indices of every row whose integer distance is at most the ``at_least``-th smallest (ties all kept), in row
    order. A histogram finds the threshold, so no sort or partition runs over all rows."""
    if at_least >= distances.shape[0]:
        return np.arange(distances.shape[0])
    counts = np.cumsum(np.bincount(distances))
    threshold = int(np.searchsorted(counts, at_least))
    return np.flatnonzero(distances <= threshold)


def matvec(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """``matrix @ vector``, through torch's thread pool when torch is already loaded (the local embedder loads it).

    Measured here: numpy's OpenBLAS threads keep spinning after the product and starve torch's threads, so the next
    query embedding took 37 ms instead of 18 ms (embed + 100k scan: 54 ms with numpy, 28 ms with ``torch.mv``, which
    shares the embedder's OpenMP pool). Without torch in the process, numpy does it.
    """
    torch = sys.modules.get("torch")
    if (torch is not None and matrix.dtype == np.float32 and matrix.flags.c_contiguous and matrix.flags.writeable
            and matrix.shape[0] > 4096):
        with torch.inference_mode():
            return torch.mv(torch.from_numpy(matrix), torch.from_numpy(np.array(vector, dtype=np.float32))).numpy()
    return matrix @ vector


class ScopedRows:
    """Row scoping shared by the in-memory vector matrix and keyword postings: rows carry ``sources`` and ``paths``."""

    sources: list[str]
    paths: list[str]
    _source_arr: np.ndarray | None

    def _mask(self, source: str | None, path_prefix: str | None) -> np.ndarray | None:
        """Rows in scope (a source and/or a path prefix), or None when unscoped."""
        if not source and not path_prefix:
            return None
        if self._source_arr is None:
            self._source_arr = np.asarray(self.sources, dtype=object)
        n = len(self.paths)
        mask = np.ones(n, dtype=bool)
        if source:
            mask &= self._source_arr == source
        if path_prefix:
            mask &= np.fromiter((p.startswith(path_prefix) for p in self.paths), dtype=bool, count=n)
        return mask


@dataclass
class VectorMatrix(ScopedRows):
    """Chunk ids, their unit vectors (rows), and the source/path of each row for scoping."""

    ids: np.ndarray
    matrix: np.ndarray
    sources: list[str]
    paths: list[str]
    _source_arr: np.ndarray | None = field(default=None, repr=False)
    _row_of: dict[int, int] | None = field(default=None, repr=False)
    _codes: BinaryCodes | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.matrix = np.ascontiguousarray(self.matrix, dtype=np.float32)

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes an exact scan reads."""
        return int(self.matrix.nbytes)

    @property
    def codes(self) -> BinaryCodes:
        """The binary codes, built on first use (about 0.1 s per 100k rows)."""
        if self._codes is None:
            self._codes = BinaryCodes.build(self.matrix)
        return self._codes


    def _top(self, rows: np.ndarray, scores: np.ndarray, k: int) -> list[tuple[int, float]]:
        """Top ``k`` of ``rows`` (row indices) by ``scores`` (parallel), best first, ties by chunk id."""
        if k < rows.shape[0]:
            part = np.argpartition(scores, rows.shape[0] - k)[rows.shape[0] - k :]
            rows, scores = rows[part], scores[part]
        ids = self.ids[rows]
        order = np.lexsort((ids, -scores))
        return [(int(ids[i]), float(scores[i])) for i in order]

    def search(
        self, query: np.ndarray, k: int, source: str | None = None, path_prefix: str | None = None
    ) -> list[tuple[int, float]]:
        """Exact top ``k`` ``(chunk_id, cosine)`` best first; ties broken by chunk id."""
        if len(self) == 0 or k <= 0:
            return []
        scores = matvec(self.matrix, np.asarray(query, dtype=np.float32))
        mask = self._mask(source, path_prefix)
        if mask is None:
            return self._top(np.arange(len(self)), scores, k)
        rows = np.flatnonzero(mask)
        return self._top(rows, scores[rows], min(k, rows.shape[0])) if rows.shape[0] else []

    def search_batch(self, queries: np.ndarray, k: int, block: int = 64) -> list[list[tuple[int, float]]]:
        """Exact top ``k`` for each row of ``queries`` (unscoped): one matrix-matrix product per ``block`` queries,
        so the matrix is read once per block instead of once per query. Same ids as :meth:`search`; scores may differ
        in the last float32 bit (BLAS sums matrix products in another order)."""
        q = np.atleast_2d(np.asarray(queries, dtype=np.float32))
        if len(self) == 0 or k <= 0:
            return [[] for _ in range(q.shape[0])]
        rows = np.arange(len(self))
        out: list[list[tuple[int, float]]] = []
        for i in range(0, q.shape[0], block):
            scores = q[i : i + block] @ self.matrix.T
            out.extend(self._top(rows, s, k) for s in scores)
        return out

    def search_quantized(
        self,
        query: np.ndarray,
        k: int,
        source: str | None = None,
        path_prefix: str | None = None,
        rescore: int | None = None,
    ) -> list[tuple[int, float]]:
        """Binary pre-filter, then exact rescoring of the shortlist: ``(chunk_id, exact cosine)`` best first.

        ``rescore`` rows at least (default ``max(RESCORE_MIN, RESCORE_FACTOR * k)``) are rescored; more when rows tie
        on Hamming distance with the last one. With ``rescore >= len(self)`` this is the exact search.
        """
        if len(self) == 0 or k <= 0:
            return []
        q = np.asarray(query, dtype=np.float32)
        want = rescore if rescore is not None else max(RESCORE_MIN, RESCORE_FACTOR * k)
        mask = self._mask(source, path_prefix)
        dist = self.codes.hamming(q)
        if mask is not None:
            dist[~mask] = np.iinfo(np.uint16).max
            want = min(want, int(mask.sum()))
            if want == 0:
                return []
        rows = shortlist(dist, max(want, k))
        if mask is not None:
            rows = rows[mask[rows]]
        scores = self.matrix[rows] @ q
        return self._top(rows, scores, min(k, rows.shape[0]))

    def vector(self, chunk_id: int) -> np.ndarray | None:
        if self._row_of is None:
            self._row_of = {int(c): i for i, c in enumerate(self.ids)}
        row = self._row_of.get(int(chunk_id))
        return None if row is None else self.matrix[row]
