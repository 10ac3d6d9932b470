"""Abstention: does a config return nothing when nothing is relevant, and still answer when something is?

nDCG never sees an answer given to a question with none: every judged query has one. So three no-answer query sets
are built from the data at hand, without new labels (:func:`no_answer_sets`):

- ``locomo-cross``: each LoCoMo question asked in the scope of another conversation. Pairing rule: within a split,
  conversations in the dataset's order; conversation ``i``'s questions are asked in conversation ``i + 1``'s scope
  (the last one's in the first's), so train stays train and test stays test. Names, events and dates do not carry
  over between LoCoMo's conversations (each is two other invented people); 40 pairs were read by hand (see
  ``eval/reports/abstention.md``).
- ``demo-none``: the demo set's hand-written ``no_answer`` queries (en, vi, zh, ja, th), with their split.
- ``scifact-on-demo``: SciFact's claims (their split) against the demo workspace (a software engineer's notes).
- ``xquad-<lang>-cross``: each XQuAD-R question asked of the sentences of the other half of the articles (the first
  half of the articles in file order against the second, and back; :func:`xquad_cross`), in each of the 11
  languages, with the question's own split. Articles are separate Wikipedia pages on unrelated subjects.

Metrics (:func:`abstention_rate`): the share of no-answer queries that return nothing; for answerable queries
nDCG@10 and recall@5 (ranx) and false abstention (the share that return nothing, the same function).
:func:`abstention_curve` gives both over ``min_score``; :func:`abstention_table` one row per config.

Example:
    >>> abstention_rate([0, 3, 0, 1])
    0.5
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

from hybridmem.config import RankConfig
from hybridmem.eval.datasets.base import Dataset, Query
from hybridmem.eval.runner import Evaluator, eval_config
from hybridmem.ranking import RankMemo, rank
from hybridmem.records import Candidates
from hybridmem.retrieve import Scope

__all__ = ["ANSWER_METRICS", "NoAnswerSet", "abstention_curve", "abstention_rate", "abstention_table",
           "confine", "curve_knob", "curve_markdown", "locomo_cross", "no_answer_candidates", "no_answer_counts", "no_answer_sets",
           "table_markdown", "xquad_cross"]

ANSWER_METRICS = ("ndcg@10", "recall@5", "budget_recall@4000")
CURVE_THRESHOLDS = tuple(round(0.025 * i, 3) for i in range(0, 21))  # calibrated fused scores sit low
GATE_THRESHOLDS = (0.0, *(round(0.05 * i, 2) for i in range(1, 20)))  # the answer gate's probability


@dataclass(frozen=True)
class NoAnswerSet:
    """Queries with no answer in the index they are asked of.

    Attributes:
        name: ``locomo-cross``, ``demo-none`` or ``scifact-on-demo``.
        index: the dataset whose index answers them (``locomo``, ``demo``).
        queries: the queries; ``scope`` restricts both legs as for labelled queries.
        rule: how they were built.
        within: ``{query id: document paths}``: a query listed here is asked of those documents only (both legs
            confined exactly, :func:`confine`); others of the whole index (or their ``scope``).
    """

    name: str
    index: str
    queries: tuple[Query, ...]
    rule: str
    within: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def select(self, split: str | None) -> "NoAnswerSet":
        """Only the queries of ``split`` (None or ``all``: every one)."""
        if split in (None, "all"):
            return self
        return replace(self, queries=tuple(q for q in self.queries if q.split == split))


def abstention_rate(returned: Sequence[int]) -> float:
    """The share of queries that returned nothing: ``returned[i]`` is how many hits query ``i`` got. On no-answer
    queries this is the abstention rate (higher is better); on answerable ones, false abstention (lower is better).
    0.0 for no queries.

    Example:
        >>> abstention_rate([0, 0, 2]), abstention_rate([])
        (0.6666666666666666, 0.0)
    """
    n = len(returned)
    return sum(1 for r in returned if r == 0) / n if n else 0.0


def locomo_cross(locomo: Dataset) -> NoAnswerSet:
    """LoCoMo questions asked in the next conversation's scope (same split; see module doc)."""
    out: list[Query] = []
    for split in ("train", "test"):
        scopes = list(dict.fromkeys(q.scope for q in locomo.queries if q.split == split and q.scope))
        nxt = {s: scopes[(i + 1) % len(scopes)] for i, s in enumerate(scopes)} if len(scopes) > 1 else {}
        out += [Query(f"{q.id}@{nxt[q.scope]}", q.text, q.category, split, nxt[q.scope])
                for q in locomo.queries if q.split == split and q.scope in nxt]
    return NoAnswerSet("locomo-cross", "locomo", tuple(out),
                       "each question asked in the next conversation's scope of the same split (last -> first)")


def xquad_cross(dataset: Dataset) -> NoAnswerSet:
    """XQuAD-R questions asked of the other half of the articles (see module doc and
    :func:`hybridmem.eval.datasets.xquad.article_halves`); in a memory of two languages
    (:func:`~hybridmem.eval.datasets.xquad.load_xquad_pair`), of the other half's sentences it holds, in either."""
    from hybridmem.eval.datasets.xquad import article_halves

    langs = dataset.name.split("-", 1)[1].split("+")  # xquad-en, or xquad-en+vi (a memory in two languages)
    sides = {lang: article_halves(lang) for lang in langs}
    questions = sides[langs[0]][1]
    prefix = (lambda lang: f"{lang}/") if len(langs) > 1 else (lambda lang: "")  # noqa: E731
    halves = [frozenset(prefix(lang) + d for lang in langs for d, side in sides[lang][0].items() if side == s)
              for s in (0, 1)]
    out = [Query(f"{q.id}@other-half", q.text, q.category, q.split) for q in dataset.queries]
    within = {f"{q.id}@other-half": halves[1 - questions[q.id]] for q in dataset.queries}
    return NoAnswerSet(f"{dataset.name}-cross", dataset.name, tuple(out),
                       "each question asked of the other half of the articles' sentences (first half <-> second)",
                       within)


def confine(cand: Candidates, paths: frozenset[str], pool: int) -> Candidates:
    """``cand`` with each leg keeping only chunks of ``paths``, re-ranked 1, 2, ... and cut to ``pool``.

    Exact (the same lists a retrieval over only those documents returns: vector cosines and FTS5 BM25 do not depend
    on the other documents' presence, BM25's IDF aside, which stays the index's own as with ``Scope``) when ``cand``
    was retrieved with a pool covering every document.
    """
    chunks = cand.chunks

    def keep(hits):  # noqa: ANN001, ANN202
        inside = [h for h in hits if chunks[h.chunk_id].path in paths][:pool]
        return tuple(replace(h, rank=i) for i, h in enumerate(inside, 1))

    kw, vec = keep(cand.keyword), keep(cand.vector)
    ids = {h.chunk_id for h in kw} | {h.chunk_id for h in vec}
    return replace(cand, keyword=kw, vector=vec, chunks={c: chunks[c] for c in ids}, pool=pool, alignment=None,
                   passage_alignment=None)


def no_answer_sets(dataset: Dataset) -> list[NoAnswerSet]:
    """The no-answer sets asked of ``dataset``'s index: LoCoMo cross-conversation for ``locomo``; the demo's own
    no-answer queries and SciFact's claims for the demo set; the other half of the articles for ``xquad-<lang>``;
    none for others."""
    from hybridmem.eval.datasets import load_dataset

    sets: list[NoAnswerSet] = []
    if dataset.name.startswith("xquad-"):
        sets.append(xquad_cross(dataset))
    if dataset.name.startswith("locomo"):
        sets.append(locomo_cross(dataset))
    if dataset.no_answer:
        sets.append(NoAnswerSet(f"{dataset.name.split('-')[0]}-none", dataset.name, dataset.no_answer,
                                "hand-written questions the memory cannot answer (no_answer: true)"))
    if dataset.name == "demo-memory":
        sci = load_dataset("scifact")
        sets.append(NoAnswerSet("scifact-on-demo", dataset.name,
                                tuple(Query(f"scifact:{q.id}", q.text, "scifact", q.split) for q in sci.queries),
                                "SciFact claims against the demo workspace"))
    return sets


def no_answer_candidates(ev: Evaluator, queries: Sequence[Query], pool: int,
                         within: Mapping[str, frozenset[str]] | None = None) -> list[Candidates]:
    """Both legs for each no-answer query over ``ev``'s index (query vectors cached like labelled queries'); a query
    named in ``within`` is confined to those documents (retrieved over the whole index, then :func:`confine`)."""
    vector = ev.embedder is not None
    vecs = ev.query_vectors([q.text for q in queries]) if vector else {}
    within = within or {}
    everything = max(pool, ev.index.status().get("chunks", 0)) if within else pool
    out: list[Candidates] = []
    for q in queries:
        paths = within.get(q.id)
        c = ev.index.retrieve(q.text, everything if paths is not None else pool, vector=vector,
                              query_vector=vecs.get(q.text), scope=Scope(path_prefix=q.scope) if q.scope else None,
                              align=paths is None)
        out.append(c if paths is None else ev.index.align(confine(c, paths, pool)))  # aligned with what it kept
    return out


def no_answer_counts(cands: Sequence[Candidates], config: RankConfig, now: float) -> list[int]:
    """How many hits ``config`` returns for each query."""
    return [len(rank(c, config, now=now, memo=RankMemo(c), explain=False, centred_snippets=False).hits)
            for c in cands]


def _answerable(ev: Evaluator, configs: Mapping[str, RankConfig], split: str | None) -> dict[str, dict[str, float]]:
    res = ev.evaluate(dict(configs), list(_metrics(ev)), split=split)
    out: dict[str, dict[str, float]] = {}
    for name in configs:
        row = dict(res.means[name])
        row["false_abstention"] = abstention_rate([len(r) for r in res.runs[name].lengths])
        out[name] = row
    return out


def _metrics(ev: Evaluator) -> tuple[str, ...]:
    return ANSWER_METRICS if ev.dataset.kind == "evidence" else ANSWER_METRICS[:2]


def abstention_table(ev: Evaluator, configs: Mapping[str, RankConfig], split: str | None = "test",
                     sets: Sequence[NoAnswerSet] | None = None) -> dict[str, dict[str, float]]:
    """``{config: {metric: value}}``: nDCG@10, recall@5 (and budget_recall@4000 on evidence sets) and
    ``false_abstention`` on the answerable queries of ``split``, and ``abstain:<set>`` on each no-answer set."""
    sets = no_answer_sets(ev.dataset) if sets is None else sets
    table = _answerable(ev, configs, split)
    depth = 10
    cfgs = {n: eval_config(c, depth) for n, c in configs.items()}
    pool = max(c.pool for c in cfgs.values())
    for s in sets:
        cands = no_answer_candidates(ev, s.select(split).queries, pool, s.within)
        for name, c in cfgs.items():
            table[name][f"abstain:{s.name}"] = abstention_rate(no_answer_counts(cands, c, ev.dataset.reference_time))
    return table


def curve_knob(config: RankConfig) -> str:
    """What a config's abstention curve varies: its answer gate's threshold when it has a gate, else its min score."""
    return "answer_threshold" if config.answer_threshold > 0.0 else "min_score"


def abstention_curve(ev: Evaluator, config: RankConfig, thresholds: Sequence[float] | None = None,
                     split: str | None = "test", sets: Sequence[NoAnswerSet] | None = None) -> list[dict[str, float]]:
    """One row per threshold: the answerable metrics, ``false_abstention`` and ``abstain:<set>`` for ``config`` with
    that value of its :func:`curve_knob` (the first key of each row): the answer gate's threshold (default grid
    :data:`GATE_THRESHOLDS`) or the min score (:data:`CURVE_THRESHOLDS`)."""
    knob = curve_knob(config)
    if thresholds is None:
        thresholds = GATE_THRESHOLDS if knob == "answer_threshold" else CURVE_THRESHOLDS
    configs = {f"{t:g}": config.replace(**{knob: float(t)}) for t in thresholds}
    table = abstention_table(ev, configs, split, sets)
    return [{knob: float(t), **table[f"{t:g}"]} for t in thresholds]


def curve_markdown(rows: Sequence[Mapping[str, float]]) -> str:
    """The curve as a Markdown table (what ``hybridmem eval --abstention`` prints)."""
    if not rows:
        return ""
    cols = list(rows[0])
    lines = ["| " + " | ".join(cols) + " |", "|" + "---:|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(f"{r[c]:.3f}" if c == cols[0] else f"{r[c]:.4f}" for c in cols) + " |")
    return "\n".join(lines) + "\n"



def table_markdown(table: Mapping[str, Mapping[str, float]]) -> str:
    """``{config: {metric: value}}`` as a Markdown table, one row per config."""
    cols = list(dict.fromkeys(c for row in table.values() for c in row))
    lines = ["| config | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
    for name, row in table.items():
        lines.append(f"| {name} | " + " | ".join(f"{row[c]:.4f}" if c in row else "-" for c in cols) + " |")
    return "\n".join(lines) + "\n"
