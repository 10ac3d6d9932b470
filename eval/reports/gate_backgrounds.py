"""The fourteenth round of docs/ranking.md: can a background put every memory's gate on one level? Train rows only.

The aligned gate separates answerable from unanswerable questions within a language almost perfectly, but its level
differs per memory (Vietnamese, Thai and Chinese questions score high whether or not they have an answer), and one
threshold serves them all. Two label-free backgrounds are measured here, each against the oracle that reads labels:

- ``memory``: a per-memory level. :data:`FRAGMENTS` fragments of the memory's own passages (9 words; 16 characters of
  Chinese or Japanese, 24 of Thai) are asked of it without their document (an XQuAD-R article: its sentences are
  documents), through the shipped retrieval, alignment and aligned gate; the median of their log-odds is the memory's
  simulated no-answer level. Beside it: the oracle (each memory's gate shifted so its own answerable train queries'
  2% point is the same), the level as a gate feature, and the level subtracted from the gate. With ``--probes
  common`` the probes carry no subject instead: :data:`COMMON_WORDS` of the memory's :data:`COMMON` most widespread
  keyword tokens (by the number of chunks holding them, written as in the text), asked of the whole memory.
- ``query``: a per-query background. The query's token alignment with the vector leg's passages at ranks 11-13 and
  21-23 (not an answer, but in the memory's language and near its subject), as gate features, alone and as the top
  passages' alignment minus it.

    PYTHONPATH=. python eval/reports/gate_rounds.py e5 --rows /tmp/e5-rows.pkl           # the rows, ~50 minutes
    PYTHONPATH=. python eval/reports/gate_backgrounds.py memory /tmp/e5-rows.pkl /tmp/levels.json   # ~6 minutes
    PYTHONPATH=. python eval/reports/gate_backgrounds.py memory --probes common /tmp/e5-rows.pkl /tmp/common.json  # ~2
    PYTHONPATH=. python eval/reports/gate_backgrounds.py query /tmp/deep.pkl                 # ~60 minutes, then kept

A second run reads what the first kept (``levels.json``, ``deep.pkl``). Fits and placements are
:func:`hybridmem.eval.gate_rounds.gate_table`'s, over the rows' gate features with the backgrounds appended as more
columns (the fit reads a column by its name in ``GATE_FEATURES``, extended for the run). Test splits are not read.
"""
import argparse
import json
import pickle
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
from scipy.stats import spearmanr

import hybridmem.eval.decisions as decisions
import hybridmem.eval.gate_rounds as gate_rounds
from hybridmem.config import DEFAULT_RANKING, Settings
from hybridmem.config.calibration import ANSWER_THRESHOLD, GATE_MODELS
from hybridmem.eval.abstention import confine, no_answer_candidates, no_answer_sets
from hybridmem.eval.datasets import load_dataset
from hybridmem.eval.datasets.xquad import articles
from hybridmem.eval.decisions import (ALIGNED_USED, DECISION_DATASETS, DEPTH, DecisionRows, _aligned,
                                      _gate_features, false_point, vector_took_part)
from hybridmem.eval.runner import Evaluator, eval_config
from hybridmem.ranking.calibrate import sigmoid
from hybridmem.ranking.gate import GATE_FEATURES, answer_probability, logit
from hybridmem.tokenization import token_spans

MODEL = "multilingual-e5-small"
FRAGMENTS = 60
COMMON, COMMON_WORDS, COMMON_PROBES = 50, 7, 40
ALIGNMENT = ("mean", "q25", "weighted", "exact", "centred")
_SPACELESS = re.compile(r"[\u0e00-\u0e7f\u3040-\u30ff\u3400-\u9fff]")


def memory_of(name: str) -> str:
    """The decision dataset whose index a row's set is asked of."""
    if name in ("demo-memory", "demo-none", "scifact-on-demo"):
        return "demo"
    return name.removesuffix("-cross")


def fragment(text: str, rng: np.random.Generator) -> str:
    """A question-sized piece of ``text``: 9 words, or 16 (Chinese, Japanese) or 24 (Thai) characters."""
    text = " ".join(text.split())
    if len(_SPACELESS.findall(text)) > len(text) / 3:
        n = 24 if re.search(r"[\u0e00-\u0e7f]", text) else 16
        if len(text) <= n:
            return text
        start = int(rng.integers(0, max(1, len(text) - n)))
        return text[start:start + n]
    words = text.split()
    if len(words) <= 9:
        return text
    start = int(rng.integers(0, len(words) - 9))
    return " ".join(words[start:start + 9])


def gate_levels(settings: Settings, probes: Callable[[Any, str], Iterator[tuple[str, frozenset[str] | None]]]
           ) -> dict[str, list[float]]:
    """Per decision dataset, the aligned gate's log-odds of each probe ``probes(index, name)`` yields: a question,
    and the documents it is confined to (None: the whole memory)."""
    config = eval_config(DEFAULT_RANKING, DEPTH)
    gate = GATE_MODELS[f"{MODEL}|aligned"]
    out: dict[str, list[float]] = {}
    for name in DECISION_DATASETS:
        ev = Evaluator(load_dataset(name), settings, progress=False)
        idx = ev.index
        everything = max(config.pool, len(idx.vectors()[0]))
        z = []
        for question, paths in probes(idx, name):
            if paths is None:
                c = idx.retrieve(question, config.pool, align=False)
            else:
                c = confine(idx.retrieve(question, everything, align=False), paths, config.pool)
            feats = dict(zip(GATE_FEATURES, _gate_features(idx.align(c, always=True), config)["both"]))
            z.append(logit(answer_probability(feats, gate)))
        out[name] = z
        print(f"{name}: median {np.median(z):+.2f}", file=sys.stderr, flush=True)
        ev.close()
    return out


def fragments(idx: Any, name: str) -> Iterator[tuple[str, frozenset[str]]]:
    """:data:`FRAGMENTS` fragments of the memory's passages, each confined to the other documents (for XQuAD-R,
    the other articles: its sentences are documents)."""
    ids, _, _, paths = idx.vectors()
    group = {p: p for p in set(paths)}
    if name.startswith("xquad-"):
        docs = articles(name.split("-")[1])[0]
        group = {p: docs[p.rsplit("/", 1)[-1].split(".")[0]] for p in set(paths)}
    rng = np.random.default_rng(1)
    pick = [int(ids[k]) for k in rng.choice(len(ids), size=min(FRAGMENTS, len(ids)), replace=False)]
    rows = idx.store.chunk_rows(pick)
    for cid in pick:
        path, text = rows[cid][0], rows[cid][4]
        yield fragment(text, rng), frozenset(p for p in group if group[p] != group[path])


def common_words(idx: Any, name: str) -> Iterator[tuple[str, None]]:
    """:data:`COMMON_PROBES` probes of :data:`COMMON_WORDS` of the memory's :data:`COMMON` most widespread keyword
    tokens (a question in the memory's language about nothing), asked of the whole memory."""
    rows = idx.store.chunk_rows([int(i) for i in idx.vectors()[0]])
    spread: Counter[str] = Counter()
    for row in rows.values():
        text = row[4]
        spread.update({text[s:e] for _, s, e in token_spans(text)})
    common = sorted(spread, key=lambda w: (-spread[w], w))[:COMMON]  # ties by the word: the same in every process
    rng = np.random.default_rng(1)
    for _ in range(COMMON_PROBES):
        yield " ".join(rng.choice(common, COMMON_WORDS, replace=False)), None


def deep_rows(settings: Settings) -> list[tuple]:
    """Per train query of every decision dataset and its no-answer sets: ``(set, label, gate features, alignment
    with the vector leg's ranks 11-13, with its ranks 21-23)``."""
    config = eval_config(DEFAULT_RANKING, DEPTH)
    out: list[tuple] = []

    def deep(ev: Evaluator, c):  # noqa: ANN001, ANN202
        aligner = ev.index.retriever._aligner[1]  # the one the shipped alignment just used
        got = []
        for lo in (10, 20):
            texts = [c.chunks[h.chunk_id].text for h in c.vector[lo:lo + 3]]
            got.append(aligner.per_passage(c.query, texts)[0] if texts else (0.0,) * 5)
        return got

    for name in DECISION_DATASETS:
        ev = Evaluator(load_dataset(name), settings, progress=False)
        cands = ev.candidates(config.pool)
        for q in ev.dataset.select("train").queries:
            c = _aligned(ev, cands[q.id])
            out.append((ev.dataset.name, 1, _gate_features(c, config)["both"], *deep(ev, c)))
        for s in no_answer_sets(ev.dataset):
            sub = s.select("train")
            for c in no_answer_candidates(ev, sub.queries, config.pool, sub.within):
                c = _aligned(ev, c)
                out.append((s.name, 0, _gate_features(c, config)["both"], *deep(ev, c)))
        print(f"{name}: {len(out)} rows", file=sys.stderr, flush=True)
        ev.close()
    return out


def table(rows: DecisionRows, extra: tuple[str, ...], label: str) -> None:
    """One line: the aligned gate's features plus ``extra``, fitted and placed as each round's, on ``rows``."""
    t = gate_rounds.gate_table(rows, ALIGNED_USED + extra, ANSWER_THRESHOLD)
    a, ha = t.abstention, t.held_out_abstention
    worst = min(a, key=a.get)
    print(f"| {label} | {100 * np.mean(list(a.values())):.1f}% / {100 * a[worst]:.1f}% ({worst}) / "
          f"{100 * max(t.false.values()):.1f}% | {100 * np.mean(list(ha.values())):.1f}% / "
          f"{100 * min(ha.values()):.1f}% / {100 * max(t.held_out_false.values()):.1f}% |")


def extended(rows: list[tuple[str, list[float], int]], names: tuple[str, ...]) -> DecisionRows:
    """``(set, gate features and extra columns, label)`` as DecisionRows, the fit told the extra columns' names."""
    columns = tuple(GATE_FEATURES) + names
    decisions.GATE_FEATURES = gate_rounds.GATE_FEATURES = columns
    return DecisionRows(gate=[(n, {"both": f}, y) for n, f, y in rows])


def abstention_at_2pct(z: np.ndarray, names: list[str], y: np.ndarray) -> dict[str, float]:
    """Per no-answer set, the share of its log-odds ``z`` under the shipping rule's point (:func:`false_point`: no
    answerable set loses more than 2%)."""
    sets = np.array(names)
    point = logit(false_point(answerable(z, sets, y, set(names))))
    return {s: float(np.mean(z[(sets == s) & (y == 0)] < point)) for s in sorted(set(names))
            if ((sets == s) & (y == 0)).any()}


def answerable(z: np.ndarray, groups: np.ndarray, y: np.ndarray, keys: set[str]) -> dict[str, list[float]]:
    """Per group, the answer probabilities of its answerable rows (what :func:`false_point` reads)."""
    return {k: [sigmoid(v) for v in z[(groups == k) & (y == 1)]] for k in keys if ((groups == k) & (y == 1)).any()}


def memory_round(rows_path: Path, levels_path: Path, settings: Settings, probes: str = "fragments") -> None:
    saved = pickle.loads(rows_path.read_bytes())
    if saved["model"] != MODEL or saved["features"] != GATE_FEATURES:
        sys.exit(f"gate_backgrounds.py: {rows_path} holds other rows than {MODEL}'s over today's gate features")
    if levels_path.exists():
        levels = json.loads(levels_path.read_text())
    else:
        levels = gate_levels(settings, fragments if probes == "fragments" else common_words)
        levels_path.write_text(json.dumps(levels))
    level = {m: float(np.median(z)) for m, z in levels.items()}
    gate_rows = vector_took_part(saved["rows"]).gate
    names = [n for n, _, _ in gate_rows]
    y = np.array([label for _, _, label in gate_rows])
    gate = GATE_MODELS[f"{MODEL}|aligned"]
    z = np.array([logit(answer_probability(dict(zip(GATE_FEATURES, f["both"])), gate)) for _, f, _ in gate_rows])
    mem = [memory_of(n) for n in names]
    oracle = {m: logit(false_point({m: p})) for m, p in answerable(z, np.array(mem), y, set(mem)).items()}
    print("| memory | simulated no-answer level (median log-odds) | oracle: its own 2% point |\n|---|---|---|")
    for m in sorted(oracle):
        print(f"| {m} | {level[m]:+.2f} | {oracle[m]:+.2f} |")
    xq = sorted(m for m in oracle if m.startswith("xquad-"))
    rho = spearmanr([level[m] for m in xq], [oracle[m] for m in xq])
    print(f"\nSpearman's rho over the XQuAD-R languages: {rho.statistic:.2f} (p = {rho.pvalue:.3f})\n")
    xquad = np.array([m.startswith("xquad-") for m in mem])
    shown = {"shipped": z, "oracle: each memory's 2% point moved onto one": z - np.array([oracle[m] for m in mem])}
    for beta in (-0.25, 0.25, 0.5):
        shown[f"minus {beta} x level, every memory"] = z - beta * np.array([level[m] for m in mem])
        shown[f"minus {beta} x level, XQuAD-R only"] = z - beta * np.array([level[m] for m in mem]) * xquad
    print("| gate log-odds | mean / worst abstention, 14 no-answer sets (train) |\n|---|---|")
    for label, v in shown.items():
        a = abstention_at_2pct(v, names, y)
        print(f"| {label} | {100 * np.mean(list(a.values())):.1f}% / {100 * min(a.values()):.1f}% |")
    print("\n| e5 aligned gate | train: mean / worst / largest false | LOLO: mean / worst / largest false |\n|---|---|---|")
    rows = [(n, list(f["both"]) + [level[memory_of(n)]], label) for n, f, label in gate_rows]
    data = extended(rows, ("memory_level",))
    table(data, (), "shipped")
    table(data, ("memory_level",), "and the memory's simulated level")


def query_round(deep_path: Path, settings: Settings) -> None:
    if deep_path.exists():
        got = pickle.loads(deep_path.read_bytes())
    else:
        got = deep_rows(settings)
        deep_path.write_bytes(pickle.dumps(got))
    top = [GATE_FEATURES.index(f"align_{k}") for k in ALIGNMENT]
    names = tuple(f"at{r}_{k}" for r in (11, 21) for k in ALIGNMENT)
    names += tuple(f"over{r}_{k}" for r in (11, 21) for k in ALIGNMENT)
    rows = []
    for n, label, f, d11, d21 in got:
        lifts = [f[i] - d for i, d in zip(top, d11)] + [f[i] - d for i, d in zip(top, d21)]
        rows.append((n, list(f) + list(d11) + list(d21) + lifts, label))
    data = extended(rows, names)
    print("| e5 aligned gate | train: mean / worst / largest false | LOLO: mean / worst / largest false |\n|---|---|---|")
    table(data, (), "shipped")
    for extra in (("at11_mean",), ("at11_centred",), ("at21_mean",), ("over11_mean",), ("over11_centred",),
                  ("over21_mean",), ("over11_mean", "over11_centred", "over11_weighted")):
        table(data, extra, "and " + ", ".join(extra))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="round", required=True)
    m = sub.add_parser("memory", help="a per-memory simulated no-answer level")
    m.add_argument("rows", type=Path, help="rows kept by eval/reports/gate_rounds.py e5 --rows")
    m.add_argument("levels", type=Path, help="the simulated levels: read when it exists, else measured and kept")
    m.add_argument("--probes", choices=("fragments", "common"), default="fragments",
                   help="fragments of the memory's passages (default), or its most widespread words")
    q = sub.add_parser("query", help="a per-query background from deeper passages")
    q.add_argument("deep", type=Path, help="the rows with deeper alignments: read when it exists, else collected")
    args = ap.parse_args()
    e5 = Settings().override(embedding={"provider": "e5"})
    if args.round == "memory":
        memory_round(args.rows, args.levels, e5, args.probes)
    else:
        query_round(args.deep, e5)
