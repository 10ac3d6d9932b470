"""Labeled datasets in one :class:`Dataset` shape, and :func:`load_dataset` to get one by name or path.

Names: ``demo``, ``scifact``, ``locomo`` (``locomo-all`` keeps category 5), ``cranfield``, ``xquad-<lang>``,
``xquad-<lang>+<lang>`` (a memory in two languages, questions in the first); or a path
to a memory workspace with its own labels (``.hybridmem-labels/``, read fresh on every call: labels change while the
workbench runs), a BEIR folder, a workspace dataset folder (``meta.json``), or a LoCoMo-style JSON file.
"""

from __future__ import annotations

from pathlib import Path

from hybridmem.config import LABELS_DIRNAME
from hybridmem.errors import DatasetError
from hybridmem.eval.datasets.base import Dataset, Evidence, Query, data_dir, parse_time
from hybridmem.eval.datasets.beir import load_beir, read_qrels
from hybridmem.eval.datasets.cranfield import load_cranfield
from hybridmem.eval.datasets.locomo import clean_evidence, load_locomo
from hybridmem.eval.datasets.workspace import load_demo, load_labels, load_workspace_dataset
from hybridmem.eval.datasets.xquad import LANGUAGES, load_xquad, load_xquad_pair

__all__ = [
    "DATASET_NAMES", "Dataset", "Evidence", "LANGUAGES", "Query", "clean_evidence", "data_dir", "load_beir",
    "load_cranfield", "load_dataset", "load_demo", "load_labels", "load_locomo", "load_workspace_dataset", "load_xquad",
    "load_xquad_pair", "parse_time", "read_qrels",
]

DATASET_NAMES = ("demo", "scifact", "locomo", "locomo-all", "cranfield", *(f"xquad-{lang}" for lang in LANGUAGES))
_CACHE: dict[tuple, Dataset] = {}


def load_dataset(name_or_path: str | Path, queries: str | Path | None = None,
                 judgments: str | Path | None = None) -> Dataset:
    """A dataset by name (see module doc) or path; ``queries``/``judgments`` pair a plain workspace folder with labels.

    Raises:
        DatasetError: the name is unknown and the path does not exist; the message lists the names.
    """
    if not queries and not judgments and (Path(name_or_path).expanduser() / LABELS_DIRNAME / "queries.jsonl").is_file():
        return load_labels(name_or_path)
    key = (str(name_or_path), str(queries), str(judgments))
    if key in _CACHE:
        return _CACHE[key]
    name = str(name_or_path)
    if name == "demo":
        ds = load_demo()
    elif name == "scifact":
        ds = load_beir(data_dir("scifact"), name="scifact")
    elif name in ("locomo", "locomo-all"):
        ds = load_locomo(include_adversarial=name == "locomo-all")
    elif name == "cranfield":
        ds = load_cranfield()
    elif name.startswith("xquad-") and "+" in name:
        ds = load_xquad_pair(*name.split("-", 1)[1].split("+", 1))
    elif name.startswith("xquad-"):
        ds = load_xquad(name.split("-", 1)[1])
    else:
        p = Path(name)
        if bool(queries) != bool(judgments) and not (p / "meta.json").is_file():
            raise DatasetError(f"{'--queries' if queries else '--judgments'} needs "
                               f"{'--judgments' if queries else '--queries'} beside it for the folder {name}")
        if queries or judgments or (p / "meta.json").is_file():
            ds = load_workspace_dataset(p, queries, judgments)
        elif (p / "corpus.jsonl").is_file():
            ds = load_beir(p)
        elif p.is_file() and p.suffix == ".json":
            ds = load_locomo(p)
        elif p.is_dir() and (p / "queries.jsonl").is_file() and (p / "judgments.jsonl").is_file():
            ds = load_workspace_dataset(p)
        elif p.is_dir():
            raise DatasetError(f"{name} has no labels yet: label queries in the workbench's search inspector, run "
                               f"`hybridmem labels import FILE {name}`, or give --queries and --judgments files")
        else:
            raise DatasetError(
                f"unknown dataset {name!r} (no such file or folder): expected one of {', '.join(DATASET_NAMES)}, a "
                "BEIR folder, a folder with meta.json, or a workspace plus --queries and --judgments files"
            )
    _CACHE[key] = ds
    return ds
