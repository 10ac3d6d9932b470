"""What a file's bytes are: binary or text, and which encoding text is read in (:func:`hybridmem.sources.read_text`
reads with it; ``memory_get`` and ``memory_write`` refuse alike). Pure; no I/O."""

from __future__ import annotations

import re

__all__ = ["BINARY", "BINARY_HEAD", "bom_encoding", "is_binary", "skipped_as_binary", "text_encoding"]

BINARY = "binary file skipped"
# A file is binary when NUL bytes and bytes that are not UTF-8 make up more than this share of its first 8 KB (and
# more than BINARY_MIN_BYTES of them): images, archives, databases and UTF-16 text are far above it; a note with a stray
# NUL or a few Latin-1 accents is text (the NUL is replaced by U+FFFD and named in a warning, never a reason to drop
# the whole file).
BINARY_SHARE = 0.10
BINARY_MIN_BYTES = 16
BINARY_HEAD = 8192  # how many of a file's first bytes decide


def is_binary(head: bytes) -> bool:
    """Whether a file starting with ``head`` is binary (see :data:`BINARY_SHARE`).

    Example:
        >>> is_binary(b"# notes\\n\\nfine\\x00 text\\n"), is_binary(b"\\x89PNG\\r\\n\\x1a\\n" + bytes(range(256)))
        (False, True)
    """
    invalid = head.decode("utf-8", errors="replace").count("\ufffd") - head.count(b"\xef\xbf\xbd")
    bad = head.count(0) + invalid
    return bad > BINARY_MIN_BYTES and bad > BINARY_SHARE * len(head)


def skipped_as_binary(data: bytes) -> bool:
    """Whether :func:`read_text` skips a file whose bytes start with ``data`` as binary: no UTF-16 or UTF-32 byte
    order mark, and :func:`is_binary` over its first 8 KB (what ``memory_get`` and ``memory_write`` refuse alike)."""
    return bom_encoding(data) is None and is_binary(data[:BINARY_HEAD])


_WIDE_BOMS = {b"\xff\xfe\x00\x00": "utf-32", b"\x00\x00\xfe\xff": "utf-32", b"\xff\xfe": "utf-16",
              b"\xfe\xff": "utf-16"}
_HIGH = bytes(range(0x80, 0x100))
_UTF8_CHAR = re.compile(rb"[\xc2-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2}|[\xf0-\xf4][\x80-\xbf]{3}")


def bom_encoding(data: bytes) -> str | None:
    return _WIDE_BOMS.get(data[:4]) or _WIDE_BOMS.get(data[:2])


def text_encoding(data: bytes) -> str:
    """How a note's bytes are read: ``utf-32``/``utf-16`` by their byte order mark, else ``utf-8``, or ``cp1252``
    (Windows-1252, a superset of Latin-1's letters) when most of its non-ASCII bytes are not UTF-8 characters.

    Example:
        >>> [text_encoding(s.encode(e)) for s, e in (("café", "utf-8"), ("« déjà »", "cp1252"), ("ok", "utf-16"))]
        ['utf-8', 'cp1252', 'utf-16']
    """
    wide = bom_encoding(data)
    if wide or data.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte order mark says UTF-8 whatever stray bytes follow
        return wide or "utf-8"
    try:
        data.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError:
        pass
    chars = _UTF8_CHAR.findall(data)
    stray = len(data) - len(data.translate(None, _HIGH)) - sum(map(len, chars))  # high bytes in no UTF-8 character
    return "cp1252" if stray > len(chars) else "utf-8"
