"""Cranfield (SMART files ``cran.all.1400``, ``cran.qry``, ``cranqrel``), graded judgments.

Quirks handled (see its PROVENANCE.md): ``cranqrel`` names queries by their 1..225 *ordinal position* in ``cran.qry``
(the ``.I`` numbers skip); relevance codes 1 (complete answer) .. 4 (minimum interest) become grades ``5 - code``
(4 .. 1); code -1 means not relevant and is dropped. Documents are ``.W`` bodies (which repeat the title). All
queries are in the ``test`` split.
"""

from __future__ import annotations

import re
from pathlib import Path

from hybridmem.errors import DatasetError
from hybridmem.eval.datasets.base import Dataset, Query, data_dir, read_provenance
from hybridmem.records import Document

_FIELD = re.compile(r"^\.([ITABW])\b ?(.*)$")


def parse_smart(text: str) -> list[tuple[str, dict[str, str]]]:
    """``[(id, {field: text})]`` from SMART ``.I/.T/.A/.B/.W`` records; a repeated field is appended."""
    records: list[tuple[str, dict[str, str]]] = []
    current: str | None = None
    for line in text.splitlines():
        m = _FIELD.match(line)
        if m and m.group(1) == "I":
            records.append((m.group(2).strip(), {}))
            current = None
        elif m:
            current = m.group(1)
            if records:
                records[-1][1].setdefault(current, "")
        elif records and current:
            fields = records[-1][1]
            fields[current] = (fields[current] + "\n" + line.strip()).strip()
    return records


def load_cranfield(folder: str | Path | None = None) -> Dataset:
    root = Path(folder) if folder else data_dir("cranfield")
    try:
        docs_raw = parse_smart((root / "cran.all.1400").read_text(encoding="utf-8", errors="replace"))
        qry_raw = parse_smart((root / "cran.qry").read_text(encoding="utf-8", errors="replace"))
        rel_lines = (root / "cranqrel").read_text(encoding="utf-8").split("\n")
    except FileNotFoundError as exc:
        raise DatasetError(f"Cranfield file missing: {exc.filename}") from None
    docs = tuple(Document(path=did, text=f.get("W") or f.get("T", ""), source="corpus", evergreen=True)
                 for did, f in docs_raw)
    qrels: dict[str, dict[str, int]] = {}
    for line in rel_lines:
        parts = line.split()
        if len(parts) < 3:
            continue
        qid, did, code = parts[0], parts[1], int(parts[2])
        if 1 <= code <= 4:
            qrels.setdefault(qid, {})[did] = 5 - code
    queries = tuple(Query(str(i), " ".join(f.get("W", "").split()), "", "test")
                    for i, (_, f) in enumerate(qry_raw, 1) if str(i) in qrels)
    return Dataset(name="cranfield", kind="documents", queries=queries, qrels=qrels, documents=docs,
                   provenance=read_provenance(root),
                   notes=(f"{len(qry_raw) - len(queries)} queries have only code -1 judgments and are left out",))
