"""The workbench's pages answer at their own URLs (issue 18, defect 12: ``/search`` showed "Page not found").

Streamlit serves the default page at ``/`` whatever ``url_path`` it was given, so a menu link or a shared
``/search`` URL found no page. The app runs under ``AppTest``; the pages it hands to ``st.navigation`` are recorded.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
SEEN: list = []


def test_every_page_has_its_own_url_and_search_answers_at_slash_search(monkeypatch: pytest.MonkeyPatch) -> None:
    real = st.navigation

    def recording_navigation(pages, **kwargs):  # noqa: ANN001, ANN003, ANN202
        SEEN[:] = [(p.url_path, p._default, p._visibility, Path(p._page).relative_to(ROOT).as_posix())
                   for p in pages]
        chosen = real(pages, **kwargs)
        chosen.run = lambda: None  # the page itself is test_app.py's business (and loads the model)
        return chosen

    monkeypatch.setattr(st, "navigation", recording_navigation)
    monkeypatch.chdir(ROOT)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.run()
    assert not at.exception
    assert [url for url, *_ in SEEN] == ["", "search", "queries", "fusion", "sweeps", "evaluation", "index"]
    assert [url for url, default, *_ in SEEN if default] == [""]
    search = [(url, vis, path) for url, _, vis, path in SEEN if url in ("", "search")]
    assert search == [("", "visible", "hybridmem/workbench/search.py"),
                      ("search", "hidden", "hybridmem/workbench/search.py")]  # one menu entry, two URLs
