"""Importing labels from other formats into a workspace's labels, all or nothing.

Formats (detected): a QMD benchmark fixture (``{"queries": [{"query", "expected_files", "id"?}]}``: file-level
judgments), a BEIR folder (``queries.jsonl`` + ``qrels/*.tsv``, corpus ids read as workspace paths: file-level), or the
demo set's format (a folder with ``queries.jsonl`` and ``judgments.jsonl``, or the ``judgments.jsonl`` file with
``queries.jsonl`` beside it).

* Everything is read and checked before anything is written. A malformed row (not an object, a missing or mistyped
  field, a bad line span or grade, a duplicate query id, a path that is absolute or climbs out with ``..``) stops the
  import with one line naming the file, the line and what is wrong, and nothing is written:
  ``qmd.json:12: queries[3]: expected_files must be a list of paths, not a string (and 2 more problems)``.
* A row that is well formed but names a file that is not a memory file of the workspace (missing, not indexable), or
  a query the file does not define, is skipped and reported in :attr:`ImportReport.skipped`. When every row is skipped
  (or the file holds none) nothing lands, and that is an error in one line (a fixture meant for another workspace).
* A new query keeps the ``split`` and ``category`` its ``queries.jsonl`` row gives (the demo set's fields; else
  test and none), so tuning on train and reporting on test (``hybridmem sweep --optimize``) works on imported labels.
* The rest is written as one change (:meth:`~hybridmem.eval.labels.LabelStore.add_judgments`: one undo step, time
  linear in the labels, under the labels' lock, so imports run at once all land).

Example:
    >>> import_labels("qmd-fixture.json", "ws")                                # doctest: +SKIP
    ImportReport(format='qmd', queries=25, judgments=31, skipped=())
"""

from __future__ import annotations

import bisect
import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from hybridmem.config import load_settings
from hybridmem.errors import DatasetError, PathError
from hybridmem.eval.labels import Judgment, LabelStore
from hybridmem.reader import validate_relative
from hybridmem.sources import discover
from hybridmem.wording import counted

Item = tuple[str, Judgment]  # (query text, judgment whose query_id is assigned on import)


@dataclass(frozen=True)
class ImportReport:
    format: str
    queries: int
    judgments: int
    skipped: tuple[str, ...] = ()


class _Check:
    """Problems (malformed rows: the import stops) and skipped rows (reported) of one import, and the workspace's
    memory files that judgments may name."""

    def __init__(self, workspace: Path) -> None:
        self.problems: list[str] = []
        self.skipped: list[str] = []
        self.attributes: dict[str, dict[str, str]] = {}  # a query's split and category, by its text
        self.files = {f.path: f.abspath for f in discover(workspace, load_settings(workspace=workspace).sources)}
        self._lines: dict[str, int] = {}

    def problem(self, where: str, what: str) -> None:
        self.problems.append(f"{where}: {what}")

    def path(self, where: str, path: Any) -> str | None:
        """The workspace key of ``path``; None (with a problem or a skip recorded) when it cannot be judged."""
        if not isinstance(path, str):
            self.problem(where, f"the path must be a string, not {_kind(path)}")
            return None
        try:
            key = validate_relative(path)
        except PathError as exc:
            self.problem(where, str(exc))
            return None
        if key not in self.files:
            self.skipped.append(f"{where}: {path}: not a memory file of the workspace")
            return None
        return key

    def line_count(self, key: str) -> int:
        if key not in self._lines:
            try:
                with open(self.files[key], "rb") as fh:
                    self._lines[key] = max(1, sum(1 for _ in fh))
            except OSError:
                self._lines[key] = 1
        return self._lines[key]

    def stop_on_problems(self) -> None:
        if self.problems:
            more = len(self.problems) - 1
            raise DatasetError(self.problems[0] + (f" (and {more} more problem{'s' * (more > 1)}; nothing was "
                                                   "imported)" if more else " (nothing was imported)"))


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__)


def _text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise DatasetError(f"{path}:{line}: not UTF-8 (byte 0x{data[exc.start]:02x}); save the file as UTF-8 "
                           "(nothing was imported)") from None


def _jsonl(path: Path) -> list[tuple[int, Any]]:
    rows = []
    for n, line in enumerate(_text(path).split("\n"), start=1):
        if line.strip():
            try:
                rows.append((n, json.loads(line)))
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{path}:{n}: not valid JSON ({exc.msg} at column {exc.colno}); nothing was "
                                   "imported") from None
    return rows


def _int(row: dict, name: str, default: int | None = None) -> int | None:
    value = row.get(name, default)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _queries(path: Path, id_field: str, check: _Check) -> dict[str, str]:
    """``{id: text}`` of a ``queries.jsonl`` (demo: ``id``; BEIR: ``_id``); duplicate ids are problems. A query's
    ``split`` and ``category`` (strings, the demo set's fields) go to ``check.attributes`` by its text."""
    texts: dict[str, str] = {}
    first: dict[str, int] = {}
    for n, row in _jsonl(path):
        where = f"{path}:{n}"
        if not isinstance(row, dict):
            check.problem(where, f"expected an object with {id_field!r} and 'text', got {_kind(row)}")
            continue
        qid, text = row.get(id_field), row.get("text")
        if not isinstance(qid, (str, int)) or isinstance(qid, bool) or not isinstance(text, str) or not text.strip():
            check.problem(where, f"a query needs {id_field!r} (a string) and a non-empty 'text'")
        elif str(qid) in first:
            check.problem(where, f"duplicate query id {str(qid)!r} (first on line {first[str(qid)]})")
        else:
            first[str(qid)] = n
            texts[str(qid)] = text
            given = {k: row[k].strip() for k in ("split", "category") if isinstance(row.get(k), str) and row[k].strip()}
            if given:
                check.attributes[text.strip()] = given
    return texts


def _element_lines(text: str) -> list[int]:
    """The line on which each element of the fixture's ``"queries"`` array starts (for messages only)."""
    from json.decoder import JSONArray
    from json.scanner import py_make_scanner

    starts: dict[int, list[int]] = {}
    decoder = json.JSONDecoder()

    def parse_array(s_and_end: tuple[str, int], scan_once: Callable) -> tuple[list, int]:
        offsets: list[int] = []

        def scan(string: str, idx: int) -> Any:
            offsets.append(idx)
            return scan_once(string, idx)

        value, end = JSONArray(s_and_end, scan)
        starts[id(value)] = offsets
        return value, end

    decoder.parse_array = parse_array  # type: ignore[method-assign]
    decoder.scan_once = py_make_scanner(decoder)  # type: ignore[method-assign]
    data = decoder.decode(text)
    breaks = [i for i, c in enumerate(text) if c == "\n"]
    return [bisect.bisect_left(breaks, o) + 1 for o in starts.get(id(data.get("queries")), [])]


def _qmd(src: Path, check: _Check) -> list[Item]:
    text = _text(src)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{src}:{exc.lineno}: not valid JSON ({exc.msg} at column {exc.colno}); nothing was "
                           "imported") from None
    if not isinstance(data, dict) or not isinstance(data.get("queries"), list):
        raise DatasetError(f"{src}: expected a QMD fixture {{\"queries\": [{{\"query\", \"expected_files\"}}]}}")
    lines: list[int] = []

    def where(i: int) -> str:
        if not lines:
            lines.extend(_element_lines(text))
        return f"{src}:{lines[i] if i < len(lines) else '?'}: queries[{i}]"

    items: list[Item] = []
    first: dict[str, int] = {}
    for i, q in enumerate(data["queries"]):
        if not isinstance(q, dict):
            check.problem(where(i), f"expected an object with \"query\" and \"expected_files\", got {_kind(q)}")
            continue
        query, files, qid = q.get("query"), q.get("expected_files"), q.get("id")
        if qid is not None:
            if str(qid) in first:
                check.problem(where(i), f"duplicate id {str(qid)!r} (first at queries[{first[str(qid)]}])")
                continue
            first[str(qid)] = i
        if query is not None and not isinstance(query, str):
            check.problem(where(i), f"query must be a string, not {_kind(query)}")
        elif files is not None and not isinstance(files, list):
            check.problem(where(i), f"expected_files must be a list of paths, not {_kind(files)}")
        elif not query or not query.strip() or not files:
            check.skipped.append(f"{where(i)}: no query or expected_files")
        else:
            for path in files:
                key = check.path(where(i), path)
                if key is not None:
                    items.append((query, Judgment("", key, 1, check.line_count(key), 1, whole_file=True)))
    return items


def _beir(folder: Path, check: _Check) -> list[Item]:
    texts = _queries(folder / "queries.jsonl", "_id", check)
    items: list[Item] = []
    for tsv in sorted((folder / "qrels").glob("*.tsv")):
        for n, row in enumerate(csv.reader(_text(tsv).split("\n"), delimiter="\t"), start=1):
            if not row or not "".join(row).strip():
                continue
            where = f"{tsv}:{n}"
            score = row[2].strip() if len(row) >= 3 else ""
            if not score.lstrip("-").isdigit():
                if n > 1:  # line 1 may be the header (query-id, corpus-id, score)
                    check.problem(where, "expected query-id, corpus-id and an integer score separated by tabs")
                continue
            if not 0 <= int(score) <= 3:
                check.problem(where, f"score {score} is outside 0..3")
            elif row[0] not in texts:
                check.skipped.append(f"{where}: query id {row[0]!r} is not in queries.jsonl")
            elif (key := check.path(where, row[1])) is not None:
                items.append((texts[row[0]], Judgment("", key, 1, check.line_count(key), int(score), whole_file=True)))
    return items


def _demo(folder: Path, check: _Check) -> list[Item]:
    texts = _queries(folder / "queries.jsonl", "id", check)
    items: list[Item] = []
    for n, row in _jsonl(folder / "judgments.jsonl"):
        where = f"{folder / 'judgments.jsonl'}:{n}"
        if not isinstance(row, dict):
            check.problem(where, f"expected an object with query_id, path, start_line and end_line, got {_kind(row)}")
            continue
        start, end, grade = _int(row, "start_line"), _int(row, "end_line"), _int(row, "grade", 1)
        whole = row.get("whole_file", False)
        if "query_id" not in row or "path" not in row:
            check.problem(where, "a judgment needs query_id and path")
        elif start is None or end is None or not 1 <= start <= end:
            check.problem(where, "start_line and end_line must be integers with 1 <= start_line <= end_line")
        elif grade is None or not 0 <= grade <= 3:
            check.problem(where, f"grade must be an integer from 0 to 3, got {row.get('grade')!r}")
        elif not isinstance(whole, bool):
            check.problem(where, f"whole_file must be true or false, got {whole!r}")
        elif str(row["query_id"]) not in texts:
            check.skipped.append(f"{where}: query id {str(row['query_id'])!r} is not in queries.jsonl")
        elif (key := check.path(where, row["path"])) is not None:
            if not whole:
                lines = check.line_count(key)
                if start > lines:  # a span no chunk can hold: it would only lower every score
                    check.skipped.append(f"{where}: {key} has {lines} lines; lines {start}-{end} are past its end")
                    continue
                end = min(end, lines)
            items.append((texts[str(row["query_id"])], Judgment("", key, start, end, grade, whole)))
    return items


def import_labels(source: str | Path, workspace: str | Path) -> ImportReport:
    """Add the labels of ``source`` (format detected, see the module doc) to ``workspace``'s labels, all or nothing.

    Raises:
        DatasetError: ``source`` does not exist, its format is not recognised, or a row is malformed (one line
            naming the file and the line; nothing is written).
    """
    src = Path(source).expanduser()
    if not src.exists():
        raise DatasetError(f"cannot import {src}: it does not exist")
    store = LabelStore(workspace)
    check = _Check(store.workspace)
    folder = src if src.is_dir() else src.parent
    if src.is_file() and src.suffix == ".json":
        fmt, items = "qmd", _qmd(src, check)
    elif (folder / "qrels").is_dir() and (folder / "queries.jsonl").is_file():
        fmt, items = "beir", _beir(folder, check)
    elif (folder / "queries.jsonl").is_file() and (folder / "judgments.jsonl").is_file():
        fmt, items = "demo", _demo(folder, check)
    else:
        raise DatasetError(f"cannot import {src}: expected a QMD fixture (.json with \"queries\"), a BEIR folder "
                           "(queries.jsonl + qrels/), or queries.jsonl + judgments.jsonl in the demo set's format")
    check.stop_on_problems()
    if not items:  # an import that lands nothing is an error, not "imported 0 judgments" (a wrong workspace, say)
        if not check.skipped:
            raise DatasetError(f"nothing to import from {src}: it holds no judgments")
        more = len(check.skipped) - 1
        raise DatasetError(f"nothing was imported from {src}: every row was skipped ({check.skipped[0]}"
                           + (f", and {counted(more, 'more row')}" if more else "")
                           + f"); are these the labels of the workspace {store.workspace}?")
    store.add_judgments(items, source="import", attributes=check.attributes)
    return ImportReport(fmt, len({text.strip() for text, _ in items}), len(items), tuple(check.skipped))


__all__ = ["ImportReport", "import_labels"]
