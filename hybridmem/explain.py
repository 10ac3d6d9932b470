"""``hybridmem search --explain``: both decisions, the token alignment, and every candidate with every stage's score."""

from __future__ import annotations

from typing import Any, Sequence

from hybridmem.config.calibration import ANSWER_THRESHOLD, NEAREST_ACROSS_THRESHOLD, joint_model
from hybridmem.wording import ACROSS_WORDS

__all__ = ["explain_table", "fmt", "print_explain"]


def fmt(v: float | None, digits: int = 3) -> str:
    """``v`` with ``digits`` decimals, or ``-`` for None."""
    return "-" if v is None else f"{v:.{digits}f}"


def explain_table(hits: Sequence[Any]) -> str:
    """A text table of every candidate with every stage's score, and why it was kept or cut."""
    head = ["pos", "citation", "vraw", "vec", "vrank", "traw", "text", "trank", "fused", "decay", "decayed", "mmr",
            "final", "status"]
    rows = []
    for h in hits:
        status = ("kept" + (" (rescued)" if h.rescued else "")) if h.kept else f"cut: {h.cut_reason}"
        rows.append([
            str(h.position or "-"), h.citation[:48], fmt(h.vector_raw), fmt(h.vector_score), str(h.vector_rank or "-"),
            fmt(h.text_raw, 2), fmt(h.text_score), str(h.text_rank or "-"), fmt(h.fused_score, 4),
            fmt(h.decay_factor), fmt(h.decayed_score, 4), fmt(h.mmr_score), fmt(h.final_score, 4), status,
        ])
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(head, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(lines)


def print_explain(resp: Any) -> None:
    """Print what ``--explain`` adds below a search's hits (``resp``: the :class:`~hybridmem.records.SearchResponse`)."""
    print()
    print(f"config: fusion={resp.config.fusion} weights={resp.config.vector_weight}/{resp.config.text_weight} "
          f"pool={resp.config.pool} min_score={resp.config.min_score} mmr={resp.config.mmr} "
          f"decay={resp.config.decay}; provider {resp.provider} {resp.model}")
    r = resp.ranking
    if r.answer_probability is not None:  # the second decision: answer or not
        verdict = "nothing returned" if r.abstained else "answer"
        print(f"answer gate: P(memory holds an answer) = {r.answer_probability:.3f}, threshold "
              f"{resp.config.answer_threshold:g}: {verdict}; final = fused x that probability")
        if r.language_bar:
            print(f"the question read as {r.language_bar[0]}: the gate read against that language's bar "
                  f"{r.language_bar[1]:g} (its probability moved so that the bar falls on {ANSWER_THRESHOLD:g})")
        a = resp.candidates.alignment
        print("token alignment with the top passages: " + ("not read (no token states)" if a is None else
              f"mean {a[0]:.3f}, lower quartile {a[1]:.3f}; weighted by surprisal {a[2]:.3f}, "
              f"same pieces {a[3]:.2f}; centred {a[4]:.3f}"))
    if r.routed_across:
        print(f"asked across languages (another script or language than {ACROSS_WORDS[r.routed_across]}"
              + ("" if r.routed_across == "top" else f"; the cross-lingual gate's bar {NEAREST_ACROSS_THRESHOLD:g}")
              + "): the cross-lingual gate may answer too, and the hits take the cross-lingual fit's probabilities")
    read = resp.candidates.passage_alignment
    model = resp.candidates.vector_model or ""
    lifts = resp.config.fusion == "joint" and resp.config.vector_weight > 0  # the lift is the vector leg's
    if read and lifts and joint_model(model, aligned=True) is not joint_model(model):
        cite = {h.chunk_id: h.citation for h in r.candidates}  # the first decision reads it too
        print("alignment of each passage read (a query piece it holds credited a share of its shortfall; the order "
              "lifts each above the least aligned; fused: the "
              "probabilities of the fit the hits take, without the lift, highest first down this order): "
              + ", ".join(f"{cite.get(cid, cid)} {m:.3f}" for cid, m in sorted(read.items(), key=lambda x: -x[1])))
    print(f"vraw/traw: raw cosine / FTS5 bm25; vec/text: each leg's score ({resp.config.vector_norm} / "
          f"{resp.config.bm25_norm}; calibrated = estimated probability of relevance)")
    for leg, searched, found in (("vector", resp.candidates.vector_searched, resp.candidates.vector),
                                 ("keyword", resp.candidates.keyword_searched, resp.candidates.keyword)):
        if searched and not found:
            print(f"{leg} leg: searched, found nothing (p = 0 for every candidate)")
    print(explain_table(resp.ranking.candidates))
    print("timings (ms): " + ", ".join(f"{k} {v:.1f}" for k, v in resp.timings.items()))
