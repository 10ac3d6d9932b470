"""Which language a text is in, where its script does not say: English over notes in German, Spanish or Turkish.

:func:`~hybridmem.ranking.gate.other_script` routes a question written in another script than its passages to the
cross-lingual gate. A question in another language of the same script (English over German notes) shares few of its
passages' words and aligns poorly with them token by token, so the usual gate refused 30% of such answerable XQuAD-R
questions. A language identifier tells these apart: py3langid (Lui and Baldwin's langid.py, a naive Bayes model over
byte n-grams of 142 languages and variants, BSD-3-Clause, numpy only). :func:`other_language` routes a question when,
for each of its top passages, the question's own probability of being in that passage's language is under
:data:`LANGUAGE_SHARE` (a German question read as Luxembourgish still gives German a fair share, so related languages
and variants are not routed), and only when the question has :data:`LANGUAGE_WORDS` words or more (an identifier or a
two-word query has no language to speak of).

The model (py3langid's package data, 4.6 MB compressed with xz, 0.6 s to read) is unpacked once into the user cache
(68 MB, one ``.npy`` per array) and mapped from there by each process in about 30 ms, like a table; the pages its
automaton touches are read as it touches them (about 65 MB after a few hundred texts in several scripts, shared by
every process on the machine). :func:`preload` starts that in the background where a process expects to search.
Each text is read to its first :data:`LANGUAGE_CHARS` characters, about 0.1 ms a text; a passage's reading is kept
(:func:`language_share`), since a memory's top passages recur.

Example:
    >>> other_language("who is responsible for the database migration?",
    ...                ["Die Datenbankmigration übernimmt Jonas bis Ende Januar.", "Die Schlüssel liegen im Büro."])
    True
    >>> other_language("who is responsible for the database migration?",
    ...                ["Jonas owns the database migration, due in January.", "Die Schlüssel liegen im Büro."])
    False
    >>> other_language("ERR_CONN_RESET E1042", ["Die Datenbankmigration übernimmt Jonas bis Ende Januar."])
    False
"""

from __future__ import annotations

import logging
import re
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Sequence

from hybridmem.config.paths import user_cache_dir
from hybridmem.tokenization import WORD_MARKS

__all__ = ["ASK_SHARE", "LANGUAGE_CHARS", "LANGUAGE_SHARE", "LANGUAGE_WORDS", "ask_in", "has_letters", "in_language",
           "language_name", "language_share", "other_language", "preload", "query_language", "text_language", "words"]

LANGUAGE_SHARE = 0.01  # a question under this probability of each top passage's language is in another language
LANGUAGE_WORDS = 3  # words of two letters or more a question needs to be read
LANGUAGE_CHARS = 256  # characters read of each text
ASK_SHARE = 0.2  # a language holding this share of a memory's chunks is named when a question in another is refused
ASK_MOST = 3  # languages named at most
ASK_NEAREST = 3  # passages of a refused question's ranking whose languages are named too
ASK_STRAY = 0.01  # ... where the memory holds this share of its chunks in it or more (a short line is misread)

_lock = threading.Lock()
_identifier = None  # the loaded model; False when it cannot be loaded
_cache_setting = ""  # embedding.shared_cache_dir, from the first search that preloads the model
log = logging.getLogger(__name__)
_WORD = re.compile(rf"[^\W\d_](?:[^\W\d_]|[{WORD_MARKS}])+")  # a letter, then letters or combining marks
_CODE = re.compile(r"[_\d/\\=<>{}()\[\]@#$%^&*|~`]|[a-z][A-Z]")  # a token of code, a number, a path or an id


def words(text: str, ascii_code: bool = False) -> list[str]:
    """The words of ``text`` (a letter and one or more letters or combining marks after it) outside its tokens of
    code, numbers and identifiers; with ``ascii_code``, outside its ASCII ones only (a Chinese or Thai question with a
    year in it is one such token).

    Example:
        >>> words("ERR_CONN_RESET after fetchUserProfile at 10:30 in E1042, l'été")
        ['after', 'at', 'in', 'été']
        >>> words("托马斯·戴维斯有多少次迫使掉球？")
        ['托马斯', '戴维斯有多少次迫使掉球']
        >>> words("दादी की आँखों की जाँच कब है?")  # a vowel sign is a combining mark inside its word
        ['दादी', 'की', 'आँखों', 'की', 'जाँच', 'कब', 'है']
    """
    return _WORD.findall(" ".join(t for t in text.split() if not ((t.isascii() or not ascii_code) and _CODE.search(t))))


def has_letters(text: str) -> bool:
    """Whether ``text`` holds two letters or more outside its ASCII tokens of code, numbers and identifiers, a Chinese,
    Japanese or Korean character counting as two (a query like ``NEAR(a b)`` or ``ERR_CONN_RESET`` is in no language
    to be asked across; ``猫`` is a word).

    Example:
        >>> has_letters("NEAR(a b)"), has_letters("ERR_CONN_RESET E1042"), has_letters("vpn"), has_letters("猫")
        (False, False, True, True)
    """
    return sum((2 if ch >= "\u2e80" else 1) for token in text.split()
               if not (token.isascii() and _CODE.search(token)) for ch in token if ch.isalpha()) >= 2


def _enough(query: str, ascii_code: bool = False) -> bool:
    """A query with a language to read: :data:`LANGUAGE_WORDS` words, or six letters outside ASCII among its words (a
    Chinese or Japanese question runs its words together). ``ascii_code``: as :func:`words`."""
    got = words(query[:LANGUAGE_CHARS], ascii_code)
    return len(got) >= LANGUAGE_WORDS or sum(len(w) for w in got if not w.isascii()) >= 6


_ARRAYS = ("ptc", "pc", "classes", "nextmove", "nextmove_row", "out_feat")  # py3langid's model file, 0.4


def _unpacked(folder: Path) -> dict[str, Any]:
    """The model's arrays from ``folder`` (one ``.npy`` each, mapped, not read: the pages the automaton and the table
    touch are read as they are), unpacking py3langid's xz-compressed file there first (0.5 s, 68 MB, once per version).
    """
    import lzma
    import shutil
    import tempfile

    import numpy as np
    from py3langid.langid import MODEL_DIR, MODEL_FILE

    if not all((folder / f"{n}.npy").exists() for n in _ARRAYS):
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
        try:
            with tempfile.TemporaryFile(dir=tmp) as npz:
                with lzma.open(MODEL_DIR / MODEL_FILE) as src:
                    shutil.copyfileobj(src, npz, length=1 << 20)
                npz.seek(0)
                with np.load(npz, allow_pickle=False) as data:
                    for n in _ARRAYS:
                        np.save(tmp / f"{n}.npy", data[n], allow_pickle=False)
            try:
                tmp.rename(folder)
            except OSError:  # another process unpacked it meanwhile
                if not (folder / "out_feat.npy").exists():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return {n: np.load(folder / f"{n}.npy", mmap_mode="r", allow_pickle=False) for n in _ARRAYS}


def _model():  # type: ignore[no-untyped-def]
    """The identifier, loaded once; False when py3langid cannot be loaded (then only the script routes a question).
    Read from its arrays unpacked in the user cache (:func:`~hybridmem.config.paths.user_cache_dir`; a few ms) where
    that folder can be written, else from its own file (0.6 s)."""
    global _identifier
    if _identifier is None:
        with _lock:
            if _identifier is None:
                try:
                    from importlib.metadata import version

                    import numpy as np
                    from py3langid.langid import MODEL_FILE, LanguageIdentifier

                    try:
                        a = _unpacked(user_cache_dir(_cache_setting) / f"langid-{version('py3langid')}")
                        # the automaton is walked a byte at a time: memoryviews index as fast as the array module
                        _identifier = LanguageIdentifier(
                            a["ptc"], np.asarray(a["pc"]), a["classes"].tolist(), memoryview(a["nextmove"]),
                            a["out_feat"].tolist(), norm_probs=True, tk_row=memoryview(a["nextmove_row"]))
                    except (OSError, ValueError, KeyError) as e:
                        log.info("language identifier read from its package (%s)", e)
                        _identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
                except (ImportError, OSError, ValueError) as e:
                    log.warning("no language identifier (%s): a question is routed across languages by its script "
                                "only", e)
                    _identifier = False
    return _identifier


def preload(cache_dir: str = "") -> None:
    """Load the model in a background thread (a search that needs it first waits for that load, not another);
    ``cache_dir``: ``embedding.shared_cache_dir``, where its tables are unpacked."""
    global _cache_setting
    if _identifier is None:
        _cache_setting = _cache_setting or cache_dir
        threading.Thread(target=_model, name="hybridmem-langid", daemon=True).start()


@lru_cache(maxsize=4096)
def language_share(text: str) -> tuple[tuple[str, float], ...]:
    """``text``'s languages with their probabilities, most likely first (its first :data:`LANGUAGE_CHARS`
    characters)."""
    return tuple((lang, float(p)) for lang, p in _model().rank(text[:LANGUAGE_CHARS]))


def other_language(query: str, passages: Sequence[str]) -> bool:
    """Whether ``query`` is in another language than each of ``passages`` that holds a word (the caller's: the vector
    leg's top 3, ``gate.asked_across``): its probability of the passage's most likely language is under
    :data:`LANGUAGE_SHARE`. False for a query of fewer than :data:`LANGUAGE_WORDS` words outside code and numbers
    (:func:`words`), unless six of their letters are outside ASCII."""
    if not _enough(query) or not _model():
        return False
    asked = dict(language_share(query))
    found = False
    for passage in passages:
        if not _WORD.search(passage[:LANGUAGE_CHARS]):
            continue
        if asked.get(language_share(passage)[0][0], 0.0) >= LANGUAGE_SHARE:
            return False
        found = True
    return found


# Varieties py3langid reads a question for where one bar serves: Mandarin questions often read as Wu, a few as Cantonese
# (XQuAD-R Chinese, train: 79 and 1 of 890), all written in the same characters and cut by the tokenizer alike.
_ONE_BAR = {"wuu": "zh", "yue": "zh"}
# The languages a passage is counted in and a refusal names (:func:`text_language`, :func:`ask_in`): a variety as its
# language, so that an Arabic note read as Egyptian Arabic is not named apart from Arabic.
_VARIETIES = {**_ONE_BAR, "arz": "ar", "ary": "ar", "uzs": "uz", "nn": "no"}


def query_language(query: str) -> str | None:
    """The language ``query`` is most likely in (py3langid's code: ``vi``, ``zh``; a Chinese variety as ``zh``), or
    None when it has too few words to read (:data:`LANGUAGE_WORDS`, or six letters outside ASCII; only ASCII tokens of
    code and numbers are left out, since a Chinese or Thai question with a year in it is one token) or the model
    cannot be loaded.

    Example:
        >>> query_language("lịch hẹn nha sĩ của mẹ là khi nào?"), query_language("E1042 vpn")
        ('vi', None)
        >>> query_language("2015年黑豹队的防守有多少次拦截记录？"), query_language("दादी की आँखों की जाँच कब है?")
        ('zh', 'hi')
    """
    if not _enough(query, ascii_code=True) or not _model():
        return None
    lang = language_share(query)[0][0]
    return _ONE_BAR.get(lang, lang)


def text_language(text: str) -> str | None:
    """The language a passage is most likely written in (as :func:`query_language` reads a question, its reading not
    kept: a sync reads each chunk once), None when it has too few words to read or the model cannot be loaded.

    Example:
        >>> text_language("- Seguro del coche (Mapfre) vence el 12 de noviembre; póliza 88-431-2207.")
        'es'
        >>> text_language("ERR_CONN_RESET E1042") is None
        True
    """
    if not _enough(text, ascii_code=True) or not _model():
        return None
    lang = _model().rank(text[:LANGUAGE_CHARS])[0][0]
    return _VARIETIES.get(lang, lang)


def ask_in(query: str, languages: Mapping[str, int], nearest: Sequence[str] = ()) -> tuple[str, ...]:
    """The languages, other than ``query``'s, a refused question may be asked again in: those of its ``nearest``
    passages (the ranking's first :data:`ASK_NEAREST`; a language the memory holds under :data:`ASK_STRAY` of its
    chunks in is a short line misread), then those holding :data:`ASK_SHARE` or more of the memory's chunks
    (``languages``: chunks per language, :func:`text_language`), most first; at most :data:`ASK_MOST`, and none when
    the question's language cannot be read. The gate reads a question across languages less surely than one asked
    in the notes' own: in memories of XQuAD-R articles in two languages, nearly every answerable question it refused
    was answered when asked again in the other (``docs/evaluation.md``, "Asked again in the notes' language").

    Example:
        >>> ask_in("when does the car insurance expire?", {"en": 30, "es": 20, "de": 2})
        ('es',)
        >>> ask_in("when does the car insurance expire?", {"en": 30, "de": 2}, ["Die Versicherung läuft im Mai ab."])
        ('de',)
        >>> ask_in("¿cuándo vence el seguro del coche?", {"en": 30, "es": 20}), ask_in("E1042", {"es": 9})
        (('en',), ())
    """
    if not _enough(query, ascii_code=True) or not _model():
        return ()
    asked: dict[str, float] = {}
    for lang, p in language_share(query):  # a language the question may well be in is not another one
        asked[_VARIETIES.get(lang, lang)] = asked.get(_VARIETIES.get(lang, lang), 0.0) + p
    total = sum(languages.values())
    read = (language_share(text)[0][0] for text in nearest[:ASK_NEAREST] if _enough(text, ascii_code=True))
    near = [lang for lang in (_VARIETIES.get(code, code) for code in read)
            if not total or languages.get(lang, 0) >= ASK_STRAY * total]  # not a stray misreading
    shared = [lang for lang, n in sorted(languages.items(), key=lambda kv: -kv[1]) if n >= ASK_SHARE * total]
    named = dict.fromkeys(lang for lang in (*near, *shared) if asked.get(lang, 0.0) < LANGUAGE_SHARE)
    return tuple(named)[:ASK_MOST]


def language_name(code: str) -> str:
    """The English name of a language :func:`text_language` reads (py3langid's code), else the code in quotes.

    Example:
        >>> language_name("vi"), language_name("zh"), language_name("gcf")
        ('Vietnamese', 'Chinese', "'gcf'")
    """
    return LANGUAGE_NAMES.get(code, f"'{code}'")


LANGUAGE_NAMES = {  # py3langid's ISO 639-1 codes, and a few of its others
    "af": "Afrikaans", "am": "Amharic", "an": "Aragonese", "ar": "Arabic", "as": "Assamese", "az": "Azerbaijani",
    "be": "Belarusian", "bg": "Bulgarian", "bn": "Bengali", "br": "Breton", "bs": "Bosnian", "ca": "Catalan",
    "cs": "Czech", "cy": "Welsh", "da": "Danish", "de": "German", "el": "Greek", "en": "English", "eo": "Esperanto",
    "es": "Spanish", "et": "Estonian", "eu": "Basque", "fa": "Persian", "fi": "Finnish", "fo": "Faroese",
    "fr": "French", "fy": "Frisian", "ga": "Irish", "gd": "Scottish Gaelic", "gl": "Galician", "gu": "Gujarati",
    "ha": "Hausa", "he": "Hebrew", "hi": "Hindi", "hr": "Croatian", "ht": "Haitian Creole", "hu": "Hungarian",
    "hy": "Armenian", "id": "Indonesian", "ig": "Igbo", "is": "Icelandic", "it": "Italian", "ja": "Japanese",
    "jv": "Javanese", "ka": "Georgian", "kk": "Kazakh", "km": "Khmer", "kn": "Kannada", "ko": "Korean",
    "ku": "Kurdish", "ky": "Kyrgyz", "la": "Latin", "lb": "Luxembourgish", "lo": "Lao", "lt": "Lithuanian",
    "lv": "Latvian", "mg": "Malagasy", "mk": "Macedonian", "ml": "Malayalam", "mn": "Mongolian", "mr": "Marathi",
    "ms": "Malay", "mt": "Maltese", "my": "Burmese", "ne": "Nepali", "nl": "Dutch", "nn": "Norwegian Nynorsk",
    "no": "Norwegian", "oc": "Occitan", "or": "Odia", "pa": "Punjabi", "pl": "Polish", "ps": "Pashto",
    "pt": "Portuguese", "qu": "Quechua", "ro": "Romanian", "ru": "Russian", "rw": "Kinyarwanda", "sa": "Sanskrit",
    "si": "Sinhala", "sk": "Slovak", "sl": "Slovenian", "so": "Somali", "sq": "Albanian", "sr": "Serbian",
    "sv": "Swedish", "sw": "Swahili", "ta": "Tamil", "te": "Telugu", "tg": "Tajik", "th": "Thai", "tk": "Turkmen",
    "tl": "Tagalog", "tr": "Turkish", "tt": "Tatar", "ug": "Uyghur", "uk": "Ukrainian", "ur": "Urdu", "uz": "Uzbek",
    "vi": "Vietnamese", "wa": "Walloon", "xh": "Xhosa", "yo": "Yoruba", "zh": "Chinese", "zu": "Zulu",
}


def in_language(query: str, texts: Sequence[str]) -> bool:
    """Whether one of ``texts`` is in ``query``'s language (:func:`other_language`'s rule; the caller's: the lines of
    its top passages in the question's script, since a note may hold a line in each of two languages).

    Example:
        >>> in_language("who is responsible for the database migration?",
        ...             ["Mẹ khám mắt ở bệnh viện vào thứ Ba.", "Jonas owns the database migration, due in January."])
        True
    """
    if not texts or not _model():
        return False
    asked = dict(language_share(query))
    return any(asked.get(language_share(text)[0][0], 0.0) >= LANGUAGE_SHARE for text in texts)
