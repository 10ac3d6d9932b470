"""Short-lived processes exit cleanly (issue 18, defect 6): two searches and an immediate exit start background
builds (keyword postings, the int8 copy with its numba kernels, the ONNX copy of the query embedder) that must never
abort the interpreter at exit ("terminate called without an active exception", exit 134)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

CHILD = textwrap.dedent(
    """
    import sys
    from hybridmem.config import Settings
    from hybridmem.index import MemoryIndex
    real = sys.argv[2] == "model"
    s = Settings().override(store={"int8_min_rows": 1, "vector_search": "memory"})
    if real:
        idx = MemoryIndex(sys.argv[1], settings=s)
    else:
        from hybridmem.embeddings.fake import HashEmbedder
        idx = MemoryIndex(sys.argv[1], settings=s, embedder=HashEmbedder())
    idx.search("payment retry backoff")
    idx.search("timing belt of the car")  # the second call starts every background build
    print("searched", flush=True)
    """
)


def _workspace(root: Path) -> Path:
    (root / "memory").mkdir(parents=True)
    (root / "MEMORY.md").write_text("# Memory\nThe payment service retries with exponential backoff.\n")
    for i in range(40):
        (root / "memory" / f"n{i}.md").write_text(f"note {i}: the mechanic replaced the timing belt, payment {i}\n")
    return root


def _runs(ws: Path, kind: str, n: int) -> list[int]:
    codes = []
    for _ in range(n):
        out = subprocess.run([sys.executable, "-c", CHILD, str(ws), kind], capture_output=True, text=True, cwd=ROOT,
                             timeout=300)
        assert out.stdout.strip() == "searched", out.stderr[-2000:]
        codes.append(out.returncode)
        if out.returncode != 0:
            print(out.stderr[-2000:])
    return codes


def test_two_searches_and_exit_exits_0_every_time(tmp_path: Path) -> None:
    from hybridmem.embeddings.fake import HashEmbedder
    from hybridmem.index import MemoryIndex

    ws = _workspace(tmp_path / "ws")
    with MemoryIndex(ws, embedder=HashEmbedder()) as idx:
        idx.sync()
    assert _runs(ws, "hash", 10) == [0] * 10


@pytest.mark.slow
def test_two_searches_with_the_real_model_and_exit_exits_0_every_time(tmp_path: Path) -> None:
    from hybridmem.index import MemoryIndex

    ws = _workspace(tmp_path / "ws")
    with MemoryIndex(ws) as idx:
        idx.sync()
    codes = _runs(ws, "model", 5)
    print("\nexit codes (torch/ONNX export and numba builds at exit):", json.dumps(codes))
    assert codes == [0] * 5
