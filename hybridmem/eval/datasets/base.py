"""The one shape every evaluation dataset takes: documents (or a workspace), queries, judgments in stable units.

Judgments never name chunks (chunk ids change with chunk size). They name *units*:

- ``kind="documents"`` (BEIR, Cranfield, XQuAD-R): a unit is a document id, and a chunk maps to the document it came
  from (``Document.path`` is the document id);
- ``kind="evidence"`` (LoCoMo, the demo memory set, a user's folder): a unit is an evidence span ``(path, start, end)``
  (1-based, inclusive lines of the indexed file; for transcripts the JSONL line numbers); a chunk is relevant to a unit
  when the chunk's line span contains the whole span.

Example:
    >>> ds = Dataset(name="toy", kind="documents", queries=(Query("q1", "cats"),), qrels={"q1": {"d1": 1}},
    ...              documents=(Document("d1", "cats purr"),))
    >>> ds.select(split="test").queries[0].id
    'q1'
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Mapping

from hybridmem.config import ChunkingConfig
from hybridmem.errors import DatasetError
from hybridmem.records import Document

KINDS = ("documents", "evidence")
REPO_ROOT = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class Query:
    """One labeled query. ``split`` is ``train`` or ``test``; ``category`` groups per-category scores; ``scope`` is a
    path prefix both retrieval legs are restricted to (LoCoMo: the query's own conversation), as
    ``MemoryIndex.search(path_prefix=...)`` does."""

    id: str
    text: str
    category: str = ""
    split: str = "test"
    scope: str | None = None


@dataclass(frozen=True)
class Evidence:
    """An evidence span: lines ``start``..``end`` (1-based, inclusive) of the indexed file ``path``; ``whole``: the
    whole file is the unit (file-level labels: any chunk of ``path`` holds it)."""

    path: str
    start: int
    end: int
    whole: bool = False

    @property
    def unit_id(self) -> str:
        return f"{self.path}#L{self.start}-L{self.end}"


@dataclass(frozen=True)
class Dataset:
    """A labeled retrieval dataset.

    Attributes:
        name: short name used in reports and cache file names.
        kind: ``documents`` (units are document ids) or ``evidence`` (units are :class:`Evidence` spans).
        queries: the queries, each with a split and a category.
        qrels: ``{query_id: {unit_id: grade}}``, grades > 0 only; every query has at least one judgment.
        documents: documents to index (empty when ``workspace`` is set).
        workspace: a folder indexed through ``MemoryIndex(workspace).sync()`` (real files, real transcripts).
        evidence: ``{unit_id: Evidence}`` for evidence datasets.
        reference_time: the clock for temporal decay (epoch seconds); never the wall clock.
        provenance: where the data came from, its license and how it was loaded.
        notes: loader decisions worth reporting (dropped queries, cleaned ids).
        chunking: the chunking this dataset is evaluated with unless the caller sets its own (document corpora use
            :data:`hybridmem.config.DOCUMENT_CHUNKING`, one chunk per judged document); None keeps the default.
        no_answer: queries whose answer is nowhere in the data (``no_answer: true`` rows of a workspace set), for
            abstention (:mod:`hybridmem.eval.abstention`); never scored for relevance.
    """

    name: str
    kind: str
    queries: tuple[Query, ...]
    qrels: Mapping[str, Mapping[str, int]]
    documents: tuple[Document, ...] = ()
    workspace: Path | None = None
    evidence: Mapping[str, Evidence] = field(default_factory=dict)
    reference_time: float = 0.0
    provenance: str = ""
    notes: tuple[str, ...] = ()
    chunking: ChunkingConfig | None = None
    no_answer: tuple[Query, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise DatasetError(f"dataset kind must be one of {', '.join(KINDS)}, not {self.kind!r}")
        if not self.documents and self.workspace is None:
            raise DatasetError(f"dataset {self.name!r} has neither documents nor a workspace to index")
        missing = [q.id for q in self.queries if not self.qrels.get(q.id)]
        if missing:
            raise DatasetError(f"dataset {self.name!r}: queries without judgments: {missing[:5]}; drop them in the loader")

    @property
    def splits(self) -> tuple[str, ...]:
        return tuple(sorted({q.split for q in self.queries}))

    @property
    def categories(self) -> tuple[str, ...]:
        return tuple(sorted({q.category for q in self.queries}))

    def select(self, split: str | None = None, categories: Iterable[str] | None = None) -> "Dataset":
        """The dataset restricted to one split and/or some categories (``None`` keeps all).

        Raises:
            DatasetError: nothing is left; the message lists the splits or categories that exist.
        """
        cats = None if categories is None else {str(c) for c in categories}
        qs = tuple(q for q in self.queries if (split is None or split == "all" or q.split == split)
                   and (cats is None or q.category in cats))
        if not qs:
            asked = " and ".join([*([f"in split {split!r}"] if split not in (None, "all") else []),
                                  *([f"of category {', '.join(sorted(cats))}"] if cats else [])]) or "at all"
            raise DatasetError(f"dataset {self.name!r} has no queries {asked}: its splits are "
                               f"{', '.join(self.splits) or 'none'}; its categories are "
                               f"{', '.join(self.categories) or 'none'}")
        ids = {q.id for q in qs}
        return replace(self, queries=qs, qrels={k: v for k, v in self.qrels.items() if k in ids})

    def fingerprint(self) -> str:
        """A short hash of what gets indexed (for the index cache): document ids and texts, or the workspace path."""
        h = hashlib.sha256(f"{self.name}\0{self.kind}\0".encode())
        if self.workspace is not None:
            h.update(str(Path(self.workspace).resolve()).encode())
        for d in self.documents:
            h.update(f"{d.path}\0{d.source}\0{d.date}\0{d.evergreen}\0".encode())
            h.update(d.text.encode("utf-8", "surrogatepass"))
        return h.hexdigest()[:12]


def data_dir(name: str) -> Path:
    """The folder of a shipped dataset: ``datasets/<name>`` in the repo (or ``$HYBRIDMEM_DATASETS``), else the shared
    copy in ``../shared/datasets/<name>``.

    Raises:
        DatasetError: neither exists.
    """
    roots = [Path(os.environ["HYBRIDMEM_DATASETS"])] if os.environ.get("HYBRIDMEM_DATASETS") else []
    roots += [REPO_ROOT / "datasets", REPO_ROOT.parent / "shared" / "datasets", Path.cwd() / "datasets"]
    for root in roots:
        if (root / name).is_dir():
            return root / name
    raise DatasetError(
        f"dataset folder {name!r} not found under {', '.join(str(r) for r in roots)}; "
        "set HYBRIDMEM_DATASETS to the folder holding it"
    )


def read_jsonl(path: Path) -> list[dict]:
    """Parse a JSONL file (blank lines skipped); errors name the file and line."""
    out = []
    try:
        with open(path, encoding="utf-8-sig") as fh:  # a file saved with a byte-order mark reads the same
            for n, line in enumerate(fh, 1):
                if line.strip():
                    try:
                        out.append(json.loads(line))
                    except json.JSONDecodeError as exc:
                        raise DatasetError(f"{path}:{n}: not valid JSON ({exc.msg})") from None
                    if not isinstance(out[-1], dict):
                        raise DatasetError(f"{path}:{n}: expected a JSON object, got {line.strip()[:60]}")
    except FileNotFoundError:
        raise DatasetError(f"file not found: {path}") from None
    except UnicodeDecodeError:
        raise DatasetError(f"{path} is not UTF-8 text: save it as UTF-8") from None
    return out


def read_provenance(folder: Path) -> str:
    for name in ("PROVENANCE.md", "README.md"):
        p = folder / name
        if p.is_file():
            return p.read_text(encoding="utf-8")
    return f"(no PROVENANCE.md in {folder})"


def parse_time(value: str | float | int | None) -> float:
    """Epoch seconds from an ISO 8601 string (naive means UTC) or a number; 0.0 for None."""
    if value is None:
        return 0.0
    if isinstance(value, (int, float)):
        return float(value)
    try:
        dt = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise DatasetError(f"reference_time {value!r} is not an ISO 8601 date-time") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()
