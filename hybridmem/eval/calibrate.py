"""Fit the calibrations of :mod:`hybridmem.config.calibration` on train splits (``hybridmem eval calibrate``).

For each dataset (SciFact, LoCoMo, the demo set) and its TRAIN split: every pooled candidate of each leg (the default
pool, 24) of every answerable query is a row labelled 1 when it holds a judged unit, else 0; every pooled candidate
of the train no-answer queries (:func:`hybridmem.eval.abstention.no_answer_sets`) is a row labelled 0. Each source
(a dataset's answerable queries, or one no-answer set) gets the same total weight, so SciFact's many claims do not
outvote the memory sets. The vector leg is fitted per embedding model; the keyword leg once (it does not depend on
the model). :func:`fit_logistic` does the fitting; :func:`render` writes the constants block.

The keyword leg also learns from XQuAD-R's train split in all 11 languages (:data:`KEYWORD_ONLY_DATASETS`, one source
together): BM25 sums and term coverage mean different things in Arabic, Thai or Russian than in English, and fitted on
English alone the calibration cut most answers there (MiniLM's default on XQuAD-R ar test: 0.42 nDCG@10 against the
keyword leg's 0.68). The vector fits leave XQuAD-R out: all-MiniLM-L6-v2 is blind outside Latin script (the adaptive
step drops its leg there), so its cosines on those rows would only flatten its English fit.

Example:
    >>> rows = Rows(); rows.add("s", [0.2], 0); rows.add("s", [0.8], 1)
    >>> rows.arrays()[2].tolist()
    [0.5, 0.5]
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from hybridmem.config import DEFAULT_RANKING, Settings
from hybridmem.config.calibration import KEYWORD_FEATURES, VECTOR_FEATURES, Calibration
from hybridmem.eval.abstention import no_answer_candidates, no_answer_sets
from hybridmem.eval.datasets.xquad import LANGUAGES
from hybridmem.eval.runner import Evaluator
from hybridmem.eval.units import holds_judged
from hybridmem.ranking.calibrate import fit_logistic, keyword_features
from hybridmem.errors import HybridMemError
from hybridmem.records import Candidates

__all__ = ["CALIBRATION_DATASETS", "Rows", "collect", "fit", "render", "write_constants"]

CALIBRATION_DATASETS = ("scifact", "locomo", "demo")
KEYWORD_ONLY_DATASETS = tuple(f"xquad-{lang}" for lang in LANGUAGES)  # one source, "xquad"
CONSTANTS = Path(__file__).resolve().parents[1] / "config" / "calibration.py"


@dataclass
class Rows:
    """Feature rows, labels and sources; :meth:`arrays` weights each source to the same total."""

    x: list[list[float]] = field(default_factory=list)
    y: list[int] = field(default_factory=list)
    source: list[str] = field(default_factory=list)

    def add(self, source: str, features: Sequence[float], label: int) -> None:
        self.x.append(list(features))
        self.y.append(label)
        self.source.append(source)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        counts: dict[str, int] = defaultdict(int)
        for s in self.source:
            counts[s] += 1
        w = np.array([1.0 / counts[s] for s in self.source])
        return np.asarray(self.x, dtype=float), np.asarray(self.y, dtype=float), w

    def summary(self) -> str:
        return (f"{len(self.y)} rows ({int(sum(self.y))} relevant) from "
                + ", ".join(sorted(set(self.source))))


def _add(cand: Candidates, relevant: set[int], src: str, vec: Rows, kw: Rows, pool: int) -> None:
    q = frozenset(cand.query_tokens)
    for h in cand.vector[:pool]:
        vec.add(src, [h.raw], int(h.chunk_id in relevant))
    for h in cand.keyword[:pool]:
        kw.add(src, keyword_features(h.raw, q, cand.chunks[h.chunk_id].tokens), int(h.chunk_id in relevant))


def collect(ev: Evaluator, vec: Rows, kw: Rows, pool: int = DEFAULT_RANKING.pool, source: str | None = None) -> None:
    """Add ``ev``'s dataset's train rows (answerable and no-answer) to ``vec`` and ``kw``, named ``source`` (default:
    the dataset's name)."""
    ds = ev.dataset
    train = ds.select("train")
    cands = ev.candidates(pool)
    for q in train.queries:
        c = cands[q.id]
        relevant = set()
        for cid in {h.chunk_id for h in (*c.vector[:pool], *c.keyword[:pool])}:
            if holds_judged(c.chunks[cid], ds.qrels[q.id], ds.evidence, ds.kind):
                relevant.add(cid)
        _add(c, relevant, source or ds.name, vec, kw, pool)
    for s in no_answer_sets(ds):
        for c in no_answer_candidates(ev, s.select("train").queries, pool, s.within):
            _add(c, set(), s.name, vec, kw, pool)


def fit(rows: Rows, features: Sequence[str], nonnegative: Sequence[int], l2: float = 1e-3) -> Calibration:
    """A :class:`Calibration` fitted on ``rows``."""
    x, y, w = rows.arrays()
    coef, b = fit_logistic(x, y, w, l2=l2, nonnegative=nonnegative)
    return Calibration(tuple(features), tuple(round(c, 4) for c in coef), round(b, 4), rows.summary())


def calibrate(settings_by_model: dict[str, Settings], datasets: Sequence[str] = CALIBRATION_DATASETS,
              progress: bool = True, keyword_only: Sequence[str] = KEYWORD_ONLY_DATASETS
              ) -> tuple[dict[str, Calibration], Calibration]:
    """Fit the vector leg per model (``{model: settings that select it}``) on ``datasets``, and the keyword leg on the
    first model's rows of ``datasets`` plus ``keyword_only`` (keyword-only indexes, one source ``xquad``)."""
    from hybridmem.eval.datasets import load_dataset

    vector: dict[str, Calibration] = {}
    keyword: Calibration | None = None
    for model, settings in settings_by_model.items():
        vec, kw = Rows(), Rows()
        for name in datasets:
            ev = Evaluator(load_dataset(name), settings, progress=progress)
            collect(ev, vec, kw)
            ev.close()
        vector[model] = fit(vec, VECTOR_FEATURES, nonnegative=(0,))
        if keyword is None:
            no_vectors = settings.override(embedding={"provider": "none"})
            for name in keyword_only:
                ev = Evaluator(load_dataset(name), no_vectors, progress=progress)
                collect(ev, Rows(), kw, source="xquad")
                ev.close()
            keyword = fit(kw, KEYWORD_FEATURES, nonnegative=(0, 1))
    if keyword is None:
        raise HybridMemError("calibrate needs at least one embedding model's settings")
    return vector, keyword


def render(vector: dict[str, Calibration], keyword: Calibration, joint: Calibration | None = None,
           gates: dict[str, Calibration | tuple[Calibration, ...]] | None = None, threshold: float | None = None,
           joints: dict[str, Calibration] | None = None) -> str:
    """The constants block of :mod:`hybridmem.config.calibration`; the order (pooled ``joint`` and per-model
    ``joints``), the gates and the threshold not given keep their current values."""
    from hybridmem.config import calibration as current

    joint = current.JOINT_MODEL if joint is None else joint
    # a model refitted replaces every order of its own: an aligned order train no longer weighs is dropped
    refit = {name.split("|")[0] for name in joints or {}}
    joints = {**{k: v for k, v in current.JOINT_MODELS.items() if k.split("|")[0] not in refit}, **(joints or {})}
    gates = {**current.GATE_MODELS, **(gates or {})}
    threshold = current.ANSWER_THRESHOLD if threshold is None else threshold

    def text(x: object) -> str:  # Python source, strings in double quotes (JSON's escapes are Python's too)
        if isinstance(x, str):
            return json.dumps(x, ensure_ascii=False)
        if isinstance(x, tuple):
            return "(" + ", ".join(text(v) for v in x) + ("," if len(x) == 1 else "") + ")"
        return repr(x)

    def cal(c: Calibration, indent: str) -> list[str]:
        return [f"Calibration({text(c.features)}, {text(c.coef)}, {text(c.intercept)},",
                f"{indent}{text(c.fitted_on)})"]

    lines = ["VECTOR_CALIBRATIONS: dict[str, Calibration] = {"]
    for model, c in vector.items():
        head, tail = cal(c, "        ")
        lines += [f"    {text(model)}: {head}", tail + ","]
    lines.append("}")
    head, tail = cal(keyword, "    ")
    lines += [f"KEYWORD_CALIBRATION = {head}", tail]
    head, tail = cal(joint, "    ")
    lines += [f"JOINT_MODEL = {head}", tail]
    lines.append("JOINT_MODELS: dict[str, Calibration] = {")
    for model, c in joints.items():
        head, tail = cal(c, "        ")
        lines += [f"    {text(model)}: {head}", tail + ","]
    lines.append("}")
    lines.append("GATE_MODELS: dict[str, Calibration | tuple[Calibration, ...]] = {")
    for model, gate in gates.items():
        parts = gate if isinstance(gate, tuple) else (gate,)
        for i, c in enumerate(parts):  # several models that must all answer: a tuple
            head, tail = cal(c, "        ")
            opening = "(" if isinstance(gate, tuple) and i == 0 else ""
            last = isinstance(gate, tuple) and i == len(parts) - 1
            closing = ("," if len(parts) == 1 else "") + ")" if last else ""  # a one-gate tuple keeps its comma
            lines += [f"    {text(model)}: {opening}{head}" if i == 0 else f"        {head}", tail + closing + ","]
    lines.append("}")
    lines.append(f"ANSWER_THRESHOLD = {threshold!r}")
    return "\n".join(lines) + "\n"


def write_constants(block: str, path: Path = CONSTANTS) -> None:
    """Replace the fitted block (between ``# BEGIN FITTED`` and ``# END FITTED``) of ``path``."""
    text = path.read_text(encoding="utf-8")
    new = re.sub(r"(# BEGIN FITTED\n).*?(# END FITTED)", lambda m: m.group(1) + block + m.group(2), text, flags=re.S)
    path.write_text(new, encoding="utf-8")
