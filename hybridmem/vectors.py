"""Exact vector search over an in-memory float32 matrix: the hot copy of the vectors sqlite-vec persists.

A matrix-vector product over 100k x 384 float32 is about the memory-bandwidth bound (DESIGN.md: 4.3 ms, against 42 ms
for sqlite-vec's KNN), so long-lived processes serve queries from here. Results equal sqlite-vec's exact KNN.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class VectorMatrix:
    """Chunk ids, their unit vectors (rows), and the source/path of each row for scoping."""

    ids: np.ndarray
    matrix: np.ndarray
    sources: list[str]
    paths: list[str]
    _source_arr: np.ndarray | None = field(default=None, repr=False)
    _path_arr: np.ndarray | None = field(default=None, repr=False)
    _row_of: dict[int, int] | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def _mask(self, source: str | None, path_prefix: str | None) -> np.ndarray | None:
        if not source and not path_prefix:
            return None
        if self._source_arr is None:
            self._source_arr = np.asarray(self.sources, dtype=object)
            self._path_arr = np.asarray(self.paths, dtype=object)
        mask = np.ones(len(self), dtype=bool)
        if source:
            mask &= self._source_arr == source
        if path_prefix:
            mask &= np.fromiter((p.startswith(path_prefix) for p in self.paths), dtype=bool, count=len(self))
        return mask

    def search(
        self, query: np.ndarray, k: int, source: str | None = None, path_prefix: str | None = None
    ) -> list[tuple[int, float]]:
        """Top ``k`` ``(chunk_id, cosine)`` best first; ties broken by chunk id."""
        if len(self) == 0 or k <= 0:
            return []
        scores = self.matrix @ np.asarray(query, dtype=np.float32)
        mask = self._mask(source, path_prefix)
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)
        k = min(k, int(mask.sum()) if mask is not None else len(self))
        if k <= 0:
            return []
        idx = np.argpartition(-scores, k - 1)[:k] if k < len(self) else np.arange(len(self))
        order = idx[np.lexsort((self.ids[idx], -scores[idx]))]
        return [(int(self.ids[i]), float(scores[i])) for i in order]

    def vector(self, chunk_id: int) -> np.ndarray | None:
        if self._row_of is None:
            self._row_of = {int(c): i for i, c in enumerate(self.ids)}
        row = self._row_of.get(int(chunk_id))
        return None if row is None else self.matrix[row]
