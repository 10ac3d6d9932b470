"""The twenty-first round of docs/ranking.md: e5's bars for a question over notes alone, placed at each share of
answerable questions a bar may lose, on train rows only (those of ``gate_rounds.py e5 --rows PATH``). Per share:
English's own point over its note sets (the anchor), each language's bar (``hybridmem.eval.language_bars.note_bars``),
and per set over notes its abstention (no-answer) or false abstention (answerable), and its train nDCG@10 before and
after the bar (each answerable question's default order read on its candidates' chunk labels, the aligned joint model,
0 where the bar refuses it). The share the round measured on test (``NOTES_MAX_FALSE``) is the largest on the grid at
which no set over notes loses more than ``MAX_COST`` of its train nDCG@10 to the bar: half of the 0.01 the issue
allows under the best fixed fusion, the other half left to the order itself, which leads that fusion by less on some
sets. Then, per share, the bars placed on one half of each set's train questions (XQuAD-R's questions come article by
article, so the halves hold different articles) and read on the other half, both ways: how far a bar placed on some
articles carries to others. Not shipped (docs/ranking.md, "The twenty-first round").

    PYTHONPATH=. python eval/reports/note_bars.py /tmp/e5-rows.pkl
"""
import pickle
import sys
from collections import defaultdict

import numpy as np

from hybridmem.config.calibration import ANSWER_THRESHOLD, gate_model, joint_model
from hybridmem.eval.decisions import _EMPTY, DecisionRows
from hybridmem.eval.language_bars import NOTES_MAX_FALSE, language_bars, note_bars, over_notes, set_bar
from hybridmem.eval.lift import lift_ndcg
from hybridmem.ranking.gate import GATE_FEATURES, answer_probability

MODEL = "multilingual-e5-small"
SHARES = (0.005, 0.0075, 0.01, 0.0125, 0.015, 0.0175, 0.02)
MAX_COST = 0.005

saved = pickle.loads(open(sys.argv[1], "rb").read())
if saved["model"] != MODEL or saved["features"] != GATE_FEATURES:
    sys.exit(f"note_bars.py: {sys.argv[1]} does not hold e5's rows over today's gate features")
rows: DecisionRows = saved["rows"]
gate, order_model = gate_model(MODEL, aligned=True), joint_model(MODEL, aligned=True)
coef = np.asarray(order_model.coef)

# Each answerable gate row with candidates has its order row next (hybridmem.eval.decisions.collect).
orders = iter(rows.order)
read: list[tuple[str, int, float, np.ndarray | None, np.ndarray | None]] = []
for name, feats, label in rows.gate:
    f = y = None
    if label and feats["both"] != _EMPTY:
        _, f, y = next(orders)
    if over_notes(name):
        read.append((name, label, answer_probability(dict(zip(GATE_FEATURES, feats["both"])), gate), f, y))
if next(orders, None) is not None:
    sys.exit("note_bars.py: the rows' order and gate rows do not pair up (collected by another version?)")
judged = [(name, f @ coef, np.zeros(len(y)), y) for name, _, _, f, y in read if y is not None and y.any()]
qualities = iter(lift_ndcg(judged, 0.0))  # nDCG@10 of those with a relevant candidate, in their order
probs: dict[tuple[str, int], list[tuple[float, float]]] = defaultdict(list)
for name, label, p, _, y in read:
    probs[name, label].append((p, float(next(qualities)) if y is not None and y.any() else 0.0))

usual = language_bars(rows, gate, ANSWER_THRESHOLD)
print(f"usual bars: {usual}\n")
print("| share | anchor (en) | worst nDCG@10 cost | " + " | ".join(
    f"{n}" for (n, label) in sorted(probs) if not label) + " |")
print("|---" * (3 + sum(1 for _, label in probs if not label)) + "|")
chosen = None
for share in SHARES:
    bars = note_bars(rows, gate, ANSWER_THRESHOLD, usual, share)
    cells, costs = [], {}
    for (name, label), v in sorted(probs.items()):
        old, new = set_bar(name, ANSWER_THRESHOLD, usual), set_bar(name, ANSWER_THRESHOLD, usual, bars)
        p, q = np.array([a for a, _ in v]), np.array([b for _, b in v])
        if label:
            costs[name] = float(np.where(p >= new, q, 0.0).mean() - np.where(p >= old, q, 0.0).mean())
        else:
            cells.append(f"{100 * np.mean(p < old):.1f} -> {100 * np.mean(p < new):.1f}%")
    worst = min(costs, key=costs.get)
    if costs[worst] >= -MAX_COST:
        chosen = share
    print(f"| {share:g} | {bars.get('en', ANSWER_THRESHOLD):.4f} | {costs[worst]:+.4f} ({worst}) | "
          + " | ".join(cells) + " |")
    print(f"  bars {bars}; nDCG@10 cost per set: "
          + ", ".join(f"{n} {c:+.4f}" for n, c in sorted(costs.items())))
print(f"\nLargest share at which no set over notes loses more than {MAX_COST:g} nDCG@10: {chosen} "
      f"(shipped: {NOTES_MAX_FALSE:g})")

# Placed on one half of each set's train rows, read on the other: what a bar placed on some articles refuses of others.
print("\n| share | false abstention on the other half: largest (set) | abstention on the other half |\n|---|---|---|")
halves = (DecisionRows(), DecisionRows())
by_set: dict[str, list] = defaultdict(list)
for r in rows.gate:
    by_set[r[0]].append(r)
for name, rs in by_set.items():
    halves[0].gate.extend(rs[: len(rs) // 2])
    halves[1].gate.extend(rs[len(rs) // 2:])
for share in SHARES:
    refused: dict[str, list[bool]] = defaultdict(list)
    for placed, read_on in ((0, 1), (1, 0)):
        bars = note_bars(halves[placed], gate, ANSWER_THRESHOLD, usual, share)
        for name, feats, _ in halves[read_on].gate:
            if over_notes(name):
                bar = set_bar(name, ANSWER_THRESHOLD, usual, bars)
                refused[name].append(answer_probability(dict(zip(GATE_FEATURES, feats["both"])), gate) < bar)
    false = {n: 100 * float(np.mean(v)) for n, v in refused.items() if not n.endswith("-cross")}
    worst = max(false, key=false.get)
    print(f"| {share:g} | {false[worst]:.1f}% ({worst}); en {false['xquad-en']:.1f}% | " + ", ".join(
        f"{n.split('-')[1]} {100 * np.mean(v):.1f}%" for n, v in sorted(refused.items()) if n.endswith("-cross"))
        + " |")
