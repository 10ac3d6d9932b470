"""A workspace's own labels: queries and file-and-line judgments, pooled candidates, and suggestions from the query log.

Labels live in ``<workspace>/.hybridmem-labels/`` (:data:`hybridmem.config.LABELS_DIRNAME`): beside the index folder,
so no reindex, rebuild or ``make clean`` deletes them, and in ``sources.ignore_dirs``, so they are never indexed. The
files are the demo set's format, which :func:`hybridmem.eval.datasets.load_workspace_dataset` reads:

* ``queries.jsonl``: ``{"id", "text", "category", "split", "source", "created"}`` (``source``: typed, log, import);
* ``judgments.jsonl``: ``{"query_id", "path", "start_line", "end_line", "grade"}`` (grade 0 = judged not relevant,
  1 or 2 = relevant; ``"whole_file": true`` marks a file-level judgment, as QMD fixtures and BEIR qrels give);
* ``meta.json``: ``{"name", "workspace": "..", "reference_time", ...}`` (the clock is the time of the last change);
* ``undo.jsonl``: the previous contents before each change (the last :data:`UNDO_DEPTH`), for :meth:`LabelStore.undo`;
* ``.lock``: every change reads, changes and writes the files holding an exclusive lock on it, so changes made at once
  (two imports, an import and a click in the workbench) all land.

Pools (TREC style): the candidates to judge for a query are the union of the top :data:`POOL_DEPTH` of several runs
(keyword, vector, the current config, RRF), so labels favour none of them.

Example:
    >>> store = LabelStore("ws")                                              # doctest: +SKIP
    >>> store.judge("retry backoff", "memory/ops.md", 4, 9, grade=1)          # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

from hybridmem.config import LABELS_DIRNAME, PRESETS, RankConfig
from hybridmem.errors import DatasetError

if TYPE_CHECKING:
    from hybridmem.index import MemoryIndex
    from hybridmem.records import Candidates

QUERIES, JUDGMENTS, META, UNDO, LOCK = "queries.jsonl", "judgments.jsonl", "meta.json", "undo.jsonl", ".lock"
POOL_DEPTH = 10
UNDO_DEPTH = 50
# Below this many labeled queries a paired test rarely finds a real difference significant (pages warn).
MIN_SIGNIFICANT_QUERIES = 20


def labels_dir(workspace: str | Path) -> Path:
    return Path(workspace) / LABELS_DIRNAME


def has_labels(workspace: str | Path) -> bool:
    """True when the workspace has at least one query with a relevant judgment."""
    d = labels_dir(workspace)
    return (d / QUERIES).is_file() and any(j.grade > 0 for j in LabelStore(workspace).judgments())


def labels_version(workspace: str | Path) -> str:
    """Changes whenever the labels change (for caches keyed by it)."""
    d = labels_dir(workspace)
    return "|".join(str(f.stat().st_mtime_ns) if f.is_file() else "-" for f in (d / QUERIES, d / JUDGMENTS))


@dataclass(frozen=True)
class LabeledQuery:
    id: str
    text: str
    category: str = ""
    split: str = "test"
    source: str = "typed"
    created: str = ""


@dataclass(frozen=True)
class Judgment:
    """Lines ``start_line``..``end_line`` (1-based, inclusive) of ``path`` judged for ``query_id`` (grade 0: not
    relevant)."""

    query_id: str
    path: str
    start_line: int
    end_line: int
    grade: int = 1
    whole_file: bool = False

    def overlaps(self, path: str, start: int, end: int) -> bool:
        return self.path == path and (self.whole_file or (self.start_line <= end and start <= self.end_line))

    def row(self) -> dict[str, Any]:
        out = asdict(self)
        if not self.whole_file:
            out.pop("whole_file")
        return out


def _read_jsonl(path: Path) -> list[dict]:
    """The rows of a label file (none when it is missing); DatasetError naming the file and line for a damaged one."""
    if not path.is_file():
        return []
    from hybridmem.eval.datasets.base import read_jsonl

    return read_jsonl(path)


def _rows(path: Path, build: Any, expected: str) -> list[Any]:
    """``build(row)`` for each row of a label file, or DatasetError naming the file and line of one it cannot build
    (a row edited by hand: a field missing, a line number that is no number)."""
    out = []
    for n, row in enumerate(_read_jsonl(path), 1):
        try:
            out.append(build(row))
        except (KeyError, TypeError, ValueError):
            raise DatasetError(f"{path}: row {n} is malformed: expected {expected}, got {json.dumps(row)[:120]}; "
                               "fix or delete it") from None
    return out


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _lock_exclusive(fh: Any) -> None:
    """Block until this process holds ``fh``'s file exclusively (released when ``fh`` is closed)."""
    try:
        import fcntl
    except ImportError:  # Windows
        import msvcrt

        while True:
            try:
                msvcrt.locking(fh.fileno(), msvcrt.LK_LOCK, 1)
                return
            except OSError:
                continue
    fcntl.flock(fh.fileno(), fcntl.LOCK_EX)


class LabelStore:
    """Read and change a workspace's labels; every change is written at once (atomically) and can be undone."""

    def __init__(self, workspace: str | Path) -> None:
        self.workspace = Path(workspace).expanduser().resolve()
        self.dir = labels_dir(self.workspace)
        self._holding = threading.local()

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the labels' lock (re-entrant within a thread): read, change and write inside it."""
        if getattr(self._holding, "depth", 0):
            self._holding.depth += 1
            try:
                yield
            finally:
                self._holding.depth -= 1
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.dir / LOCK, "ab") as fh:
            _lock_exclusive(fh)
            self._holding.depth = 1
            try:
                yield
            finally:
                self._holding.depth = 0

    # -- reading -----------------------------------------------------------------------------------------------
    def queries(self) -> list[LabeledQuery]:
        fields = LabeledQuery.__dataclass_fields__

        def query(r: dict) -> LabeledQuery:
            q = LabeledQuery(**{k: (str(v) if k == "id" else v) for k, v in r.items() if k in fields})
            if not isinstance(q.text, str):
                raise TypeError("text")
            return q

        return _rows(self.dir / QUERIES, query, "an object with id and text")

    def judgments(self, query_id: str | None = None) -> list[Judgment]:
        out = _rows(self.dir / JUDGMENTS, lambda r: Judgment(
            str(r["query_id"]), str(r["path"]), int(r["start_line"]), int(r["end_line"]), int(r.get("grade", 1)),
            bool(r.get("whole_file", False))), "an object with query_id, path, start_line and end_line")
        return [j for j in out if query_id is None or j.query_id == query_id]

    def find(self, text: str) -> LabeledQuery | None:
        t = text.strip()
        return next((q for q in self.queries() if q.text.strip() == t), None)

    def counts(self) -> dict[str, int]:
        js = self.judgments()
        return {"queries": len(self.queries()), "labeled": len({j.query_id for j in js if j.grade > 0}),
                "judgments": len(js), "relevant": sum(j.grade > 0 for j in js)}

    # -- changing ----------------------------------------------------------------------------------------------
    def _save(self, queries: list[LabeledQuery], judgments: list[Judgment]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        before = {n: (self.dir / n).read_text(encoding="utf-8") if (self.dir / n).is_file() else ""
                  for n in (QUERIES, JUDGMENTS)}
        history = _read_jsonl(self.dir / UNDO)[-(UNDO_DEPTH - 1):] + [before]
        _atomic_write(self.dir / UNDO, "".join(json.dumps(h, ensure_ascii=False) + "\n" for h in history))
        self._write(queries, judgments)

    def _write(self, queries: list[LabeledQuery], judgments: list[Judgment]) -> None:
        _atomic_write(self.dir / QUERIES, "".join(json.dumps(asdict(q), ensure_ascii=False) + "\n" for q in queries))
        _atomic_write(self.dir / JUDGMENTS, "".join(json.dumps(j.row(), ensure_ascii=False) + "\n"
                                                    for j in judgments))
        meta = {"name": _name(self.workspace), "workspace": "..", "queries": QUERIES, "judgments": JUDGMENTS,
                "reference_time": _now(), "format": "hybridmem labels v1 (demo-memory format)"}
        _atomic_write(self.dir / META, json.dumps(meta, indent=2) + "\n")

    def add_query(self, text: str, source: str = "typed", split: str = "test") -> LabeledQuery:
        """The labeled query with this text, created when new."""
        text = text.strip()
        if not text:
            raise DatasetError("a labeled query needs text")
        with self.locked():
            found = self.find(text)
            if found is not None:
                return found
            qs = self.queries()
            q = LabeledQuery(f"u{_next_number(qs):03d}", text, split=split, source=source, created=_now())
            self._save([*qs, q], self.judgments())
            return q

    def judge(self, query: str, path: str, start_line: int, end_line: int, grade: int = 1, source: str = "typed",
              whole_file: bool = False) -> Judgment:
        """Judge lines of ``path`` for the query ``query`` (its text; created when new). A judgment of the same query
        overlapping these lines is replaced (that is how a span is narrowed or a grade changed).

        Raises:
            DatasetError: an empty or reversed line span, or a grade outside 0..3.
        """
        item = (query, Judgment("", path, start_line, end_line, grade, whole_file))
        _check_item(*item)
        with self.locked():
            self.add_query(query, source=source)  # a new query is its own undo step, as in the workbench
            return self.add_judgments([item], source)[0]

    def add_judgments(self, items: Sequence[tuple[str, Judgment]], source: str = "typed",
                      attributes: Mapping[str, Mapping[str, str]] | None = None) -> list[Judgment]:
        """Judge many ``(query text, judgment)`` pairs in one change (one undo step), in time linear in the labels:
        queries are found by text and created when new (with ``source``, and the ``split`` and ``category`` that
        ``attributes`` gives the text, else test and none); a judgment replaces the same query's judgments it
        overlaps, as :meth:`judge` does. Every item is checked before anything is written.

        Raises:
            DatasetError: an empty query, an empty or reversed line span, or a grade outside 0..3.
        """
        for text, j in items:
            _check_item(text, j)
        with self.locked():
            qs, js = self.queries(), self.judgments()
            by_text = {q.text.strip(): q for q in qs}
            number = _next_number(qs)
            kept: list[Judgment | None] = list(js)
            by_file: dict[tuple[str, str], list[int]] = {}
            for i, j in enumerate(js):
                by_file.setdefault((j.query_id, j.path), []).append(i)
            added = []
            for text, j in items:
                q = by_text.get(text.strip())
                if q is None:
                    given = (attributes or {}).get(text.strip(), {})
                    q = by_text[text.strip()] = LabeledQuery(
                        f"u{number:03d}", text.strip(), category=given.get("category", ""),
                        split=given.get("split", "test"), source=source, created=_now())
                    qs.append(q)
                    number += 1
                new = replace(j, query_id=q.id, start_line=int(j.start_line), end_line=int(j.end_line),
                              grade=int(j.grade))
                same = by_file.setdefault((q.id, new.path), [])
                for i in same:
                    old = kept[i]
                    if old is not None and old.overlaps(new.path, new.start_line, new.end_line):
                        kept[i] = None
                same.append(len(kept))
                kept.append(new)
                added.append(new)
            self._save(qs, [j for j in kept if j is not None])
            return added

    def unjudge(self, query_id: str, path: str, start_line: int, end_line: int) -> int:
        """Delete the judgments of ``query_id`` overlapping these lines; how many were deleted."""
        with self.locked():
            js = self.judgments()
            kept = [j for j in js if not (j.query_id == query_id and j.overlaps(path, start_line, end_line))]
            if len(kept) != len(js):
                self._save(self.queries(), kept)
            return len(js) - len(kept)

    def edit_query(self, query_id: str, text: str) -> None:
        with self.locked():
            qs = [LabeledQuery(**{**asdict(q), "text": text.strip()}) if q.id == query_id else q
                  for q in self.queries()]
            self._save(qs, self.judgments())

    def delete_query(self, query_id: str) -> None:
        with self.locked():
            self._save([q for q in self.queries() if q.id != query_id],
                       [j for j in self.judgments() if j.query_id != query_id])

    def undo(self) -> bool:
        """Restore the labels as they were before the last change; False when there is nothing to undo."""
        with self.locked():
            history = _read_jsonl(self.dir / UNDO)
            if not history:
                return False
            last = history.pop()
            for n in (QUERIES, JUDGMENTS):
                _atomic_write(self.dir / n, last.get(n, ""))
            _atomic_write(self.dir / UNDO, "".join(json.dumps(h, ensure_ascii=False) + "\n" for h in history))
            return True

    def can_undo(self) -> bool:
        return bool(_read_jsonl(self.dir / UNDO))


def _check_item(text: str, j: Judgment) -> None:
    if not text.strip():
        raise DatasetError("a labeled query needs text")
    if j.start_line < 1 or j.end_line < j.start_line:
        raise DatasetError(f"evidence lines {j.start_line}-{j.end_line} are not a span of 1-based lines")
    if not 0 <= j.grade <= 3:
        raise DatasetError(f"grade {j.grade} is outside 0..3 (0 = not relevant)")


def _next_number(queries: list[LabeledQuery]) -> int:
    return max((int(m.group(1)) for q in queries if (m := re.fullmatch(r"u(\d+)", q.id))), default=0) + 1


def _name(workspace: Path) -> str:
    return "labels-" + (re.sub(r"[^A-Za-z0-9_.-]+", "_", workspace.name) or "workspace")


# -- pools ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PoolItem:
    """One pooled chunk: its lines, and its rank (1-based) in each run that put it in the top :data:`POOL_DEPTH`."""

    path: str
    start_line: int
    end_line: int
    citation: str
    text: str
    runs: Mapping[str, int] = field(default_factory=dict)

    @property
    def best_rank(self) -> int:
        return min(self.runs.values())


def pool_configs(config: RankConfig, depth: int = POOL_DEPTH) -> dict[str, RankConfig]:
    """The runs a query's pool is drawn from: keyword, vector, the current config, and RRF, each cut at ``depth``
    with no min score and no answer gate (a pool takes each run's top ``depth``, whatever their scores)."""
    runs = {"keyword": PRESETS["keyword"], "vector": PRESETS["vector"], "current": config,
            "rrf": config.with_fusion("rrf")}
    return {n: c.replace(max_results=depth, min_score=0.0, rescue_keyword=False, max_injected_chars=0,
                         answer_threshold=0.0) for n, c in runs.items()}


def pool(index: "MemoryIndex", candidates: "Candidates", configs: Mapping[str, RankConfig],
         now: float | None = None) -> list[PoolItem]:
    """The union of each config's hits, best rank first (ties: more runs first, then by path and line)."""
    items: dict[tuple[str, int, int], dict[str, Any]] = {}
    for name, cfg in configs.items():
        for h in index.rank(candidates, cfg, now=now).hits:
            it = items.setdefault((h.path, h.start_line, h.end_line),
                                  {"citation": h.citation, "text": h.text or h.snippet, "runs": {}})
            it["runs"].setdefault(name, h.position)
    out = [PoolItem(p, s, e, v["citation"], v["text"], v["runs"]) for (p, s, e), v in items.items()]
    return sorted(out, key=lambda i: (i.best_rank, -len(i.runs), i.path, i.start_line))


def judgment_for(path: str, start: int, end: int, judgments: list[Judgment]) -> Judgment | None:
    """The judgment covering (overlapping) these lines of ``path``, or None."""
    return next((j for j in judgments if j.overlaps(path, start, end)), None)


def unjudged(items: list[PoolItem], judgments: list[Judgment]) -> int:
    """How many pooled chunks no judgment of the query touches yet."""
    return sum(judgment_for(i.path, i.start_line, i.end_line, judgments) is None for i in items)


def parse_lines(text: str, default: tuple[int, int]) -> tuple[int, int]:
    """``"5-9"``, ``"L5-L9"`` or ``"7"`` as a line span; ``default`` for empty text.

    Raises:
        DatasetError: anything else.
    """
    t = text.strip().replace("L", "").replace(" ", "")
    if not t:
        return default
    m = re.fullmatch(r"(\d+)(?:-(\d+))?", t)
    if not m:
        raise DatasetError(f"lines {text!r}: write a span such as 5-9, or one line such as 7")
    a = int(m.group(1))
    b = int(m.group(2) or a)
    if a < 1 or b < a:
        raise DatasetError(f"lines {text!r}: the span must start at 1 or later and not end before it starts")
    return a, b


def parse_citation(citation: str) -> tuple[str, int | None, int | None]:
    """``path#L5-L9`` -> ``(path, 5, 9)``; ``path#L5`` -> ``(path, 5, 5)``; no anchor -> ``(path, None, None)``."""
    path, _, anchor = citation.partition("#")
    m = re.fullmatch(r"L(\d+)(?:-L(\d+))?", anchor)
    if not m:
        return path, None, None
    return path, int(m.group(1)), int(m.group(2) or m.group(1))


__all__ = [
    "JUDGMENTS", "Judgment", "LabelStore", "LabeledQuery", "MIN_SIGNIFICANT_QUERIES", "POOL_DEPTH", "PoolItem",
    "QUERIES", "has_labels", "judgment_for", "labels_dir", "labels_version", "parse_citation", "parse_lines", "pool",
    "pool_configs", "unjudged",
]
