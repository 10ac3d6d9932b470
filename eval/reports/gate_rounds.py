"""The answer gate on train, as each round in docs/ranking.md was chosen: a model's decision rows (every TRAIN query of
every decision dataset and its no-answer sets) and what its aligned gate, or one over other features, scores on them:
per no-answer set the share it abstains on, per answerable set its false abstention, and the same for each XQuAD-R
language read by a gate fitted without it (`hybridmem.eval.gate_rounds.gate_table`). Test splits are never read.

    PYTHONPATH=. python eval/reports/gate_rounds.py e5 --rows /tmp/e5-rows.pkl
    PYTHONPATH=. python eval/reports/gate_rounds.py e5 --rows /tmp/e5-rows.pkl --features vector_top,vector_gap,...

``--rows PATH`` reads the rows from PATH when it exists, else collects them (e5: about 40 minutes on 2 cores) and
writes them there, so that variants of the gate are compared on the same rows in seconds. Without ``--features`` the
gate is the shipped aligned gate's (`ALIGNED_USED_BY_MODEL`).

``--language-bars`` places the shipped aligned gate's bar per question language on the train rows
(`hybridmem.eval.language_bars`; `LANGUAGE_BARS` in hybridmem/config/calibration.py) and prints what reading each
set against it changes, on train and, with ``--test-rows PATH`` (collected there when missing, about 15 minutes for
e5), on the test splits' rows, read only to report:

    PYTHONPATH=. python eval/reports/gate_rounds.py e5 --rows /tmp/e5-rows.pkl --language-bars --test-rows /tmp/t.pkl

MiniLM's (``local``: train rows about 55 minutes, test rows about 15) start from English's own 2% point
(``language_bars.ANCHORED``); its pair of gates, which decides the questions whose blind vector leg was dropped, gets
bars of its own placed the same way (``<model>|keyword+aligned``), printed after the aligned gate's.

``--notes [SHARE]`` with ``--language-bars`` places e5's bars for a question over notes alone too
(``language_bars.note_bars``: English's own SHARE point over its note sets, each language moved from it as on
XQuAD-R; "The twenty-first round"; ``eval/reports/note_bars.py`` prints what each share costs):

    PYTHONPATH=. python eval/reports/gate_rounds.py e5 --rows /tmp/e5-rows.pkl --language-bars --notes
"""
import argparse
import pickle
import sys
import time
from pathlib import Path

import numpy as np

from hybridmem.config import Settings, provider_model
from hybridmem.config.calibration import ANSWER_THRESHOLD, GATE_MODELS, gate_model
from hybridmem.eval.decisions import ALIGNED_USED_BY_MODEL, DECISION_DATASETS, collect_rows
from hybridmem.eval.language_bars import ANCHORED, NOTES_MAX_FALSE, bar_table, language_bars, note_bars
from hybridmem.eval.gate_rounds import gate_table
from hybridmem.ranking.gate import GATE_FEATURES

ap = argparse.ArgumentParser()
ap.add_argument("provider", choices=("e5", "local"))
ap.add_argument("--rows", type=Path, help="read the rows here, or collect and write them here")
ap.add_argument("--features", help="comma-separated GATE_FEATURES names (default: the shipped aligned gate's)")
ap.add_argument("--language-bars", action="store_true", help="place the bar per question language; print its table")
ap.add_argument("--test-rows", type=Path, help="with --language-bars: the test splits' rows (collected when missing)")
ap.add_argument("--notes", type=float, nargs="?", const=NOTES_MAX_FALSE, metavar="SHARE",
                help=f"with --language-bars: place the bars for notes too, at SHARE (default {NOTES_MAX_FALSE:g})")
args = ap.parse_args()
settings = Settings().override(embedding={"provider": args.provider})
model = provider_model(args.provider, settings.embedding.model)
features = tuple(args.features.split(",")) if args.features else ALIGNED_USED_BY_MODEL[model]
unknown = set(features) - set(GATE_FEATURES)
if unknown:
    sys.exit(f"gate_rounds.py: {', '.join(sorted(unknown))} not among the gate's features ({', '.join(GATE_FEATURES)})")



def load_rows(path: Path | None, split: str):  # noqa: ANN201
    if path and path.exists():
        saved = pickle.loads(path.read_bytes())
        if saved["model"] != model:
            sys.exit(f"gate_rounds.py: {path} holds {saved['model']}'s rows, not {model}'s")
        if saved["features"] != GATE_FEATURES:
            sys.exit(f"gate_rounds.py: {path} was collected over other gate features than today's; collect again")
        return saved["rows"]
    t0 = time.time()
    got = collect_rows(settings, DECISION_DATASETS, split=split)
    print(f"{split} rows collected in {time.time() - t0:.0f} s", file=sys.stderr)
    if path:
        path.write_bytes(pickle.dumps({"model": model, "features": GATE_FEATURES, "rows": got}))
    return got


def pct(v: float) -> str:
    return f"{100 * v:.1f}%"


def print_bars(key: str, gate: object, pair: bool, rows: object, test_rows: object) -> None:
    """One gate's bars per question language, placed on ``rows``, and what they change on train and test."""
    start = f"English's own 2% point, at least {ANSWER_THRESHOLD:g}" if model in ANCHORED else f"{ANSWER_THRESHOLD:g}"
    bars = language_bars(rows, gate, ANSWER_THRESHOLD, anchored=model in ANCHORED, pair=pair)
    print(f"\n{key}: bars per question language (shifts from {start}): {bars}")
    notes = None
    if args.notes is not None and not pair and model not in ANCHORED:
        notes = note_bars(rows, gate, ANSWER_THRESHOLD, bars, args.notes)
        print(f"{key}|notes: bars over notes alone (English's own {args.notes:g} point over its notes): {notes}")
    for split, split_rows in (("train", rows), ("test", test_rows)):
        if split_rows is None:
            continue
        bt = bar_table(split_rows, gate, ANSWER_THRESHOLD, bars, pair=pair, notes=notes)
        print(f"\n{split}: | set | bar | returns nothing: shared threshold -> the language's bar |\n|---|---|---|")
        for name in bt.bar:
            kind = "false abstention" if bt.answerable[name] else "abstention"
            print(f"| {name} | {bt.bar[name]:g} | {kind} {pct(bt.before[name])} -> {pct(bt.after[name])} |")
        none = [n for n in bt.bar if not bt.answerable[n]]
        print(f"No-answer sets, mean / worst: {pct(np.mean([bt.before[n] for n in none]))} / "
              f"{pct(min(bt.before[n] for n in none))} -> {pct(np.mean([bt.after[n] for n in none]))} / "
              f"{pct(min(bt.after[n] for n in none))}; largest false abstention "
              f"{pct(max(bt.before[n] for n in bt.bar if n not in none))} -> "
              f"{pct(max(bt.after[n] for n in bt.bar if n not in none))}")


rows = load_rows(args.rows, "train")
if args.language_bars:
    test_rows = load_rows(args.test_rows, "test") if args.test_rows else None
    print_bars(f"{model}|aligned", gate_model(model, aligned=True), False, rows, test_rows)
    if f"{model}|keyword+aligned" in GATE_MODELS:
        print_bars(f"{model}|keyword+aligned", GATE_MODELS[f"{model}|keyword+aligned"], True, rows, test_rows)
    sys.exit(0)

t = gate_table(rows, features, ANSWER_THRESHOLD)


print(f"{model}, gate over {', '.join(features)}; threshold {ANSWER_THRESHOLD:g}\n")
print("| set | abstention (train) | left out of the fit |\n|---|---|---|")
for name, v in sorted(t.abstention.items()):
    print(f"| {name} | {pct(v)} | {pct(t.held_out_abstention[name]) if name in t.held_out_abstention else ''} |")
print(f"\nMean / worst of the no-answer sets: {pct(np.mean(list(t.abstention.values())))} / "
      f"{pct(min(t.abstention.values()))}; largest false abstention {pct(max(t.false.values()))} "
      f"({max(t.false, key=t.false.get)}).")
if t.held_out_abstention:
    print(f"Left out of the fit (XQuAD-R): {pct(np.mean(list(t.held_out_abstention.values())))} / "
          f"{pct(min(t.held_out_abstention.values()))}; largest false abstention "
          f"{pct(max(t.held_out_false.values()))} ({max(t.held_out_false, key=t.held_out_false.get)}).")
