"""A refused question asked again in the languages its reply names, in memories written in two languages.

Where the answer gate refuses, the reply names the languages other than the question's that memory holds notes in
(``SearchResponse.ask_in``, :func:`hybridmem.ranking.language.ask_in`), and memory_search's description tells an agent
to ask again, translated, in each. This measures that protocol on XQuAD-R memories in two languages
(:func:`hybridmem.eval.datasets.xquad.load_xquad_pair`): XQuAD-R asks the same questions in all eleven of its
languages, so its human translation of a question stands in for the agent's. Per pair and split:

- answerable questions: refused by one call (false abstention), and after asking again in each named language until
  one is answered; nDCG@10 of the first call, and of the answer the protocol ends with (a refused question scores 0);
- the pair's no-answer questions (each asked of the memory without its article, :func:`xquad_cross`): refused by one
  call, and still refused after the same protocol (a retry that answers is a false answer).

A language named that XQuAD-R does not ask in cannot be asked here and counts as refused again (the ``not asked``
column).

    PYTHONPATH=. python eval/reports/ask_again.py test en:vi zh:en de:en en:ru ar:en el:en vi:zh th:de

writes ``eval/reports/ask-again-e5.md`` and ``.json`` (the embedding model of the default settings; another split than
``test``, ``ask-again-e5-<split>.md``). ``demo`` instead
measures the demo's no-answer questions, each asked again in the languages named from the hand translations in
``eval/reports/ask_again_demo.tsv`` (a language named with no translation there counts as not asked):

    PYTHONPATH=. python eval/reports/ask_again.py demo
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import replace
from pathlib import Path

from hybridmem.config import DEFAULT_RANKING
from hybridmem.eval.abstention import no_answer_candidates, xquad_cross
from hybridmem.eval.datasets.xquad import LANGUAGES, load_xquad, load_xquad_pair
from hybridmem.eval.runner import Evaluator, eval_config
from hybridmem.ranking import RankMemo, rank

HERE = Path(__file__).resolve().parent
POOL = 40


def first_hit_ndcg(ranking, relevant: set[str]) -> float:  # noqa: ANN001 - one judged sentence per question
    return next((1 / math.log2(i + 2) for i, h in enumerate(ranking.hits[:10]) if h.path in relevant), 0.0)


def measure(asked: str, other: str, split: str) -> dict:
    t0 = time.time()
    ds = load_xquad_pair(asked, other)
    ev = Evaluator(ds, progress=False)
    cfg = eval_config(DEFAULT_RANKING, 10)
    now = ds.reference_time
    translated = {lang: {q.id: q.text for q in load_xquad(lang).queries} for lang in LANGUAGES}
    census = ev.index.status()["languages"]  # the chunks per language a refusal's reply reads (for the report)

    def ranked(cand):  # noqa: ANN001, ANN202
        return rank(cand, cfg, now=now, memo=RankMemo(cand))

    def retries(qid: str, text: str, ranking) -> tuple[list[tuple[str, str]], int]:  # noqa: ANN001
        named = ev.index.ask_in(text, ranking)
        asks = [(lang, translated[lang][qid]) for lang in named if qid in translated.get(lang, {})]
        return asks, len(named) - len(asks)

    out: dict = {"pair": f"{asked}+{other}", "split": split, "census": census}
    queries = [q for q in ds.queries if q.split == split]
    cands = ev.candidates(POOL)
    first = after = 0.0
    refused = still = not_asked = named = 0
    for q in queries:
        r = ranked(cands[q.id])
        relevant = set(ds.qrels[q.id])
        score = first_hit_ndcg(r, relevant)
        first += score
        if r.abstained:
            refused += 1
            asks, missing = retries(q.id, q.text, r)
            named += bool(asks) or bool(missing)
            not_asked += missing
            vecs = ev.query_vectors([t for _, t in asks])
            for _, text in asks:
                r2 = ranked(ev.index.retrieve(text, POOL, query_vector=vecs.get(text)))
                if not r2.abstained:
                    score = first_hit_ndcg(r2, relevant)
                    break
            else:
                still += 1
        after += score
    n = len(queries)
    out["answerable"] = {"n": n, "refused": refused, "named": named, "refused_after": still, "not_asked": not_asked,
                         "ndcg_first": first / n, "ndcg_after": after / n}
    na = xquad_cross(ds).select(split)
    nq = list(na.queries)
    na_refused = false = na_named = na_not_asked = 0
    for q, cand in zip(nq, no_answer_candidates(ev, nq, POOL, na.within)):
        r = ranked(cand)
        if not r.abstained:
            continue
        na_refused += 1
        asks, missing = retries(q.id.split("@")[0], q.text, r)
        na_named += bool(asks) or bool(missing)
        na_not_asked += missing
        again = [replace(q, text=text) for _, text in asks]
        if any(not ranked(c).abstained for c in no_answer_candidates(ev, again, POOL, {a.id: na.within[q.id]
                                                                                     for a in again})):
            false += 1
    out["no_answer"] = {"n": len(nq), "refused": na_refused, "named": na_named, "answered_again": false,
                        "not_asked": na_not_asked}
    out["seconds"] = round(time.time() - t0)
    ev.close()
    return out


def measure_demo() -> dict:
    """The demo's no-answer questions (both splits): refused by one call, and after asking again (module doc)."""
    from hybridmem.eval.datasets import load_dataset

    ds = load_dataset("demo")
    ev = Evaluator(ds, progress=False)
    cfg = eval_config(DEFAULT_RANKING, 10)
    census = ev.index.status()["languages"]
    rows = [line.split("\t") for line in (HERE / "ask_again_demo.tsv").read_text(encoding="utf-8").splitlines()
            if line and not line.startswith("#")]
    translated = {(qid, lang): text for qid, lang, text in rows}
    out: dict = {"census": census}
    queries = list(ds.no_answer)
    for q, cand in zip(queries, no_answer_candidates(ev, queries, POOL)):
        got = out.setdefault(q.split, {"n": 0, "refused": 0, "named": 0, "answered_again": [], "not_asked": 0})
        got["n"] += 1
        r = rank(cand, cfg, now=ds.reference_time, memo=RankMemo(cand))
        if not r.abstained:
            continue
        got["refused"] += 1
        named = ev.index.ask_in(q.text, r)
        got["named"] += bool(named)
        again = [replace(q, text=translated[(q.id, lang)]) for lang in named if (q.id, lang) in translated]
        got["not_asked"] += len(named) - len(again)
        if any(not rank(c, cfg, now=ds.reference_time, memo=RankMemo(c)).abstained
               for c in no_answer_candidates(ev, again, POOL)):
            got["answered_again"].append(q.id)
    ev.close()
    return out


def markdown(rows: list[dict], split: str, seconds: float) -> str:
    lines = [
        "# A refused question asked again in the languages its reply names (issue #22)",
        "",
        f"`PYTHONPATH=. python eval/reports/ask_again.py {split} {' '.join(r['pair'].replace('+', ':') for r in rows)}`"
        f" in {seconds:.0f} s, {time.strftime('%Y-%m-%d')}; the default settings (multilingual-e5-small, the joint "
        "order, the answer gate at 0.07). XQuAD-R memories in two languages (even articles in the first, odd in the "
        f"second; questions in the first), {split} split. \"one call\": memory_search once; \"asked again\": where it "
        "refused, the same question again in each language its reply names (`ask_in`; XQuAD-R's own translation "
        "standing in for the agent's) until one is answered.",
        "",
        "| memory | false abstention: one call -> asked again | nDCG@10: one call -> asked again | "
        "no-answer refused: one call -> asked again | languages named (of refused answerable / no-answer) |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        a, na = r["answerable"], r["no_answer"]
        lines.append(
            f"| {r['pair']} | {a['refused'] / a['n']:.1%} -> {a['refused_after'] / a['n']:.1%} | "
            f"{a['ndcg_first']:.4f} -> {a['ndcg_after']:.4f} | {na['refused'] / na['n']:.1%} -> "
            f"{(na['refused'] - na['answered_again']) / na['n']:.1%} | {a['named']} of {a['refused']} / "
            f"{na['named']} of {na['refused']}"
            + (f" ({a['not_asked'] + na['not_asked']} not asked)" if a["not_asked"] + na["not_asked"] else "") + " |")
    lines += ["", "Chunks per language in each memory (the census the reply reads): "
              + "; ".join(f"{r['pair']} {r['census']}" for r in rows), ""]
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    if argv[:1] == ["demo"]:
        print(json.dumps(measure_demo(), ensure_ascii=False, indent=1))
        return
    split, pairs = argv[0], [p.split(":") for p in argv[1:]]
    t0 = time.time()
    rows = []
    for asked, other in pairs:
        rows.append(measure(asked, other, split))
        print(json.dumps(rows[-1]), file=sys.stderr)
    name = "ask-again-e5" if split == "test" else f"ask-again-e5-{split}"
    (HERE / f"{name}.json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    (HERE / f"{name}.md").write_text(markdown(rows, split, time.time() - t0), encoding="utf-8")
    print(f"wrote eval/reports/{name}.md")


if __name__ == "__main__":
    main(sys.argv[1:])
