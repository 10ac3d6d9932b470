"""Fit and measure the recall block's chatter filter (:mod:`hybridmem.config.chatter`; ``hybridmem eval chatter``).

Rows (``datasets/chatter/chatter.jsonl``, written for this project): chat messages (``kind`` chatter: thanks, ok,
go on, greetings, yes and no) and short topical queries (``kind`` topic: "visa", "wifi password", "牙医"), each in a
``train`` or ``test`` split; the train chat messages are in six languages, the test ones in eleven others and in
English phrasings the fit never saw. Beside them, questions drawn from every labeled dataset's split
(:data:`QUESTIONS_PER_DATASET` each, seeded): real queries a filter must never take for chatter.

Fit: every train row's query vector (the model's ``embed_batch(is_query=True)``), labelled 1 for chatter; the chat
messages weigh as much as the negatives together, and the topical queries as much as the questions (there are
about a thirtieth as many, and they are the hard ones); L2-regularized Newton iterations (:data:`L2`). Threshold: the lowest of
:data:`THRESHOLDS` at which no train negative is read as chatter under 5-fold cross-validation; where there is none
the fit is not usable and is not written (all-MiniLM-L6-v2, English only, reads 8.5% of the train topical queries as
chatter at 0.9 and catches 29% of the test chat messages: recall reads e5's vector with e5's fit for it).

Example:
    >>> folds(["a", "a", "b", "a", "b"], 2, seed=0).tolist()
    [0, 0, 1, 1, 0]
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from hybridmem.config.chatter import CHATTER_FILE, Chatter
from hybridmem.eval.datasets import LANGUAGES, load_dataset
from hybridmem.eval.datasets.base import data_dir, read_jsonl
from hybridmem.ranking.calibrate import fit_logistic

__all__ = ["ChatterFit", "fit_chatter", "folds", "question_rows", "render", "write_fits"]

QUESTION_DATASETS = ("demo", "scifact", "locomo", "cranfield", *(f"xquad-{lang}" for lang in LANGUAGES))
QUESTIONS_PER_DATASET = 150
L2 = 0.01
THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9)
FOLDS = 5


@dataclass(frozen=True)
class ChatterFit:
    """A fitted filter and what it scored: ``rates`` maps a row group (``chatter/<lang>``, ``topic``,
    ``questions``; each split) to its rows and the share read as chatter (at the highest threshold where the fit is
    not ``usable``)."""

    chatter: Chatter
    rates: dict[str, tuple[int, float]]
    usable: bool = True  # some threshold kept every train negative out (else none is shipped: the model reads no chatter)


def folds(groups: Sequence[str], k: int, seed: int = 0) -> np.ndarray:
    """A fold number per row, each group's rows dealt in turn over ``k`` folds after a seeded shuffle."""
    rng = random.Random(seed)
    out = np.zeros(len(groups), dtype=int)
    for g in sorted(set(groups)):
        idx = [i for i, x in enumerate(groups) if x == g]
        rng.shuffle(idx)
        for n, i in enumerate(idx):
            out[i] = n % k
    return out


def question_rows(split: str, seed: int = 0, per_dataset: int = QUESTIONS_PER_DATASET) -> list[tuple[str, str]]:
    """``(dataset, question)`` for ``per_dataset`` questions of ``split`` per labeled dataset, drawn seeded."""
    rng = random.Random(seed)
    out: list[tuple[str, str]] = []
    for name in QUESTION_DATASETS:
        texts = sorted({q.text for q in load_dataset(name).queries if q.split == split})
        rng.shuffle(texts)
        out += [(name, t) for t in texts[:per_dataset]]
    return out


def _rows(split: str) -> tuple[list[str], list[str], list[int]]:
    """Texts, groups and labels of ``split``: chat messages, topical queries, dataset questions."""
    texts, groups, labels = [], [], []
    for r in read_jsonl(data_dir("chatter") / "chatter.jsonl"):
        if r["split"] == split:
            texts.append(r["text"])
            groups.append(f"chatter/{r['lang']}" if r["kind"] == "chatter" else "topic")
            labels.append(int(r["kind"] == "chatter"))
    for _, text in question_rows(split):
        texts.append(text)
        groups.append("questions")
        labels.append(0)
    return texts, groups, labels


def _weights(groups: Sequence[str], labels: Sequence[int]) -> np.ndarray:
    kind = ["chatter" if lab else g for g, lab in zip(groups, labels)]
    total = {"chatter": 2.0, "topic": 1.0, "questions": 1.0}  # chat messages as much as both negatives together
    n = {k: kind.count(k) for k in total}
    return np.array([total[k] * len(kind) / (4.0 * n[k]) for k in kind])


def _embed(embedder: Any, texts: Sequence[str], batch: int = 64) -> np.ndarray:
    from hybridmem.embeddings.base import encoder_query, sanitize

    parts = [sanitize(embedder.embed_batch([encoder_query(t) for t in texts[i:i + batch]], is_query=True))
             for i in range(0, len(texts), batch)]
    return np.vstack(parts)


def _probabilities(x: np.ndarray, coef: Sequence[float], intercept: float) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-(x @ np.asarray(coef) + intercept)))


def fit_chatter(embedder: Any, progress: bool = True) -> ChatterFit:
    """Fit the filter for ``embedder``'s model on the train rows and measure it on both splits (see module doc)."""
    say = (lambda m: print(m, file=sys.stderr)) if progress else (lambda m: None)
    texts, groups, labels = _rows("train")
    say(f"embedding {len(texts)} train rows with {embedder.model}")
    x, y, w = _embed(embedder, texts), np.array(labels, dtype=float), _weights(groups, labels)
    fold = folds(groups, FOLDS)
    held = np.zeros(len(y))
    for k in range(FOLDS):
        coef, b = fit_logistic(x[fold != k], y[fold != k], w[fold != k], l2=L2)
        held[fold == k] = _probabilities(x[fold == k], coef, b)
    negatives = held[y == 0]
    threshold = next((t for t in THRESHOLDS if not (negatives >= t).any()), None)
    coef, b = fit_logistic(x, y, w, l2=L2)
    rates = _rates("train", groups, held, threshold or THRESHOLDS[-1])
    t_texts, t_groups, _ = _rows("test")
    say(f"embedding {len(t_texts)} test rows")
    rates.update(_rates("test", t_groups, _probabilities(_embed(embedder, t_texts), coef, b),
                        threshold or THRESHOLDS[-1]))
    n_pos = int(y.sum())
    fitted_on = (f"{n_pos} chat messages ({', '.join(sorted({g[8:] for g in groups if g.startswith('chatter/')}))}), "
                 f"{groups.count('topic')} topical queries and {groups.count('questions')} dataset questions, train "
                 f"split; l2 {L2}; threshold: the lowest of {THRESHOLDS} with no train negative above it under "
                 f"{FOLDS}-fold cross-validation")
    return ChatterFit(Chatter(embedder.model, tuple(round(c, 6) for c in coef), round(b, 6), threshold or 0.0,
                              fitted_on), rates, threshold is not None)


def _rates(split: str, groups: Sequence[str], probs: np.ndarray, threshold: float) -> dict[str, tuple[int, float]]:
    out = {}
    for g in sorted(set(groups)):
        mask = np.array([x == g for x in groups])
        out[f"{split}/{g}"] = (int(mask.sum()), float((probs[mask] >= threshold).mean()))
    return out


def render(fit: ChatterFit) -> str:
    """The fit's rates as a Markdown table: per split, the chat messages read as chatter (by language) and the
    topical queries and questions wrongly read as chatter."""
    head = (f"threshold {fit.chatter.threshold:g}" if fit.usable else
            f"not usable: train negatives are read as chatter at every threshold up to {THRESHOLDS[-1]:g}")
    lines = [f"Chatter filter for {fit.chatter.model}: {head}", "",
             "| split | rows | n | read as chatter |", "|---|---|---:|---:|"]
    for key, (n, rate) in fit.rates.items():
        split, group = key.split("/", 1)
        lines.append(f"| {split} | {group} | {n} | {rate:.1%} |")
    chat = {s: [r for k, r in fit.rates.items() if k.startswith(f"{s}/chatter/")] for s in ("train", "test")}
    for s, rows in chat.items():
        n = sum(r[0] for r in rows)
        if n:
            lines.append(f"| {s} | all chat messages | {n} | {sum(r[0] * r[1] for r in rows) / n:.1%} |")
    return "\n".join(lines) + "\n"


def write_fits(fits: Sequence[Chatter]) -> None:
    """Write ``fits`` into :data:`~hybridmem.config.chatter.CHATTER_FILE`, keeping other models' fits."""
    try:
        current = json.loads(CHATTER_FILE.read_text(encoding="utf-8"))
    except FileNotFoundError:
        current = {}
    for f in fits:
        current[f.model] = {"coef": list(f.coef), "intercept": f.intercept, "threshold": f.threshold,
                            "fitted_on": f.fitted_on}
    # one line per model field; the coefficients on one line each (384 of them for e5)
    body = ",\n".join(f" {json.dumps(m)}: {{\n" + ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in fit.items())
                       + "\n }" for m, fit in sorted(current.items()))
    CHATTER_FILE.write_text("{\n" + body + "\n}\n", encoding="utf-8")
