"""Rounds of docs/ranking.md that screen a new answer-gate signal beside the shipped gate, on train splits only: the
nineteenth (how alike the top passages are) and the twentieth (the question's adjacent terms, near each other in a
passage). Each family of signals is computed per train question of the XQuAD-R languages named, beside the shipped
gate's probability (the aligned gate and its language bar, as ``rank()`` reads them).

``--family coherence`` (the nineteenth): over the vector leg's top 10 (e5 vectors, cosines), ``coherence``, their mean
pairwise cosine, and ``top_rest``, the first one's mean cosine with the nine others (a query-performance predictor
after Cronen-Townsend et al.'s clarity score: an answerable question's top passages tend to share its subject); beside
them the top cosine and the vector gap.

``--family pairs`` (the twentieth): each pair of the question's adjacent keyword terms (stopwords dropped, as the
keyword leg reads it) is held by a passage when the second follows the first within ``WINDOW`` of the passage's
stored tokens (a Vietnamese word is two syllables, each stored with and without its marks; a Chinese or Thai one
overlapping bigrams: single terms of those languages are found in any passage, pairs much less). ``pair_cov_w``: the
largest share of the pairs, each weighed by its two terms' BM25 IDF, that one of either leg's top 5 holds;
``pair_cov``: the same unweighted; ``pair_share_w`` and ``pair_share``: the share held by some passage of either
leg's top 40.

Printed per language: each signal's ROC AUC between answerable and cross-article questions (with the two classes'
medians); then the gate alone and the gate with each signal beside it (a logistic model over both, fitted on the rows,
each language and class weighing the same), read two ways: one threshold for all (the largest at which no language's
answerable questions lose more than 2%) and each language's own 2% point (an oracle no deployed gate has).

    PYTHONPATH=. python eval/reports/gate_screen.py --family coherence /tmp/coh.pkl xquad-vi xquad-th xquad-zh xquad-en xquad-ar
    PYTHONPATH=. python eval/reports/gate_screen.py --family pairs /tmp/pairs.pkl xquad-vi xquad-th xquad-en xquad-zh xquad-hi xquad-es xquad-ar

The rows are kept at the path given (collected when missing; one to four minutes a language on 2 cores).
"""
import argparse
import pickle
import sys
import time
from pathlib import Path
from typing import Callable

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
from hybridmem.tokenization import bm25_idf

TOP = 10  # the coherence family's passages
PAIR_TOP, PAIR_POOL, WINDOW = 5, 40, 4
FAMILIES = {"coherence": ("coherence", "top_rest", "top_cos", "gap"),
            "pairs": ("pair_cov_w", "pair_cov", "pair_share_w", "pair_share")}
MAX_FALSE = 0.02


def coherence_signals(ev: Evaluator) -> Callable[[Candidates], dict[str, float] | None]:
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
    return signals


def pair_signals(c: Candidates) -> dict[str, float] | None:
    """The pairs family for one question (None when it has fewer than two distinct terms)."""
    terms = [t for k, t in enumerate(c.query_tokens) if k == 0 or c.query_tokens[k - 1] != t]
    pairs = list(dict.fromkeys((a, b) for a, b in zip(terms, terms[1:]) if a != b))
    if not pairs:
        return None
    idf = ({t: bm25_idf(c.doc_count, n) for t, n in zip(c.query_tokens, c.term_docs)}
           if c.doc_count > 0 and len(c.term_docs) == len(c.query_tokens) else {})
    w = np.maximum([idf.get(a, 1.0) + idf.get(b, 1.0) for a, b in pairs], 1e-9)
    wanted = set(terms)
    held_by: dict[int, np.ndarray] = {}

    def held(cid: int) -> np.ndarray:
        if cid not in held_by:
            pos: dict[str, set[int]] = {}
            for i, t in enumerate(c.chunks[cid].tokens._text.split()):
                if t in wanted:
                    pos.setdefault(t, set()).add(i)
            held_by[cid] = np.array([any(i + d in pos.get(b, ()) for i in pos.get(a, ()) for d in range(1, WINDOW + 1))
                                     for a, b in pairs])
        return held_by[cid]

    top = [h.chunk_id for leg in (c.keyword, c.vector) for h in leg[:PAIR_TOP]]
    anywhere = np.zeros(len(pairs), bool)
    for cid in (h.chunk_id for leg in (c.keyword, c.vector) for h in leg[:PAIR_POOL]):
        anywhere |= held(cid)
    return {"pair_cov_w": max((float(w[held(x)].sum() / w.sum()) for x in top), default=0.0),
            "pair_cov": max((float(held(x).mean()) for x in top), default=0.0),
            "pair_share_w": float(w[anywhere].sum() / w.sum()), "pair_share": float(anywhere.mean())}


def collect(family: str, names: list[str]) -> list[tuple[str, int, float, dict[str, float]]]:
    """``(language, answerable, gate probability, signals)`` per train question of each XQuAD-R dataset."""
    config = eval_config(DEFAULT_RANKING, DEPTH)
    rows = []
    for name in names:
        t0 = time.time()
        ev = Evaluator(load_dataset(name), Settings(), progress=False)
        cands = ev.candidates(config.pool)
        signals = coherence_signals(ev) if family == "coherence" else pair_signals

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


def abstention(score: np.ndarray, y: np.ndarray, lang: np.ndarray, own: bool) -> dict[str, float]:
    """Each language's abstention on its cross-article questions under one threshold for all (the largest at which
    none loses more than 2% of its answerable questions) or, ``own``, under its own 2% point."""
    point = {g: np.quantile(score[(lang == g) & (y == 1)], MAX_FALSE) for g in np.unique(lang)}
    shared = min(point.values())
    return {g: float(np.mean(score[(lang == g) & (y == 0)] < (point[g] if own else shared))) for g in point}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", choices=sorted(FAMILIES), required=True)
    ap.add_argument("rows", type=Path)
    ap.add_argument("names", nargs="+")
    args = ap.parse_args()
    rows = pickle.loads(args.rows.read_bytes()) if args.rows.exists() else collect(args.family, args.names)
    args.rows.write_bytes(pickle.dumps(rows))
    keys = FAMILIES[args.family]
    lang = np.array([r[0] for r in rows])
    y = np.array([r[1] for r in rows])
    gate = logit(np.array([r[2] for r in rows]))
    sig = {k: np.array([r[3][k] for r in rows]) for k in keys}
    print("| language | gate AUC | " + " | ".join(f"{k} AUC (answerable / no-answer median)" for k in keys) + " |")
    print("|---" * (2 + len(keys)) + "|")
    for g in np.unique(lang):
        w = lang == g
        cells = [f"{roc_auc_score(y[w], sig[k][w]):.3f} ({np.median(sig[k][w & (y == 1)]):.3f} / "
                 f"{np.median(sig[k][w & (y == 0)]):.3f})" for k in keys]
        print(f"| {g} | {roc_auc_score(y[w], gate[w]):.3f} | " + " | ".join(cells) + " |")
    weight = np.zeros(len(y))
    for g in np.unique(lang):
        for label in (0, 1):
            m = (lang == g) & (y == label)
            weight[m] = 1.0 / m.sum()
    scores = {"the gate": (gate, None)}
    for k in keys:
        both = np.column_stack([gate, sig[k]])
        fitted = LogisticRegression(C=1e3).fit(both, y, sample_weight=weight)
        scores[f"the gate and {k}"] = (fitted.decision_function(both), fitted.coef_[0].round(3).tolist())
    print("\n| gate | weights (gate log-odds, signal) | one threshold: abstention per language | each language's "
          "own 2% point (oracle) |\n|---|---|---|---|")
    for label, (score, coef) in scores.items():
        cells = [", ".join(f"{g} {100 * a:.1f}%" for g, a in abstention(score, y, lang, own).items())
                 for own in (False, True)]
        print(f"| {label} | {coef or ''} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
