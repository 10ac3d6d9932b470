"""Questions in another language than the memory: XQuAD-R's parallel questions asked of another language's sentences.

XQuAD-R asks the same questions (same ids) in eleven languages of the same articles, so a question of language A keeps
its judgments when asked of language B's sentences; asked of the other half of B's articles it has no answer
(:func:`hybridmem.eval.abstention.xquad_cross`'s halves). This script collects, for language pairs, the answer gate's
features as ``rank()`` reads them (``decision_features``), fits the cross-lingual gate on the train split's rows that
``rank()`` routes to it (``gate.asked_across``: the question's script, or its language, differs from each of its top
passages'; there either gate may answer; the shipped gate was fitted when the script alone routed),
places it with the gates' rule (no answerable pair loses more than 2% at the shared threshold), and
reports false abstention and abstention per pair, also with each pair left out of the fit.

    PYTHONPATH=. python eval/reports/crosslingual.py collect train 300 rows-train.pkl en:zh zh:en ...
    PYTHONPATH=. python eval/reports/crosslingual.py fit rows-train.pkl          # prints the gate and LOPO
    PYTHONPATH=. python eval/reports/crosslingual.py report rows-test.pkl        # the shipped gates on other rows

The hits' probabilities of a routed question (``CROSSLINGUAL_HITS``): every pooled candidate of the answerable
questions, with its order features and label, and the default's top 10 as shown (the gate off):

    PYTHONPATH=. python eval/reports/crosslingual.py collect-hits train 300 hits-train.pkl en:zh zh:en ...
    PYTHONPATH=. python eval/reports/crosslingual.py fit-hits hits-train.pkl hits-test.pkl   # the fit; test and LOPO

A memory written in two languages (:func:`mixed_memories`): each question asked of a memory holding its answer in the
other language, one holding it in its own, and one without it; the bar of the nearest route
(``NEAREST_ACROSS_THRESHOLD``) placed on train, the table on test:

    PYTHONPATH=. python eval/reports/crosslingual.py collect-mixed train 300 mixed-train.pkl en:vi vi:en ...
    PYTHONPATH=. python eval/reports/crosslingual.py collect-memory train demo-train.pkl demo   # a real memory too
    PYTHONPATH=. python eval/reports/crosslingual.py mixed mixed-train.pkl,demo-train.pkl mixed-test.pkl,demo-test.pkl

(docs/ranking.md, "Questions in another language than the memory" and "A hit's score across languages".)
"""

from __future__ import annotations

import dataclasses
import math
import pickle
import sys
import time
from collections import defaultdict
from dataclasses import replace

import numpy as np

from hybridmem.config import DEFAULT_RANKING, RankConfig
from hybridmem.config.calibration import (
    ANSWER_THRESHOLD, GATE_MODELS, JOINT_FEATURES, NEAREST_ACROSS_THRESHOLD, Calibration, gate_model,
)
from hybridmem.eval import Evaluator
from hybridmem.eval.abstention import no_answer_candidates
from hybridmem.eval.calibrate import fit_logistic
from hybridmem.eval.datasets import load_dataset
from hybridmem.eval.datasets.base import Query
from hybridmem.eval.datasets.xquad import article_halves
from hybridmem.eval.decisions import false_point
from hybridmem.eval.runner import eval_config
from hybridmem.eval.units import holds_judged
from hybridmem.ranking import rank
from hybridmem.ranking.calibrate import fit_logistic as fit_candidates
from hybridmem.ranking.gate import across_languages, answer_probability, asked_across, either_gate
from hybridmem.ranking.pipeline import decision_features
from hybridmem.records import Candidates

# The gate's features: where the candidates carry the token alignment, its mean and centred form beside the vector
# leg's two (train, left-out pairs: largest false abstention 2.4% against 4.9% without them); else the two.
FEATURES = {"multilingual-e5-small|aligned": ("vector_top", "vector_gap", "align_mean", "align_centred"),
            "multilingual-e5-small": ("vector_top", "vector_gap")}


def asked_of(ql: str, dl: str):  # noqa: ANN201
    """XQuAD-R language ``dl``'s sentences and judgments with its questions as written in language ``ql``."""
    ds = load_dataset(f"xquad-{dl}")
    asked = {q.id: q.text for q in load_dataset(f"xquad-{ql}").queries}
    return replace(ds, name=f"xquad-{ql}-on-{dl}",
                   queries=tuple(replace(q, text=asked[q.id]) for q in ds.queries if q.id in asked))


def collect(split: str, limit: int, out: str, pairs: list[tuple[str, str]]) -> None:
    cfg = eval_config(DEFAULT_RANKING, 10)
    rows = []
    for ql, dl in pairs:
        t = time.time()
        xds = asked_of(ql, dl)
        ev = Evaluator(xds, progress=False)
        chosen = [q for q in xds.queries if q.split == split][:limit]
        docs, sides = article_halves(dl)
        halves = [frozenset(d for d, s in docs.items() if s == k) for k in (0, 1)]
        cross = [Query(f"{q.id}@x", q.text, q.category, q.split) for q in chosen]
        within = {f"{q.id}@x": halves[1 - sides[q.id]] for q in chosen}
        for label, queries, confined in ((1, chosen, None), (0, cross, within)):
            for c in no_answer_candidates(ev, queries, cfg.pool, confined):
                _, f = decision_features(c, cfg)
                rows.append((f"{ql}->{dl}", label, f, c.query, [c.chunks[h.chunk_id].text for h in c.vector[:3]]))
        ev.close()
        print(f"{ql}->{dl}: {time.time() - t:.0f}s", flush=True)
    with open(out, "wb") as fh:
        pickle.dump(rows, fh)


def routed(row: tuple) -> bool:
    """What ``rank()`` sends to the cross-lingual gate (``RankMemo.answer``)."""
    return asked_across(row[3], row[4])


def fit(rows: list[tuple], features: tuple[str, ...]) -> Calibration:
    x = np.array([[r[2][f] for f in features] for r in rows])
    y = np.array([r[1] for r in rows], dtype=float)
    groups = [("A" if r[1] else "N") + r[0] for r in rows]
    count: dict[str, int] = defaultdict(int)
    for g in groups:
        count[g] += 1
    w = np.array([1.0 / count[g] for g in groups])
    for label in (0, 1):  # each pair weighs the same within its label, and the labels the same in total
        w[y == label] /= w[y == label].sum()
    mu, sd = x.mean(0), x.std(0) + 1e-9
    coef, b = fit_logistic((x - mu) / sd, y, w, l2=1e-2)
    coef = np.asarray(coef) / sd
    b = float(b - (coef * mu).sum())
    gate = Calibration(features, tuple(round(float(c), 4) for c in coef), round(b, 4))
    answerable: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        if r[1]:
            answerable[r[0]].append(answer_probability(r[2], gate))
    point = false_point(answerable)
    logit = lambda p: math.log(p / (1 - p))  # noqa: E731
    pairs = sorted({r[0] for r in rows})
    return replace(gate, intercept=round(b + logit(ANSWER_THRESHOLD) - logit(point), 4),
                   fitted_on=f"{int(y.sum())} answerable and {int(len(y) - y.sum())} no-answer train questions of "
                             f"XQuAD-R language pairs routed to it ({', '.join(pairs)}); intercept moved so its 2% "
                             "point is the threshold")


def table(rows: list[tuple], gates: dict[str, object]) -> None:
    print("| pair | routed (answerable / no-answer) | "
          + " | ".join(f"{n}: false abstention / abstention" for n in gates) + " |")
    print("|---|---|" + "---|" * len(gates))
    for pair in sorted({r[0] for r in rows}):
        rs = [r for r in rows if r[0] == pair]
        a, n = [r for r in rs if r[1]], [r for r in rs if not r[1]]
        cells = []
        for name, g in gates.items():
            def refused(r: tuple) -> bool:
                gate = g(r) if callable(g) else g  # a tuple: either may answer (rank()'s routed questions)
                p = max(answer_probability(r[2], h) for h in gate) if isinstance(gate, list) else \
                    answer_probability(r[2], gate)
                return p < ANSWER_THRESHOLD
            cells.append(f"{np.mean([refused(r) for r in a]):.1%} / {np.mean([refused(r) for r in n]):.1%}")
        print(f"| {pair} | {sum(map(routed, a))}/{len(a)} / {sum(map(routed, n))}/{len(n)} | "
              + " | ".join(cells) + " |")


def collect_hits(split: str, limit: int, out: str, pairs: list[tuple[str, str]]) -> None:
    """Per answerable question of each pair: whether it is routed, each pooled candidate's order features (with the
    alignment and without) and label, and the default's top 10 (chunk id, score) as a search shows them, the gate
    off, with the alignment and without."""
    cfg = eval_config(DEFAULT_RANKING, 10).replace(answer_threshold=0.0)
    rows = []
    for ql, dl in pairs:
        t = time.time()
        xds = asked_of(ql, dl)
        ev = Evaluator(xds, progress=False)
        chosen = [q for q in xds.queries if q.split == split and xds.qrels.get(q.id)][:limit]
        for q, c in zip(chosen, no_answer_candidates(ev, chosen, cfg.pool, None)):
            bare = dataclasses.replace(c, passage_alignment=None, alignment=None)
            feats = {key: decision_features(cc, cfg)[0] for key, cc in (("aligned", c), ("bare", bare))}
            labels = {cid: int(holds_judged(c.chunks[cid], xds.qrels[q.id], xds.evidence, xds.kind))
                      for cid in feats["aligned"]}
            shown = {key: [(h.chunk_id, h.final_score) for h in rank(cc, cfg, now=0.0).hits[:10]]
                     for key, cc in (("aligned", c), ("bare", bare))}
            rows.append((f"{ql}->{dl}", q.id, asked_across(c.query, [c.chunks[h.chunk_id].text for h in c.vector]),
                         feats, labels, shown))
        ev.close()
        print(f"{ql}->{dl}: {time.time() - t:.0f}s", flush=True)
    with open(out, "wb") as fh:
        pickle.dump(rows, fh)


MIXED_KINDS = ("across", "own", "none")
MIXED_SHAPES = ("half", "few")


def mixed_memories(ql: str, dl: str) -> tuple[object, dict[tuple[str, str], dict[str, frozenset[str]]]]:
    """Memories written in two languages: XQuAD-R's articles cut in four runs, each question ``q`` of run ``k`` asked
    (in ``ql``) of three memories of each shape. ``half``: half their articles' sentences in ``ql`` and half in
    ``dl``; ``across`` holds its article in ``dl`` only (runs k, k+2 in ``dl``, k+1, k+3 in ``ql``), ``own`` in ``ql``
    only (the other way round), ``none`` not at all (runs k+1, k+2, k+3, languages alternating). ``few``: the
    question's language holds one run of the memory (``across``: k, k+1, k+2 in ``dl``, k+3 in ``ql``; ``own``: k in
    ``ql``, the rest in ``dl``; ``none``: k+1 in ``ql``, k+2, k+3 in ``dl``), as a few notes in a second language
    among many. The dataset holds both languages' sentences, ids prefixed ``<lang>/``; the memories are
    ``{(shape, kind): {question id: paths}}``."""
    qds, dds = load_dataset(f"xquad-{ql}"), load_dataset(f"xquad-{dl}")
    runs = {lang: article_halves(lang, parts=4) for lang in (ql, dl)}
    docs = tuple(replace(d, path=f"{lang}/{d.path}") for lang, ds in ((ql, qds), (dl, dds)) for d in ds.documents)

    def sentences(lang: str, parts: set[int]) -> set[str]:
        return {f"{lang}/{d}" for d, k in runs[lang][0].items() if k in parts}

    memories: dict[tuple[str, str], dict[str, frozenset[str]]] = {
        (shape, kind): {} for shape in MIXED_SHAPES for kind in MIXED_KINDS}
    for q in qds.queries:
        k = runs[ql][1][q.id]
        at = lambda *steps: {(k + s) % 4 for s in steps}  # noqa: E731
        third = (ql, dl)[k % 2]  # the run after those two, in each language for every other run
        for key, (asked, other) in {
                ("half", "across"): (at(1, 3), at(0, 2)), ("half", "own"): (at(0, 2), at(1, 3)),
                ("few", "across"): (at(3), at(0, 1, 2)), ("few", "own"): (at(0), at(1, 2, 3)),
                ("few", "none"): (at(1), at(2, 3))}.items():
            memories[key][q.id] = frozenset(sentences(ql, asked) | sentences(dl, other))
        memories["half", "none"][q.id] = frozenset(
            sentences(ql, at(1)) | sentences(dl, at(2)) | sentences(third, at(3)))
    qrels = {q: {f"{lang}/{d}": g for lang in (ql, dl) for d, g in grades.items()} for q, grades in qds.qrels.items()}
    return replace(qds, name=f"xquad-mixed-{ql}-{dl}", documents=docs, qrels=qrels), memories


def mixed_row(name: str, kind: str, label: int, c: Candidates, cfg: RankConfig) -> tuple:
    """One row of :func:`collect_mixed` and :func:`collect_memory`: the set, kind, label, the gate's features, the
    question and the vector leg's top 10 (text, path, cosine)."""
    _, f = decision_features(c, cfg)
    return name, kind, label, f, c.query, [(c.chunks[h.chunk_id].text, c.chunks[h.chunk_id].path, h.raw)
                                           for h in c.vector[:10]]


def collect_mixed(split: str, limit: int, out: str, pairs: list[tuple[str, str]],
                  shapes: tuple[str, ...] = MIXED_SHAPES) -> None:
    """Per question of each pair, asked of the memories of :func:`mixed_memories`: the pair and shape
    (``en+vi``, ``en+vi few``), kind, label (1 where the memory holds its answer), the gate's features, the question
    and the vector leg's top 10 (text, path, cosine)."""
    cfg = eval_config(DEFAULT_RANKING, 10)
    rows = []
    for ql, dl in pairs:
        t = time.time()
        ds, memories = mixed_memories(ql, dl)
        ev = Evaluator(ds, progress=False)
        chosen = [q for q in ds.queries if q.split == split][:limit]
        for (shape, kind), memory in memories.items():
            if shape not in shapes:
                continue
            asked = [Query(f"{q.id}@{shape}-{kind}", q.text, q.category, q.split) for q in chosen]
            within = {f"{q.id}@{shape}-{kind}": memory[q.id] for q in chosen}
            name = f"{ql}+{dl}" + (" few" if shape == "few" else "")
            rows.extend(mixed_row(name, kind, int(kind != "none"), c, cfg)
                        for c in no_answer_candidates(ev, asked, cfg.pool, within))
        ev.close()
        print(f"{ql}+{dl}: {time.time() - t:.0f}s", flush=True)
    with open(out, "wb") as fh:
        pickle.dump(rows, fh)


def collect_memory(split: str, out: str, names: list[str]) -> None:
    """Each named dataset's answerable and no-answer questions of ``split`` in :func:`collect_mixed`'s rows, as set
    ``NAME:SPLIT`` of kind ``own`` or ``none``: a real memory in several languages (the demo's is mostly English with
    a few notes in Vietnamese, Chinese, Japanese and Thai) weighs in the nearest route's bar beside XQuAD-R's."""
    cfg = eval_config(DEFAULT_RANKING, 10)
    rows = []
    for name in names:
        ds = load_dataset(name)
        ev = Evaluator(ds, progress=False)
        for label, queries in ((1, ds.queries), (0, ds.no_answer)):
            chosen = [q for q in queries if q.split == split]
            rows.extend(mixed_row(f"{name}:{split}", "own" if label else "none", label, c, cfg)
                        for c in no_answer_candidates(ev, chosen, cfg.pool, None))
        ev.close()
    with open(out, "wb") as fh:
        pickle.dump(rows, fh)


NEAREST_STEP = 2.0  # the most no-answer questions (in points) the nearest route may add to any set's answered


def mixed_answers(rows: list[tuple], bar: float | None) -> list[bool]:
    """Whether each :func:`collect_mixed` row is answered as ``rank()`` decides it: the usual gate; the cross-lingual
    gate too where the question is asked across its top passages' languages; and, where it is across its nearest
    passage's alone, the cross-lingual gate against ``bar`` (None: not routed, as before the nearest route)."""
    usual = gate_model("multilingual-e5-small", aligned=True)
    cross = gate_model("multilingual-e5-small", aligned=True, crosslingual=True)
    out = []
    for r in rows:
        asked = across_languages(r[4], [t for t, *_ in r[5]])
        if bar is None and asked == "nearest":
            asked = ""
        p = either_gate(r[3], usual, cross, asked, ANSWER_THRESHOLD if bar is None else bar, ANSWER_THRESHOLD)
        out.append(p >= ANSWER_THRESHOLD)
    return out


def place_nearest(rows: list[tuple], bars: tuple[float, ...] = (0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.98)) -> float:
    """The lowest bar at which no set (a pair and shape, or a memory of :func:`collect_memory`) answers more than
    :data:`NEAREST_STEP` points more of its no-answer questions than without the nearest route."""
    before = mixed_answers(rows, None)
    for bar in bars:
        after = mixed_answers(rows, bar)
        if all(100 * (np.mean([a for a, r in zip(after, rows) if r[0] == pair and not r[2]])
                      - np.mean([b for b, r in zip(before, rows) if r[0] == pair and not r[2]])) <= NEAREST_STEP + 1e-9
               for pair in {r[0] for r in rows}):
            return bar
    return bars[-1]


def mixed_table(rows: list[tuple], bars: dict[str, float | None]) -> None:
    """Per pair: the share of questions answered about a note in the other language (``across``) and in their own
    (``own``), and of no-answer questions refused, for each bar."""
    got = {name: mixed_answers(rows, bar) for name, bar in bars.items()}
    print("| pair | " + " | ".join(f"{n}: answered across / own, abstention" for n in bars) + " |")
    print("|---|" + "---|" * len(bars))
    for pair in [*sorted({r[0] for r in rows}), "all"]:
        cells = []
        for answered in got.values():
            got_kind = {kind: [a for a, r in zip(answered, rows) if r[1] == kind and pair in ("all", r[0])]
                        for kind in MIXED_KINDS}
            share = {kind: f"{np.mean(v) if kind != 'none' else 1 - np.mean(v):.1%}" if v else "-"
                     for kind, v in got_kind.items()}
            cells.append(f"{share['across']} / {share['own']}, {share['none']}")
        print(f"| {pair} | " + " | ".join(cells) + " |")

HIT_COLUMNS = 7  # the order's features but the alignment's lift (which only reorders): one fit with and without it


def fit_hits(rows: list[tuple]) -> Calibration:
    """A pointwise logistic fit over the order's features of every pooled candidate of the routed answerable
    questions, each pair of the same weight, each coefficient >= 0 (a hit's probability never falls as a leg's raw
    score rises)."""
    count: dict[str, int] = defaultdict(int)
    for r in rows:
        count[r[0]] += 1
    xs, ys, ws = [], [], []
    for r in rows:
        feats = r[3]["aligned"]
        xs.append(np.array([feats[c][:HIT_COLUMNS] for c in feats]))
        ys.append(np.array([r[4][c] for c in feats], dtype=float))
        ws.append(np.full(len(feats), 1.0 / (count[r[0]] * len(feats))))
    x, y, w = np.vstack(xs), np.concatenate(ys), np.concatenate(ws)
    mu, sd = x.mean(0), x.std(0) + 1e-9
    coef, b = fit_candidates((x - mu) / sd, y, w / w.sum(), l2=1e-4, nonnegative=tuple(range(HIT_COLUMNS)))
    scaled = np.asarray(coef) / sd
    pairs = sorted(count)
    return Calibration(JOINT_FEATURES, tuple(round(float(v), 4) for v in scaled) + (0.0,),
                       round(float(b - (scaled * mu).sum()), 4),
                       f"{int(y.sum())} relevant of {len(y)} candidates of {len(rows)} answerable train questions of "
                       f"XQuAD-R language pairs routed across ({', '.join(pairs)})")


def hit_table(rows: list[tuple], models: dict[str, Calibration | dict[str, Calibration] | None]) -> None:
    """Per pair, the top 10 hits' mean score, ECE (10 bins) and log loss, with the alignment and without: as shown
    when collected (None) or with each model's probabilities handed down the shown order (a dict: one model per
    pair)."""
    def scores(r: tuple, key: str, model: Calibration | dict[str, Calibration] | None) -> list[tuple[float, int]]:
        shown = r[5][key]
        if model is None:
            return [(s, r[4][cid]) for cid, s in shown]
        m = model[r[0]] if isinstance(model, dict) else model
        feats = r[3][key]
        z = np.array([feats[c] for c in feats]) @ np.array(m.coef) + m.intercept
        p = np.sort(1.0 / (1.0 + np.exp(-z)))[::-1]
        return [(float(p[k]), r[4][cid]) for k, (cid, _) in enumerate(shown)]

    def read(got: list[tuple[float, int]]) -> str:
        p = np.clip(np.array([g[0] for g in got]), 1e-9, 1 - 1e-9)
        y = np.array([g[1] for g in got], dtype=float)
        bins = np.minimum((p * 10).astype(int), 9)
        ece = sum(abs(p[bins == k].mean() - y[bins == k].mean()) * (bins == k).sum() for k in range(10)
                  if (bins == k).any()) / len(p)
        return f"{p.mean():.3f} / {ece:.3f} / {-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)):.3f}"

    routed_rows = [r for r in rows if r[2]]
    for key in ("aligned", "bare"):
        print(f"\n{key}: | pair | routed | hits | relevant | "
              + " | ".join(f"{n}: mean / ECE / log loss" for n in models) + " |")
        print("|---|---|---|---|" + "---|" * len(models))
        for pair in [*sorted({r[0] for r in rows}), "all"]:
            rs = [r for r in routed_rows if pair in ("all", r[0])]
            if not rs:
                print(f"| {pair} | 0/{sum(r[0] == pair for r in rows)} |")
                continue
            got = {n: [g for r in rs for g in scores(r, key, m)] for n, m in models.items()}
            first = next(iter(got.values()))
            print(f"| {pair} | {len(rs)}/{sum(pair in ('all', r[0]) for r in rows)} | {len(first)} | "
                  f"{np.mean([g[1] for g in first]):.3f} | " + " | ".join(read(g) for g in got.values()) + " |")


def load_rows(paths: str) -> list[tuple]:
    """The rows of one or more (comma-separated) pickled files."""
    rows: list[tuple] = []
    for path in paths.split(","):
        with open(path, "rb") as fh:
            rows.extend(pickle.load(fh))
    return rows


def main(argv: list[str]) -> None:
    collectors = {"collect": collect, "collect-hits": collect_hits, "collect-mixed": collect_mixed}
    if argv[0] == "collect-memory":
        collect_memory(argv[1], argv[2], argv[3:])
        return
    if argv[0] in collectors:
        pairs = [tuple(p.split(":")) for p in argv[4:]]
        collectors[argv[0]](argv[1], int(argv[2]), argv[3], pairs)  # type: ignore[operator]
        return
    if argv[0] == "mixed":  # mixed TRAIN[,TRAIN...] [TEST[,TEST...]]: the bar placed on TRAIN, the table on TEST
        train = load_rows(argv[1])
        bar = place_nearest(train)
        print(f"bar placed on {len(train)} train rows: {bar:g} (shipped: {NEAREST_ACROSS_THRESHOLD:g})")
        test = load_rows(argv[2] if len(argv) > 2 else argv[1])
        mixed_table(test, {"before (no nearest route)": None, f"nearest route at {NEAREST_ACROSS_THRESHOLD:g}":
                           NEAREST_ACROSS_THRESHOLD, "at the shipped threshold": ANSWER_THRESHOLD})
        return
    if argv[0] == "fit-hits":
        with open(argv[1], "rb") as fh:
            train = [r for r in pickle.load(fh) if r[2]]
        model = fit_hits(train)
        print(f"'multilingual-e5-small': {model!r}")
        with open(argv[2] if len(argv) > 2 else argv[1], "rb") as fh:
            test = pickle.load(fh)
        left_out = {pair: fit_hits([r for r in train if r[0] != pair]) if any(r[0] == pair for r in train) else model
                    for pair in sorted({r[0] for r in test})}
        hit_table(test, {"as collected": None, "this fit": model, "its pair left out of the fit": left_out})
        return
    with open(argv[1], "rb") as fh:
        rows = pickle.load(fh)
    shipped = gate_model("multilingual-e5-small", aligned=True)
    if argv[0] == "fit":
        chosen = [r for r in rows if routed(r)]
        for name, features in FEATURES.items():
            gate = fit(chosen, features)
            print(f"{name!r}: {gate!r}")
            left_out = {pair: fit([r for r in chosen if r[0] != pair], features)
                        for pair in sorted({r[0] for r in chosen})}
            table(rows, {"shipped before": shipped,
                         "either gate where routed": lambda r, g=gate: [shipped, g] if routed(r) else shipped,
                         "same, its pair left out of the fit": lambda r, lo=left_out: [shipped, lo.get(r[0], shipped)]
                         if routed(r) else shipped})
    else:
        table(rows, {"aligned gate": shipped, "as rank() routes it": lambda r: [shipped, gate_model(
            "multilingual-e5-small", aligned=True, crosslingual=True)] if routed(r) else shipped})


if __name__ == "__main__":
    main(sys.argv[1:])
