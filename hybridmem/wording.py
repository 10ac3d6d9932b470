"""Counts in words: a number and its noun in the right number, for every message the CLI, the workbench and the
warnings print ("1 file", "2 files"; "line 4", "lines 4, 9"); and the few phrases two of them share."""

from __future__ import annotations

import unicodedata

from typing import Iterable

# What a question was asked across languages of, per route (Ranking.routed_across), as `search --explain` and the
# workbench's inspector say it.
ACROSS_WORDS = {"top": "its top passages", "nearest": "its nearest passage, or its top passages in several scripts"}


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1 (the CLI's and the workbench's counts).

    Example:
        >>> counted(1, "file"), counted(0, "chunk"), counted(2, "labeled query"), counted(3, "day")
        ('1 file', '0 chunks', '2 labeled queries', '3 days')
    """
    if n == 1:
        return f"{n} {noun}"
    return f"{n} {noun[:-1]}ies" if noun.endswith("y") and noun[-2:-1] not in "aeiou" else f"{n} {noun}s"


def numbered(noun: str, numbers: Iterable[int], more: str = "") -> str:
    """``noun`` and the numbers it names, plural unless there is one number and nothing ``more`` ("and later").

    Example:
        >>> numbered("line", [4]), numbered("line", [4, 9]), numbered("line", [4], " and later")
        ('line 4', 'lines 4, 9', 'lines 4 and later')
    """
    shown = [str(x) for x in numbers]
    return f"{noun}{'' if len(shown) == 1 and not more else 's'} {', '.join(shown)}{more}"


def unreadable_name(key: str) -> str | None:
    """The warning for a file whose name is not UTF-8 text (bytes the file system took as a name, which the index, a
    citation and a terminal cannot hold), shown with its bytes escaped, or holds a backslash or a control character
    such as a line break (a citation could not name it: ``memory_get`` reads a backslash as a folder's separator);
    None for a readable name.

    Example:
        >>> unreadable_name("memory/bad\\udcffname.md"), unreadable_name("memory/café.md")
        ('memory/bad\\\\xffname.md: skipped, its file name is not UTF-8 text; rename it to index it', None)
        >>> unreadable_name("memory/home\\\\network.md")
        "'memory/home\\\\\\\\network.md': skipped, its file name holds a backslash or a control character, which a citation cannot name; rename it to index it"
    """
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        shown = key.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        return f"{shown}: skipped, its file name is not UTF-8 text; rename it to index it"
    if "\\" in key or any(unicodedata.category(ch) == "Cc" for ch in key):
        return (f"{key!r}: skipped, its file name holds a backslash or a control character, which a citation cannot "
                "name; rename it to index it")
    return None


def get_cut(shown: int, total: int, next_from: int | None, by: str, limit: int, cut_line: int | None = None) -> str:
    """What ``hybridmem get`` and ``memory_get`` say beside a reply they cut at ``sources.get_max_lines`` (``by``
    "lines": no count was asked) or ``sources.get_max_chars`` (``by`` "chars"), and where to read on (``next_from``,
    None past the end); ``cut_line``: a line longer than the cap, cut itself.

    Example:
        >>> print(get_cut(400, 2000, 401, "lines", 400))  # doctest: +NORMALIZE_WHITESPACE
        cut at 400 of 2000 lines (sources.get_max_lines, when no count is asked); read on from line 401
        (memory_get from=401, hybridmem get --from 401)
        >>> get_cut(1, 1, None, "chars", 40000, cut_line=1)
        'line 1 was cut at its first 40000 characters (sources.get_max_chars); the rest of it cannot be read with get'
    """
    if cut_line is not None:
        said = (f"line {cut_line} was cut at its first {limit} characters (sources.get_max_chars); the rest of it "
                "cannot be read with get")
    elif by == "lines":
        said = f"cut at {shown} of {counted(total, 'line')} (sources.get_max_lines, when no count is asked)"
    else:
        said = f"cut at {limit} characters, after {counted(shown, 'line')} (sources.get_max_chars)"
    return said + (f"; read on from line {next_from} (memory_get from={next_from}, hybridmem get --from {next_from})"
                   if next_from is not None else "")


def brief(value: object, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters: an error never echoes a megabyte a client sent.

    Example:
        >>> brief("x" * 100, 10), brief(10 ** 400), brief(3)
        ("'xxxxxxxx…", 'an integer of 401 digits', '3')
    """
    if isinstance(value, int) and abs(value) >= 10 ** limit:  # repr of a huge int is slow, or refused past 4,300 digits
        return f"an integer of {len(str(abs(value))) if value.bit_length() < 14_000 else 'over 4,000'} digits"
    shown = repr(value)
    return shown if len(shown) <= limit else shown[:limit - 1] + "…"
