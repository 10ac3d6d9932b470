"""The recall block's chatter filter: a chat message that asks nothing ("thanks", "ok", "go on", "谢谢") is not a
question to recall memory for.

The answer gate reads whether memory holds what a query names, and a transcript that holds the word "thanks" answers
"thanks" (P 0.999 on the demo memory), so ``hybridmem recall`` and the MCP ``recall`` prompt, which run on every
message an agent receives, injected a transcript for it. Nothing the index reads tells "thanks" from "visa": both
are one common word that memory holds, and their surprisal in the tokenizer is the same (11.5 and 12.7). What tells
them apart is what the message means, which the embedding model reads: a logistic model over the message's query
vector, one per embedding model, gives the probability that it is chatter; at :attr:`Chatter.threshold` or more the
recall block is empty. ``memory_search`` is not filtered: an agent that searches chose its query.

How it was fitted (re-run with ``hybridmem eval chatter --write``; :mod:`hybridmem.eval.chatter`): chat messages in
six languages (en, es, de, fr, zh, vi) against short topical queries ("visa", "wifi password", "牙医") and questions
sampled from the train splits of every labeled dataset, L2-regularized Newton iterations
(:func:`hybridmem.ranking.calibrate.fit_logistic`); the threshold is the lowest of a grid at which no negative of the
train rows is read as chatter under 5-fold cross-validation. It is measured on messages in eleven languages it never
saw (ja, ko, th, ar, hi, ru, tr, el, pt, it, id) and English phrasings it was not fitted on, short topical queries in
those languages, and questions of the test splits (``datasets/chatter/``; ``docs/evaluation.md``, "Chat messages":
86.6% of the chat messages read as chatter, no topical query and no question).
The numbers live in ``hybridmem/data/chatter.json``. A model without a fit there whose answer gate reads the bundled
e5's alignment (MiniLM, whose own vectors made no usable fit) is filtered by e5's fit on e5's vector; any other (a
remote one) is not (``hybridmem.tools.is_chatter``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Sequence

__all__ = ["CHATTER_CHARS", "CHATTER_FILE", "Chatter", "chatter_model"]

CHATTER_FILE = Path(__file__).resolve().parent.parent / "data" / "chatter.json"
# A message longer than this is never read as chatter, nor embedded twice (once for the filter, once by the search that
# follows: 10-20 ms with e5): every chat message of datasets/chatter is 15 characters or less, and a longer one that
# starts with thanks goes on to say something ("thanks! where are the backup keys?")
CHATTER_CHARS = 24


@dataclass(frozen=True)
class Chatter:
    """A fitted logistic model over one embedding model's query vectors: the probability that a message is chatter.

    Attributes:
        model: the embedding model whose query vectors it reads.
        coef: one coefficient per dimension.
        intercept: the constant term.
        threshold: the probability at or above which a message is chatter.
        fitted_on: what it was fitted on.
    """

    model: str
    coef: tuple[float, ...]
    intercept: float
    threshold: float
    fitted_on: str = ""

    def probability(self, vector: Sequence[float]) -> float:
        """The probability that the message whose query vector is ``vector`` is chatter.

        Example:
            >>> round(Chatter("m", (2.0, -1.0), 0.5, 0.7).probability([1.0, 0.5]), 4)
            0.8808
        """
        z = self.intercept + sum(c * float(v) for c, v in zip(self.coef, vector))
        return 1.0 / (1.0 + math.exp(-max(min(z, 50.0), -50.0)))

    def is_chatter(self, message: str, vector: Sequence[float]) -> bool:
        """Whether ``message`` (its query vector ``vector``) is chatter: short enough and at the threshold or above."""
        return len(message.strip()) <= CHATTER_CHARS and self.probability(vector) >= self.threshold


@lru_cache(maxsize=1)
def _fits() -> dict[str, Chatter]:
    try:
        raw = json.loads(CHATTER_FILE.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    return {m: Chatter(m, tuple(f["coef"]), f["intercept"], f["threshold"], f.get("fitted_on", ""))
            for m, f in raw.items()}


def chatter_model(model: str) -> Chatter | None:
    """The chatter filter fitted for embedding ``model``, or None where none was (no filter).

    Example:
        >>> chatter_model("multilingual-e5-small").threshold > 0.5, chatter_model("no-such-model")
        (True, None)
    """
    return _fits().get(model)
