"""The thirteenth round of docs/ranking.md: e5's aligned gate features through monotone gradient-boosted trees instead
of a logistic model, on the train rows `eval/reports/gate_rounds.py e5 --rows PATH` keeps, placed by the shipping rule
(the largest threshold at which no answerable train set loses more than 2%); the train table, and each XQuAD-R
language read by trees fitted without it. Test splits are not read. Needs scikit-learn (sentence-transformers brings
it; the engine does not use it).

    PYTHONPATH=. python eval/reports/gate_trees.py /tmp/e5-rows.pkl
"""
import pickle
import sys
from pathlib import Path

import numpy as np
from sklearn.ensemble import HistGradientBoostingClassifier

from hybridmem.eval.decisions import ALIGNED_USED, MAX_FALSE_ABSTENTION, _source, vector_took_part
from hybridmem.eval.lift import source_weights
from hybridmem.ranking.gate import GATE_FEATURES

VARIANTS = {"100 rounds, depth 3": dict(max_iter=100, max_depth=3, learning_rate=0.1),
            "200 rounds, depth 2, L2 1.0": dict(max_iter=200, max_depth=2, learning_rate=0.1, l2_regularization=1.0)}

if len(sys.argv) != 2 or not Path(sys.argv[1]).exists():
    sys.exit("usage: gate_trees.py ROWS.pkl (rows kept by eval/reports/gate_rounds.py e5 --rows ROWS.pkl)")
saved = pickle.loads(Path(sys.argv[1]).read_bytes())
if saved["features"] != GATE_FEATURES:
    sys.exit("gate_trees.py: the rows were collected over other gate features than today's; collect again")
rows = vector_took_part(saved["rows"]).gate
features = list(ALIGNED_USED)
x = np.array([r[1]["both"] for r in rows])[:, [GATE_FEATURES.index(f) for f in features]]
y = np.array([r[2] for r in rows])
name = np.array([r[0] for r in rows])
language = np.array([n.split("-")[1] if n.startswith("xquad-") else "" for n in name])
w = np.asarray(source_weights([("A:" if r[2] else "N:") + _source(r[0]) for r in rows]), float)
for label in (0, 1):  # answerable and no-answer rows weigh the same in total, as fit_gate weighs them
    w[y == label] /= w[y == label].sum()
monotone = [-1 if f == "log_terms" else 1 for f in features]  # the logistic gate's signs


def fit(mask: np.ndarray, params: dict) -> np.ndarray:
    trees = HistGradientBoostingClassifier(monotonic_cst=monotone, random_state=0, **params)
    return trees.fit(x[mask], y[mask], sample_weight=w[mask]).predict_proba(x)[:, 1]


def placed(p: np.ndarray, mask: np.ndarray) -> float:
    """The largest threshold at which no answerable set within ``mask`` abstains (p < t) on more than 2% (or one)."""
    t = 1.0
    for s in set(name[mask & (y == 1)]):
        ps = np.sort(p[mask & (y == 1) & (name == s)])
        k = int(max(MAX_FALSE_ABSTENTION * len(ps), 1.0))
        t = min(t, ps[k] if k < len(ps) else 1.0)
    return t


def shares(p: np.ndarray, t: float, mask: np.ndarray) -> tuple[dict[str, float], dict[str, float]]:
    out = {s: float(np.mean(p[mask & (name == s)] < t)) for s in sorted(set(name[mask]))}
    return ({s: v for s, v in out.items() if not y[name == s][0]}, {s: v for s, v in out.items() if y[name == s][0]})


def line(what: str, abstention: dict[str, float], false: dict[str, float]) -> str:
    v = list(abstention.values())
    return (f"{what}: mean {100 * np.mean(v):.1f}% / worst {100 * min(v):.1f}% / largest false "
            f"{100 * max(false.values()):.1f}%  " + ", ".join(f"{s} {100 * a:.1f}" for s, a in abstention.items()))


everything = np.ones(len(y), bool)
for what, params in VARIANTS.items():
    p = fit(everything, params)
    print(line(f"{what}, train", *shares(p, placed(p, everything), everything)))
    held_abstention: dict[str, float] = {}
    held_false: dict[str, float] = {}
    for lang in sorted(set(language) - {""}):
        kept = language != lang
        p = fit(kept, params)
        a, f = shares(p, placed(p, kept), ~kept)
        held_abstention.update(a)
        held_false.update(f)
    print(line(f"{what}, left out of the fit", held_abstention, held_false))
