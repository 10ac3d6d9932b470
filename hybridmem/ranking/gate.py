"""Answer or not: a query-level decision, apart from the order. Pure; no I/O.

Whether anything in memory answers a query is a property of the query's candidates as a whole, not of one hit: a
per-hit min score on a fused probability cuts relevant hits below the first and, because averaging marginal
probabilities halves what one leg alone finds, whole answerable queries. :func:`answer_probability` reads the
query's top candidates of both legs:

- ``keyword_top``: the log-odds of the keyword leg's best calibrated probability (:mod:`hybridmem.ranking.calibrate`);
- ``vector_top``: the log-odds of the vector leg's best calibrated probability (per embedding model);
- ``agreement``: the share of the vector leg's top :data:`AGREE_DEPTH` that the keyword leg's top
  :data:`AGREE_DEPTH` also holds (unrelated questions draw unrelated lists from the two legs);
- ``vector_gap``: the top cosine minus the mean of the next :data:`GAP_DEPTH` (a question with an answer has a
  chunk standing out of its pool; one without has a flat pool);
- ``coverage_top``: the largest share of the query's distinct terms one of the keyword leg's top
  :data:`AGREE_DEPTH` chunks holds;
- ``idf_coverage_top``: the same share with each term weighted by its BM25 IDF in this memory
  (:func:`~hybridmem.tokenization.bm25_idf`; ``Candidates.doc_count`` and ``term_docs``): a chunk holding a question's common words but not its
  rare ones (the name, the thing asked about) covers little of it, and a term memory never mentions weighs most;
- ``term_share``: the share of the query's distinct terms that some chunk of either leg's top 40 holds (a question about
  a person or a thing memory never mentions has terms found nowhere: on LoCoMo, a question asked of another
  conversation names people who are not in it);
- ``log_terms``: ``log`` of the number of distinct query terms;
- ``name_missing``: 1 when a name of the query (:func:`query_names`: a word after the first written with a capital) is
  held by no chunk of either leg's top 40, else 0 (computed for the gate's fits; no shipped gate reads it: the
  fifteenth round in docs/ranking.md);
- ``align_mean`` and ``align_q25``: the query's token alignment with the best of its top passages, read by the
  encoder token by token (:mod:`hybridmem.retrieve.alignment`; ``Candidates.alignment``, 0 without one): the mean
  and the lower quartile over the query's tokens of each one's best cosine with a token of the passage. Unlike the
  others it reads the text, so it tells a passage about the thing asked from one that only shares its words or topic;
- ``align_weighted`` and ``align_exact``: the same mean with each query token weighted by its surprisal (a common
  piece weighs least), and the weighted share of query tokens whose best match is the same piece;
- ``align_centred``: per query token, its best cosine less its mean cosine with the passage's tokens, averaged over
  the query's tokens, the highest over the top passages: where a language's token states all lie close together,
  any passage's best matches are high, and so is the rest of it.

A logistic model over them (:class:`~hybridmem.config.calibration.Calibration`, fitted on the train splits of the
answerable sets against the no-answer sets; numbers in :mod:`hybridmem.config.calibration`) gives the probability that
the query has an answer in memory; ``rank()`` returns nothing below ``RankConfig.answer_threshold``. A leg that does
not take part (weight 0, not searched, or dropped by the adaptive step as blind) reads as having found nothing. Where
MiniLM's blind vector leg is dropped and the candidates carry the alignment, two models must both answer (the lower
probability decides): the keyword leg's gate, which tells questions on another topic, and one over the alignment,
which tells questions that only share the words (:func:`~hybridmem.config.calibration.gate_model`). A question
written in another script than each of the vector leg's top passages (:func:`other_script`: English over notes in
Chinese) or in another language of the same script (:mod:`hybridmem.ranking.language`: English over notes in German),
which neither the keyword leg nor the alignment can read, may also be answered by the model's cross-lingual gate
(``CROSSLINGUAL_GATES``; the higher probability decides; :func:`asked_across`).

Example:
    >>> from hybridmem.config.calibration import Calibration
    >>> gate = Calibration(("keyword_top", "agreement"), (1.0, 2.0), -0.5)
    >>> round(answer_probability({"keyword_top": 0.0, "agreement": 0.4}, gate), 3)
    0.574
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from functools import lru_cache
from typing import Mapping, Sequence

from hybridmem.config.calibration import Gate
from hybridmem.ranking.adaptive import letter_script
from hybridmem.ranking.calibrate import sigmoid
from hybridmem.ranking.language import LANGUAGE_WORDS, has_letters, in_language, other_language, words

__all__ = ["AGREE_DEPTH", "ALIGN_FEATURES", "CROSSLINGUAL_PASSAGES", "GAP_DEPTH", "GATE_FEATURES",
           "across_languages", "answer_probability", "asked_across", "dominant_script", "either_gate", "holds_script",
           "in_script", "logit", "nearest_across", "other_script", "query_features", "query_names", "raised",
           "script_lines", "several_scripts"]

AGREE_DEPTH = 5
GAP_DEPTH = 9
ALIGN_FEATURES = ("align_mean", "align_q25", "align_weighted", "align_exact", "align_centred")  # Candidates.alignment
GATE_FEATURES = ("keyword_top", "vector_top", "agreement", "vector_gap", "coverage_top", "term_share",
                 "log_terms", "idf_coverage_top", "name_missing", *ALIGN_FEATURES)
_WORD = re.compile(r"[^\W\d_][\w'’-]*")


def query_names(query: str) -> list[str]:
    """The words of ``query`` written as names: after its first word, one that starts with a capital and has a small
    letter after it ("Andrew", "McKinsey"; not "NASA", nor the question's first word). A script without capitals has
    none; German writes every noun so.

    Example:
        >>> query_names("Has Andrew moved to Hà Nội with McKinsey? ask NASA")
        ['Andrew', 'Hà', 'Nội', 'McKinsey']
    """
    words = _WORD.findall(query)
    return [w for w in words[1:] if w[0].isupper() and any(c.islower() for c in w[1:])]


def query_features(vector_ids: Sequence[int], vector_raws: Sequence[float], vector_probs: Sequence[float],
                   keyword_ids: Sequence[int], keyword_probs: Sequence[float], coverages: Sequence[float],
                   n_terms: int, found_terms: int = 0, idf_coverages: Sequence[float] | None = None,
                   alignment: tuple[float, ...] | None = None, name_missing: float = 0.0) -> dict[str, float]:
    """Every feature of :data:`GATE_FEATURES` for one query (see the module doc). Each leg's sequences are in rank
    order; an empty leg gives its features 0; ``coverages[i]`` is the share of the query's distinct terms that keyword
    hit ``i``'s chunk holds; ``found_terms`` how many of the query's ``n_terms`` distinct terms some pooled chunk
    holds; ``idf_coverages`` the IDF-weighted shares (None: every term weighs the same, ``coverages``);
    ``alignment`` the candidates' token alignment (None: 0); ``name_missing`` 1 when a name of the query
    (:func:`query_names`) is held by no pooled chunk.

    Example:
        >>> f = query_features([1, 2, 3], [0.9, 0.8, 0.7], [0.2, 0.1, 0.05], [2, 9], [0.4, 0.1], [1.0, 0.5], 2, 2)
        >>> f["agreement"], round(f["vector_gap"], 3), f["coverage_top"], f["term_share"]
        (0.2, 0.15, 1.0, 1.0)
    """
    top_v = set(vector_ids[:AGREE_DEPTH])
    top_k = set(keyword_ids[:AGREE_DEPTH])
    rest = vector_raws[1:1 + GAP_DEPTH]
    return {
        "keyword_top": logit(max(keyword_probs, default=0.0)),
        "vector_top": logit(max(vector_probs, default=0.0)),
        "agreement": len(top_v & top_k) / AGREE_DEPTH if top_v and top_k else 0.0,
        "vector_gap": vector_raws[0] - sum(rest) / len(rest) if rest else 0.0,
        "coverage_top": max(coverages[:AGREE_DEPTH], default=0.0),
        "term_share": found_terms / n_terms if n_terms > 0 else 0.0,
        "log_terms": math.log(n_terms) if n_terms > 0 else 0.0,
        "idf_coverage_top": max((coverages if idf_coverages is None else idf_coverages)[:AGREE_DEPTH], default=0.0),
        "name_missing": name_missing,
        **dict(zip(ALIGN_FEATURES, alignment or (0.0,) * len(ALIGN_FEATURES))),
    }


def logit(p: float) -> float:
    """``log(p / (1 - p))`` with ``p`` clipped to [1e-6, 1 - 1e-6] (a leg that found nothing reads -13.8)."""
    p = min(max(p, 1e-6), 1.0 - 1e-6)
    return math.log(p / (1.0 - p))


# Letters whose scripts write one language family's text together: a Japanese question and its passage mix kana and
# kanji; full-width Latin is Latin.
_SCRIPT_GROUPS = {"HIRAGANA": "CJK", "KATAKANA": "CJK", "HALFWIDTH": "CJK", "IDEOGRAPHIC": "CJK", "FULLWIDTH": "LATIN"}
SCRIPT_LETTERS = 64  # letters read of the query, and of each passage
SCRIPT_CHARS = 256  # characters they are read in
_ASCII_LETTER = re.compile("[A-Za-z]")
_NON_ASCII = re.compile("[^\x00-\x7f]")
OWN_SCRIPT_SHARE = 0.2  # the share of letters a script other than Latin needs to be a text's script
# Vietnamese is written in Latin letters, some of which only it writes (about 15% of a Vietnamese sentence's letters in
# XQuAD-R, none of an English, German, Spanish or Turkish one's): a Latin text where they are this share is Vietnamese
VIETNAMESE_SHARE = 0.05
HELD_LETTERS = 12  # letters of a script that make it one of a passage's scripts whatever their share (holds_script)
LINE_CHARS = 1024  # characters of a passage read line by line (script_lines, in_script)
_LATIN = ("LATIN", "VIETNAMESE")
# A question written in another script than each of the vector leg's top CROSSLINGUAL_PASSAGES passages may be answered
# by the cross-lingual gate as well as by the usual one (an identifier asked of a note in another language is read by
# the keyword leg and its gate). Where one of them is in the question's script (a memory in several languages), the
# usual gate alone decides: a question nothing answers is still refused there (the demo's went 80% -> 50% when the
# majority of the top passages decided).
CROSSLINGUAL_PASSAGES = 3


def dominant_script(texts: Sequence[str]) -> str | None:
    """The script ``texts`` are written in (the first :data:`SCRIPT_LETTERS` letters of each): the most frequent
    script other than Latin when it holds :data:`OWN_SCRIPT_SHARE` of the letters or more (Latin names, code and
    units are written inside text of every script, rarely the other way round), else Latin; None without a letter.

    Example:
        >>> dominant_script(["会議は月曜日です"]), dominant_script(["The iPhone 15 Pro 的电池"]), dominant_script(["42"])
        ('CJK', 'CJK', None)
        >>> dominant_script(["Ran the 東京 backup job at night"]), dominant_script(["Mẹ mổ mắt ở bệnh viện nào?"])
        ('LATIN', 'VIETNAMESE')
    """
    heads = [t[:SCRIPT_CHARS] for t in texts]
    if all(h.isascii() for h in heads):  # the common case, at C speed
        return "LATIN" if any(_ASCII_LETTER.search(h) for h in heads) else None
    counts: Counter[str] = Counter()
    for text in heads:
        seen = 0
        for ch in text:
            if ch.isalpha():
                counts[_group(ch)] += 1
                seen += 1
                if seen >= SCRIPT_LETTERS:
                    break
    if not counts:
        return None
    total = sum(counts.values())
    others = [(n, script) for script, n in counts.items() if script not in _LATIN]
    if others and max(others)[0] >= OWN_SCRIPT_SHARE * total:
        return max(others)[1]
    latin = counts["LATIN"] + counts["VIETNAMESE"]
    if not latin:
        return max(others)[1]
    return "VIETNAMESE" if counts["VIETNAMESE"] >= VIETNAMESE_SHARE * latin else "LATIN"


@lru_cache(maxsize=1024)
def _vietnamese(ch: str) -> bool:
    """A Latin letter only Vietnamese writes: đ, a horn (ơ ư), a hook above or a dot below, a tilde on e, i, u or y."""
    d = unicodedata.normalize("NFD", ch)
    return ch in "đĐ" or any(m in d for m in "\u031b\u0309\u0323") or (d[0] in "eiuyEIUY" and "\u0303" in d)


def other_script(query: str, passages: Sequence[str]) -> bool:
    """Whether ``query`` is written in another script than each of the first :data:`CROSSLINGUAL_PASSAGES` of
    ``passages`` (the vector leg's, in rank order) that holds a letter.

    Example:
        >>> other_script("when is the team meeting?", ["周一上午九点召开团队周会。", "退款会在五个工作日内退回。"])
        True
        >>> other_script("when is the team meeting?", ["周一上午九点召开团队周会。", "Weekly sync on Mondays."])
        False
    """
    asked = dominant_script([query])
    if asked is None or not has_letters(query):  # code, an identifier or a stray letter: the usual gate reads it
        return False
    # a Latin question with accents but no letter only Vietnamese writes may be Vietnamese all the same (a short one,
    # or one full of English names): it is not told apart from Vietnamese passages
    near = {asked, "VIETNAMESE"} if asked == "LATIN" and not all(c.isascii() for c in query if c.isalpha()) else {asked}
    found = False
    for passage in passages[:CROSSLINGUAL_PASSAGES]:
        script = dominant_script([passage])
        if script in near or any(holds_script(passage, s) for s in near):
            return False
        found = found or script is not None
    return found


@lru_cache(maxsize=4096)
def _group(ch: str) -> str:
    """A letter's script as :func:`dominant_script` and :func:`holds_script` count it: kana with CJK, Vietnamese's own
    letters apart."""
    script = letter_script(ch)
    return "VIETNAMESE" if script == "LATIN" and _vietnamese(ch) else _SCRIPT_GROUPS.get(script, script)


def holds_script(text: str, script: str) -> bool:
    """Whether ``script`` is one of those ``text`` is written in (a note of one day may hold a line in Chinese, one in
    Vietnamese and one in Thai): a script other than Latin that holds :data:`OWN_SCRIPT_SHARE` of the letters of its
    first :data:`SCRIPT_CHARS` characters or :data:`HELD_LETTERS` of them (a line of Chinese is short in letters
    beside one of Thai); Vietnamese where Latin letters do and Vietnamese's own are :data:`VIETNAMESE_SHARE` of them.
    Latin names, code and units are written inside text of every script, so Latin (and Vietnamese besides) is one of
    them only through a line of its own (of the first :data:`LINE_CHARS` characters, :func:`script_lines`).

    Example:
        >>> note = "搬家公司报价三千五百元，下周六早上八点来搬。Mẹ khám mắt ở bệnh viện vào thứ Ba. พ่อไปตรวจสุขภาพประจำปี"
        >>> dominant_script([note]), [holds_script(note, s) for s in ("CJK", "VIETNAMESE", "THAI", "LATIN")]
        ('CJK', [True, True, True, False])
        >>> holds_script("- 搬家公司报价三千五百元。\\n- Dentist moved to Friday at 3pm.", "LATIN")
        True
        >>> holds_script("Ran the 東京 backup job", "CJK"), holds_script("Apple 和 Google 的 API 文档", "LATIN")
        (False, False)
    """
    if script in _LATIN and script_lines(text, script):
        return True
    counts = Counter(_group(ch) for ch in text[:SCRIPT_CHARS] if ch.isalpha())
    total = sum(counts.values())
    if not total or script == "LATIN":
        return False
    held = lambda n: n >= min(HELD_LETTERS, OWN_SCRIPT_SHARE * total)  # noqa: E731
    if script != "VIETNAMESE":
        return held(counts[script])
    latin = counts["LATIN"] + counts["VIETNAMESE"]
    return held(latin) and counts["VIETNAMESE"] >= VIETNAMESE_SHARE * latin


@lru_cache(maxsize=1024)  # a memory's top passages recur
def script_lines(text: str, script: str) -> tuple[str, ...]:
    """The lines of ``text``'s first :data:`LINE_CHARS` characters written in ``script`` (:func:`dominant_script`;
    Latin and Vietnamese as one) with :data:`~hybridmem.ranking.language.LANGUAGE_WORDS` words or more outside code,
    numbers and identifiers, when ``text`` has more than one line.

    Example:
        >>> note = "# 2026-11-21\\n- Dentist moved to Friday at 3pm.\\n- retry_backoff_ms = 250\\n- 搬家公司报价。"
        >>> script_lines(note, "LATIN")
        ('- Dentist moved to Friday at 3pm.',)
    """
    lines = text[:LINE_CHARS].splitlines()
    group = _LATIN if script in _LATIN else (script,)
    return tuple(line for line in lines if len(words(line)) >= LANGUAGE_WORDS and dominant_script([line]) in group
                 ) if len(lines) > 1 else ()


@lru_cache(maxsize=1024)  # a memory's top passages recur
def in_script(text: str, script: str | None) -> str:
    """``text`` without the letters of scripts other than ``script`` (:func:`dominant_script`'s; Latin and Vietnamese
    as one), so that the language of its part in ``script`` can be read; ``text`` itself for None.

    Example:
        >>> in_script("搬家公司报价。Mẹ khám mắt.", "CJK"), in_script("搬家公司报价。Mẹ khám mắt.", "VIETNAMESE")
        ('搬家公司报价。  .', '。Mẹ khám mắt.')
    """
    latin = script in _LATIN
    if script is None or (latin and text[:LINE_CHARS].isascii()):
        return text
    keep = {"LATIN", "VIETNAMESE"} if latin else {script}
    kept = _NON_ASCII.sub(lambda m: m[0] if not m[0].isalpha() or _group(m[0]) in keep else "", text[:LINE_CHARS])
    return kept if latin else _ASCII_LETTER.sub("", kept)


def nearest_across(query: str, passages: Sequence[str]) -> bool:
    """Whether ``query`` is asked across languages of its nearest passage alone (the vector leg's first;
    :func:`asked_across`): in a memory written in two languages, a question about a note in the other one finds that
    note first and one in its own language among the next (English over notes in Vietnamese and English).

    Example:
        >>> notes = ["Nhà mình thay lõi lọc nước ngày 3 tháng 5.", "The Terraform modules are maintained by Priya."]
        >>> nearest_across("when was the water filter cartridge replaced?", notes)
        True
        >>> asked_across("when was the water filter cartridge replaced?", notes)
        False
    """
    return asked_across(query, passages[:1])


def asked_across(query: str, passages: Sequence[str]) -> bool:
    """Whether ``query`` is asked across languages of the first :data:`CROSSLINGUAL_PASSAGES` of ``passages`` (the
    vector leg's, in rank order), where the cross-lingual gate may answer too: in another script than each
    (:func:`other_script`), or in another language of the same script
    (:func:`~hybridmem.ranking.language.other_language`: English over notes in German)."""
    top = passages[:CROSSLINGUAL_PASSAGES]
    if other_script(query, top):
        return True
    # each passage's part in the question's script, and its lines in it: a note may hold several languages
    asked = dominant_script([query])
    if not other_language(query, [in_script(p, asked) for p in top]):
        return False
    return asked not in _LATIN or not in_language(query, [line for p in top for line in script_lines(p, asked)])


def several_scripts(query: str, passages: Sequence[str]) -> bool:
    """Whether ``passages`` are written in two scripts or more besides ``query``'s own (:func:`dominant_script`;
    Vietnamese counts as Latin here): a memory in several languages, not one in another language (whose passages
    full of names may read as Latin).

    Example:
        >>> notes = ["คุณยายไปตรวจความดันโลหิต", "زرعنا أشجار الزيتون", "宿は祇園の近くの旅館を予約した。"]
        >>> several_scripts("when is my sister's birthday?", notes)
        True
        >>> several_scripts("when is the team meeting?", ["周一上午九点召开团队周会。", "Apple 和 Google 的 API", "42"])
        False
    """
    latin = lambda s: "LATIN" if s == "VIETNAMESE" else s  # noqa: E731
    scripts = {latin(dominant_script([p])) for p in passages} - {None, latin(dominant_script([query]))}
    return len(scripts) > 1


def across_languages(query: str, passages: Sequence[str]) -> str:
    """How ``query`` is asked across languages of ``passages`` (the vector leg's, in rank order): ``"top"``, of each
    of the first :data:`CROSSLINGUAL_PASSAGES` (:func:`asked_across`) in a memory in another language; ``"nearest"``,
    of the first alone (:func:`nearest_across`), or of each of the first where they are written in several scripts
    besides the question's (:func:`several_scripts`: a memory in several languages, whose notes in other languages
    than the question's all lie near it; read against the nearest route's bar); ``""``, neither.

    Example:
        >>> notes = ["คุณยายไปตรวจความดันโลหิต", "زرعنا أشجار الزيتون", "宿は祇園の近くの旅館を予約した。"]
        >>> across_languages("when is my sister's birthday?", notes), across_languages("when is my sister's birthday?",
        ...                                                                            notes[:1] * 3)
        ('nearest', 'top')
    """
    top = passages[:CROSSLINGUAL_PASSAGES]
    if asked_across(query, top):
        return "nearest" if several_scripts(query, top) else "top"
    return "nearest" if nearest_across(query, top) else ""


def either_gate(features: Mapping[str, float], usual: Gate, cross: Gate, asked: str, bar: float,
                shipped: float, usual_bar: float = 0.0) -> float:
    """The probability that a question asked across languages as ``asked`` says (:func:`across_languages`) has an
    answer: ``usual``'s, read against ``usual_bar`` where that is above ``shipped`` (the bar of the question's language,
    :data:`~hybridmem.config.calibration.LANGUAGE_BARS`); where ``"top"``, the higher of it and the cross-lingual gate
    ``cross``'s; where ``"nearest"``, the higher of it and ``cross``'s read against ``bar`` where the threshold is
    ``shipped`` (:func:`raised`)."""
    got = answer_probability(features, usual)
    if usual_bar > shipped:
        got = raised(got, usual_bar, shipped)
    if asked:
        p = answer_probability(features, cross)
        got = max(got, p if asked == "top" else raised(p, bar, shipped))
    return got


def raised(p: float, threshold: float, shipped: float) -> float:
    """``p`` read against ``threshold`` where the shipped threshold is ``shipped``: its logit moved down so that
    ``threshold`` falls where ``shipped`` is (a stricter bar for the same gate, its probability still monotone).

    Example:
        >>> round(raised(0.9, 0.9, 0.07), 4), raised(0.5, 0.9, 0.07) < 0.07 < raised(0.95, 0.9, 0.07)
        (0.07, True)
    """
    return sigmoid(logit(p) - logit(threshold) + logit(shipped))


def answer_probability(features: Mapping[str, float], model: Gate) -> float:
    """The probability that the query has an answer, from the features ``model`` names; for several models that
    must all answer (a pair, :func:`~hybridmem.config.calibration.gate_model`), the lowest of theirs.

    Raises:
        KeyError: ``model`` names a feature ``features`` lacks.
    """
    if isinstance(model, tuple):
        return min(answer_probability(features, m) for m in model)
    z = model.intercept
    for name, c in zip(model.features, model.coef):
        z += c * features[name]
    return sigmoid(z)
