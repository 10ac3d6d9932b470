"""The nineteenth round of docs/ranking.md: how alike the top passages are to each other, as an answer-gate signal.
Train splits only.

Every signal the gate reads compares the question with passages, so its level moves with the question's language
(Vietnamese and Thai questions share many short tokens with any passage). How alike the vector leg's top passages
are among themselves compares passages with passages: an answerable question's top passages tend to share its
subject (a query-performance predictor, after Cronen-Townsend et al.'s clarity score), a question the memory cannot
answer pulls passages that each match a part of it. Per query, over the vector leg's top 10 (e5 vectors, cosines):
``coherence``, their mean pairwise cosine, and ``top_rest``, the first one's mean cosine with the nine others; beside
them the shipped gate's probability (the aligned gate and its language bar, as ``rank()`` reads them), the top cosine
and the vector gap.

Printed per XQuAD-R language: each signal's ROC AUC between answerable and cross-article questions, and the shipping
rule read on these languages alone (one threshold, the largest at which no language's answerable questions lose more
than 2%) for the gate and for the gate with ``coherence`` beside it (a logistic model over both, fitted on the rows).

    PYTHONPATH=. python eval/reports/gate_coherence.py /tmp/coherence.pkl xquad-vi xquad-th xquad-zh xquad-en xquad-ar

The rows are kept at the first argument (collected when missing; about 2.5 minutes a language on 2 cores).
"""
import pickle
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

from hybridmem.config import DEFAULT_RANKING, Settings
from hybridmem.eval.abstention import no_answer_candidates, no_answer_sets
from hybridmem.eval.datasets import load_dataset
from hybridmem.eval.decisions import DEPTH, _aligned
from hybridmem.eval.runner import Evaluator, eval_config
from hybridmem.ranking import rank
from hybridmem.ranking.memo import RankMemo
from hybridmem.records import Candidates

TOP = 10
SIGNALS = ("coherence", "top_rest", "top_cos", "gap")
MAX_FALSE = 0.02


def collect(names: list[str]) -> list[tuple[str, int, float, dict[str, float]]]:
    """``(language, answerable, gate probability, signals)`` per train question of each XQuAD-R dataset."""
    config = eval_config(DEFAULT_RANKING, DEPTH)
    rows = []
    for name in names:
        t0 = time.time()
        ev = Evaluator(load_dataset(name), Settings(), progress=False)
        cands = ev.candidates(config.pool)
        ids, mat, _, _ = ev.index.retriever.vectors()
        at = {int(i): k for k, i in enumerate(ids)}

        def signals(c: Candidates) -> dict[str, float] | None:
            top = c.vector[:TOP]
            if len(top) < 3:
                return None
            m = mat[[at[h.chunk_id] for h in top]]
            sims = m @ m.T
            cos = np.array([h.raw for h in top])
            return {"coherence": float(sims[~np.eye(len(top), dtype=bool)].mean()),
                    "top_rest": float(sims[0, 1:].mean()), "top_cos": float(cos[0]), "gap": float(cos[0] - cos[1:].mean())}

        def add(c: Candidates, answerable: int) -> None:
            if (s := signals(c)) is not None:
                c = _aligned(ev, c)
                p = rank(c, config, memo=RankMemo(c), explain=False, centred_snippets=False).answer_probability
                rows.append((name.split("-", 1)[1], answerable, float(p), s))

        for q in ev.dataset.select("train").queries:
            add(cands[q.id], 1)
        for s in no_answer_sets(ev.dataset):
            sub = s.select("train")
            for c in no_answer_candidates(ev, sub.queries, config.pool, sub.within):
                add(c, 0)
        ev.close()
        print(f"{name}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    return rows


def logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


def shipping_rule(score: np.ndarray, y: np.ndarray, lang: np.ndarray) -> tuple[float, dict[str, float]]:
    """One threshold for every language (the largest at which none loses more than 2% of its answerable questions)
    and each language's abstention on its cross-article questions under it."""
    t = min(np.quantile(score[(lang == g) & (y == 1)], MAX_FALSE) for g in np.unique(lang))
    return t, {g: float(np.mean(score[(lang == g) & (y == 0)] < t)) for g in np.unique(lang)}


def main() -> None:
    path, names = Path(sys.argv[1]), sys.argv[2:]
    rows = pickle.loads(path.read_bytes()) if path.exists() else collect(names)
    path.write_bytes(pickle.dumps(rows))
    lang = np.array([r[0] for r in rows])
    y = np.array([r[1] for r in rows])
    gate = logit(np.array([r[2] for r in rows]))
    sig = {k: np.array([r[3][k] for r in rows]) for k in SIGNALS}
    print("| language | gate AUC | " + " | ".join(f"{k} AUC (answerable / no-answer median)" for k in SIGNALS) + " |")
    print("|---" * (2 + len(SIGNALS)) + "|")
    for g in np.unique(lang):
        w = lang == g
        cells = [f"{roc_auc_score(y[w], sig[k][w]):.3f} ({np.median(sig[k][w & (y == 1)]):.3f} / "
                 f"{np.median(sig[k][w & (y == 0)]):.3f})" for k in SIGNALS]
        print(f"| {g} | {roc_auc_score(y[w], gate[w]):.3f} | " + " | ".join(cells) + " |")
    both = np.column_stack([gate, sig["coherence"]])
    fitted = LogisticRegression(C=1e3).fit(both, y)
    with_coherence = fitted.decision_function(both)
    for label, score in (("the gate", gate), ("the gate and coherence", with_coherence)):
        t, abst = shipping_rule(score, y, lang)
        print(f"\n{label}: threshold {t:.3f} (logit); abstention on cross-article questions: "
              + ", ".join(f"{g} {100 * a:.1f}%" for g, a in abst.items())
              + f"; mean {100 * np.mean(list(abst.values())):.1f}%")
    print(f"\ncoefficients (gate logit, coherence): {fitted.coef_[0].round(3).tolist()}")


if __name__ == "__main__":
    main()
