"""BEIR-format folders (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``): SciFact and any other.

Each corpus document becomes one :class:`~hybridmem.records.Document` whose path is the BEIR ``_id``, text
``title`` + newline + ``text``, evergreen (no dates, so decay never applies). A query's split is the qrels file that
judges it (``test.tsv`` -> ``test``). qrels files may have CRLF line endings and a ``query-id corpus-id score`` header.
"""

from __future__ import annotations

from pathlib import Path

from hybridmem.config import DOCUMENT_CHUNKING
from hybridmem.errors import DatasetError
from hybridmem.eval.datasets.base import Dataset, Query, read_jsonl, read_provenance
from hybridmem.records import Document


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """``{query_id: {doc_id: grade}}`` from a BEIR qrels TSV; grades <= 0 are dropped."""
    out: dict[str, dict[str, int]] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        parts = line.strip().split("\t") if "\t" in line else line.split()
        if not parts or parts == [""]:
            continue
        if n == 1 and not parts[-1].lstrip("-").isdigit():
            continue  # header
        if len(parts) < 3:
            raise DatasetError(f"{path}:{n}: expected 'query-id corpus-id score', got {line!r}")
        qid, did, grade = parts[0], parts[1], int(parts[-1])
        if grade > 0:
            out.setdefault(qid, {})[did] = grade
    return out


def load_beir(folder: str | Path, name: str | None = None) -> Dataset:
    """Load a BEIR folder; queries judged in ``qrels/<split>.tsv`` get that split.

    Raises:
        DatasetError: a required file is missing or a qrels id names no corpus document.
    """
    root = Path(folder)
    for need in ("corpus.jsonl", "queries.jsonl", "qrels"):
        if not (root / need).exists():
            raise DatasetError(f"{root} is not a BEIR folder: {need} is missing")
    docs = []
    for row in read_jsonl(root / "corpus.jsonl"):
        title, text = (row.get("title") or "").strip(), (row.get("text") or "").strip()
        docs.append(Document(path=str(row["_id"]), text=f"{title}\n{text}" if title else text, source="corpus",
                             evergreen=True))
    doc_ids = {d.path for d in docs}
    texts = {str(r["_id"]): r.get("text", "") for r in read_jsonl(root / "queries.jsonl")}
    qrels: dict[str, dict[str, int]] = {}
    split_of: dict[str, str] = {}
    for tsv in sorted((root / "qrels").glob("*.tsv"), key=lambda p: (p.stem != "test", p.stem)):
        for qid, judged in read_qrels(tsv).items():
            unknown = [d for d in judged if d not in doc_ids]
            if unknown:
                raise DatasetError(f"{tsv}: query {qid} judges documents not in the corpus: {unknown[:3]}")
            if qid not in texts:
                raise DatasetError(f"{tsv}: query {qid} is not in queries.jsonl")
            if qid not in split_of:
                split_of[qid] = tsv.stem
                qrels[qid] = judged
    queries = tuple(Query(qid, texts[qid], "", split) for qid, split in split_of.items())
    return Dataset(name=name or root.name, kind="documents", queries=queries, qrels=qrels, documents=tuple(docs),
                   provenance=read_provenance(root), chunking=DOCUMENT_CHUNKING)
