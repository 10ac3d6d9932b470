"""Query-adaptive leg weights: keep a blind leg from drowning a good one (issue 14). Pure; no I/O.

An English embedding model (all-MiniLM-L6-v2) pointed at Thai, Arabic or Chinese notes gives vectors close to random:
on XQuAD-R its vector leg scores 0.067 nDCG@10 in Thai where the keyword leg scores 0.8, and an equal-weight fusion
lands between the two. Before fusion, :func:`reweight` scales each leg's weight by how far it can be trusted for this
query, from what the candidates say:

* **script** (``Candidates.vector_scripts``, the embedder's coverage as Unicode scripts, None = any): the share
  ``f`` of the query's letters written in a script the model was not trained on. The vector weight is multiplied by
  ``1 - f`` (a Thai query against MiniLM: 0; an English one: unchanged; a mixed one in between).
* **agreement**: when neither leg's top :data:`AGREEMENT_DEPTH` shares a chunk with the other's and the vector leg's
  raw scores are flat (top score minus the mean of the rest below :data:`FLAT_MARGIN`, cosine units), the vector leg
  looks blind too (a Latin-script language the model barely knows); its weight is multiplied by
  :data:`FLAT_FACTOR`.

The weights stay weights: the fused score is still a sum of one term per leg (``Hit.vector_part + Hit.text_part``),
now with the adapted weights, and a leg of weight 0 adds 0. Nothing changes for a query where both legs look
sighted. Constants were chosen on train splits only (XQuAD-R questions 300+, SciFact train, LoCoMo conversations
0-4, the demo train split); see eval/reports/README.md.

Example:
    >>> foreign_share("ไทย car", frozenset({"LATIN"}))  # 3 Thai letters of 6
    0.5
    >>> foreign_share("ไทย car", None)
    0.0
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from functools import lru_cache
from itertools import islice
from typing import Any, Sequence

from hybridmem.config import RankConfig
from hybridmem.records import Candidates

__all__ = ["AGREEMENT_DEPTH", "FLAT_FACTOR", "FLAT_MARGIN", "MAX_QUERY_LETTERS", "adapt", "adapted_weights",
           "foreign_letters", "foreign_share", "letter_script", "reweight"]

AGREEMENT_DEPTH = 10  # top entries of each leg compared for a shared chunk
FLAT_MARGIN = 0.0  # cosine: top score minus the mean of the rest of the top AGREEMENT_DEPTH; 0 switches it off
FLAT_FACTOR = 1.0  # the vector weight's factor when the legs share nothing and the vector scores are flat
MAX_QUERY_LETTERS = 400  # letters of the query inspected for their script (a long query is judged by its start)


@lru_cache(maxsize=4096)
def letter_script(ch: str) -> str:
    """The Unicode script of a letter, from its name's first word (``LATIN``, ``THAI``, ``CJK``, ``ARABIC``...).

    Example:
        >>> letter_script("ệ"), letter_script("中"), letter_script("ا")
        ('LATIN', 'CJK', 'ARABIC')
        >>> letter_script("µ"), letter_script("Ａ"), letter_script("ｱ"), letter_script("ᚠ")
        ('GREEK', 'LATIN', 'KATAKANA', 'RUNIC')
    """
    folded = unicodedata.normalize("NFKC", ch)[:1]  # a compatibility form is its letter's: "µ" Greek, "Ａ" Latin
    name = unicodedata.name(folded if folded.isalpha() else ch, "")
    first = name.split(" ", 1)[0]
    return first or "UNKNOWN"


@lru_cache(maxsize=1024)  # read once per rank(); a sweep ranks one query under many configs
def foreign_share(query: str, scripts: frozenset[str] | None) -> float:
    """The share of the query's letters (its first :data:`MAX_QUERY_LETTERS`) in a script outside ``scripts``; 0.0
    when ``scripts`` is None (the model claims every script) or the query has no letters."""
    if scripts is None:
        return 0.0
    outside, total = foreign_letters(query, scripts)
    return outside.total() / total if total else 0.0


def foreign_letters(text: str, scripts: frozenset[str]) -> tuple[Counter[str], int]:
    """Of ``text``'s first :data:`MAX_QUERY_LETTERS` letters: how many each script outside ``scripts`` writes, and how
    many letters there are (a query's share for :func:`foreign_share`; a chunk's script the model cannot read for the
    sync's warning).

    Example:
        >>> foreign_letters("ไทย car عربي", frozenset({"LATIN"}))
        (Counter({'ARABIC': 4, 'THAI': 3}), 10)
    """
    letters = list(islice((c for c in text if c.isalpha()), MAX_QUERY_LETTERS))
    return Counter(s for s in map(letter_script, letters) if s not in scripts), len(letters)


def _looks_blind(candidates: Candidates, flat_margin: float, depth: int) -> bool:
    """No chunk in both legs' top ``depth``, and the vector leg's top raw score barely above the rest."""
    if flat_margin <= 0.0 or len(candidates.vector) < 2 or not candidates.keyword:
        return False
    top_v = candidates.vector[:depth]
    if {h.chunk_id for h in top_v} & {h.chunk_id for h in candidates.keyword[:depth]}:
        return False
    rest = [h.raw for h in top_v[1:]]
    return top_v[0].raw - sum(rest) / len(rest) < flat_margin


def adapted_weights(candidates: Candidates, vector_weight: float, text_weight: float) -> tuple[float, float]:
    """``(vector_weight, text_weight)`` for this query (see the module doc).

    Example:
        >>> from hybridmem.records import Candidates
        >>> c = Candidates("ภาษาไทย", (), keyword=(), vector=(), chunks={}, pool=4, vector_scripts=frozenset({"LATIN"}))
        >>> adapted_weights(c, 0.5, 0.5)
        (0.0, 0.5)
    """
    vw = vector_weight * (1.0 - foreign_share(candidates.query, candidates.vector_scripts))
    if vw > 0.0 and _looks_blind(candidates, FLAT_MARGIN, AGREEMENT_DEPTH):
        vw *= FLAT_FACTOR
    return vw, text_weight


def adapt(legs: Sequence[Any], candidates: Candidates, config: RankConfig) -> tuple[list[Any], RankConfig]:
    """The fuse stage's adaptive step: :func:`reweight` the legs, and scale ``min_score`` by the share of its weight
    the most reduced leg kept. A query whose vector leg is judged wholly blind is then ranked as the ``keyword``
    preset ranks (its min score is 0: a threshold set for the sum of two legs cut relevant keyword hits; on the demo
    train split, Thai queries against MiniLM scored 0.807 nDCG@10 cut at 0.35, 0.950 uncut). Unchanged when nothing
    shifted."""
    out = reweight(legs, candidates)
    before = {leg.scored.name: leg.scored.weight for leg in legs}
    kept = min((leg.scored.weight / before[leg.scored.name] for leg in out if before[leg.scored.name] > 0.0),
               default=1.0)
    out = [leg for leg in out if leg.scored.weight > 0.0] or out  # a leg weighted to 0 drops out, as 0 always does
    if kept >= 1.0 or config.min_score <= 0.0 or _probabilities(config):
        return out, config
    return out, config.replace(min_score=config.min_score * kept)


def _probabilities(config: RankConfig) -> bool:
    """Both legs calibrated: the fused score is a probability of relevance whatever the weights (fusion divides by
    their sum), so ``min_score`` keeps its meaning and is not scaled."""
    return config.vector_norm == "calibrated" and config.bm25_norm == "calibrated"


def reweight(legs: Sequence[Any], candidates: Candidates) -> list[Any]:
    """The pipeline's legs (each with a ``scored`` :class:`~hybridmem.ranking.fusion.ScoredLeg`) with adapted
    weights, the heavier first (vector first on equal weights), as the normalize stage orders them."""
    if len(legs) < 2:
        return list(legs)  # one leg (or none) takes part: nothing to shift weight onto
    weights = {leg.scored.name: leg.scored.weight for leg in legs}
    vw, tw = adapted_weights(candidates, weights.get("vector", 0.0), weights.get("keyword", 0.0))
    new = {"vector": vw, "keyword": tw}
    out = [leg if leg.scored.weight == new.get(leg.scored.name, leg.scored.weight)
           else leg._replace(scored=leg.scored._replace(weight=new[leg.scored.name])) for leg in legs]
    return sorted(out, key=lambda leg: (-leg.scored.weight, leg.scored.name != "vector"))
