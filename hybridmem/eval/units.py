"""Map ranked chunk hits to judged units (documents, or evidence spans of files and lines).

- documents: a hit's ``path`` is its document id; first occurrence wins.
- evidence: a hit is relevant to an evidence span when its line span contains the whole span (same path), or to a
  whole-file unit (``Evidence.whole``) when it is in that file. A hit that
  contains no not-yet-seen judged unit still takes a rank, as a placeholder ``chunk:<id>`` (never relevant), so
  rank-based metrics count it as a miss.

Also the positions that evidence recall needs: the 1-based hit position at which each judged unit is first found,
and how many hits fit in a character budget.

Example:
    >>> ev = {"a.md#L3-L3": Evidence("a.md", 3, 3)}
    >>> judged_units(["a.md", "b.md"], [1, 2], [1, 5], [9, 9], {"a.md#L3-L3": 1}, ev, "evidence")
    (['a.md#L3-L3', 'chunk:2'], {'a.md#L3-L3': 1})
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

from hybridmem.eval.datasets.base import Evidence

if TYPE_CHECKING:  # pragma: no cover
    from hybridmem.records import ChunkInfo


def holds_judged(chunk: ChunkInfo, judged: Mapping[str, int], evidence: Mapping[str, Evidence], kind: str) -> bool:
    """Whether one candidate chunk holds a judged unit of ``judged`` (:func:`judged_units` of that chunk alone): the
    label the fits and the hit-score report give a candidate.

    Example:
        >>> from hybridmem.records import ChunkInfo
        >>> ev = {"a.md#L3-L3": Evidence("a.md", 3, 3)}
        >>> holds_judged(ChunkInfo(1, "a.md", "memory", 1, 9, "", 0.0, True, frozenset()), {"a.md#L3-L3": 1}, ev,
        ...              "evidence")
        True
    """
    return bool(judged_units([chunk.path], [chunk.id], [chunk.start_line], [chunk.end_line], judged, evidence,
                             kind)[1])


def judged_units(
    paths: Sequence[str],
    chunk_ids: Sequence[int],
    starts: Sequence[int],
    ends: Sequence[int],
    judged: Mapping[str, int],
    evidence: Mapping[str, Evidence],
    kind: str,
) -> tuple[list[str], dict[str, int]]:
    """Ranked unit ids for one query's hits, and ``{judged unit: first hit position (1-based)}``."""
    ranked: list[str] = []
    first: dict[str, int] = {}
    if kind == "documents":
        seen: set[str] = set()
        for pos, path in enumerate(paths, 1):
            if path not in seen:
                seen.add(path)
                ranked.append(path)
                if path in judged:
                    first[path] = pos
        return ranked, first
    spans = [(u, evidence[u]) for u in judged]
    for pos, (path, cid, s, e) in enumerate(zip(paths, chunk_ids, starts, ends), 1):
        new = [u for u, ev in spans if u not in first and ev.path == path
               and (ev.whole or s <= ev.start and ev.end <= e)]
        for u in new:
            first[u] = pos
        ranked.extend(new if new else [f"chunk:{cid}"])
    return ranked, first


def hits_within_budget(lengths: Sequence[int], budget: int) -> int:
    """How many leading hits fit when their chunk texts are injected whole within ``budget`` characters.

    Example:
        >>> hits_within_budget([1500, 1500, 1500], 4000)
        2
    """
    total = 0
    for i, n in enumerate(lengths):
        total += n
        if total > budget:
            return i
    return len(lengths)
