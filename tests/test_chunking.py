from __future__ import annotations

from hypothesis import given, settings, strategies as st

from hybridmem.chunking import chunk_text, sha256, split_lines
from hybridmem.config import ChunkingConfig


def cfg(tokens: int, overlap: int) -> ChunkingConfig:
    return ChunkingConfig(tokens=tokens, overlap=overlap, chars_per_token=1)


def test_small_text_is_one_chunk_with_1_based_lines():
    (c,) = chunk_text("a\nb\nc\n")
    assert (c.start_line, c.end_line, c.text) == (1, 3, "a\nb\nc")
    assert c.hash == sha256("a\nb\nc")


def test_overlap_carries_whole_trailing_lines():
    text = "\n".join(f"line{i:02d}" for i in range(1, 11))  # 10 lines of 6 chars (7 with newline)
    chunks = chunk_text(text, cfg(tokens=21, overlap=7))  # 3 lines per chunk, 1 line overlap
    spans = [(c.start_line, c.end_line) for c in chunks]
    assert spans == [(1, 3), (3, 5), (5, 7), (7, 9), (9, 10)]
    assert chunks[1].text.splitlines()[0] == chunks[0].text.splitlines()[-1]


def test_no_overlap():
    text = "\n".join(f"line{i:02d}" for i in range(1, 7))
    assert [(c.start_line, c.end_line) for c in chunk_text(text, cfg(21, 0))] == [(1, 3), (4, 6)]


def test_long_line_is_split_and_keeps_its_number():
    chunks = chunk_text("short\n" + "x" * 25 + "\nend", cfg(10, 0))
    assert [(c.start_line, c.end_line) for c in chunks] == [(1, 1), (2, 2), (2, 2), (2, 3)]
    assert all(len(c.text) <= 10 for c in chunks)


def test_empty_chunks_dropped():
    assert chunk_text("\n\n   \n") == []
    assert chunk_text("") == []


def test_line_map_maps_back_to_source_lines():
    (c,) = chunk_text("User: hi\nAssistant: hello", line_map=[3, 7])
    assert (c.start_line, c.end_line) == (3, 7)


def test_split_lines_matches_a_viewer():
    assert split_lines("a\r\nb\rc\nd\x0ce\n") == ["a", "b", "c", "d\x0ce"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="ab \t", max_size=40), max_size=60), st.integers(8, 60), st.integers(0, 7))
def test_every_nonblank_line_is_covered_and_chunks_are_bounded(lines, tokens, overlap):
    c = cfg(tokens, min(overlap, tokens - 1))
    chunks = chunk_text("\n".join(lines), c)
    covered = set()
    for ch in chunks:
        assert 1 <= ch.start_line <= ch.end_line <= len(lines)
        assert len(ch.text) <= c.max_chars
        covered.update(range(ch.start_line, ch.end_line + 1))
    for i, line in enumerate(lines, start=1):
        if line.strip():
            assert i in covered
