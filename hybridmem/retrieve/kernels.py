"""The vector leg's compiled kernels: int8 rows scored against a float32 query, and float32 rows gathered by index.

Both are compiled with numba on first use (about 1 s, cached on disk after that), release the GIL, and run in pure
loops over rows, so a scan can be split over a few threads (one per core, at most 8; the calling thread takes the first
share) without a second thread pool that spins: torch's OpenMP threads and OpenBLAS's keep spinning after a product
and starve whatever runs next on this 2-core machine (see :func:`hybridmem.retrieve.vectors.matvec`). ``reassoc`` and
``contract`` let LLVM vectorize each row's sum and fuse multiply-adds; a row's result does not depend on which thread
computes it.

Measured here, 100k rows on 2 cores: int8 x 384 dims 2.2 ms (17 GB/s, about the memory bandwidth; torch's fbgemm
``linear_dynamic``, used before, 2.3-2.5 ms), int8 x 128 dims 0.85 ms (fbgemm 1.1-1.9 ms).
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import Callable, NamedTuple

import numpy as np

SPLIT_ROWS = 16_384  # rows a thread gets at least; smaller jobs run on the calling thread alone

__all__ = ["Kernels", "gathered_scores", "int8_scores", "load_kernels", "loaded_kernels"]


class Kernels(NamedTuple):
    """``int8(w, scale, q, out, start, stop)``: ``out[i] = scale[i] * sum_k float32(w[i, k]) * q[k]``;
    ``gathered(m, rows, q, out, start, stop)``: ``out[j] = sum_k m[rows[j], k] * q[k]``; each for ``start:stop``."""

    int8: Callable[..., None]
    gathered: Callable[..., None]


@lru_cache(maxsize=1)
def load_kernels() -> Kernels | None:
    """The compiled kernels, or None when numba is not installed."""
    try:
        from numba import njit
    except ImportError:
        return None

    @njit(nogil=True, cache=True, fastmath={"reassoc", "contract"})
    def int8(w, scale, q, out, start, stop):  # noqa: ANN001, ANN202
        dims = w.shape[1]
        for i in range(start, stop):
            acc = np.float32(0.0)
            for k in range(dims):
                acc += np.float32(w[i, k]) * q[k]
            out[i] = acc * scale[i]

    @njit(nogil=True, cache=True, fastmath={"reassoc", "contract"})
    def gathered(m, rows, q, out, start, stop):  # noqa: ANN001, ANN202
        dims = m.shape[1]
        for j in range(start, stop):
            r = rows[j]
            acc = np.float32(0.0)
            for k in range(dims):
                acc += m[r, k] * q[k]
            out[j] = acc

    one = np.ones(1, np.float32)
    int8(np.zeros((1, 1), np.int8), one, one, np.empty(1, np.float32), 0, 1)  # compile now, not in a query
    gathered(np.zeros((1, 1), np.float32), np.zeros(1, np.int64), one, np.empty(1, np.float32), 0, 1)
    return Kernels(int8, gathered)


def loaded_kernels() -> Kernels | None:
    """The kernels if :func:`load_kernels` has already run (in this process), else None: never imports numba, so a
    query on a path that can do without them (a small matrix's float32 scan) never waits for it."""
    return load_kernels() if load_kernels.cache_info().currsize else None


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _threads() -> int:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(8, cores))


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=max(1, _threads() - 1), thread_name_prefix="hybridmem-scan")
    return _POOL


def _run(kernel: Callable[..., None], n: int, *args: object) -> None:
    """``kernel(*args, start, stop)`` over ``0:n``, in shares of at least :data:`SPLIT_ROWS` rows a thread."""
    parts = max(1, min(_threads(), n // SPLIT_ROWS))
    if parts == 1:
        kernel(*args, 0, n)
        return
    bounds = [n * p // parts for p in range(parts + 1)]
    futures = [_pool().submit(kernel, *args, bounds[p], bounds[p + 1]) for p in range(1, parts)]
    kernel(*args, bounds[0], bounds[1])
    for f in futures:
        f.result()


def _required() -> Kernels:
    kernels = load_kernels()
    if kernels is None:
        raise RuntimeError("the vector kernels need numba: pip install numba")
    return kernels


def int8_scores(w: np.ndarray, scale: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``scale * (w @ q)`` for int8 rows ``w`` (C order) and a float32 query.

    Raises:
        RuntimeError: numba is not installed (check :func:`load_kernels` first).
    """
    q = _query(q, w)
    out = np.empty(w.shape[0], dtype=np.float32)
    _run(_required().int8, w.shape[0], w, scale, q, out)
    return out


def gathered_scores(matrix: np.ndarray, rows: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``matrix[rows] @ q`` for float32 ``matrix`` (C order) without copying the rows out.

    Raises:
        RuntimeError: numba is not installed (check :func:`load_kernels` first).
    """
    q = _query(q, matrix)
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    if rows.shape[0] and (int(rows.min()) < 0 or int(rows.max()) >= matrix.shape[0]):
        raise IndexError(f"row indices must lie in [0, {matrix.shape[0]})")
    out = np.empty(rows.shape[0], dtype=np.float32)
    _run(_required().gathered, rows.shape[0], matrix, rows, q, out)
    return out


def _query(q: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``q`` as contiguous float32, checked against the rows' width (the kernels do not bounds-check)."""
    q = np.ascontiguousarray(q, dtype=np.float32)
    if rows.ndim != 2 or q.shape != (rows.shape[1],):
        raise ValueError(f"query of shape {q.shape} against rows of shape {rows.shape}")
    return q
