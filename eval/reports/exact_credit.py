"""The alignment's credit for a passage holding the question's very piece (``retrieve/alignment.py: EXACT_CREDIT``).

The order's ``align_lift`` (:mod:`hybridmem.ranking.joint`) reads each read passage's alignment mean: per query token,
its best cosine with a token of the passage. Tokens are read in context, so an identifier's own note can align less
than a note with a near identifier ("uniq0037" in a short Chinese note read closer to "uniq0137" than "uniq0137" in a
long one of code). A passage's mean credits a query token whose piece it holds ``credit`` of the token's shortfall
from 1. Per TRAIN query with an answer, each candidate's features under the default config and each read passage's
mean at credit 0 and at credit 1 are collected (every credit between is their blend); the credit and the lift's
weight are then chosen together on train nDCG@10, each source (demo, LoCoMo, SciFact, XQuAD-R) weighing the same, as
:func:`hybridmem.eval.lift.fit_lift` weighs the lift alone (both score through ``lift_ndcg``). ``--split test``
reads the test split with the same rows.

    PYTHONPATH=. python eval/reports/exact_credit.py ROWS [--split test] [DATASET ...]  # collects ROWS once (~40 min)
"""
import pickle
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

import hybridmem.retrieve.alignment as alignment
from hybridmem.config import DEFAULT_RANKING
from hybridmem.config.calibration import JOINT_MODELS
from hybridmem.eval.datasets import load_dataset
from hybridmem.eval.decisions import DECISION_DATASETS, _aligned, _source
from hybridmem.eval.lift import DEPTH, LIFT_GRID, lift_ndcg
from hybridmem.eval.runner import Evaluator, eval_config
from hybridmem.eval.units import holds_judged
from hybridmem.ranking.pipeline import decision_features

CREDITS = (0.0, 0.25, 0.5, 0.75, 1.0)
MODEL = "multilingual-e5-small"
_align = alignment.align_passages


class _Mean(float):
    """A passage's mean as the order reads it, carrying its means at credit 0 and 1."""
    ends = (0.0, 0.0)


def _recording(query, passages):  # noqa: ANN001, ANN202 - align_passages, each mean carrying both ends
    saved = alignment.EXACT_CREDIT
    try:
        alignment.EXACT_CREDIT = 0.0
        out, plain = _align(query, passages)
        alignment.EXACT_CREDIT = 1.0
        _, full = _align(query, passages)
    finally:
        alignment.EXACT_CREDIT = saved
    means = []
    for a, b in zip(plain, full):
        m = _Mean(a + saved * (b - a))
        m.ends = (a, b)
        means.append(m)
    return out, means


def collect(split: str, names: tuple[str, ...]) -> list[tuple]:
    """Per answerable ``split`` query: ``(dataset, features, labels, (mean at 0, mean at 1) per candidate, read)``."""
    alignment.align_passages = _recording
    rows = []
    for name in names:
        t = time.time()
        ds = load_dataset(name)
        ev = Evaluator(ds, None, progress=False)
        config = eval_config(DEFAULT_RANKING, DEPTH)
        cands = ev.candidates(config.pool)
        for q in ds.select(split).queries:
            c = _aligned(ev, cands[q.id])
            joint, _ = decision_features(c, config)
            if not joint or not ds.qrels.get(q.id):
                continue
            ids = list(joint)
            read = c.passage_alignment or {}
            rows.append((name, np.array([joint[i] for i in ids]),
                         np.array([int(holds_judged(c.chunks[i], ds.qrels[q.id], ds.evidence, ds.kind)) for i in ids]),
                         np.array([getattr(read.get(i), "ends", (0.0, 0.0)) for i in ids]),
                         np.array([i in read for i in ids])))
        ev.close()
        print(f"{name}: {len(rows)} queries so far, {time.time() - t:.0f} s", file=sys.stderr, flush=True)
    alignment.align_passages = _align
    return rows


def lifts(rows: list[tuple], credit: float) -> list[np.ndarray]:
    """``align_lift`` of every candidate at ``credit``: its mean less the lowest read one's, 0 when not read."""
    out = []
    for _, _, _, ends, read in rows:
        mean = ends[:, 0] + credit * (ends[:, 1] - ends[:, 0])
        lift = np.zeros(len(mean))
        if read.any():
            lift[read] = mean[read] - mean[read].min()
        out.append(lift)
    return out


def table(rows: list[tuple], per_set: bool = False) -> dict:
    """nDCG@10 of the order ``z + beta * lift`` for each credit and weight: the mean over sources (and per set)."""
    plain = JOINT_MODELS[MODEL]
    coef, b = np.array(plain.coef[:-1]), plain.intercept
    usable = [r for r in rows if r[2].any()]
    z = [f[:, :-1] @ coef + b for _, f, _, _, _ in usable]
    by_set, by_source = defaultdict(list), defaultdict(list)
    for i, r in enumerate(usable):
        by_set[r[0]].append(i)
        by_source[_source(r[0])].append(i)
    out = {}
    for credit in CREDITS:
        ordered = [(r[0], zi, lift, r[2]) for r, zi, lift in zip(usable, z, lifts(usable, credit))]
        for beta in LIFT_GRID:
            per = lift_ndcg(ordered, beta)
            out[(credit, beta)] = (float(np.mean([per[ix].mean() for ix in by_source.values()])),
                                   {s: float(per[ix].mean()) for s, ix in by_set.items()} if per_set else {})
    return out


def main() -> None:
    args = sys.argv[2:]
    split = args[args.index("--split") + 1] if "--split" in args else "train"
    chosen = tuple(a for a in args if a not in ("--split", split))
    path = Path(sys.argv[1])
    if not path.exists():
        names = chosen or DECISION_DATASETS + (("cranfield",) if split == "test" else ())
        path.write_bytes(pickle.dumps(collect(split, names)))
    got = table(pickle.loads(path.read_bytes()), per_set=split == "test")
    print(f"{split} nDCG@{DEPTH}, mean of the sources; rows: credit, columns: the lift's weight (logits)")
    print("| credit | " + " | ".join(f"{b:g}" for b in LIFT_GRID) + " |")
    print("|---" * (len(LIFT_GRID) + 1) + "|")
    for credit in CREDITS:
        print(f"| {credit:g} | " + " | ".join(f"{got[(credit, b)][0]:.4f}" for b in LIFT_GRID) + " |")
    best = max(got, key=lambda k: (got[k][0], -k[0], -k[1]))
    print(f"best: credit {best[0]:g}, weight {best[1]:g} ({got[best][0]:.4f})")
    if split == "test":
        for key in ((0.0, 80.0), (alignment.EXACT_CREDIT, 80.0)):
            print(key, {s: round(v, 4) for s, v in got[key][1].items()})


if __name__ == "__main__":
    main()
