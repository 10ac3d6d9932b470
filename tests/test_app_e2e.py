"""End to end: ``streamlit run app.py`` headless, opened in Debian's Chromium through playwright.

Uses the real model and the shipped demo workspace (what ``make app`` shows). Screenshots go to ``test-artifacts/``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# (url path, what must appear once the page has finished, screenshot name)
PAGES = [
    ("search", '[data-testid="stDataFrame"]', "search"),
    ("index", '[data-testid="stDataFrame"]', "index"),
    ("fusion", '[data-testid="stDataFrame"]', "fusion"),
    ("sweeps", '[data-testid="stPlotlyChart"]', "sweeps"),
    ("evaluation", '[data-testid="stDataFrame"]', "evaluation"),
]

pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"Debian's chromium is not installed at "
                                 f"{CHROMIUM} (make chromium, or apt-get install chromium)")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    """The app on a free local port, on its default data: the shipped demo workspace (as ``make app`` runs it)."""
    port = _free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    cmd = [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.headless", "true",
           "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
           "--server.fileWatcherType", "none"]
    ARTIFACTS.mkdir(exist_ok=True)
    log = open(ARTIFACTS / "streamlit.log", "w")
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=1).read() == b"ok":
                break
        except OSError:
            time.sleep(0.3)
    else:
        proc.terminate()
        pytest.fail("streamlit did not start; see test-artifacts/streamlit.log")
    yield url
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


def _open(browser, url: str, selector: str, shot: str, timeout_ms: int = 240_000) -> float:  # noqa: ANN001
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    t0 = time.perf_counter()
    page.goto(url)
    page.wait_for_selector('[data-testid="stSidebar"]', timeout=timeout_ms)
    page.wait_for_selector(selector, state="attached", timeout=timeout_ms)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stSpinner\"]')", timeout=timeout_ms)
    elapsed = time.perf_counter() - t0
    page.wait_for_timeout(800)  # let charts finish drawing before the screenshot
    page.screenshot(path=str(ARTIFACTS / f"{shot}.png"), full_page=True)
    errors = page.locator('[data-testid="stException"]').all_inner_texts()
    page.close()
    assert not errors, f"{shot}: exception shown in the page: {errors[0][:500]}"
    return elapsed


def test_search_inspector_shows_results(server, browser):  # noqa: ANN001
    elapsed = _open(browser, server, '[data-testid="stDataFrame"]', "search")
    assert (ARTIFACTS / "search.png").stat().st_size > 10_000
    print(f"search inspector ready in {elapsed:.1f}s")


@pytest.mark.parametrize("path,selector,shot", PAGES[1:], ids=[p[0] for p in PAGES[1:]])
def test_every_page_renders(server, browser, path, selector, shot):  # noqa: ANN001
    elapsed = _open(browser, f"{server}/{path}", selector, shot)
    print(f"{path} ready in {elapsed:.1f}s")

