"""Counts in words: a number and its noun in the right number, for every message the CLI, the workbench and the
warnings print ("1 file", "2 files"; "line 4", "lines 4, 9")."""

from __future__ import annotations

from typing import Iterable


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
    citation and a terminal cannot hold), shown with its bytes escaped; None for a readable name.

    Example:
        >>> unreadable_name("memory/bad\\udcffname.md"), unreadable_name("memory/café.md")
        ('memory/bad\\\\xffname.md: skipped, its file name is not UTF-8 text; rename it to index it', None)
    """
    try:
        key.encode("utf-8")
        return None
    except UnicodeEncodeError:
        shown = key.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        return f"{shown}: skipped, its file name is not UTF-8 text; rename it to index it"
