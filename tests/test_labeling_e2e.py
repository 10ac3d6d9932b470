"""The labeling flow in a real browser: ``streamlit run app.py`` headless, Debian's Chromium through playwright.

A fresh workspace (keyword-only index through its own ``hybridmem.toml``) is chosen in the sidebar, two queries are
typed and three hits marked relevant, the labels appear on disk, and the Evaluation page scores them (with the real
model, as ``make app`` runs). Screenshots go to ``test-artifacts/`` (``labeling.png``, ``labeling-evaluation.png``);
the click-to-saved and query-to-pool latencies are printed (``-s``) for the "how long to label ten queries" estimate.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from hybridmem.querylog import QueryLog, log_path

from test_app_e2e import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, browser, server  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"Debian's chromium is not installed at "
                                 f"{CHROMIUM} (make chromium, or apt-get install chromium)")]

FILES = {
    "MEMORY.md": "# Memory\n\nLinh prefers the Gruvbox theme in her editor.\nShe types on a split keyboard.\n",
    "memory/2026-01-02.md": "# Jan 2\n\nRenewed the TLS certificate for api.example.com.\nIt expires in March.\n",
    "memory/2026-02-10.md": "# Feb 10\n\nThe TLS handshake failed on staging: wrong certificate chain.\n",
    "memory/ops.md": "# Ops\n\nRetry backoff for payments: 3 attempts, 2 s apart.\nDeploys are blue-green.\n",
}
IDLE = ("() => document.querySelector('[data-testid=\"stApp\"]')?.getAttribute('data-test-script-state') "
        "=== 'notRunning' && !document.querySelector('[data-testid=\"stSpinner\"]')")


def _settle(page, timeout_ms: int = 240_000) -> None:  # noqa: ANN001
    """Wait until the script has finished its rerun (Streamlit marks the app root)."""
    page.wait_for_timeout(150)
    page.wait_for_function(IDLE, timeout=timeout_ms)


def _judgments(ws: Path) -> int:
    f = ws / ".hybridmem-labels" / "judgments.jsonl"
    return len(f.read_text().splitlines()) if f.is_file() else 0


def _wait_for(cond, timeout: float = 60.0) -> float:  # noqa: ANN001
    t0 = time.perf_counter()
    while not cond():
        if time.perf_counter() - t0 > timeout:
            raise AssertionError("timed out")
        time.sleep(0.05)
    return time.perf_counter() - t0


def test_label_two_queries_in_the_browser_then_evaluate(server, browser, tmp_path):  # noqa: F811
    ws = tmp_path / "ws"
    for rel, text in FILES.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text, encoding="utf-8")
    (ws / "hybridmem.toml").write_text("[embedding]\nprovider = \"none\"\n")
    log = QueryLog(log_path(ws))
    log.search("claude-code", "when does the api certificate expire", {}, "h", [("memory/2026-01-02.md#L1-L4", 0.9)])
    log.get("claude-code", "memory/2026-01-02.md", 3, 2)
    log.search("cursor", "payment retry policy", {}, "h", [("memory/ops.md#L1-L4", 0.8)])
    page = browser.new_page(viewport={"width": 1500, "height": 1300})
    page.goto(server)
    page.wait_for_selector('[data-testid="stSidebar"]', timeout=240_000)
    _settle(page)  # on a loaded machine the first run may still be drawing the sidebar: its selectbox is not visible
    source = page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').first
    source.wait_for(state="visible", timeout=240_000)
    source.click()
    page.get_by_role("option", name="Your folder or BEIR directory").click()
    page.get_by_role("textbox", name="Folder path").fill(str(ws))
    page.get_by_role("textbox", name="Folder path").press("Enter")
    page.wait_for_selector("text=Type a query", timeout=120_000)
    _settle(page)

    clicks, loads = [], []
    for query, n_relevant in (("TLS certificate", 2), ("editor theme", 1)):
        t0 = time.perf_counter()
        page.get_by_role("textbox", name="Query", exact=True).fill(query)
        page.get_by_role("textbox", name="Query", exact=True).press("Enter")
        page.get_by_role("tab", name="Label (pooled)").wait_for(timeout=120_000)
        _settle(page)
        loads.append(time.perf_counter() - t0)
        for i in range(n_relevant):
            before = _judgments(ws)
            page.get_by_role("tab", name="Label (pooled)").click()  # the first label adds the query picker above
            page.wait_for_selector("text=still unjudged", timeout=60_000)
            page.get_by_role("tabpanel").get_by_role("button", name="Relevant", exact=True).nth(i).click()
            try:
                clicks.append(_wait_for(lambda: _judgments(ws) == before + 1))
            except AssertionError:
                page.screenshot(path=str(ARTIFACTS / "labeling-failed.png"), full_page=True)
                raise AssertionError(f"query {query!r}, click {i}: no judgment saved (see labeling-failed.png)")
            _settle(page)
    page.get_by_role("tab", name="Label (pooled)").click()
    page.wait_for_timeout(800)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "labeling.png"), full_page=True)
    assert not page.locator('[data-testid="stException"]').all_inner_texts()
    rows = [json.loads(x) for x in (ws / ".hybridmem-labels" / "judgments.jsonl").read_text().splitlines()]
    assert [(r["query_id"], r["grade"]) for r in rows] == [("u001", 1), ("u001", 1), ("u002", 1)]

    page.get_by_role("link", name="Agent queries").click()
    page.wait_for_selector("text=suggested relevant", timeout=60_000)
    _settle(page)
    page.screenshot(path=str(ARTIFACTS / "agent-queries.png"), full_page=True)
    page.get_by_role("link", name="Evaluation").click()  # same session: the sidebar keeps the folder
    page.wait_for_selector("text=labeled queries", timeout=240_000)
    page.wait_for_selector('[data-testid="stDataFrame"]', state="attached", timeout=240_000)
    _settle(page)
    page.wait_for_timeout(800)
    page.screenshot(path=str(ARTIFACTS / "labeling-evaluation.png"), full_page=True)
    text = page.inner_text("body")
    assert "2 labeled queries" in text and "Only 2 labeled queries" in text
    assert not page.locator('[data-testid="stException"]').all_inner_texts()
    page.close()
    print(f"query typed -> pool shown: {', '.join(f'{x:.2f}' for x in loads)} s; "
          f"click -> judgment on disk: {', '.join(f'{x:.2f}' for x in clicks)} s")
