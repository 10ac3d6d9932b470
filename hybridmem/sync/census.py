"""What a sync counts of each file's chunks, so that a search or a status can say it without reading them again.

Per file, in the index's meta and written in the same transaction as the file's rows:

- :data:`UNREAD_META`: how many of its chunks are written mostly in a script the embedding model does not read
  (:func:`unread_script`; all-MiniLM-L6-v2 reads Latin alone), for the sync's warning and ``status``'s note;
- :data:`LANGUAGES_META`: how many are in each language (:func:`~hybridmem.ranking.language.text_language`), beside
  their sum over the index (:data:`LANGUAGE_TOTALS_META`), which a refused question's reply reads to name the
  languages it may be asked again in (:func:`~hybridmem.ranking.language.ask_in`).

An index written before a count existed is counted over its stored chunks by the first sync that finds the count
missing (:meth:`Census.count_stored`); a full reindex starts every count afresh.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Iterable, Mapping

from hybridmem.ranking.adaptive import MAX_QUERY_LETTERS, foreign_letters
from hybridmem.ranking.language import text_language
from hybridmem.store import Store

UNREAD_META = "unread_scripts"  # {path: {script: chunks}} of the files with chunks the model does not read
LANGUAGES_META = "chunk_languages"  # {path: {language: chunks}}
LANGUAGE_TOTALS_META = "chunk_language_totals"  # {language: chunks} over the index
_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def unread_script(text: str, scripts: frozenset[str] | None) -> str | None:
    """The script most of ``text``'s letters are written in, where the embedding model does not read it (``scripts``,
    ``Embedder.scripts``: all-MiniLM-L6-v2 reads Latin alone; None, any); else None. Its first 400 letters are read
    as a query's are for the adaptive step (:func:`~hybridmem.ranking.adaptive.foreign_letters`). The model's vector
    of such a chunk is close to random: only the keyword leg finds it.

    Example:
        >>> unread_script("# 2026-11-05\\n- คุณยายไปตรวจความดันที่โรงพยาบาล (Siriraj)", frozenset({"LATIN"}))
        'THAI'
        >>> unread_script("Staging Redis listens on 6380 (ステージング)", frozenset({"LATIN"})) is None
        True
    """
    if scripts is None:
        return None
    if "LATIN" in scripts and not any(c.isalpha() for c in _NON_ASCII.findall(text, 0, 4 * MAX_QUERY_LETTERS)):
        return None  # letters in ASCII alone, the common case: found at C speed
    outside, letters = foreign_letters(text, scripts)
    return outside.most_common(1)[0][0] if 2 * outside.total() > letters else None


def unread_words(unread: Counter[str], total: int, model: str) -> str:
    """One sentence for ``hybridmem index``: how many of the ``total`` chunks a sync stored are written in scripts
    ``model`` does not read (``unread``: chunks per script, :func:`unread_script`), and what to do about it.

    Example:
        >>> print(unread_words(Counter({"THAI": 8, "ARABIC": 6}), 40, "all-MiniLM-L6-v2"))
        ... # doctest: +NORMALIZE_WHITESPACE
        14 of 40 chunks indexed are written mostly in scripts all-MiniLM-L6-v2 does not read (Thai 8, Arabic 6): its
        vectors of them are close to random, so only the keyword leg finds them; multilingual-e5-small, the default
        model, reads them ([embedding] provider = "e5").
    """
    named = ", ".join(f"{s if s == 'CJK' else s.title()} {n}" for s, n in unread.most_common())
    verb = "is" if unread.total() == 1 else "are"
    return (f"{unread.total():,} of {total:,} chunks indexed {verb} written mostly in scripts {model} does not read "
            f"({named}): its vectors of them are close to random, so only the keyword leg finds them; "
            'multilingual-e5-small, the default model, reads them ([embedding] provider = "e5").')


def _read(store: Store, key: str) -> dict[str, dict[str, int]] | None:
    """A count map from the meta; None when the index has none (or it cannot be read)."""
    raw = store.get_meta(key)
    try:
        got = json.loads(raw) if raw is not None else None
    except ValueError:
        return None
    return got if isinstance(got, dict) else None


def _counts(per: object) -> bool:
    """Whether a file's entry in a count map is what :class:`Census` writes: chunks (int) per name."""
    return isinstance(per, dict) and all(isinstance(n, int) for n in per.values())


def unread_note(store: Store, chunks: int, model: str) -> str | None:
    """:func:`unread_words` over the whole index (``chunks`` in it), for ``hybridmem status`` and ``memory_status``;
    None when every chunk is in a script ``model`` reads."""
    unread: Counter[str] = Counter()
    for per in (_read(store, UNREAD_META) or {}).values():
        if _counts(per):
            unread.update(per)
    return unread_words(unread, chunks, model) if unread else None


def chunk_languages(store: Store) -> dict[str, int]:
    """Chunks per language over the index (:data:`LANGUAGE_TOTALS_META`); empty when not counted yet."""
    got = _read(store, LANGUAGE_TOTALS_META) or {}
    return {k: v for k, v in got.items() if isinstance(v, int)}


class Census:
    """The per-file counts of one sync: read once, changed file by file, written with the rows they describe."""

    def __init__(self, store: Store, scripts: frozenset[str] | None) -> None:
        self.scripts = scripts  # what the model reads (None: any script, or no model)
        read = {key: _read(store, key) for key in (UNREAD_META, LANGUAGES_META)}
        self.missing = read[LANGUAGES_META] is None  # an index from before the counts: count its stored chunks
        self.kept = not self.missing  # the maps held each stored file's counts when this sync began
        self.maps = {key: {path: per for path, per in (got or {}).items() if _counts(per)} for key, got in read.items()}
        self.totals: Counter[str] = Counter()  # chunks per language over the index, kept as files change
        for per in self.maps[LANGUAGES_META].values():
            self.totals.update(per)
        self.dirty: set[str] = set()

    def count(self, path: str, texts: Iterable[str], before: Mapping[str, int] | None = None) -> Counter[str]:
        """Count ``path``'s chunks (``texts``); returns its chunks per unread script. ``before``: the file's stored
        chunks (text -> how many), when known: only the texts that came or went are read, and its counts change by
        theirs (a transcript that grew by a few messages is read in a few chunks, not ten thousand)."""
        texts = list(texts)
        if before is None or not self.kept:
            unread, langs = self._read_texts(texts)
        else:
            now, was = Counter(texts), Counter(before)
            came, went = self._read_texts(list((now - was).elements())), self._read_texts(list((was - now).elements()))
            unread, langs = (Counter(self.maps[key].get(path, {})) for key in (UNREAD_META, LANGUAGES_META))
            for counts, plus, minus in zip((unread, langs), came, went):
                counts.update(plus)
                counts.subtract(minus)
            if any(n < 0 for counts in (unread, langs) for n in counts.values()):  # counts not of these chunks
                unread, langs = self._read_texts(texts)
            unread, langs = +unread, +langs
        for key, counts in ((UNREAD_META, unread), (LANGUAGES_META, langs)):
            was = self.maps[key].pop(path, None)
            if counts:
                self.maps[key][path] = dict(counts)
            if (dict(counts) or None) != was:
                self.dirty.add(key)
                if key == LANGUAGES_META:
                    self.totals.subtract(was or {})
                    self.totals.update(langs)
        return unread

    def _read_texts(self, texts: list[str]) -> tuple[Counter[str], Counter[str]]:
        """Chunks per unread script and per language among ``texts``."""
        return (Counter(s for t in texts if (s := unread_script(t, self.scripts))),
                Counter(lang for t in texts if (lang := text_language(t))))

    def drop(self, path: str) -> None:
        """Forget a deleted file."""
        for key, counts in self.maps.items():
            if (was := counts.pop(path, None)) is not None:
                self.dirty.add(key)
                if key == LANGUAGES_META:
                    self.totals.subtract(was)

    def count_stored(self, store: Store, skip: set[str]) -> None:
        """Count the chunks an index written before the counts holds (but the files in ``skip``, stored again now)."""
        by_path: dict[str, list[int]] = {}
        for cid, path in store.chunk_paths().items():
            if path not in skip:
                by_path.setdefault(path, []).append(cid)
        ids = [cid for cids in by_path.values() for cid in cids]
        texts: dict[int, str] = {}
        for i in range(0, len(ids), 500):
            texts.update((cid, row[4]) for cid, row in store.chunk_rows(ids[i:i + 500]).items())
        for path, cids in by_path.items():
            self.count(path, (texts[c] for c in cids if c in texts))
        self.missing = False
        self.dirty.add(LANGUAGES_META)  # written even when empty: counted

    def write(self, store: Store) -> None:
        """Write what changed (inside the caller's transaction)."""
        for key in sorted(self.dirty):
            store.set_meta(key, json.dumps(self.maps[key], ensure_ascii=False))
        if LANGUAGES_META in self.dirty:
            totals = {lang: n for lang, n in self.totals.most_common() if n > 0}
            store.set_meta(LANGUAGE_TOTALS_META, json.dumps(totals, ensure_ascii=False))
        self.dirty.clear()

    @staticmethod
    def reset(store: Store) -> None:
        """Every count empty (a store cleared for a full reindex, whose files are all stored and counted again)."""
        for key in (UNREAD_META, LANGUAGES_META, LANGUAGE_TOTALS_META):
            store.set_meta(key, "{}")
