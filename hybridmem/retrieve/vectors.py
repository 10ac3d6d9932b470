"""Exact vector search over an in-memory float32 matrix: the hot copy of the vectors sqlite-vec persists.

A matrix-vector product over 100k x 384 float32 reads 153.6 MB a query, so it runs at about the machine's memory
bandwidth, many times faster than sqlite-vec's KNN (`hybridmem bench --only vectors` measures both,
docs/benchmarks.md); long-lived processes serve queries from here.
Results equal sqlite-vec's exact KNN (cosine similarity of unit vectors, ties broken by chunk id).

Large matrices (``StoreConfig.int8_min_rows`` rows and up) are scanned **exactly through an int8 copy**
(:class:`~hybridmem.retrieve.int8scan.Int8Rows`): each row is quantized to int8 with its own scale, and the row's quantization
error norm is kept. One pass over the int8 rows (a quarter of the bytes, scored against the float32 query) gives every
row's approximate score with a proven error bound, every row whose upper bound reaches the k-th best lower bound is
rescored in float32, and the top k of those are returned. The bound makes the result the exact top k, not an
approximation (``tests/test_vectors.py`` checks both the bound and the equality).

:meth:`VectorMatrix.search_quantized` is the faster, approximate path: an **int8 pre-filter in the principal
subspace** (:class:`PcaPrefilter`: rows projected on the top 128 principal components of the index's own vectors,
128 bytes a row, 12x less to read than float32) ranks every row, and the best ``rescore`` rows are **rescored
exactly** in float32. Whatever it returns carries the exact cosine and exact order; it equals the exact top k
whenever those rows survive the pre-filter (recall@10 against exact is measured by ``hybridmem bench``). It replaced
a binary (sign-bit, ITQ-rotated) pre-filter that measured slower at lower recall here (docs/benchmarks.md).
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, field

import numpy as np

from hybridmem.background import SecondCallBuild
from hybridmem.config import DEFAULT_STORE
from hybridmem.retrieve.int8scan import Int8Rows
from hybridmem.retrieve.kernels import gathered_scores, loaded_kernels

__all__ = ["Int8Rows", "PcaPrefilter", "ScopedRows", "VectorMatrix", "matvec", "rows_matvec", "top_rows"]


@dataclass
class PcaPrefilter:
    """The quantized path's pre-filter: every row projected on the top ``dims`` principal components of the index's
    own vectors and stored as int8 (:class:`Int8Rows`), so a query scans ``dims`` bytes a row (128 of float32's
    1,536 at 384 dims).

    ``q . x = (q - m) . (x - m) + m . x + (q . m - m . m)``; the last term is the same for every row, ``m . x`` is
    kept per row, and ``(q - m) . (x - m)`` is approximated in the principal subspace, where sentence embeddings keep
    most of their variance (82% of SciFact's MiniLM vectors in 128 of 384 dims). The approximate scores only choose
    which rows to rescore; the rescoring is exact. The basis is fitted on a seeded sample of the rows (no queries, no
    labels). Without the int8 kernel (numba) the projection is scanned in float32.
    """

    mean: np.ndarray
    basis: np.ndarray  # (input dims, dims) float32, orthonormal columns
    offset: np.ndarray  # m . x per row
    int8: Int8Rows | None
    projected: np.ndarray | None  # float32 rows, only when int8 is None
    _basis_rows: np.ndarray = field(init=False, repr=False)  # the basis as rows (dims, input dims), C order
    _all_rows: np.ndarray = field(init=False, repr=False)

    SAMPLE = 10_000

    def __post_init__(self) -> None:
        self._basis_rows = np.ascontiguousarray(self.basis.T)
        self._all_rows = np.arange(self._basis_rows.shape[0])

    @classmethod
    def build(cls, matrix: np.ndarray, dims: int, block: int = 16384) -> "PcaPrefilter":
        """About 0.3 s per 100k x 384 rows (the eigenbasis of a 10k-row sample, one projection, int8 quantization)."""
        n, d = matrix.shape
        dims = max(1, min(dims, d))
        mean = matrix.mean(axis=0, dtype=np.float64).astype(np.float32) if n else np.zeros(d, np.float32)
        sample = np.random.default_rng(0).choice(n, cls.SAMPLE, replace=False) if n > cls.SAMPLE else slice(None)
        x = np.asarray(matrix[sample], dtype=np.float64) - mean
        _, vecs = np.linalg.eigh(x.T @ x)
        basis = np.ascontiguousarray(vecs[:, ::-1][:, :dims], dtype=np.float32)
        projected = np.empty((n, dims), dtype=np.float32)
        for i in range(0, n, block):
            projected[i : i + block] = (matrix[i : i + block] - mean) @ basis
        offset = matvec(matrix, mean) if n else np.zeros(0, np.float32)
        int8 = Int8Rows.build(projected) if n else None
        return cls(mean=mean, basis=basis, offset=np.asarray(offset, dtype=np.float32), int8=int8,
                   projected=None if int8 is not None else projected)

    @property
    def nbytes(self) -> int:
        """Bytes a scan reads."""
        rows = self.offset.shape[0]
        return int(rows * self.basis.shape[1] * (1 if self.int8 is not None else 4) + self.offset.nbytes)

    def scores(self, query: np.ndarray) -> np.ndarray:
        """Approximate ``q . x`` of every row, up to a constant: fit for choosing rows, not for reporting."""
        # the projection through the same gather kernel as the rescoring: no thread pool woken before the int8 scan
        qp = rows_matvec(self._basis_rows, self._all_rows, np.asarray(query, dtype=np.float32) - self.mean)
        approx = self.int8.approx(qp) if self.int8 is not None else matvec(self.projected, qp)
        approx += self.offset
        return approx


def top_rows(scores: np.ndarray, want: int) -> np.ndarray:
    """Indices of the ``want`` largest ``scores`` (any of a tie at the cut), in row order.

    A threshold guessed from a strided sample keeps a little more than ``want`` rows in one pass, and a partition of
    those few cuts to exactly ``want``: 0.45 ms -> ~0.1 ms against ``argpartition`` over 100k rows here. When the guess
    keeps too few (a skewed sample) the full partition answers.
    """
    n = scores.shape[0]
    if want >= n:
        return np.arange(n)
    step = max(1, n // 4096)
    sample = scores[::step]
    take = min(sample.shape[0], int(want / step * 1.25) + 4)
    guess = np.partition(sample, sample.shape[0] - take)[sample.shape[0] - take]
    rows = np.flatnonzero(scores >= guess)
    if rows.shape[0] < want:
        return np.sort(np.argpartition(scores, n - want)[n - want :])
    if rows.shape[0] > want:
        rows = np.sort(rows[np.argpartition(scores[rows], rows.shape[0] - want)[rows.shape[0] - want :]])
    return rows


def matvec(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """``matrix @ vector``, through torch's thread pool when torch is already loaded (the local embedder loads it).

    Measured here: numpy's OpenBLAS threads keep spinning after a product and starve torch's threads, so the next
    query embedding took 37 ms instead of 18 ms (embed + 100k scan: 54 ms with numpy, 28 ms with ``torch.mv``, which
    shares the embedder's OpenMP pool). With another process busy on the same 2 cores it was far worse: a 500-row
    rescoring product through OpenBLAS made the next query embedding take 500 ms instead of 19. So every product of
    the vector leg goes through here, whatever its size. Without torch in the process, numpy does it.
    """
    torch = sys.modules.get("torch")
    if torch is not None and matrix.dtype == np.float32 and matrix.ndim == 2 and matrix.shape[0]:
        m = matrix
        # torch wraps only writeable memory; a transposed view (Fortran order) it multiplies in place
        if not ((m.flags.c_contiguous or m.flags.f_contiguous) and m.flags.writeable):
            if m.nbytes > 64 << 20:  # never copy a big matrix per query
                return matrix @ vector
            m = np.array(m, order="C")
        with torch.inference_mode():
            return torch.mv(torch.from_numpy(m), torch.from_numpy(np.array(vector, dtype=np.float32))).numpy()
    return matrix @ vector


def rows_matvec(matrix: np.ndarray, rows: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """``matrix[rows] @ vector`` (the exact float32 rescoring of shortlisted rows) through the compiled gather kernel
    (:func:`hybridmem.retrieve.kernels.gathered_scores`) once it is loaded: no copy of the rows, and no thread pool left
    spinning after it (torch's ``index_select`` + ``mv`` here left OpenMP threads spinning into the next query's int8
    scan: quantized search 2.0 -> 2.7 ms). Before that, or without numba, one product over the gathered rows."""
    if rows.shape[0] and matrix.dtype == np.float32 and matrix.ndim == 2 and matrix.flags.c_contiguous and \
            loaded_kernels() is not None:
        return gathered_scores(matrix, rows, vector)
    return matvec(matrix[rows], vector)


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
    _prefilter: PcaPrefilter | None = field(default=None, repr=False)
    int8_min_rows: int = DEFAULT_STORE.int8_min_rows
    rescore_min: int = DEFAULT_STORE.rescore_min
    rescore_factor: int = DEFAULT_STORE.rescore_factor
    prefilter_dims: int = DEFAULT_STORE.prefilter_dims
    _int8: Int8Rows | None | bool = field(default=None, repr=False)  # False: tried, unavailable
    _int8_build: SecondCallBuild = field(init=False, repr=False)
    last_rescored: int = field(default=0, repr=False)  # rows the last int8 or quantized search rescored
    _int8_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self.matrix = np.ascontiguousarray(self.matrix, dtype=np.float32)
        self._int8_build = SecondCallBuild("int8", lambda: self.int8)

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes an exact scan reads."""
        return int(self.matrix.nbytes)

    @property
    def prefilter(self) -> PcaPrefilter:
        """The quantized path's pre-filter, built on first use."""
        if self._prefilter is None:
            self._prefilter = PcaPrefilter.build(self.matrix, self.prefilter_dims)
        return self._prefilter

    @property
    def int8(self) -> Int8Rows | None:
        """The int8 copy that exact search scans, built now if it is not yet (``int8_min_rows`` rows and up)."""
        if self._int8 is None:
            with self._int8_lock:  # the background build and a caller must not both build it
                if self._int8 is None:
                    big = 0 < self.int8_min_rows <= len(self)
                    self._int8 = (Int8Rows.build(self.matrix) if big else None) or False
        return self._int8 or None

    @property
    def int8_built(self) -> bool:
        """Whether exact search is scanning the int8 copy (without building it)."""
        return bool(self._int8)

    def _int8_for_search(self) -> Int8Rows | None:
        """The int8 copy once it is ready. Searches before that scan float32 (same results): the first search of a
        matrix does not build it, so one-shot CLI searches never pay for it; the second starts a background build
        (about 1 s per 100k rows) and later searches use the copy once it is there."""
        if self._int8 is not None or not 0 < self.int8_min_rows <= len(self):
            return self._int8 or None
        self._int8_build.request()
        return None

    def _top(self, rows: np.ndarray, scores: np.ndarray, k: int) -> list[tuple[int, float]]:
        """Top ``k`` of ``rows`` (row indices) by ``scores`` (parallel), best first, ties by chunk id.

        Every row tied with the k-th score is kept before the id order cuts to k: a partition alone keeps an arbitrary
        subset of a tie at the boundary (and so a result that depends on row order, e.g. a zero query's)."""
        if k < rows.shape[0]:
            kth = np.partition(scores, rows.shape[0] - k)[rows.shape[0] - k]
            keep = np.flatnonzero(scores >= kth)
            rows, scores = rows[keep], scores[keep]
        ids = self.ids[rows]
        order = np.lexsort((ids, -scores))[:k]
        return [(int(ids[i]), float(scores[i])) for i in order]

    def search(
        self, query: np.ndarray, k: int, source: str | None = None, path_prefix: str | None = None
    ) -> list[tuple[int, float]]:
        """Exact top ``k`` ``(chunk_id, cosine)`` best first; ties broken by chunk id."""
        if len(self) == 0 or k <= 0:
            return []
        q = np.asarray(query, dtype=np.float32)
        mask = self._mask(source, path_prefix)
        int8 = self._int8_for_search()
        if int8 is not None and q.shape == (int8.dims,) and np.isfinite(q).all():
            rows, approx, hi = int8.candidates(q, k, mask)
            if rows.shape[0] <= len(self) // 8:  # else (a zero query: every bound ties) the full scan is cheaper
                return self._rescore_bounded(q, k, rows, approx, hi) if rows.shape[0] else []
        rows = np.flatnonzero(mask) if mask is not None else np.arange(len(self))
        if not rows.shape[0]:
            return []
        return self._top(rows, self._exact_scores(q, rows, mask is None), min(k, rows.shape[0]))

    def _exact_scores(self, q: np.ndarray, rows: np.ndarray, every_row: bool = False) -> np.ndarray:
        """Float32 scores of ``rows``: by the gather kernel that rescores the int8 scan's shortlist once the kernels
        are loaded (the int8 copy's background build loads them), so from then on a row's score is the same bits
        whichever path computed it; before that (a one-shot search, a small matrix), one product over the matrix
        (``every_row``) or over the gathered rows."""
        if every_row and loaded_kernels() is None:
            return matvec(self.matrix, q)
        return rows_matvec(self.matrix, rows, q)

    def _rescore_bounded(
        self, q: np.ndarray, k: int, rows: np.ndarray, approx: np.ndarray, hi: np.ndarray
    ) -> list[tuple[int, float]]:
        """The exact top ``k`` of the int8 scan's candidate ``rows``, rescoring as few of them in float32 as the
        bounds allow: first the ``2k`` best by approximate score, whose k-th exact score ``S`` is a lower bound on the
        true k-th score; then only the rows whose upper bound ``hi`` reaches ``S`` (a row below it cannot make the top
        k, ties included). At 100k random rows this rescores ~100 rows instead of ~1,100."""
        k = min(k, rows.shape[0])
        first_n = 2 * k
        if rows.shape[0] <= 2 * first_n:
            self.last_rescored = int(rows.shape[0])
            return self._top(rows, self._exact_scores(q, rows), k)
        first = np.argpartition(approx, rows.shape[0] - first_n)[rows.shape[0] - first_n :]
        first_scores = self._exact_scores(q, rows[first])
        kth = np.partition(first_scores, first_n - k)[first_n - k]
        more = hi >= kth
        more[first] = False
        rest = np.flatnonzero(more)
        picked = np.concatenate([rows[first], rows[rest]])
        self.last_rescored = int(picked.shape[0])
        scores = np.concatenate([first_scores, self._exact_scores(q, rows[rest])]) if rest.shape[0] else first_scores
        return self._top(picked, scores, k)

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

    def rescore_rows(self, k: int) -> int:
        """Rows :meth:`search_quantized` rescores by default for a top ``k``."""
        return max(self.rescore_min, self.rescore_factor * k)

    def search_quantized(
        self,
        query: np.ndarray,
        k: int,
        source: str | None = None,
        path_prefix: str | None = None,
        rescore: int | None = None,
    ) -> list[tuple[int, float]]:
        """int8 pre-filter in the principal subspace (:class:`PcaPrefilter`), then exact rescoring of the rows it
        ranks highest: ``(chunk_id, exact cosine)`` best first.

        ``rescore`` rows (default ``max(rescore_min, rescore_factor * k)``, from ``StoreConfig``) are rescored in
        float32. Whatever comes back carries the exact cosine and exact order; it equals the exact top k whenever
        those rows are among the rescored ones. With ``rescore >= len(self)`` this is the exact search.
        """
        if len(self) == 0 or k <= 0:
            return []
        q = np.asarray(query, dtype=np.float32)
        if not np.isfinite(q).all():
            return self.search(q, k, source, path_prefix)
        want = max(k, rescore if rescore is not None else self.rescore_rows(k))
        mask = self._mask(source, path_prefix)
        n = len(self)
        if mask is not None:
            want = min(want, int(mask.sum()))
            if want == 0:
                return []
        if want >= n:
            rows = np.flatnonzero(mask) if mask is not None else np.arange(n)
        else:
            approx = self.prefilter.scores(q)
            if mask is not None:
                approx[~mask] = -np.inf
            rows = top_rows(approx, want)
            if mask is not None:
                rows = rows[mask[rows]]
        self.last_rescored = int(rows.shape[0])
        return self._top(rows, self._exact_scores(q, rows), min(k, rows.shape[0]))

    def vector(self, chunk_id: int) -> np.ndarray | None:
        if self._row_of is None:
            self._row_of = {int(c): i for i, c in enumerate(self.ids)}
        row = self._row_of.get(int(chunk_id))
        return None if row is None else self.matrix[row]
