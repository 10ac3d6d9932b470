"""LoCoMo (Maharana et al., ACL 2024): long multi-session conversations, QA with evidence dialog turn ids.

Each session becomes one transcript-like document, ``<sample_id>/session_<n>`` (source ``sessions``), dated by its
``session_<n>_date_time``; each turn is exactly one line (``Speaker: text``, plus ``[image: caption]`` when the turn
shared a photo), so the turn ``D3:7`` is one line of one document and a chunk contains it exactly when the chunk's
line span covers that line. Judgments are evidence units, one per turn.

Label noise (PROVENANCE.md) is cleaned: evidence strings are split on ``;`` and whitespace, ``D:11:26`` becomes
``D11:26``, leading zeros are dropped (``D30:05`` -> ``D30:5``), ids that name no turn are dropped, and QA items left
with no evidence are left out. Category 5 (adversarial, unanswerable) is left out unless asked for.

Split (documented, fixed): conversations 0-4 (``conv-26`` .. ``conv-43`` in file order) are ``train``, 5-9 ``test``.
The reference time is the last session date of the whole file.
Each query is scoped to its own conversation (path prefix ``<sample_id>/``): one conversation is one agent's memory.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path

from hybridmem.errors import DatasetError
from hybridmem.eval.datasets.base import Dataset, Evidence, Query, data_dir, read_provenance
from hybridmem.records import Document

TRAIN_CONVERSATIONS = 5
_ID = re.compile(r"^D:?(\d+):0*(\d+)$")


def parse_locomo_date(text: str) -> float:
    """``'1:56 pm on 8 May, 2023'`` -> epoch seconds (UTC)."""
    try:
        return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc).timestamp()
    except ValueError:
        raise DatasetError(f"LoCoMo session date {text!r} is not like '1:56 pm on 8 May, 2023'") from None


def clean_evidence(raw: list[str]) -> list[str]:
    """Normalized ``D<session>:<turn>`` ids from noisy evidence strings (unparseable pieces dropped)."""
    out = []
    for item in raw:
        for piece in re.split(r"[;\s]+", item.strip()):
            m = _ID.match(piece)
            if m:
                out.append(f"D{int(m.group(1))}:{int(m.group(2))}")
    return list(dict.fromkeys(out))


def load_locomo(path: str | Path | None = None, include_adversarial: bool = False) -> Dataset:
    """Load ``locomo10.json`` (default: the vendored copy)."""
    file = Path(path) if path else data_dir("locomo") / "locomo10.json"
    try:
        samples = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DatasetError(f"LoCoMo file not found: {file}") from None
    docs: list[Document] = []
    evidence: dict[str, Evidence] = {}
    queries: list[Query] = []
    qrels: dict[str, dict[str, int]] = {}
    dropped_ids = dropped_qas = 0
    for ci, sample in enumerate(samples):
        sid, conv = sample["sample_id"], sample["conversation"]
        turn_unit: dict[str, str] = {}
        n = 1
        while f"session_{n}" in conv:
            doc_path = f"{sid}/session_{n}"
            lines = []
            for li, turn in enumerate(conv[f"session_{n}"], 1):
                text = " ".join(str(turn.get("text", "")).split())
                if turn.get("blip_caption"):
                    text += f" [image: {' '.join(str(turn['blip_caption']).split())}]"
                lines.append(f"{turn['speaker']}: {text}")
                ev = Evidence(doc_path, li, li)
                evidence[ev.unit_id] = ev
                m = _ID.match(turn["dia_id"])
                key = f"D{int(m.group(1))}:{int(m.group(2))}" if m else turn["dia_id"]
                turn_unit[key] = ev.unit_id
            docs.append(Document(path=doc_path, text="\n".join(lines), source="sessions",
                                 date=parse_locomo_date(conv[f"session_{n}_date_time"])))
            n += 1
        split = "train" if ci < TRAIN_CONVERSATIONS else "test"
        for qi, qa in enumerate(sample["qa"]):
            cat = int(qa["category"])
            if cat == 5 and not include_adversarial:
                continue
            ids = clean_evidence(qa.get("evidence", []))
            units = [turn_unit[i] for i in ids if i in turn_unit]
            dropped_ids += len(ids) - len(units)
            if not units:
                dropped_qas += 1
                continue
            qid = f"{sid}/q{qi}"
            queries.append(Query(qid, qa["question"], str(cat), split, scope=f"{sid}/"))
            qrels[qid] = dict.fromkeys(units, 1)
    ref = max(d.date for d in docs if d.date is not None)
    notes = (f"{dropped_ids} evidence ids named no turn and were dropped",
             f"{dropped_qas} QA items had no usable evidence and were left out",
             "split: conversations 0-4 train, 5-9 test")
    return Dataset(name="locomo", kind="evidence", queries=tuple(queries), qrels=qrels, documents=tuple(docs),
                   evidence=evidence, reference_time=ref, provenance=read_provenance(file.parent), notes=notes)
