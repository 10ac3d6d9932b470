"""Where labels come from besides a person typing: the MCP query log, and files in other formats.

* :func:`logged_queries`: the searches agents ran (``<workspace>/.hybridmem/query-log.jsonl``), newest first, each
  with the results the agent went on to read with ``memory_get`` as :class:`Suggestion` objects. A suggestion is
  never a judgment: it becomes one only through :meth:`hybridmem.eval.labels.LabelStore.judge` (a person accepts it).
* :func:`import_labels`: a QMD benchmark fixture (``{"queries": [{"query", "expected_files", ...}]}``, paths relative
  to the workspace: file-level judgments), a BEIR folder (``queries.jsonl`` + ``qrels/*.tsv``, corpus ids read as paths
  relative to the workspace: file-level), or the demo set's format (a folder with ``queries.jsonl`` and
  ``judgments.jsonl``, or the ``judgments.jsonl`` file with ``queries.jsonl`` beside it).

Example:
    >>> for q in logged_queries("ws"):                           # doctest: +SKIP
    ...     print(q.query, [s.citation for s in q.suggestions])
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

from hybridmem.errors import DatasetError
from hybridmem.eval.labels import LabelStore, parse_citation
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


# -- imports -------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ImportReport:
    format: str
    queries: int
    judgments: int
    skipped: tuple[str, ...] = ()


def _file_judgment(store: LabelStore, text: str, rel: str, grade: int, skipped: list[str]) -> bool:
    f = store.workspace / rel
    if not f.is_file():
        skipped.append(f"{rel}: not a file of the workspace")
        return False
    store.judge(text, rel, 1, _line_count(f), grade=grade, source="import", whole_file=True)
    return True


def import_labels(source: str | Path, workspace: str | Path) -> ImportReport:
    """Add the labels of ``source`` (format detected, see module doc) to ``workspace``'s labels.

    Raises:
        DatasetError: the format is not recognised, or a file cannot be parsed.
    """
    src = Path(source).expanduser()
    store = LabelStore(workspace)
    skipped: list[str] = []
    n_q = n_j = 0
    if src.is_file() and src.suffix == ".json":
        try:
            data = json.loads(src.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{src}: not valid JSON ({exc.msg})") from None
        if not isinstance(data, dict) or not isinstance(data.get("queries"), list):
            raise DatasetError(f"{src}: expected a QMD fixture {{\"queries\": [{{\"query\", \"expected_files\"}}]}}")
        for q in data["queries"]:
            if not q.get("query") or not q.get("expected_files"):
                skipped.append(f"query {q.get('id', q.get('query', '?'))!r}: no query or expected_files")
                continue
            n_q += 1
            n_j += sum(_file_judgment(store, q["query"], str(f), 1, skipped) for f in q["expected_files"])
        return ImportReport("qmd", n_q, n_j, tuple(skipped))
    folder = src if src.is_dir() else src.parent
    if (folder / "qrels").is_dir() and (folder / "queries.jsonl").is_file():
        texts = {str(r["_id"]): r["text"] for r in _jsonl(folder / "queries.jsonl")}
        seen: set[str] = set()
        for tsv in sorted((folder / "qrels").glob("*.tsv")):
            with open(tsv, encoding="utf-8") as fh:
                for row in csv.reader(fh, delimiter="\t"):
                    if len(row) < 3 or not row[2].strip().lstrip("-").isdigit() or row[0] not in texts:
                        continue
                    if _file_judgment(store, texts[row[0]], row[1], int(row[2]), skipped):
                        seen.add(row[0])
                        n_j += 1
        return ImportReport("beir", len(seen), n_j, tuple(skipped))
    if (folder / "queries.jsonl").is_file() and (folder / "judgments.jsonl").is_file():
        texts = {str(r["id"]): r["text"] for r in _jsonl(folder / "queries.jsonl")}
        seen = set()
        for r in _jsonl(folder / "judgments.jsonl"):
            qid = str(r.get("query_id"))
            if qid not in texts:
                skipped.append(f"judgment for unknown query {qid!r}")
                continue
            store.judge(texts[qid], r["path"], int(r["start_line"]), int(r["end_line"]), int(r.get("grade", 1)),
                        source="import", whole_file=bool(r.get("whole_file", False)))
            seen.add(qid)
            n_j += 1
        return ImportReport("demo", len(seen), n_j, tuple(skipped))
    raise DatasetError(f"cannot import {src}: expected a QMD fixture (.json with \"queries\"), a BEIR folder "
                       "(queries.jsonl + qrels/), or queries.jsonl + judgments.jsonl in the demo set's format")


def _jsonl(path: Path) -> list[dict]:
    try:
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}: not valid JSON lines ({exc.msg})") from None


__all__ = ["ImportReport", "LoggedQuery", "Suggestion", "import_labels", "logged_queries"]
