"""What a second pair of eyes found on the query path (2026-12-07): a ranx fusion that crashed when one leg found
nothing, a path prefix with a lone surrogate that crashed the keyword leg, and a path prefix typed in the other
Unicode form than the folder on disk that found nothing. Each test fails before its fix."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest

from hybridmem.config import Settings
from hybridmem.index import MemoryIndex
from hybridmem.ranking.fusion import ScoredLeg, ranx_fusion

KEYWORD_ONLY = Settings().override(embedding={"provider": "none"})


@pytest.mark.parametrize("method", ["combsum", "combmnz", "isr", "bordafuse", "wsum"])
def test_a_ranx_fusion_with_a_leg_that_found_nothing_fuses_the_other(method: str) -> None:
    """A query the keyword leg misses and the vector leg finds: ranx refused the empty run (`max() arg is an empty
    sequence`) and every ranx fusion failed the search."""
    empty = ScoredLeg("keyword", 1.0, (), (), ())
    found = ScoredLeg("vector", 1.0, (7, 3), (0.9, 0.4), (1, 2))
    fused = ranx_fusion([empty, found], method)
    assert sorted(fused, key=fused.get, reverse=True) == [7, 3]


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    folder = ws / "memory" / unicodedata.normalize("NFD", "Việt")  # as macOS keeps a name
    folder.mkdir(parents=True)
    (folder / "ghi.md").write_text("# ghi\n\nquokka sống ở Úc, payment notes too\n", encoding="utf-8")
    (ws / "memory" / "other.md").write_text("# other\n\nthe payment runbook\n", encoding="utf-8")
    return ws


def test_a_path_prefix_with_a_lone_surrogate_matches_nothing_and_raises_nothing(ws: Path) -> None:
    with MemoryIndex(ws, settings=KEYWORD_ONLY) as idx:
        idx.sync()
        assert idx.search("payment", path_prefix="memory/\ud800", answer_threshold=0.0).results == ()
        assert idx.search("payment", session="\ud800", answer_threshold=0.0).results == ()


@pytest.mark.parametrize("form", ["NFC", "NFD"])
def test_a_path_prefix_in_either_unicode_form_finds_the_folder(ws: Path, form: str) -> None:
    """The prefix was compared as typed: `memory/Việt/` typed composed missed the folder the file system keeps
    decomposed, though `memory_get` reads either form."""
    with MemoryIndex(ws, settings=KEYWORD_ONLY) as idx:
        idx.sync()
        hits = idx.search("quokka payment", path_prefix=unicodedata.normalize(form, "memory/Việt/"),
                          answer_threshold=0.0).results
    assert [unicodedata.normalize("NFC", h.path) for h in hits] == ["memory/Việt/ghi.md"]


def test_a_keyword_only_search_with_nothing_to_search_says_why(ws: Path, tmp_path: Path) -> None:
    """A keyword-only index said "the keyword search found no candidate" for a path prefix no file matches and for
    an empty index, where an index with vectors says that nothing was searched and why; and "neither search found a
    candidate" where neither ran."""
    from hybridmem.tools import nothing_found

    with MemoryIndex(ws, settings=KEYWORD_ONLY) as idx:
        idx.sync()
        assert "No indexed file matches the search's scope" in nothing_found(idx.search("payment", path_prefix="nope/"))
        assert "No search ran" in nothing_found(idx.search("payment", text_weight=0.0))
    (tmp_path / "empty" / "memory").mkdir(parents=True)
    with MemoryIndex(tmp_path / "empty", settings=KEYWORD_ONLY) as idx:
        idx.sync()
        assert "The index holds no memory files" in nothing_found(idx.search("payment"))
