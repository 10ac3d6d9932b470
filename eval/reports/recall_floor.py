"""The recall block's floor (``ranking.recall_floor``): which hits below the first an agent's context block leaves out.

``recall`` (the CLI command and the MCP prompt) puts a search's hits before an agent's prompt. Under the default every
hit the answer gate lets through comes back (no per-hit cut: it cost relevant hits in search), so a block held the
right note at p = 0.83 and five unrelated ones at p = 0.00-0.01. A floor relative to the first hit (a hit is left out
below ``recall_floor`` x the first hit's score; the first one is always kept, the gate having answered) reads the same
whatever the gate's probability. Per TRAIN query with an answer, the default's hits as a search returns them (gate on,
``max_results`` 6) are labelled relevant or not; the floor shipped is the largest of the grid at which no train set
loses more than 2% of its relevant hits (the gate's rule), with the absolute floor beside it for comparison.

    PYTHONPATH=. python eval/reports/recall_floor.py ROWS [DATASET ...]   # collects ROWS once (~30 minutes), then reads it
"""
import pickle
import sys
import time
from pathlib import Path

from hybridmem.config import DEFAULT_RANKING
from hybridmem.eval.datasets import load_dataset
from hybridmem.eval.runner import Evaluator
from hybridmem.eval.units import holds_judged
from hybridmem.ranking import rank

DATASETS = ("demo", "locomo", "scifact", "xquad-en", "xquad-vi", "xquad-zh", "xquad-ar", "xquad-de", "xquad-th")
GRID = (0.0, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2)
LOSS = 0.02  # the most relevant hits (a share) any train set may lose


def collect(names: tuple[str, ...]) -> dict[str, list[list[tuple[float, int]]]]:
    """Per dataset, per answerable train query: ``(score, relevant)`` of each hit the default search returns."""
    out = {}
    for name in names:
        t = time.time()
        ds = load_dataset(name)
        ev = Evaluator(ds, None, progress=False)
        cands = ev.candidates(DEFAULT_RANKING.pool)
        rows = []
        for q in ds.select("train").queries:
            if ds.qrels.get(q.id):
                c = ev.index.align(cands[q.id])
                rows.append([(h.final_score, int(holds_judged(c.chunks[h.chunk_id], ds.qrels[q.id], ds.evidence,
                                                               ds.kind))) for h in rank(c, DEFAULT_RANKING, now=0.0).hits])
        ev.close()
        out[name] = rows
        print(f"{name}: {len(rows)} queries, {time.time() - t:.0f} s", file=sys.stderr, flush=True)
    return out


def kept(rows: list[list[tuple[float, int]]], floor: float, relative: bool) -> tuple[float, float, float]:
    """The share of relevant hits kept, the share of the others left out, and the hits per answered query."""
    rel = rel_kept = other = other_out = hits = queries = 0
    for hs in rows:
        if not hs:
            continue
        queries += 1
        bar = floor * hs[0][0] if relative else floor
        for i, (p, y) in enumerate(hs):
            keep = i == 0 or p >= bar
            hits += keep
            rel, rel_kept = rel + y, rel_kept + (y and keep)
            other, other_out = other + (not y), other_out + (not y and not keep)
    return rel_kept / max(rel, 1), other_out / max(other, 1), hits / max(queries, 1)


def main(path: Path, names: tuple[str, ...]) -> None:
    data = pickle.loads(path.read_bytes()) if path.exists() else None
    if data is None:
        data = collect(names)
        path.write_bytes(pickle.dumps(data))
    for relative in (True, False):
        print(f"\n{'relative to the first hit' if relative else 'absolute'}: relevant kept / others left out / hits\n")
        print("| floor | " + " | ".join(data) + " |\n|---|" + "---|" * len(data))
        chosen = 0.0
        for floor in GRID:
            got = {n: kept(rows, floor, relative) for n, rows in data.items()}
            if all(k >= 1 - LOSS for k, _, _ in got.values()):
                chosen = floor
            print(f"| {floor:g} | " + " | ".join(f"{k:.3f} / {o:.3f} / {h:.2f}" for k, o, h in got.values()) + " |")
        print(f"\nthe largest floor at which no set loses more than {LOSS:.0%} of its relevant hits: {chosen:g}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), tuple(sys.argv[2:]) or DATASETS)
