"""Where labels come from besides a person typing: the MCP query log, and files in other formats.

* :func:`logged_queries`: the searches agents ran (``<workspace>/.hybridmem/query-log.jsonl``), newest first, each
  with the results the agent went on to read with ``memory_get`` as :class:`Suggestion` objects. A suggestion is
  never a judgment: it becomes one only through :meth:`hybridmem.eval.labels.LabelStore.judge` (a person accepts it).
* :func:`import_labels` (from :mod:`hybridmem.eval.labelimport`): QMD fixtures, BEIR folders and the demo set's
  format, checked whole and written as one change.

Example:
    >>> for q in logged_queries("ws"):                           # doctest: +SKIP
    ...     print(q.query, [s.citation for s in q.suggestions])
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hybridmem.eval.labelimport import ImportReport, import_labels
from hybridmem.eval.labels import parse_citation
from hybridmem.querylog import log_path, read_log


@dataclass(frozen=True)
class Suggestion:
    """Lines an agent read after a search: ``rank`` is the read file's position in that search's results."""

    path: str
    start_line: int
    end_line: int
    rank: int | None

    @property
    def citation(self) -> str:
        return f"{self.path}#L{self.start_line}" + (f"-L{self.end_line}" if self.end_line != self.start_line else "")


@dataclass(frozen=True)
class LoggedQuery:
    id: str
    time: str
    client: str
    query: str
    results: tuple[str, ...]
    suggestions: tuple[Suggestion, ...]


def _line_count(path: Path) -> int:
    try:
        with open(path, "rb") as fh:
            return max(1, sum(1 for _ in fh))
    except OSError:
        return 1


def _suggestion(workspace: Path, get: dict, results: list[str]) -> Suggestion:
    path, rank = str(get.get("path", "")), get.get("rank")
    start, lines = get.get("from"), get.get("lines")
    if start:
        end = int(start) + int(lines) - 1 if lines else _line_count(workspace / path)
        return Suggestion(path, int(start), max(int(start), end), rank)
    for c in results:  # no lines asked: the lines of the hit in that file the search returned
        p, a, b = parse_citation(c)
        if p == path and a is not None:
            return Suggestion(path, a, b or a, rank)
    return Suggestion(path, 1, _line_count(workspace / path), rank)


def logged_queries(workspace: str | Path) -> list[LoggedQuery]:
    """Every logged search, newest first, with what the agent read after it (one suggestion per span)."""
    ws = Path(workspace)
    records = read_log(log_path(ws))
    searches = [r for r in records if r.get("type") == "search" and r.get("query")]
    by_id = {r["id"]: r for r in searches if "id" in r}
    reads: dict[str, list[Suggestion]] = {}
    for g in records:
        if g.get("type") == "get" and g.get("after") in by_id:
            results = [x.get("citation", "") for x in by_id[g["after"]].get("results", [])]
            s = _suggestion(ws, g, results)
            if s not in reads.setdefault(g["after"], []):
                reads[g["after"]].append(s)
    out = [LoggedQuery(str(r.get("id", "")), str(r.get("time", "")), str(r.get("client", "")), str(r["query"]),
                       tuple(x.get("citation", "") for x in r.get("results", [])), tuple(reads.get(r.get("id"), ())))
           for r in searches]
    order = sorted(range(len(out)), key=lambda i: (out[i].time, i), reverse=True)  # later lines win time ties
    return [out[i] for i in order]


__all__ = ["ImportReport", "LoggedQuery", "Suggestion", "import_labels", "logged_queries"]
