"""int8 rows and the kernel that scores them: the byte-saving copy behind exact vector search and the quantized
pre-filter (:mod:`hybridmem.retrieve.vectors`).

Each row is stored as int8 with its own scale (``x ~ scale * w``). A query is **not** quantized: the kernel computes
``scale_i * sum_k w_ik * q_k`` with the float32 query, so the only errors are the rows' own rounding, known per row,
and float32 arithmetic, bounded a priori. That makes the per-row error bound about four times tighter than with an
integer kernel that quantizes the query too (torch's fbgemm ``linear_dynamic``, used before: its 7-bit query step
dominated the bound), and the scan rescores a few dozen rows instead of hundreds.

The kernel (:mod:`hybridmem.retrieve.kernels`) is compiled with numba and split over the cores. Without numba,
:meth:`Int8Rows.build` returns None and callers scan float32.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hybridmem.retrieve.kernels import int8_scores, load_kernels

# Absolute slack added to every int8 error bound: covers float32 rounding in the bound's own terms (err, norm) and in
# the float32 rescoring (both ~1e-7 for unit vectors), a hundred times over.
INT8_EPSILON = 1e-5
_UNIT_ROUNDOFF = 2.0 ** -24  # float32

__all__ = ["INT8_EPSILON", "Int8Rows", "quantize_rows"]


def quantize_rows(matrix: np.ndarray, block: int = 8192) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each row as int8 with its own scale (``x ~ scale * w``, ``scale = max|x| / 127``): ``(w, scale, err, norm)``
    with ``err = |x - scale * w|`` and ``norm = |scale * w|`` per row. Float32 rounding in these norms is ~1e-7, far
    inside :data:`INT8_EPSILON`."""
    n, dims = matrix.shape
    w = np.empty((n, dims), dtype=np.int8)
    scale = np.empty(n, dtype=np.float32)
    err = np.empty(n, dtype=np.float32)
    norm = np.empty(n, dtype=np.float32)
    for i in range(0, n, block):
        x = np.asarray(matrix[i : i + block], dtype=np.float32)
        absmax = np.abs(x).max(axis=1)
        sc = np.where(absmax > 0, absmax / np.float32(127.0), np.float32(1.0)).astype(np.float32)
        q = np.rint(x / sc[:, None])
        w[i : i + block] = q
        scale[i : i + block] = sc
        deq = q * sc[:, None]
        err[i : i + block] = np.sqrt(np.einsum("ij,ij->i", x - deq, x - deq))
        norm[i : i + block] = np.sqrt(np.einsum("ij,ij->i", deq, deq))
    return w, scale, err, norm


@dataclass
class Int8Rows:
    """Each row quantized to int8 with its own scale, with the norms that bound the error of a score computed from it.

    For a query ``q``, the kernel's score of row ``x' = scale * w`` differs from the exact ``q . x`` by at most
    ``|q| * |x - x'|`` (the row's rounding, Cauchy-Schwarz) plus the float32 error of a dot product of ``d`` terms
    summed in any order and scaled once, ``gamma(d + 1) * |x'| * |q|`` with ``gamma(n) = n u / (1 - n u)`` and
    ``u = 2**-24`` (Higham, *Accuracy and Stability of Numerical Algorithms*, 2002, section 3.1), plus
    :data:`INT8_EPSILON`. ``err`` holds ``|x - x'|`` and ``norm`` holds ``|x'|`` per row.
    """

    w: np.ndarray
    scale: np.ndarray
    err: np.ndarray
    norm: np.ndarray
    dims: int

    @classmethod
    def build(cls, matrix: np.ndarray, block: int = 8192) -> "Int8Rows | None":
        """Quantize ``matrix`` (about 0.5 s per 100k x 384 rows); None when the kernel is unavailable (no numba)."""
        if load_kernels() is None or matrix.ndim != 2 or matrix.shape[0] == 0:
            return None
        w, scale, err, norm = quantize_rows(matrix, block)
        return cls(w=w, scale=scale, err=err, norm=norm, dims=int(matrix.shape[1]))

    @property
    def nbytes(self) -> int:
        """Bytes a scan reads: the int8 rows (and one scale a row)."""
        return int(self.w.nbytes + self.scale.nbytes)

    def approx(self, query: np.ndarray) -> np.ndarray:
        """Approximate scores of every row: one pass over the int8 rows."""
        return int8_scores(self.w, self.scale, query)

    def scores(self, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Approximate scores of every row and each one's error bound: ``|exact - approx| <= bound``."""
        q = np.asarray(query, dtype=np.float32)
        approx = self.approx(q)
        q_norm = float(np.linalg.norm(q.astype(np.float64)))
        n = self.dims + 1
        gamma = n * _UNIT_ROUNDOFF / (1.0 - n * _UNIT_ROUNDOFF)
        bound = self.err * q_norm
        bound += (gamma * q_norm) * self.norm
        bound += INT8_EPSILON
        return approx, bound

    def candidates(
        self, query: np.ndarray, k: int, mask: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every row (in ``mask``) that can be among the exact top ``k``, in row order, with its approximate score
        and the upper bound of its exact score: ``(rows, approx, hi)``.

        With ``lo``/``hi`` the bounds of each row's exact score and ``L`` the k-th largest ``lo``, at least k rows
        score ``>= L``, so the k-th exact score is ``>= L`` and a row with ``hi < L`` cannot be in the top k.
        """
        approx, bound = self.scores(query)
        lo = approx - bound
        hi = approx + bound
        if mask is not None:
            lo[~mask] = -np.inf
            hi[~mask] = -np.inf
            k = min(k, int(mask.sum()))
            if k == 0:
                empty = np.empty(0, dtype=np.int64)
                return empty, empty.astype(np.float32), empty.astype(np.float32)
        n = lo.shape[0]
        k = min(k, n)
        threshold = np.partition(lo, n - k)[n - k]
        rows = np.flatnonzero(hi >= threshold)
        return rows, approx[rows], hi[rows]
