"""Ranking settings: :class:`RankConfig`, the presets (``default``, ``reference``, ``rrf``...) and their rules."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from hybridmem.config.base import (
    BM25_NORMALIZATIONS, MMR_SIMILARITIES, VECTOR_NORMALIZATIONS, _check, _check_choice, _is_int,
)
from hybridmem.config.calibration import ANSWER_THRESHOLD
from hybridmem.errors import ConfigError

# The pool depth the joint order and the answer gate were fitted at (evaluation depth 10 x candidate multiplier 4):
# their min-max features and term share read each leg's top DECISION_DEPTH (hybridmem/ranking/joint.py).
DECISION_DEPTH = 40
# The default min score on calibrated fused scores (see RankConfig.min_score).
CALIBRATED_MIN_SCORE = 0.04
# The recall block's floor under its first hit's score (see RankConfig.recall_floor).
RECALL_FLOOR = 0.03


@dataclass(frozen=True)
class RankConfig:
    """Everything ``rank()`` reads. Cheap to change: no re-retrieval needed.

    The pool per leg is ``min(max_candidates, max_results * candidate_multiplier)``, and at least
    :data:`DECISION_DEPTH` under the joint order or the answer gate (see :attr:`pool`).
    """

    # "joint" (one fitted logistic model over both legs' features, ranking/joint.py), "weighted", "rrf", or any ranx
    # fusion method name (e.g. "combmnz"). "joint" was chosen on train splits against min-max, RRF and the calibrated
    # sum (docs/ranking.md); the others stay available by name.
    fusion: str = "joint"
    # 0.5/0.5, not the reference's 0.7/0.3: measured on TRAIN splits (nDCG@10, min-max weighted sum), 0.5/0.5 beats
    # 0.7/0.3 on SciFact (0.7300 vs 0.7033), LoCoMo (0.7651 vs 0.7157) and the demo set (0.7971 vs 0.7733);
    # see eval/reports/README.md. The reference preset keeps 0.7/0.3.
    vector_weight: float = 0.5
    text_weight: float = 0.5
    rrf_k: int = 60
    # "calibrated": each leg's raw score read as an estimated probability of relevance (hybridmem.config.calibration),
    # so one min_score means the same in every query; "minmax" (the earlier default) gives every query's best
    # candidate 1.0 and cannot abstain (hybridmem/ranking/calibrate.py). See eval/reports/abstention.md.
    bm25_norm: str = "calibrated"
    vector_norm: str = "calibrated"
    max_results: int = 6
    candidate_multiplier: int = 4
    max_candidates: int = 200
    # A per-hit cut on the final score. 0 under the default: whether to answer at all is the gate's decision
    # (answer_threshold), and a per-hit cut only dropped relevant hits below the first (docs/ranking.md).
    min_score: float = 0.0
    # The answer gate (ranking/gate.py): below this probability that the query has an answer in memory, return
    # nothing. 0 switches the gate off. Chosen on train splits (hybridmem/config/calibration.py).
    answer_threshold: float = ANSWER_THRESHOLD
    # When nothing passes min_score, return the keyword leg's hits anyway (the reference's behaviour). Off: an agent
    # told "nothing relevant" does better than one handed the least bad keyword matches as if they were recalled.
    rescue_keyword: bool = False
    # Query-adaptive leg weights (ranking/adaptive.py): the vector weight (and min_score with it) shrinks by the share
    # of the query's letters in scripts the embedding model does not cover, so a blind leg cannot drown the keyword
    # leg. On by default: measured on train splits (nDCG@10, eval/reports/README.md), MiniLM on XQuAD-R Thai 0.493 ->
    # 0.834 (keyword 0.830), demo 0.787 -> 0.796, LoCoMo unchanged (0.742); a no-op with e5 (every script).
    adaptive: bool = True
    decay: bool = False
    half_life_days: float = 30.0
    mmr: bool = False
    mmr_lambda: float = 0.7
    mmr_similarity: str = "jaccard"
    snippet_chars: int = 700
    max_injected_chars: int = 4000
    # The recall block (``hybridmem recall``, the MCP ``recall`` prompt) leaves out a hit below this share of the first
    # hit's score; the first is always kept (the gate answered). Search returns every hit. Chosen on train splits by
    # the gate's rule, no set losing more than 2% of its relevant hits (eval/reports/recall_floor.py; docs/ranking.md,
    # "The recall block's floor").
    recall_floor: float = RECALL_FLOOR

    def __post_init__(self) -> None:
        _check(isinstance(self.fusion, str) and self.fusion != "", "ranking.fusion", self.fusion, "a fusion name")
        for name in ("vector_weight", "text_weight"):
            v = getattr(self, name)
            _check(isinstance(v, (int, float)) and math.isfinite(v) and v >= 0, f"ranking.{name}", v, "a number >= 0")
        _check(self.vector_weight + self.text_weight > 0, "ranking.vector_weight", self.vector_weight,
               "vector_weight + text_weight > 0")
        _check(_is_int(self.rrf_k) and self.rrf_k >= 0, "ranking.rrf_k", self.rrf_k, "an integer >= 0")
        _check_choice("ranking.bm25_norm", self.bm25_norm, BM25_NORMALIZATIONS)
        _check_choice("ranking.vector_norm", self.vector_norm, VECTOR_NORMALIZATIONS)
        _check(_is_int(self.max_results) and self.max_results >= 1, "ranking.max_results", self.max_results,
               "an integer >= 1")
        _check(_is_int(self.candidate_multiplier) and 1 <= self.candidate_multiplier <= 20,
               "ranking.candidate_multiplier", self.candidate_multiplier, "an integer from 1 to 20")
        _check(_is_int(self.max_candidates) and self.max_candidates >= 1, "ranking.max_candidates",
               self.max_candidates, "an integer >= 1")
        _check(math.isfinite(self.min_score), "ranking.min_score", self.min_score, "a finite number")
        _check(isinstance(self.answer_threshold, (int, float)) and 0.0 <= self.answer_threshold < 1.0,
               "ranking.answer_threshold", self.answer_threshold, "a number from 0 (no gate) up to 1")
        _check(self.half_life_days > 0, "ranking.half_life_days", self.half_life_days, "a number > 0")
        _check(0.0 <= self.mmr_lambda <= 1.0, "ranking.mmr_lambda", self.mmr_lambda, "a number from 0 to 1")
        _check_choice("ranking.mmr_similarity", self.mmr_similarity, MMR_SIMILARITIES)
        _check(self.snippet_chars >= 16, "ranking.snippet_chars", self.snippet_chars, ">= 16")
        _check(self.max_injected_chars >= 0, "ranking.max_injected_chars", self.max_injected_chars, ">= 0")
        _check(isinstance(self.recall_floor, (int, float)) and 0.0 <= self.recall_floor <= 1.0, "ranking.recall_floor",
               self.recall_floor, "a number from 0 (every hit) to 1")

    @property
    def pool(self) -> int:
        """Candidates fetched per leg: ``max_results * candidate_multiplier``, at least :data:`DECISION_DEPTH` under
        the joint order or the answer gate (the depth both were fitted at: a live search of 6 results would read a
        pool of 24 and rank, measured on test splits, 0.002-0.005 nDCG@10 below what the evaluation shows), at most
        ``max_candidates``."""
        floor = DECISION_DEPTH if self.fusion == "joint" or self.answer_threshold > 0 else 0
        return min(self.max_candidates, max(self.max_results * self.candidate_multiplier, floor))

    @property
    def needs_vectors(self) -> bool:
        """Whether ranking reads the candidates' vectors (MMR with cosine similarity), so retrieval must load them."""
        return self.mmr and self.mmr_similarity == "cosine"

    def replace(self, **changes: Any) -> "RankConfig":
        """A copy with ``changes`` applied (validated)."""
        return replace(self, **changes)

    def with_fusion(self, method: str) -> "RankConfig":
        """A copy fused by ``method``; switching fusion also takes :func:`fusion_min_score` (this config itself when
        ``method`` is its fusion already).

        Example:
            >>> RankConfig(min_score=0.5).with_fusion("rrf").min_score
            0.0
        """
        if method == self.fusion:
            return self
        return self.replace(fusion=method, min_score=fusion_min_score(method, self.min_score))


# The reference system, reproduced exactly.
REFERENCE_RANKING = RankConfig(
    fusion="weighted", vector_weight=0.7, text_weight=0.3, bm25_norm="reference", vector_norm="raw",
    min_score=0.35, rescue_keyword=True, decay=False, mmr=False, adaptive=False, answer_threshold=0.0,
)

# The engine's default: two decisions (docs/ranking.md). The order is the joint model over both legs' features; the
# answer gate decides from the query's top candidates whether to answer at all, and the ranked hits come back whole.
# Each hit's score is the probability that it is relevant. Other values are the reference's.
DEFAULT_RANKING = RankConfig()

# The default of #16: one calibrated 0.5/0.5 average of the legs' probabilities both ordered and cut the hits (min
# score 0.04). It halved every hit one leg alone found and cut relevant hits below the first (docs/ranking.md).
CALIBRATED_RANKING = RankConfig(fusion="weighted", min_score=CALIBRATED_MIN_SCORE, answer_threshold=0.0)

# The default before calibration (#16): min-max normalization of both legs (the reference's raw cosine + rank
# transform scored below it on SciFact: eval/reports/README.md), min score 0.35 relative to each query's own pool,
# keyword rescue on.
MINMAX_RANKING = RankConfig(fusion="weighted", bm25_norm="minmax", vector_norm="minmax", min_score=0.35,
                            rescue_keyword=True, adaptive=False, answer_threshold=0.0)


PRESETS: dict[str, RankConfig] = {
    "default": DEFAULT_RANKING,
    "reference": REFERENCE_RANKING,
    # The default's order alone: no answer gate.
    "joint": replace(DEFAULT_RANKING, answer_threshold=0.0),
    "calibrated": CALIBRATED_RANKING,
    # The static fusions (fixed weights whatever the query), and the default before calibration (#16): min-max.
    "weighted": replace(CALIBRATED_RANKING, adaptive=False),
    "minmax": MINMAX_RANKING,
    "rrf": replace(MINMAX_RANKING, fusion="rrf", vector_weight=1.0, text_weight=1.0, min_score=0.0),
    "keyword": replace(MINMAX_RANKING, vector_weight=0.0, text_weight=1.0, min_score=0.0),
    "vector": replace(MINMAX_RANKING, vector_weight=1.0, text_weight=0.0, min_score=0.0),
    # The default (its joint order already adapts the leg weights per query) and RRF with query-adaptive leg
    # weights (ranking/adaptive.py).
    "adaptive": DEFAULT_RANKING,
    "rrf-adaptive": replace(MINMAX_RANKING, fusion="rrf", vector_weight=1.0, text_weight=1.0, min_score=0.0,
                            adaptive=True),
}


# The configs an evaluation compares when none are named (CLI, evaluation runner, workbench).
DEFAULT_EVAL_CONFIGS = ("default", "keyword", "vector", "minmax", "rrf")


def fusion_min_score(method: str, current: float) -> float:
    """The min score a config takes when its fusion switches to ``method``: the preset of that name's (RRF scores are
    about 0.01-0.03, so a threshold meant for normalized weighted sums would cut every candidate and every query would
    end in the keyword rescue); ``current`` for a fusion with no preset of its name, and 0 (no cut) for every fusion.

    No cut stays no cut: the default has none (the gate decides whether to answer), and the Fusion page compares the
    sidebar's settings with the fusion switched. Switching to the calibrated sum used to add its preset's cut (0.04),
    which scored the demo set's 81 queries at nDCG@10 0.699 where the same sum uncut scores 0.849.

    Example:
        >>> fusion_min_score("rrf", 0.35), fusion_min_score("weighted", 0.35), fusion_min_score("combmnz", 0.2)
        (0.0, 0.04, 0.2)
        >>> fusion_min_score("weighted", 0.0)
        0.0
    """
    p = PRESETS.get(method)
    return current if p is None or current == 0 else p.min_score


def preset(name: str) -> RankConfig:
    """The named ranking preset; raises ConfigError listing the valid names."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(f"unknown ranking preset {name!r}: expected one of {', '.join(PRESETS)}") from None
