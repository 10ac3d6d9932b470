"""Fitted calibrations: each retrieval leg's raw score mapped to an estimated probability of relevance.

A :class:`Calibration` is a logistic regression ``p = 1 / (1 + exp(-(intercept + sum_i coef_i * feature_i)))`` over
the named features of one candidate (see :mod:`hybridmem.ranking.calibrate` for how each feature is computed):

- vector leg, one fit per embedding model (cosines mean different things per model: all-MiniLM-L6-v2 gives relevant
  short notes 0.3 to 0.6, multilingual-e5-small gives everything 0.7 to 0.9): feature ``cosine``;
- keyword leg, one fit for FTS5 BM25 as this project tokenizes: ``log1p_bm25`` (``log(1 + -bm25())``), ``coverage``
  (the share of the query's distinct terms found in the chunk) and ``log_terms`` (``log`` of the number of distinct
  query terms, so a long query's larger BM25 sum is read relative to its length).

How they were fitted (re-run with ``hybridmem eval calibrate --write``; :mod:`hybridmem.eval.calibrate`): on TRAIN
splits only (SciFact train claims, LoCoMo conversations 0-4, the demo set's train queries; for the keyword leg also
XQuAD-R's train questions in all 11 languages, one source), every pooled candidate
(24 per leg, the default pool) of every answerable query labelled 1 when it holds a judged unit and 0 otherwise,
plus every pooled candidate of the train no-answer queries (LoCoMo questions asked in another train conversation,
SciFact train claims against the demo workspace, the demo set's train no-answer queries) labelled 0; each dataset's
rows weighted to the same total, L2-regularized Newton iterations (:func:`hybridmem.ranking.calibrate.fit_logistic`).
Coefficients of a raw score are constrained to be >= 0, so a calibrated score never falls as its raw score rises.

Each model's vector fit is refitted alone with ``hybridmem eval calibrate --models e5 --write`` (the other models keep
theirs; the keyword fit is the same rows whichever model runs). multilingual-e5-small's cosines sit high and close
together (0.75-0.95), so its probabilities stay low (0.05 at cosine 0.92): a hit its vector leg alone finds rarely
clears the default min score, and the keyword leg decides most abstentions. A query-relative feature (cosine minus the
query's best cosine) was tried on the same rows: coefficient 2.4, train nDCG@10 within 0.002 of the cosine-only fit on
SciFact, LoCoMo and the demo set, so it was not kept.

A model with no fit of its own uses :data:`FALLBACK_VECTOR_MODEL`'s (the English MiniLM; other models' cosines may
sit elsewhere: fit them with ``hybridmem eval calibrate --settings S.toml``).
"""

from __future__ import annotations

from dataclasses import dataclass

from hybridmem.errors import ConfigError

VECTOR_FEATURES = ("cosine",)
KEYWORD_FEATURES = ("log1p_bm25", "coverage", "log_terms")
# The order (hybridmem/ranking/joint.py): one candidate's features over both legs, and the token alignment's lift among
# the passages it read.
JOINT_FEATURES = ("vector_minmax", "keyword_minmax", "vector_p", "keyword_p", "vector_rank", "keyword_rank", "both",
                  "align_lift")


@dataclass(frozen=True)
class Calibration:
    """A fitted logistic map from a candidate's features to a probability of relevance.

    Attributes:
        features: feature names, in the order of ``coef``.
        coef: one coefficient per feature.
        intercept: the constant term.
        fitted_on: what it was fitted on (rows, positives, datasets).
    """

    features: tuple[str, ...]
    coef: tuple[float, ...]
    intercept: float
    fitted_on: str = ""

    def __post_init__(self) -> None:
        if len(self.features) != len(self.coef):
            raise ConfigError(f"calibration has {len(self.features)} features but {len(self.coef)} coefficients")


# -- fitted numbers (written by `hybridmem eval calibrate --write`; edit by re-running it) ----------------------------
# BEGIN FITTED
VECTOR_CALIBRATIONS: dict[str, Calibration] = {
    "all-MiniLM-L6-v2": Calibration(("cosine",), (5.7173,), -5.259,
        "76608 rows (1828 relevant) from demo-memory, demo-none, locomo, locomo-cross, scifact, scifact-on-demo"),
    "multilingual-e5-small": Calibration(("cosine",), (6.7018,), -8.9422,
        "76608 rows (1892 relevant) from demo-memory, demo-none, locomo, locomo-cross, scifact, scifact-on-demo"),
}
KEYWORD_CALIBRATION = Calibration(("log1p_bm25", "coverage", "log_terms"), (1.036, 5.0248, -0.1675), -7.3897,
    "288198 rows (10765 relevant) from demo-memory, demo-none, locomo, locomo-cross, scifact, scifact-on-demo, xquad")
JOINT_MODEL = Calibration(("vector_minmax", "keyword_minmax", "vector_p", "keyword_p", "vector_rank", "keyword_rank", "both", "align_lift"), (1.3481, 1.9613, 0.0, 3.1741, 1.8395, 1.8512, 0.0, 0.0), -6.5397,
    "1392289 candidates (22934 relevant) of 22804 queries from demo, locomo, scifact, xquad")
JOINT_MODELS: dict[str, Calibration] = {
    "multilingual-e5-small": Calibration(("vector_minmax", "keyword_minmax", "vector_p", "keyword_p", "vector_rank", "keyword_rank", "both", "align_lift"), (1.8722, 1.5311, 0.1902, 3.2291, 2.0828, 1.8401, 0.0, 0.0), -6.9002,
        "761220 candidates (11741 relevant) of 11402 queries from demo, locomo, scifact, xquad"),
    "all-MiniLM-L6-v2": Calibration(("vector_minmax", "keyword_minmax", "vector_p", "keyword_p", "vector_rank", "keyword_rank", "both", "align_lift"), (1.2378, 2.0912, 0.0, 3.5156, 1.4395, 1.9644, 0.0, 0.0), -6.3193,
        "631069 candidates (11193 relevant) of 11402 queries from demo, locomo, scifact, xquad"),
    "multilingual-e5-small|aligned": Calibration(("vector_minmax", "keyword_minmax", "vector_p", "keyword_p", "vector_rank", "keyword_rank", "both", "align_lift"), (1.8722, 1.5311, 0.1902, 3.2291, 2.0828, 1.8401, 0.0, 80.0), -6.9002,
        "761220 candidates (11741 relevant) of 11402 queries from demo, locomo, scifact, xquad; align_lift weighed 80 logits on train nDCG@10"),
}
GATE_MODELS: dict[str, Calibration | tuple[Calibration, ...]] = {
    "multilingual-e5-small": Calibration(("keyword_top", "vector_top", "vector_gap", "coverage_top", "idf_coverage_top", "term_share"), (0.4151, 8.8112, 31.5943, 3.325, 2.7556, 2.281), 25.5377,
        "11402 answerable and 11370 no-answer train queries from demo-memory, demo-none, locomo, locomo-cross, scifact, scifact-on-demo, xquad-ar, xquad-ar-cross, xquad-de, xquad-de-cross, xquad-el, xquad-el-cross, xquad-en, xquad-en-cross, xquad-es, xquad-es-cross, xquad-hi, xquad-hi-cross, xquad-ru, xquad-ru-cross, xquad-th, xquad-th-cross, xquad-tr, xquad-tr-cross, xquad-vi, xquad-vi-cross, xquad-zh, xquad-zh-cross; intercept moved so its 2% point is the threshold"),
    "all-MiniLM-L6-v2": Calibration(("keyword_top", "vector_top", "vector_gap", "coverage_top", "term_share"), (0.8357, 0.5033, 8.7824, 2.9707, 4.1495), -1.0389,
        "6537 answerable and 6509 no-answer train queries from demo-memory, demo-none, locomo, locomo-cross, scifact, scifact-on-demo, xquad-ar, xquad-ar-cross, xquad-de, xquad-de-cross, xquad-el, xquad-el-cross, xquad-en, xquad-en-cross, xquad-es, xquad-es-cross, xquad-hi, xquad-hi-cross, xquad-ru, xquad-ru-cross, xquad-th, xquad-th-cross, xquad-tr, xquad-tr-cross, xquad-vi, xquad-vi-cross, xquad-zh, xquad-zh-cross; intercept moved so its 2% point is the threshold"),
    "keyword": Calibration(("keyword_top", "coverage_top", "term_share"), (0.7631, 3.1063, 4.6955), -1.7722,
        "11402 answerable and 11370 no-answer train queries from demo, demo-none, locomo, locomo-cross, scifact, scifact-on-demo, xquad-ar, xquad-ar-cross, xquad-de, xquad-de-cross, xquad-el, xquad-el-cross, xquad-en, xquad-en-cross, xquad-es, xquad-es-cross, xquad-hi, xquad-hi-cross, xquad-ru, xquad-ru-cross, xquad-th, xquad-th-cross, xquad-tr, xquad-tr-cross, xquad-vi, xquad-vi-cross, xquad-zh, xquad-zh-cross; intercept moved so its 2% point is the threshold"),
    "multilingual-e5-small|vector": Calibration(("vector_top", "vector_gap"), (11.0126, 29.6203), 36.3376,
        "11402 answerable and 11370 no-answer train queries from demo, demo-none, locomo, locomo-cross, scifact, scifact-on-demo, xquad-ar, xquad-ar-cross, xquad-de, xquad-de-cross, xquad-el, xquad-el-cross, xquad-en, xquad-en-cross, xquad-es, xquad-es-cross, xquad-hi, xquad-hi-cross, xquad-ru, xquad-ru-cross, xquad-th, xquad-th-cross, xquad-tr, xquad-tr-cross, xquad-vi, xquad-vi-cross, xquad-zh, xquad-zh-cross; intercept moved so its 2% point is the threshold"),
    "all-MiniLM-L6-v2|vector": Calibration(("vector_top", "vector_gap"), (0.7548, 14.8224), -0.4505,
        "11402 answerable and 11370 no-answer train queries from demo, demo-none, locomo, locomo-cross, scifact, scifact-on-demo, xquad-ar, xquad-ar-cross, xquad-de, xquad-de-cross, xquad-el, xquad-el-cross, xquad-en, xquad-en-cross, xquad-es, xquad-es-cross, xquad-hi, xquad-hi-cross, xquad-ru, xquad-ru-cross, xquad-th, xquad-th-cross, xquad-tr, xquad-tr-cross, xquad-vi, xquad-vi-cross, xquad-zh, xquad-zh-cross; intercept moved so its 2% point is the threshold"),
    "multilingual-e5-small|aligned": Calibration(("vector_top", "vector_gap", "idf_coverage_top", "term_share", "align_mean", "align_q25", "align_weighted", "align_exact", "align_centred", "log_terms"), (4.407, 5.1227, 0.6352, 3.3419, 17.5435, 15.9814, 16.1067, 1.3735, 48.0367, -0.8192), -32.442,
        "11402 answerable and 11370 no-answer train queries from demo-memory, demo-none, locomo, locomo-cross, scifact, scifact-on-demo, xquad-ar, xquad-ar-cross, xquad-de, xquad-de-cross, xquad-el, xquad-el-cross, xquad-en, xquad-en-cross, xquad-es, xquad-es-cross, xquad-hi, xquad-hi-cross, xquad-ru, xquad-ru-cross, xquad-th, xquad-th-cross, xquad-tr, xquad-tr-cross, xquad-vi, xquad-vi-cross, xquad-zh, xquad-zh-cross; intercept moved so its 2% point is the threshold"),
    "all-MiniLM-L6-v2|aligned": Calibration(("vector_top", "vector_gap", "idf_coverage_top", "term_share", "align_mean", "align_q25", "align_weighted", "align_exact", "log_terms"), (0.359, 6.3311, 0.8188, 3.6474, 23.3528, 18.026, 21.8607, 1.4701, -0.3943), -51.1479,
        "6537 answerable and 6509 no-answer train queries from demo-memory, demo-none, locomo, locomo-cross, scifact, scifact-on-demo, xquad-ar, xquad-ar-cross, xquad-de, xquad-de-cross, xquad-el, xquad-el-cross, xquad-en, xquad-en-cross, xquad-es, xquad-es-cross, xquad-hi, xquad-hi-cross, xquad-ru, xquad-ru-cross, xquad-th, xquad-th-cross, xquad-tr, xquad-tr-cross, xquad-vi, xquad-vi-cross, xquad-zh, xquad-zh-cross; intercept moved so its 2% point is the threshold"),
    "all-MiniLM-L6-v2|keyword+aligned": (Calibration(("keyword_top", "coverage_top", "term_share"), (0.7631, 3.1063, 4.6955), -1.5222,
        "11402 answerable and 11370 no-answer train queries from demo, demo-none, locomo, locomo-cross, scifact, scifact-on-demo, xquad-ar, xquad-ar-cross, xquad-de, xquad-de-cross, xquad-el, xquad-el-cross, xquad-en, xquad-en-cross, xquad-es, xquad-es-cross, xquad-hi, xquad-hi-cross, xquad-ru, xquad-ru-cross, xquad-th, xquad-th-cross, xquad-tr, xquad-tr-cross, xquad-vi, xquad-vi-cross, xquad-zh, xquad-zh-cross; intercept moved so its 2% point is the threshold; intercept raised by 0.25: one of a pair with a gate over the alignment"),
        Calibration(("align_mean", "align_q25", "align_weighted", "align_exact", "log_terms"), (16.248, 13.4299, 17.1657, 6.9634, -1.0573), -34.7357,
        "4865 answerable and 4861 no-answer train queries from demo-memory, demo-none, xquad-ar, xquad-ar-cross, xquad-el, xquad-el-cross, xquad-hi, xquad-hi-cross, xquad-ru, xquad-ru-cross, xquad-th, xquad-th-cross, xquad-zh, xquad-zh-cross; intercept moved so that the pair's 1.25% point is the threshold")),
}
ANSWER_THRESHOLD = 0.07
# END FITTED

# The cross-lingual gate (gate_model's ``crosslingual``), per embedding model: fitted apart from the block above on
# XQuAD-R questions of one language asked of another language's sentences (parallel questions keep their judgments;
# the other half of the articles gives the no-answer questions), train splits, by eval/reports/crosslingual.py;
# docs/ranking.md, "Questions in another language than the memory".
CROSSLINGUAL_GATES: dict[str, Calibration] = {
    "multilingual-e5-small|aligned": Calibration(('vector_top', 'vector_gap', 'align_mean', 'align_centred'), (4.9544, 36.4862, 36.4789, 23.4024), -11.7538,
        "5912 answerable and 5891 no-answer train questions of XQuAD-R language pairs routed to it (ar->en, de->ru, el->en, en->ar, en->el, en->hi, en->ru, en->th, en->vi, en->zh, es->ar, hi->en, ru->en, th->en, tr->hi, vi->de, vi->en, vi->zh, zh->en, zh->vi); intercept moved so its 2% point is the threshold"),
    "multilingual-e5-small": Calibration(('vector_top', 'vector_gap'), (8.4457, 64.506), 29.4065,
        "5912 answerable and 5891 no-answer train questions of XQuAD-R language pairs routed to it (ar->en, de->ru, el->en, en->ar, en->el, en->hi, en->ru, en->th, en->vi, en->zh, es->ar, hi->en, ru->en, th->en, tr->hi, vi->de, vi->en, vi->zh, zh->en, zh->vi); intercept moved so its 2% point is the threshold"),
}

# A memory written in two languages: a question whose nearest passage is in another language, with one in its own
# among the next (gate.nearest_across, not asked_across), takes the cross-lingual gate too, read against this bar
# instead of ANSWER_THRESHOLD (gate.raised). Placed on train questions asked of memories in several languages: XQuAD-R
# (half the articles in each of two languages, or a quarter in the question's; 14 pairs, eval/reports/crosslingual.py
# collect-mixed) and the demo memory (mostly English, a few notes in four other languages; collect-memory), then
# mixed: the lowest bar at which no set answers more than 2 points more of its no-answer questions (the gates' 2% rule,
# the other way round). XQuAD-R alone placed it at 0.9, where the demo's train no-answer questions went 81.8% -> 72.7%
# refused (one of 11: its nearest note, in another language, is on a neighbouring subject); here, questions about a
# note in the other language: 49.0% -> 51.4% answered; no-answer questions refused 90.9% -> 90.8% (docs/ranking.md,
# "A memory in two languages").
NEAREST_ACROSS_THRESHOLD = 0.98

# A bar per question language for a gate whose questions score higher in some languages at the same content (read
# against it by gate.raised, as the nearest route's bar): e5's aligned gate, where a Vietnamese, Chinese or Thai
# question shares many short units with any passage and aligns well with it whatever it asks, so the shared
# threshold let most such questions about what memory does not hold through. Placed on the gate's train rows by
# hybridmem.eval.language_bars (eval/reports/gate_rounds.py --language-bars; again whenever the gate is refitted): the
# shipped threshold moved up by how far the language's 2% point lies above English's on XQuAD-R, whose questions are
# the same in every language (the shift is the language's, not the kind of text's). English, and a question too short
# to read or in a language not here, keep ANSWER_THRESHOLD (docs/ranking.md, "The sixteenth round"). all-MiniLM-L6-v2
# reads English only, and its shared threshold is bound by Turkish, Thai and Greek questions it cannot read, so its
# shifts start from English's own 2% point over its English sets (LoCoMo's conversations bind), English included
# (language_bars.ANCHORED; "The seventeenth round"). Its pair, which decides a question whose blind vector leg was
# dropped (Arabic, Greek, Hindi, Russian, Thai, Chinese), has bars placed the same way on the questions it decides,
# English read as the pair would read it ("The eighteenth round").
LANGUAGE_BARS: dict[str, dict[str, float]] = {
    "multilingual-e5-small|aligned": {"th": 0.0793, "vi": 0.1303, "zh": 0.1483},
    "all-MiniLM-L6-v2|aligned": {"de": 0.2237, "en": 0.4669, "es": 0.3695, "vi": 0.5824},
    "all-MiniLM-L6-v2|keyword+aligned": {"ar": 0.0925, "el": 0.12, "hi": 0.2097, "th": 0.4669},
}

# The hits' probabilities where a question is routed across languages (RankMemo.other_language), per embedding model:
# the order is the model's own, only the probabilities handed out down it come from this fit (hit_model), whose
# features are the order's at their cross-lingual levels (a cosine across languages sits lower, the keyword leg finds
# little). Fitted on every pooled candidate of XQuAD-R's answerable train questions asked of another language's
# sentences and routed, by eval/reports/crosslingual.py (fit-hits); docs/ranking.md, "A hit's score across languages".
CROSSLINGUAL_HITS: dict[str, Calibration] = {
    "multilingual-e5-small": Calibration(JOINT_FEATURES, (5.5874, 0.7469, 68.23, 0.0, 1.9667, 0.0, 0.0, 0.0), -9.5538,
        "7984 relevant of 367263 candidates of 8352 answerable train questions of XQuAD-R language pairs routed across (ar->en, de->en, de->es, de->ru, el->en, en->ar, en->de, en->el, en->es, en->hi, en->ru, en->th, en->tr, en->vi, en->zh, es->ar, es->en, es->tr, hi->en, ru->en, th->en, tr->en, tr->hi, vi->de, vi->en, vi->zh, zh->en, zh->vi)"),
}

FALLBACK_VECTOR_MODEL = "all-MiniLM-L6-v2"
DEFAULT_GATE_MODEL = "multilingual-e5-small"  # whose gate a model with no fit of its own uses
KEYWORD_GATE = "keyword"  # the gate of the keyword leg alone (GATE_MODELS key)
Gate = Calibration | tuple[Calibration, ...]  # one logistic model, or several that must all answer (the lowest decides)


def vector_calibration(model: str) -> Calibration:
    """The vector leg's calibration for embedding ``model`` (the fallback model's for one never fitted).

    Example:
        >>> vector_calibration("no-such-model") is VECTOR_CALIBRATIONS[FALLBACK_VECTOR_MODEL]
        True
    """
    return VECTOR_CALIBRATIONS.get(model) or VECTOR_CALIBRATIONS[FALLBACK_VECTOR_MODEL]


def has_aligned_gate(model: str) -> bool:
    """Whether embedding ``model`` has an answer gate that reads the token alignment (``"<model>|aligned"``): then a
    search reads the alignment even when ``model`` gives no token states (the bundled e5's are read instead).

    Example:
        >>> has_aligned_gate(DEFAULT_GATE_MODEL), has_aligned_gate("no-such-model")
        (True, False)
    """
    return f"{model}|aligned" in GATE_MODELS


def joint_model(model: str = "", aligned: bool = False) -> Calibration:
    """The order's model (:mod:`hybridmem.ranking.joint`) for embedding ``model``: its own fit where there is one
    (each model's vector leg reads differently: MiniLM's is blind outside English, e5's the stronger leg in Russian or
    German), else :data:`JOINT_MODEL`, the fit on every model's rows together. When the candidates carry the token
    alignment of the passages it read (``aligned``) and ``model`` has an order that weighs it (``"<model>|aligned"``:
    the plain fit plus the alignment's lift, weighed on train nDCG@10), that one. It is an order, not a probability:
    :func:`~hybridmem.ranking.joint.joint_fusion` hands the plain fit's probabilities out down it.

    Example:
        >>> joint_model("no-such-model") is JOINT_MODEL
        True
        >>> joint_model("multilingual-e5-small", aligned=True) is JOINT_MODELS["multilingual-e5-small|aligned"]
        True
        >>> joint_model("all-MiniLM-L6-v2", aligned=True) is JOINT_MODELS["all-MiniLM-L6-v2"]  # no lift fitted
        True
    """
    return (aligned and JOINT_MODELS.get(f"{model}|aligned")) or JOINT_MODELS.get(model) or JOINT_MODEL


def reads_language(model: str) -> bool:
    """Whether :func:`~hybridmem.ranking.rank` asks which language a query is in for embedding ``model``: where it has
    a cross-lingual gate or hit fit (:data:`CROSSLINGUAL_GATES`, :data:`CROSSLINGUAL_HITS`).

    Example:
        >>> reads_language("multilingual-e5-small"), reads_language("all-MiniLM-L6-v2")
        (True, False)
    """
    return model in CROSSLINGUAL_GATES or model in CROSSLINGUAL_HITS


def language_bars(model: str, legs: frozenset[str] | set[str], aligned: bool, blind: bool = False) -> dict[str, float]:
    """The bars per question language of the gate :func:`gate_model` gives for ``legs`` of ``model`` (both legs, or
    the keyword leg where a ``blind`` vector leg was dropped: the pair), :data:`LANGUAGE_BARS`; empty where it has
    none (another gate, or a leg left out).

    Example:
        >>> language_bars("multilingual-e5-small", {"vector", "keyword"}, aligned=True)["vi"] > ANSWER_THRESHOLD
        True
        >>> language_bars("multilingual-e5-small", {"keyword"}, aligned=True)
        {}
        >>> language_bars("all-MiniLM-L6-v2", {"keyword"}, aligned=True, blind=True)["th"] > ANSWER_THRESHOLD
        True
    """
    if "vector" not in legs:
        pair = f"{model}|keyword+aligned"
        return LANGUAGE_BARS.get(pair, {}) if blind and aligned and "keyword" in legs and pair in GATE_MODELS else {}
    both = "keyword" in legs
    return LANGUAGE_BARS.get(f"{model}|aligned", {}) if both and aligned and has_aligned_gate(model) else {}


def hit_model(model: str = "", crosslingual: bool = False) -> Calibration:
    """The model whose probabilities a search's hits take (:func:`~hybridmem.ranking.joint.joint_fusion`'s
    ``scored_by``): the plain order's (:func:`joint_model`), or, for a question asked across languages
    (``crosslingual``), ``model``'s cross-lingual fit where it has one (:data:`CROSSLINGUAL_HITS`). Either way a
    probability of relevance given that the query has an answer.

    Example:
        >>> hit_model("no-such-model", crosslingual=True) is joint_model("no-such-model")
        True
    """
    return (crosslingual and CROSSLINGUAL_HITS.get(model)) or joint_model(model)


def gate_model(model: str, legs: frozenset[str] | set[str] = frozenset({"vector", "keyword"}),
               aligned: bool = False, blind: bool = False, crosslingual: bool = False) -> Gate:
    """The answer gate's model for the legs taking part (:mod:`hybridmem.ranking.gate`): both legs with embedding
    ``model``: that model's gate with the token alignment (``"<model>|aligned"``) when the candidates carry one
    (``aligned``) and ``model`` has such a gate, else its gate without (the default model's for one never fitted); the
    keyword leg alone (no embedder, a vector weight of 0, or a vector leg the adaptive step judged blind and dropped):
    :data:`KEYWORD_GATE`, except where the vector leg was dropped as blind (``blind``) and the candidates carry the
    alignment: ``model``'s pair (``"<model>|keyword+aligned"``: the keyword leg's gate and one over the alignment,
    both must answer, fitted on such queries) where it has one; the vector leg alone: ``model``'s vector-only gate
    (``"<model>|vector"``); a question in another script than the passages found, which the keyword leg cannot read
    (``crosslingual``): ``model``'s cross-lingual gate where it has one (:data:`CROSSLINGUAL_GATES`).

    Example:
        >>> gate_model("no-such-model") is GATE_MODELS[DEFAULT_GATE_MODEL]
        True
    """
    if "vector" not in legs:
        if blind and aligned and f"{model}|keyword+aligned" in GATE_MODELS:
            return GATE_MODELS[f"{model}|keyword+aligned"]
        return GATE_MODELS[KEYWORD_GATE]
    if "keyword" not in legs:
        return GATE_MODELS.get(f"{model}|vector") or GATE_MODELS[f"{DEFAULT_GATE_MODEL}|vector"]
    if crosslingual and model in CROSSLINGUAL_GATES:
        return CROSSLINGUAL_GATES.get(f"{model}|aligned" if aligned else model) or CROSSLINGUAL_GATES[model]
    if aligned and f"{model}|aligned" in GATE_MODELS:
        return GATE_MODELS[f"{model}|aligned"]
    return GATE_MODELS.get(model) or GATE_MODELS[DEFAULT_GATE_MODEL]
