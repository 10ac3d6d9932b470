"""Workspace datasets: a real memory folder plus queries and file-and-line judgments (the demo set, a user's own).

Layout (the demo set's): ``meta.json`` ``{name, reference_time, workspace, queries, judgments}``; ``queries.jsonl``
rows ``{id, text, category, split}`` (a row with ``"no_answer": true`` and a ``lang`` is a question the
memory cannot answer: it goes to :attr:`Dataset.no_answer`, never judged); ``judgments.jsonl`` rows ``{query_id, path, start_line, end_line, grade}`` with
``path`` relative to the workspace and lines 1-based inclusive (JSONL line numbers for ``sessions/*.jsonl``). The
workspace is indexed through ``MemoryIndex(workspace).sync()``, so real files and transcripts go through the real code.
Without ``meta.json``, ``queries.jsonl`` and ``judgments.jsonl`` are looked for beside the workspace. A workspace's
own labels (``<workspace>/.hybridmem-labels/``, see :mod:`hybridmem.eval.labels`) load with :func:`load_labels`.
"""

from __future__ import annotations

import json
from pathlib import Path

from hybridmem.config import LABELS_DIRNAME
from hybridmem.errors import DatasetError
from hybridmem.eval.datasets.base import Dataset, Evidence, Query, data_dir, parse_time, read_jsonl, read_provenance
from hybridmem.wording import counted


def load_workspace_dataset(
    folder: str | Path,
    queries: str | Path | None = None,
    judgments: str | Path | None = None,
    reference_time: str | float | None = None,
) -> Dataset:
    """Load a folder with ``meta.json`` (or a workspace plus explicit ``queries``/``judgments`` files).

    Raises:
        DatasetError: a file is missing, a row lacks a field, or a judgment names a query that does not exist.
    """
    root = Path(folder)
    meta: dict = {}
    if (root / "meta.json").is_file():
        try:
            meta = json.loads((root / "meta.json").read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise DatasetError(f"{root / 'meta.json'} is not a JSON object ({exc}); fix or delete it") from None
        if not isinstance(meta, dict):
            raise DatasetError(f"{root / 'meta.json'} is not a JSON object; fix or delete it")
    workspace = root / meta["workspace"] if "workspace" in meta else (root / "workspace" if (root / "workspace").is_dir()
                                                                      else root)
    qfile = Path(queries) if queries else root / meta.get("queries", "queries.jsonl")
    jfile = Path(judgments) if judgments else root / meta.get("judgments", "judgments.jsonl")
    if not workspace.is_dir():
        raise DatasetError(f"workspace folder not found: {workspace}")
    try:
        qrows = read_jsonl(qfile)
        jrows = read_jsonl(jfile)
        qs = [Query(str(r["id"]), r["text"], str(r.get("category", "")), str(r.get("split", "test"))) for r in qrows
              if r.get("no_answer") is not True]
        none = tuple(Query(str(r["id"]), r["text"], str(r.get("lang", r.get("category", ""))),
                           str(r.get("split", "test"))) for r in qrows if r.get("no_answer") is True)
        evidence: dict[str, Evidence] = {}
        qrels: dict[str, dict[str, int]] = {}
        known = {q.id for q in qs}
        seen: set[str] = set()
        for q in (*qs, *none):
            if q.id in seen:
                raise DatasetError(f"{qfile}: query id {q.id!r} appears twice; give each query its own id")
            seen.add(q.id)
        for n, r in enumerate(jrows, 1):
            try:
                qid = str(r["query_id"])
                ev = Evidence(str(r["path"]), int(r["start_line"]), int(r["end_line"]),
                              bool(r.get("whole_file", False)))
                grade = int(r.get("grade", 1))
            except (TypeError, ValueError, AttributeError):
                raise DatasetError(f"{jfile}: judgment {n} is malformed: expected an object with query_id, path, and "
                                   f"whole-number start_line, end_line and grade, got {json.dumps(r)[:120]}") from None
            if qid not in known:
                raise DatasetError(f"{jfile}: judgment for unknown query {qid!r}")
            if not 1 <= ev.start <= ev.end:
                raise DatasetError(f"{jfile}: judgment {n} has start_line {ev.start} and end_line {ev.end}: "
                                   "expected 1 <= start_line <= end_line")
            if grade > 0:
                evidence[ev.unit_id] = ev
                qrels.setdefault(qid, {})[ev.unit_id] = max(grade, qrels.get(qid, {}).get(ev.unit_id, 0))
    except (TypeError, AttributeError):
        raise DatasetError(f"a row in {qfile.name} is malformed: expected objects with id and text") from None
    except KeyError as exc:
        raise DatasetError(f"a row in {qfile.name} or {jfile.name} lacks the field {exc}") from None
    kept = tuple(q for q in qs if q.id in qrels)
    ref = parse_time(reference_time if reference_time is not None else meta.get("reference_time"))
    notes = ((f"{len(qs) - len(kept)} queries without judgments left out",) if len(kept) < len(qs) else ()
             ) + _stale(workspace, evidence)
    return Dataset(name=meta.get("name", root.name), kind="evidence", queries=kept, qrels=qrels,
                   workspace=workspace.resolve(), evidence=evidence, reference_time=ref,
                   provenance=read_provenance(root), no_answer=none, notes=notes)


def _stale(workspace: Path, evidence: dict[str, Evidence]) -> tuple[str, ...]:
    """What the relevant judgments name that the workspace no longer holds (a note deleted or cut short after it was
    labeled): they count as missed by every config, so the scores fall for a reason the user should see."""
    missing: set[str] = set()
    past: set[str] = set()
    lines: dict[str, int] = {}
    for ev in evidence.values():
        path = workspace / ev.path
        if not path.is_file():
            missing.add(ev.path)
        elif path.suffix.lower() == ".md":  # a transcript's lines are its rendered messages', not the file's
            if ev.path not in lines:
                with open(path, "rb") as fh:
                    lines[ev.path] = sum(1 for _ in fh)
            if ev.start > lines[ev.path]:
                past.add(f"{ev.path}#L{ev.start}-L{ev.end}")
    out = []
    for found, what in ((missing, "relevant judgments name {} the workspace no longer holds"),
                        (past, "{} of relevant judgments start past the file's last line")):
        if found:
            out.append(what.format(counted(len(found), "file" if found is missing else "span")).capitalize()
                       + f" ({', '.join(sorted(found)[:3])}{', ...' if len(found) > 3 else ''}): every config misses "
                       "them; relabel or delete them")
    return tuple(out)


def load_labels(workspace: str | Path) -> Dataset:
    """A workspace's own labels (``<workspace>/.hybridmem-labels/``, written by :mod:`hybridmem.eval.labels`) as a
    dataset over the workspace itself.

    Raises:
        DatasetError: the workspace has no labels, or none with a relevant judgment.
    """
    root = Path(workspace).expanduser() / LABELS_DIRNAME
    if not (root / "queries.jsonl").is_file():
        raise DatasetError(f"{workspace} has no labels yet ({root} is missing): label queries in the workbench's "
                           "search inspector or run `hybridmem labels import FILE WORKSPACE`")
    ds = load_workspace_dataset(root, root / "queries.jsonl", root / "judgments.jsonl")
    if not ds.queries:
        raise DatasetError(f"{workspace}: no labeled query has a relevant judgment yet")
    return ds


def load_demo() -> Dataset:
    """The shipped demo memory set (``datasets/demo-memory``)."""
    return load_workspace_dataset(data_dir("demo-memory"))
