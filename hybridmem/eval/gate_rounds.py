"""The answer gate's train table: how each round of the gate in docs/ranking.md is chosen. Pure; no I/O.

A gate over some features (names of :data:`~hybridmem.ranking.gate.GATE_FEATURES`) is fitted on a model's decision
rows (:func:`hybridmem.eval.decisions.collect` over every decision dataset's TRAIN split) and placed as
:func:`~hybridmem.eval.decisions.fit_rows` places every gate but the default's; the table gives, per no-answer set,
the share of its queries it abstains on, per answerable set its false abstention, and the same for each XQuAD-R
language read by a gate fitted without it (a language the gate has never seen). ``eval/reports/gate_rounds.py``
prints it.
"""

from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple, Sequence

import numpy as np

from hybridmem.config.calibration import Calibration
from hybridmem.eval.decisions import DecisionRows, fit_gate, place_gate, vector_took_part
from hybridmem.ranking.gate import GATE_FEATURES, answer_probability

__all__ = ["GateTable", "gate_table"]


class GateTable(NamedTuple):
    """What a gate over some features scores on train rows (:func:`gate_table`): per set, the share of its queries
    that return nothing; ``abstention`` on the no-answer sets, ``false`` on the answerable ones; ``held_out_*`` the
    same for each XQuAD-R language read by a gate fitted without it."""

    abstention: dict[str, float]
    false: dict[str, float]
    held_out_abstention: dict[str, float]
    held_out_false: dict[str, float]


def gate_table(rows: DecisionRows, features: Sequence[str], threshold: float) -> GateTable:
    """A gate over ``features`` (names of :data:`GATE_FEATURES`) fitted on ``rows``' queries whose vector leg took
    part and placed as :func:`fit_rows` places every gate but the default's (its own 2% point moved onto
    ``threshold``), read on those queries; then the same with each XQuAD-R language left out of the fit and placement
    in turn and read on its own queries (a language the gate has never seen). How a round of the gate is chosen on
    train (docs/ranking.md; ``eval/reports/gate_rounds.py``)."""
    decided = vector_took_part(rows)

    def placed(fit_on: DecisionRows) -> Calibration:
        return place_gate(fit_gate(fit_on, features), {"": fit_on}, "both", threshold)

    def shares(gate: Calibration, on: DecisionRows) -> tuple[dict[str, float], dict[str, float]]:
        out: dict[tuple[str, int], list[bool]] = defaultdict(list)
        for name, feats, label in on.gate:
            out[name, label].append(answer_probability(dict(zip(GATE_FEATURES, feats["both"])), gate) < threshold)
        no_answer = {n: float(np.mean(v)) for (n, label), v in out.items() if not label}
        answerable = {n: float(np.mean(v)) for (n, label), v in out.items() if label}
        return no_answer, answerable

    def language(name: str) -> str | None:
        return name.split("-")[1] if name.startswith("xquad-") else None

    abstention, false = shares(placed(decided), decided)
    held_abstention: dict[str, float] = {}
    held_false: dict[str, float] = {}
    for lang in sorted({language(r[0]) for r in decided.gate} - {None}):
        kept = DecisionRows(gate=[r for r in decided.gate if language(r[0]) != lang])
        left = DecisionRows(gate=[r for r in decided.gate if language(r[0]) == lang])
        a, f = shares(placed(kept), left)
        held_abstention.update(a)
        held_false.update(f)
    return GateTable(abstention, false, held_abstention, held_false)
