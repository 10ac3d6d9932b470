"""The answer gate's bar per question language (:data:`~hybridmem.config.calibration.LANGUAGE_BARS`), placed on a
model's decision rows. Pure; no I/O.

One threshold for every language lets through most questions about what memory does not hold in the languages whose
questions score higher at the same content: a Vietnamese, Chinese or Thai question is cut into many short units
that any passage shares, and it aligns well token by token with any passage. XQuAD-R asks the same questions of the
same articles in eleven languages, so how far one language's 2% false-abstention point lies above English's there is
the language's shift, not the kind of text's (each language's own point would carry Wikipedia's level into its bar:
English's lies 1.5 logits higher over XQuAD-R than over LoCoMo's conversations). A language's bar is the shared
threshold moved up by its shift; English, and a language whose questions score no higher than English's, keep the
shared threshold (where every train set abstains on 2% or less). ``eval/reports/gate_rounds.py --language-bars``
prints them and what they change.

For a model in :data:`ANCHORED` the shifts start from English's own 2% point over every English set it decides (its
conversations, abstracts and Wikipedia questions; the lowest of them binds) instead of the shared threshold: there
the shared threshold is bound by languages the model cannot read (all-MiniLM-L6-v2 is English only; its hardest
Turkish, Thai and Greek questions score 2.3 to 3.4 logits under its hardest English ones), so English kept a bar that no
English set needed. e5's shared threshold is bound by English's conversations among others, 0.4 logits under that
point; anchored there it lost English questions on test past what the issue allows (docs/ranking.md, "The
sixteenth round" and "The seventeenth round").

MiniLM's pair (``"<model>|keyword+aligned"``, the keyword leg's gate and one over the alignment, both must answer)
decides the questions whose blind vector leg the adaptive step dropped: Arabic, Greek, Hindi, Russian, Thai and
Chinese. Its bars (``pair=True``) are placed by the same anchored rule, on the questions it decides; English, which it
never decides, is read as the pair would read it (its keyword leg's features alone, which carry the alignment) to give
the anchor and the reference, and gets no bar of its own ("The eighteenth round").

:func:`note_bars` places bars for a question over notes alone (XQuAD-R's articles, SciFact's abstracts; no
transcript among its passages), from English's own point over those: measured in "The twenty-first round" and not
shipped, since bars placed on some articles refused about twice their share of others' answerable questions.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Mapping, NamedTuple

import numpy as np

from hybridmem.config.calibration import Gate
from hybridmem.eval.decisions import MAX_FALSE_ABSTENTION, DecisionRows, false_point, vector_dropped, vector_took_part
from hybridmem.ranking.calibrate import sigmoid
from hybridmem.ranking.gate import GATE_FEATURES, answer_probability, logit

__all__ = ["ANCHORED", "LEAST_QUESTIONS", "NOTES_MAX_FALSE", "NOTE_SETS", "REFERENCE_LANGUAGE", "SET_LANGUAGES",
           "BarTable", "bar_table", "language_bars", "note_bars", "over_notes", "set_bar", "set_language"]

REFERENCE_LANGUAGE = "en"  # the language each shift is read from; it keeps the shared threshold unless anchored
ANCHORED = frozenset({"all-MiniLM-L6-v2"})  # models whose shifts start from the reference language's own 2% point
LEAST_QUESTIONS = 100  # a language's point is read on at least this many answerable questions its gate decides
SET_LANGUAGES = {"locomo": "en", "scifact": "en", "locomo-cross": "en", "scifact-on-demo": "en"}  # beside XQuAD-R's
NOTE_SETS = ("xquad-", "scifact")  # decision sets asked of a memory of notes alone (by prefix; the demo holds both)
NOTES_MAX_FALSE = 0.01  # the share of a language's answerable train questions over notes its bar may lose (measured)


def over_notes(name: str) -> bool:
    """Whether decision set ``name`` is asked of a memory of notes alone (no transcript): XQuAD-R's articles and
    SciFact's abstracts; LoCoMo's conversations are transcripts, and the demo (notes and transcripts) and the SciFact
    claims asked of it are neither.

    Example:
        >>> over_notes("xquad-vi-cross"), over_notes("scifact"), over_notes("scifact-on-demo"), over_notes("locomo")
        (True, True, False, False)
    """
    return name.startswith(NOTE_SETS) and name != "scifact-on-demo"


def set_language(name: str) -> str | None:
    """The language of a decision set's questions: ``xquad-<lang>`` and its ``-cross`` set, :data:`SET_LANGUAGES`;
    None for a set in several (the demo).

    Example:
        >>> set_language("xquad-vi-cross"), set_language("locomo"), set_language("demo-memory")
        ('vi', 'en', None)
    """
    if name.startswith("xquad-"):
        return name.split("-")[1]
    return SET_LANGUAGES.get(name)


def _probabilities(rows: DecisionRows, gate: Gate, pair: bool = False,
                   legs: str = "both") -> dict[tuple[str, int], np.ndarray]:
    """Per decision set and label, ``gate``'s probability on each question it decides (where the vector leg took
    part; for the ``pair``, where it was dropped), read on the features of ``legs``."""
    out: dict[tuple[str, int], list[float]] = defaultdict(list)
    for name, feats, label in (vector_dropped(rows) if pair else vector_took_part(rows)).gate:
        out[name, label].append(answer_probability(dict(zip(GATE_FEATURES, feats[legs])), gate))
    return {key: np.asarray(v) for key, v in out.items()}


def language_bars(rows: DecisionRows, gate: Gate, threshold: float, anchored: bool = False,
                  pair: bool = False, max_false: float = MAX_FALSE_ABSTENTION,
                  notes: bool = False) -> dict[str, float]:
    """Per XQuAD-R language whose gate decides :data:`LEAST_QUESTIONS` of its answerable questions or more and whose
    2% point under ``gate`` lies above :data:`REFERENCE_LANGUAGE`'s: ``threshold`` moved up by that many logits,
    rounded to four decimals; with ``anchored``, the reference language's own 2% point over all its sets (never under
    ``threshold``) moved so, the reference language included; for the ``pair``, on the questions whose vector leg was
    dropped, the reference language read as the pair would read it and given no bar (see the module doc). Each
    point is the ``max_false`` point (2%); with ``notes``, the anchor is read over the reference language's sets of
    notes alone (:func:`over_notes`)."""
    probs = _probabilities(rows, gate, pair)
    if pair:  # it never decides a reference question: read them as it would, on the keyword leg's features alone
        probs.update({key: v for key, v in _probabilities(rows, gate, legs="keyword").items()
                      if set_language(key[0]) == REFERENCE_LANGUAGE})
    xquad = {set_language(name): v for (name, label), v in probs.items()
             if label and name.startswith("xquad-") and len(v) >= LEAST_QUESTIONS}
    if REFERENCE_LANGUAGE not in xquad:
        return {}
    own = {name: v for (name, label), v in probs.items()
           if label and set_language(name) == REFERENCE_LANGUAGE and (over_notes(name) or not notes)}
    start = max(threshold, false_point(own, max_false)) if anchored else threshold
    point = {lang: logit(false_point({lang: v}, max_false)) for lang, v in xquad.items()}
    bars = {lang: round(sigmoid(logit(start) + p - point[REFERENCE_LANGUAGE]), 4) for lang, p in point.items()
            if not (pair and lang == REFERENCE_LANGUAGE)}
    return {lang: bar for lang, bar in sorted(bars.items()) if bar > threshold}


def note_bars(rows: DecisionRows, gate: Gate, threshold: float, usual: Mapping[str, float],
              max_false: float = NOTES_MAX_FALSE) -> dict[str, float]:
    """Per XQuAD-R language (as :func:`language_bars`), the bar for a question over notes alone: English's own
    ``max_false`` point over its note sets (:func:`over_notes`: XQuAD-R's and SciFact's answerable questions; the
    lowest binds) moved by how far the language's ``max_false`` point lies from English's on XQuAD-R, up or down;
    never under ``threshold`` nor the language's ``usual`` bar. English's conversations (LoCoMo), whose answers score
    1.5 logits under its articles', bind the shared threshold; these bars read a memory of notes against notes alone.
    Measured in docs/ranking.md's twenty-first round and not shipped: placed on one set of articles, they refuse twice
    their share of another's answerable questions."""
    bars = language_bars(rows, gate, threshold, anchored=True, max_false=max_false, notes=True)
    return {lang: bar for lang, bar in bars.items() if bar > usual.get(lang, threshold)}


def set_bar(name: str, threshold: float, bars: Mapping[str, float], notes: Mapping[str, float] | None = None) -> float:
    """The bar decision set ``name``'s questions are read against: its language's in ``bars``, or in ``notes`` for a
    set over notes alone (:func:`over_notes`) where that is higher; never under ``threshold``.

    Example:
        >>> set_bar("xquad-vi-cross", 0.07, {"vi": 0.13}, {"vi": 0.39}), set_bar("locomo", 0.07, {"vi": 0.13})
        (0.39, 0.07)
    """
    lang = set_language(name) or ""
    return max(threshold, bars.get(lang, threshold), (notes or {}).get(lang, 0.0) if over_notes(name) else 0.0)


class BarTable(NamedTuple):
    """Per decision set: its bar, and the share of its questions that return nothing at the shared threshold and at
    the bar (abstention on a no-answer set, false abstention on an answerable one)."""

    bar: dict[str, float]
    before: dict[str, float]
    after: dict[str, float]
    answerable: dict[str, bool]


def bar_table(rows: DecisionRows, gate: Gate, threshold: float, bars: Mapping[str, float],
              pair: bool = False, notes: Mapping[str, float] | None = None) -> BarTable:
    """What reading each set's questions against their language's bar (``bars``; else ``threshold``) changes, on the
    questions ``gate`` decides (``pair``: those whose vector leg was dropped); a set over notes alone
    (:func:`over_notes`) against its language's bar in ``notes`` where that has one."""
    table = BarTable({}, {}, {}, {})
    for (name, label), v in sorted(_probabilities(rows, gate, pair).items()):
        bar = set_bar(name, threshold, bars, notes)
        table.bar[name], table.answerable[name] = bar, bool(label)
        table.before[name], table.after[name] = float(np.mean(v < threshold)), float(np.mean(v < bar))
    return table
