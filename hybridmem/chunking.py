"""Line-based chunking with overlap by whole trailing lines.

Sizes are estimated tokens times ``chars_per_token`` (400 x 4 = 1600 chars, overlap 80 x 4 = 320 chars). Lines are
accumulated until the next one would pass the limit; the chunk is flushed and its trailing lines, up to the overlap
budget, start the next chunk. A line longer than the limit is split into limit-sized segments that keep its line number.

Example:
    >>> from hybridmem.config import ChunkingConfig
    >>> [(c.start_line, c.end_line) for c in chunk_text("a\\nb\\nc", ChunkingConfig(tokens=8, overlap=0, chars_per_token=1))]
    [(1, 3)]
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import Iterator, Sequence

from hybridmem.config import ChunkingConfig
from hybridmem.records import Chunk

_LINE_RE = re.compile(r"\r\n|\r|\n")


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def chunk_hash(text: str) -> str:
    """A chunk's key in the embedding caches: the sha256 of its text in Unicode NFC, the form the e5 provider
    embeds (``embeddings/e5.py: _clean``), so a note saved decomposed (macOS, some Vietnamese keyboards) shares the
    vector of the same text composed, and never reuses a vector embedded before that normalization."""
    return sha256(unicodedata.normalize("NFC", text))


def _segments(lines: Sequence[str], max_chars: int) -> Iterator[tuple[int, str]]:
    for number, line in enumerate(lines, start=1):
        if len(line) <= max_chars:
            yield number, line
        else:
            for i in range(0, len(line), max_chars):
                yield number, line[i : i + max_chars]


def _make(buf: list[tuple[int, str]], line_map: Sequence[int] | None) -> Chunk | None:
    text = "\n".join(seg for _, seg in buf)
    if not text.strip():
        return None
    start, end = buf[0][0], buf[-1][0]
    if line_map is not None:
        start, end = line_map[start - 1], line_map[end - 1]
    return Chunk(start_line=start, end_line=end, text=text, hash=chunk_hash(text))


def chunk_lines(
    lines: Sequence[str], config: ChunkingConfig | None = None, line_map: Sequence[int] | None = None
) -> list[Chunk]:
    """Chunk already split lines. ``line_map[i]`` is the source line number of ``lines[i]`` (default ``i + 1``)."""
    cfg = config or ChunkingConfig()
    max_chars, overlap_chars = cfg.max_chars, cfg.overlap_chars
    chunks: list[Chunk] = []
    buf: list[tuple[int, str]] = []
    size = 0  # characters in buf, counting one newline per segment
    for number, seg in _segments(lines, max_chars):
        seg_size = len(seg) + 1
        if buf and size + seg_size > max_chars:
            chunk = _make(buf, line_map)
            if chunk is not None:
                chunks.append(chunk)
            carried: list[tuple[int, str]] = []
            carried_size = 0
            for item in reversed(buf):
                item_size = len(item[1]) + 1
                if carried_size + item_size > overlap_chars:
                    break
                carried.insert(0, item)
                carried_size += item_size
            while carried and carried_size + seg_size > max_chars:
                carried_size -= len(carried.pop(0)[1]) + 1
            buf, size = carried, carried_size
        buf.append((number, seg))
        size += seg_size
    if buf:
        chunk = _make(buf, line_map)
        if chunk is not None:
            chunks.append(chunk)
    return chunks


def split_lines(text: str) -> list[str]:
    """Lines as a file viewer numbers them: split on ``\n``, ``\r\n`` or ``\r`` only (not on form feeds etc.)."""
    lines = _LINE_RE.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def chunk_text(text: str, config: ChunkingConfig | None = None, line_map: Sequence[int] | None = None) -> list[Chunk]:
    """Chunk ``text`` by lines (``\\n``, ``\\r\\n`` or ``\\r``)."""
    return chunk_lines(split_lines(text), config, line_map)
