"""What ``rank()`` derives from one query's candidates whatever the config says: :class:`RankMemo`.

Each leg cut to a pool and normalized, the earlier order, the legs' calibrated probabilities, the joint model's
scores (:mod:`hybridmem.ranking.joint`) and the answer gate's probability (:mod:`hybridmem.ranking.gate`), MMR's token
bitsets and snippets. An evaluation sweep ranks one query's candidates under many configs and shares one memo.
"""

from __future__ import annotations

from itertools import chain, zip_longest
from typing import NamedTuple, Sequence

import numpy as np

from hybridmem.config import RankConfig
from hybridmem.config.calibration import (
    ANSWER_THRESHOLD, CROSSLINGUAL_HITS, KEYWORD_CALIBRATION, NEAREST_ACROSS_THRESHOLD, gate_model, hit_model,
    joint_model, language_bars, vector_calibration,
)
from hybridmem.errors import HybridMemError
from hybridmem.ranking.calibrate import keyword_probabilities, vector_probabilities
from hybridmem.ranking.fusion import ScoredLeg
from hybridmem.ranking.gate import (
    AGREE_DEPTH, CROSSLINGUAL_PASSAGES, across_languages, either_gate, query_features, query_names,
)
from hybridmem.ranking.joint import NORM_DEPTH, JointLeg, feature_matrix, joint_fusion
from hybridmem.ranking.language import query_language
from hybridmem.ranking.mmr import TokenBits
from hybridmem.ranking.normalize import Normalizer
from hybridmem.ranking.snippet import lead_snippet, make_snippet
from hybridmem.tokenization import bm25_idf, query_terms
from hybridmem.records import Candidates, ChunkInfo, LegHit, frozen_tokens

__all__ = ["Leg", "RankMemo"]


class Leg(NamedTuple):
    """One leg cut to the pool and normalized: what fusion reads (``scored``) and what each hit shows."""

    scored: ScoredLeg
    raws: list[float]
    index: dict[int, int]  # chunk id -> position in the leg


class RankMemo:
    """What :func:`rank` derives from one :class:`Candidates` whatever the config says, shared by the calls given it.

    An evaluation sweep ranks one query's candidates under many configs in turn, and most of each call would redo the
    same work: each leg's columns and normalized scores for a pool, the earlier order, every chunk's tokens for
    MMR's Jaccard, the kept hits' snippets. Candidates are immutable (frozen, never changed in place once built), so
    these are functions of the candidates and a few config values, and a memo changes no result. Create one per
    query's candidates and drop it with them:

        memo = RankMemo(cands)
        rankings = [rank(cands, config, now=t, memo=memo) for config in configs]
    """

    __slots__ = ("candidates", "_legs", "_orders", "_snippets", "token_bits", "_calibrated", "_answer", "_joint",
                 "_probs", "_shared", "_across", "_language")

    def __init__(self, candidates: Candidates) -> None:
        self.candidates = candidates
        self._legs: dict[tuple[str, int, Normalizer], tuple[tuple[int, ...], list[float], tuple[float, ...],
                                                                 tuple[int, ...], dict[int, int]]] = {}
        self._orders: dict[tuple, tuple[list[int], dict[int, float]]] = {}  # leg names + pool -> (order, all 1.0)
        self._snippets: dict[tuple[int, int, bool], str] = {}  # (chunk id, snippet_chars, centred) -> snippet
        self.token_bits = TokenBits(lambda: {cid: c.tokens for cid, c in candidates.chunks.items()})
        self._calibrated: dict[str, Normalizer] = {}
        self._answer: dict[tuple, tuple[float, tuple[str, float] | None]] = {}  # and the language bar read
        self._across: str | None = None
        self._language: str | None = None
        # the legs' names and ids -> their joint features, and the fused probabilities per legs' factors
        self._joint: dict[tuple, tuple[tuple[list[int], np.ndarray], dict[tuple, tuple]]] = {}
        self._probs: dict[tuple, list[float]] = {}  # a leg's name and ranks -> its calibrated probabilities
        self._shared: dict[int, tuple[str, int, int]] | None = None

    def shared_spans(self) -> dict[int, tuple[str, int, int]]:
        """The candidates that cite the same lines as another candidate (the pieces of one very long line), each with
        those lines; empty in the common case, so the ranking's fold of them costs nothing there."""
        got = self._shared
        if got is None:
            by_span: dict[tuple[str, int, int], list[int]] = {}
            for cid, ch in self.candidates.chunks.items():
                by_span.setdefault((ch.path, ch.start_line, ch.end_line), []).append(cid)
            got = self._shared = {cid: span for span, ids in by_span.items() if len(ids) > 1 for cid in ids}
        return got

    def calibrated(self, leg: str) -> Normalizer:
        """The ``calibrated`` normalizer of leg ``leg`` (``vector`` or ``keyword``) for these candidates: each entry's
        probability of relevance, computed once for the whole leg and looked up by rank."""
        got = self._calibrated.get(leg)
        if got is None:
            c = self.candidates
            if leg == "vector":
                probs = vector_probabilities([h.raw for h in c.vector], vector_calibration(c.vector_model))
            else:
                chunks = c.chunks
                probs = keyword_probabilities([h.raw for h in c.keyword],
                                              [frozen_tokens(chunks[h.chunk_id].tokens) if h.chunk_id in chunks
                                               else frozenset() for h in c.keyword], c.query_tokens,
                                              KEYWORD_CALIBRATION)

            def got(raws: Sequence[float], ranks: Sequence[int], probs: list[float] = probs) -> list[float]:
                return [probs[r - 1] for r in ranks]

            self._calibrated[leg] = got
        return got

    def leg(self, name: str, weight: float, hits: tuple[LegHit, ...], pool: int, normalizer: Normalizer) -> Leg:
        """Leg ``name`` (whose entries are ``hits``) cut to ``pool`` and normalized; a chunk listed twice keeps its
        first entry."""
        key = (name, pool, normalizer)
        got = self._legs.get(key)
        if got is None:
            cut = hits[:pool]
            ids = [h.chunk_id for h in cut]
            if len(set(ids)) != len(ids):
                first: dict[int, LegHit] = {}
                for h in cut:
                    first.setdefault(h.chunk_id, h)
                cut = tuple(first.values())
                ids = [h.chunk_id for h in cut]
            raws, ranks = [h.raw for h in cut], [h.rank for h in cut]
            got = self._legs[key] = (tuple(ids), raws, tuple(normalizer(raws, ranks)), tuple(ranks),
                                     dict(zip(ids, range(len(ids)))))
        ids, raws, scores, ranks, index = got
        return Leg(ScoredLeg(name, weight, ids, scores, ranks), raws, index)

    def earlier_order(self, legs: Sequence[Leg], pool: int) -> tuple[list[int], dict[int, float]]:
        """The legs' chunk ids interleaved rank by rank (first leg first), and a decay factor of 1.0 for each.

        Raises:
            HybridMemError: a leg names a chunk id missing from the candidates' chunks.
        """
        key = (*(leg.scored.name for leg in legs), pool)
        got = self._orders.get(key)
        if got is None:
            interleaved = dict.fromkeys(chain.from_iterable(zip_longest(*(leg.scored.ids for leg in legs))))
            interleaved.pop(None, None)  # zip_longest's filler
            chunks = self.candidates.chunks
            if not interleaved.keys() <= chunks.keys():
                missing = [cid for cid in interleaved if cid not in chunks]
                raise HybridMemError(f"candidates name chunk ids with no ChunkInfo: {missing[:10]}; "
                                     "rebuild the Candidates")
            got = self._orders[key] = (list(interleaved), dict.fromkeys(interleaved, 1.0))
        return got

    def probabilities(self, leg: Leg) -> list[float]:
        """The calibrated probability of each entry of ``leg`` (whatever normalization the config chose)."""
        # a leg cut to one pool has one tuple of ranks, which leg() keeps alive as long as this memo
        key = (leg.scored.name, id(leg.scored.ranks))
        got = self._probs.get(key)
        if got is None:
            got = self._probs[key] = self.calibrated(leg.scored.name)(leg.raws, leg.scored.ranks)
        return got

    def joint_legs(self, legs: Sequence[Leg], config: RankConfig) -> list[JointLeg]:
        """``legs`` as the joint model reads them, each leg's factor its weight over the mean configured weight."""
        mean = (float(config.vector_weight) + float(config.text_weight)) / 2.0
        return [JointLeg(leg.scored.name, leg.scored.weight / mean if mean > 0 else 0.0, leg.scored.ids, leg.raws,
                         self.probabilities(leg), leg.scored.ranks) for leg in legs]

    def joint(self, legs: Sequence[Leg], config: RankConfig) -> dict[int, float]:
        """:func:`~hybridmem.ranking.joint.joint_fusion` of ``legs`` under the fitted model; when the candidates carry
        the token alignment and the model has an order that weighs it (:func:`~hybridmem.config.calibration.joint_model`),
        in that order, with the plain model's probabilities handed out down it; for a question asked across languages
        (:meth:`other_language`, both legs taking part), the model's cross-lingual fit's probabilities where it has one
        (:func:`~hybridmem.config.calibration.hit_model`). Legs with the same chunks and factors get the same dict:
        read it, never change it."""
        joint_legs = self.joint_legs(legs, config)
        key = tuple((leg.name, leg.ids) for leg in joint_legs)  # the features do not depend on the weights
        entry = self._joint.get(key)
        if entry is None:
            entry = self._joint[key] = (feature_matrix(joint_legs, self.candidates.passage_alignment), {})
        feats, fused = entry
        c = self.candidates
        model = c.vector_model or ""
        scored = hit_model(model, self._routed({leg.name for leg in joint_legs}, model in CROSSLINGUAL_HITS))
        order = joint_model(model, aligned=c.passage_alignment is not None)
        # the probabilities depend on the legs' factors alone: configs that differ elsewhere (MMR, decay) share them
        factors = tuple(leg.factor for leg in joint_legs)
        got = fused.get(factors)
        if got is None or got[0] is not order or got[1] is not scored:
            got = fused[factors] = (order, scored, joint_fusion(joint_legs, order, feats,
                                                                 None if order is scored else scored))
        return got[2]

    def query_features(self, legs: Sequence[Leg]) -> dict[str, float]:
        """The answer gate's features of this query (:func:`~hybridmem.ranking.gate.query_features`) from the legs
        taking part (a leg that does not reads as having found nothing)."""
        by = {leg.scored.name: leg for leg in legs}
        v, k = by.get("vector"), by.get("keyword")
        q = frozenset(self.candidates.query_tokens)
        chunks = self.candidates.chunks
        top = [] if k is None or not q else [frozen_tokens(chunks[cid].tokens) for cid in k.scored.ids[:AGREE_DEPTH]]
        coverages = [sum(1 for t in q if t in tokens) / len(q) for tokens in top]
        weights = self.term_weights()
        idf_coverages = None
        if weights is not None and top:
            total = sum(weights.values())
            idf_coverages = [sum(w for t, w in weights.items() if t in tokens) / total for tokens in top]
        left = q
        for leg in legs:  # each leg's top NORM_DEPTH, as fitted: the share must not grow with max_results
            for cid in leg.scored.ids[:NORM_DEPTH]:
                if not left:
                    break
                left = left.difference(frozen_tokens(chunks[cid].tokens))
        names = [held for held in (q.intersection(query_terms(n)) for n in query_names(self.candidates.query)) if held]
        return query_features(
            v.scored.ids if v else (), v.raws if v else (), self.probabilities(v) if v else (),
            k.scored.ids if k else (), self.probabilities(k) if k else (), coverages, len(q), len(q) - len(left),
            idf_coverages, self.candidates.alignment, float(any(terms <= left for terms in names)))

    def term_weights(self) -> dict[str, float] | None:
        """Each distinct query token's BM25 IDF in this memory (:func:`~hybridmem.tokenization.bm25_idf`), or None when
        the candidates carry no counts (the keyword leg did not run)."""
        c = self.candidates
        if c.doc_count <= 0 or len(c.term_docs) != len(c.query_tokens):
            return None
        return {t: bm25_idf(c.doc_count, n) for t, n in zip(c.query_tokens, c.term_docs)}

    def answer(self, legs: Sequence[Leg], pool: int, blind: bool = False) -> float:
        """The gate's probability that the query has an answer (:func:`~hybridmem.ranking.gate.answer_probability`);
        ``blind``: the adaptive step dropped the vector leg (:func:`~hybridmem.config.calibration.gate_model`)."""
        return self._decided(legs, pool, blind)[0]

    def answer_bar(self, legs: Sequence[Leg], pool: int, blind: bool = False) -> tuple[str, float] | None:
        """The question's language and the bar :meth:`answer` read its gate against
        (:data:`~hybridmem.config.calibration.LANGUAGE_BARS`), or None where it read none."""
        return self._decided(legs, pool, blind)[1]

    def _decided(self, legs: Sequence[Leg], pool: int, blind: bool) -> tuple[float, tuple[str, float] | None]:
        key = (tuple(leg.scored.name for leg in legs), pool, blind)
        got = self._answer.get(key)
        if got is None:
            features, names = self.query_features(legs), {leg.scored.name for leg in legs}
            model, aligned = self.candidates.vector_model, self.candidates.alignment is not None
            usual = gate_model(model, names, aligned=aligned, blind=blind)
            cross = gate_model(model, names, aligned, crosslingual=True)
            asked = self.across() if self._routed(names, cross is not usual) else ""  # either gate may answer
            bars = language_bars(model, names, aligned, blind)
            bar = bars.get(self.language() or "", 0.0) if bars else 0.0
            p = either_gate(features, usual, cross, asked, NEAREST_ACROSS_THRESHOLD, ANSWER_THRESHOLD, bar)
            got = self._answer[key] = (p, (self.language() or "", bar) if bar > ANSWER_THRESHOLD else None)
        return got

    def language(self) -> str | None:
        """The language the query is in (:func:`~hybridmem.ranking.language.query_language`), read once."""
        if self._language is None:
            self._language = query_language(self.candidates.query) or ""
        return self._language or None

    def other_language(self) -> bool:
        """Whether the query is written in another script than each of the vector leg's top passages (a question in
        English over notes in Chinese), or in another language of theirs (English over notes in German): the keyword
        leg and the token alignment cannot read such a pair."""
        return self.across() == "top"

    def _routed(self, legs: set[str], fitted: bool) -> bool:
        """Whether a decision with a cross-lingual fit of its own (``fitted``) takes it: both legs take part and the
        question is asked across languages of its nearest passage at least (:meth:`across`, read only then)."""
        return fitted and legs == {"vector", "keyword"} and bool(self.across())

    def across(self) -> str:
        """How the query is asked across languages of the vector leg's passages: ``"top"``, of each of its top
        passages (:meth:`other_language`); ``"nearest"``, of its nearest alone, one of the next in its own language (a
        memory in two languages: :func:`~hybridmem.ranking.gate.nearest_across`, the cross-lingual gate read against
        a higher bar); ``""``, neither."""
        if self._across is None:
            c = self.candidates
            top = c.vector[:CROSSLINGUAL_PASSAGES]
            self._across = across_languages(c.query, [c.chunks[h.chunk_id].text for h in top])
        return self._across

    def routed_across(self) -> str:
        """:meth:`across` where a decision asked it (a model with a cross-lingual gate or hit fit), else ``""``."""
        return self._across or ""

    def snippet(self, chunk: ChunkInfo, snippet_chars: int, centred: bool) -> str:
        """``chunk``'s snippet: centred on the query's matches, or the lead of its text."""
        key = (chunk.id, snippet_chars, centred)
        got = self._snippets.get(key)
        if got is None:
            got = self._snippets[key] = (
                make_snippet(chunk.text, self.candidates.query_tokens, snippet_chars, chunk.tokens) if centred
                else lead_snippet(chunk.text, snippet_chars))
        return got
