"""Shared fixtures: small inline workspaces, a counting embedder, and the demo workspace indexed once with MiniLM."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

# Locally hypothesis explores new random cases on every run (that is how the fuzz tests find bugs); in CI the same
# thousands of cases run in a fixed order, so a landing is never blocked by a case no one has seen yet.
hypothesis_settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    hypothesis_settings.load_profile("ci")

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Never the real user cache (~/.cache/hybridmem): the shared embedding cache and e5's ONNX graph go to a folder of
# this test run (subprocesses inherit it), removed when the run ends. HYBRIDMEM_TEST_CACHE_DIR keeps one between runs.
_CACHE_DIR = os.environ.get("HYBRIDMEM_TEST_CACHE_DIR")
if not _CACHE_DIR:
    _CACHE_DIR = tempfile.mkdtemp(prefix="hm-cache-")
    atexit.register(shutil.rmtree, _CACHE_DIR, ignore_errors=True)
os.environ["HYBRIDMEM_CACHE_DIR"] = _CACHE_DIR

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "datasets" / "demo-memory"


def write(root: Path, rel: str, text: str) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return p


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "# Memory\n\nLinh prefers dark mode.\nThe payment_processor retries with retry_backoff_ms = 250.\n")
    write(ws, "memory/2026-05-01.md", "# 2026-05-01\n\nMet Tanaka about thanh toán hóa đơn.\n支付处理器的重试策略已更新。\n")
    write(ws, "memory/2026-06-01.md", "# 2026-06-01\n\n決済サービスの再試行を修正した。\nการชำระเงินล้มเหลวเมื่อวานนี้\n")
    write(ws, "memory/topics/cars.md", "# Cars\n\nThe mechanic swapped the timing belt on the Civic in March.\n")
    write(ws, "notes/ignored.md", "not a memory file\n")
    return ws


@pytest.fixture
def hash_embedder():
    from hybridmem.embeddings.fake import HashEmbedder

    return HashEmbedder(dims=64)


@pytest.fixture(scope="session")
def demo_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of the demo workspace (tests never write into the repository)."""
    dst = tmp_path_factory.mktemp("demo") / "workspace"
    shutil.copytree(DEMO / "workspace", dst, ignore=shutil.ignore_patterns(".hybridmem"))
    return dst


@pytest.fixture(scope="session")
def demo_index(demo_copy: Path):
    """The demo workspace indexed with the real all-MiniLM-L6-v2 model (one setting away from the default e5)."""
    from hybridmem.config import Settings
    from hybridmem.index import MemoryIndex

    idx = MemoryIndex(demo_copy, settings=Settings().override(embedding={"provider": "local"}))
    idx.sync()
    yield idx
    idx.close()


@pytest.fixture(scope="module")
def demo_eval(tmp_path_factory: pytest.TempPathFactory):
    """The labeled demo set in an Evaluator with the counting hash embedder (no model), index in a temp cache."""
    from hybridmem.embeddings.fake import HashEmbedder
    from hybridmem.eval.datasets import load_dataset
    from hybridmem.eval.runner import Evaluator

    ev = Evaluator(load_dataset("demo"), embedder=HashEmbedder(dims=64), cache=tmp_path_factory.mktemp("c"),
                   progress=False)
    yield ev
    ev.close()


from pgserver_fixture import pg_namespace, pg_url  # noqa: E402,F401  (the PostgreSQL backend suite's server)
