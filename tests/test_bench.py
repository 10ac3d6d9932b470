"""``hybridmem bench``: correctness only (no timing assertions). One ``--quick`` run with the fake hash embedder
produces every required figure; the retrieve-once sweep must score exactly what re-running search scores; the
quantized vector path must keep recall; the JSON is a flat mapping of numbers; the Markdown has the table."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from hybridmem.bench import GROUPS, REQUIRED
from hybridmem.bench.common import first_occurrence, percentiles
from hybridmem.bench.report import ROWS, markdown
from hybridmem.bench.sweep import grid
from hybridmem.cli import main


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    root = tmp_path_factory.mktemp("bench")
    out = root / "out"
    code = main(["bench", "--quick", "--hash-embedder", "--no-isolate", "--cache-dir", str(root / "cache"),
                 "--out", str(out), "--json"])
    assert code == 0
    return json.loads((out / "bench-quick.json").read_text(encoding="utf-8")), out


def test_json_is_a_flat_mapping_with_every_required_figure(quick_run: tuple[dict, Path]) -> None:
    figures, _ = quick_run
    missing = [k for k in REQUIRED if k not in figures]
    assert not missing
    assert all(isinstance(v, (int, float)) or v is None for v in figures.values())
    for k in REQUIRED:
        assert figures[k] is not None and math.isfinite(figures[k]), k
    assert figures["quick"] == 1.0
    for g in GROUPS:
        assert f"peak_rss_mb_{g}" in figures


def test_quality_figures_are_sane(quick_run: tuple[dict, Path]) -> None:
    f, _ = quick_run
    for k in ("keyword_ndcg10_scifact", "bm25s_ndcg10_scifact", "rank_bm25_ndcg10_scifact", "sweep_best_ndcg10"):
        assert 0.3 < f[k] <= 1.0, k  # 40 SciFact queries over their judged documents plus 400 others
    assert 0.0 <= f["vector_recall10_quantized"] <= 1.0
    assert f["vector_recall10_quantized_synthetic_1k"] >= 0.95  # 800 of 1,000 random rows rescored
    assert f["sqlitevec_knn_recall10_1k"] == 1.0 and f["sqlitevec_knn_recall10_5k"] == 1.0  # both are exact
    assert f["warm_resync_chunks"] > 0 and f["index_embedded"] == f["index_chunks"]
    assert 0 < f["delete_half_s"] < f["resync_cold_hash_s"]  # removing half costs less than storing all
    assert f["transcript_chunks"] > 100 and f["transcript_regrown_s"] > 0 and f["transcript_reread_s"] > 0


def test_sweep_after_retrieval_scores_exactly_what_search_scores(quick_run: tuple[dict, Path]) -> None:
    f, _ = quick_run
    assert f["sweep_research_same_ndcg"] == 1.0


def test_in_memory_keyword_leg_equals_fts5_on_scifact(quick_run: tuple[dict, Path]) -> None:
    f, _ = quick_run
    assert f["keyword_memory_same_as_fts5"] == 1.0  # every query: same ids, ranks and bm25 scores


def test_markdown_has_every_row_and_the_peer_beside_it(quick_run: tuple[dict, Path]) -> None:
    _, out = quick_run
    text = (out / "bench-quick.md").read_text(encoding="utf-8")
    assert "| figure | engine | peer | peer value | engine / peer | target | met |" in text
    for what, *_ in ROWS:
        assert f"| {what} |" in text
    assert "| keyword throughput, SciFact |" in text and "| rank_bm25 |" in text


def test_markdown_ratio_and_target_by_hand() -> None:
    md = markdown({"keyword_qps_scifact": 400.0, "bm25s_qps_scifact": 800.0, "keyword_ndcg10_scifact": 0.6,
                   "bm25s_ndcg10_scifact": 0.75})
    assert "| keyword throughput, SciFact | 400 q/s | bm25s (batch) | 800 q/s | 0.5 | >= 300 | yes |" in md
    assert "| keyword nDCG@10, SciFact | 0.6 | bm25s | 0.75 | 0.8 | >= 0.68 | **no** |" in md


def test_first_occurrence_maps_chunks_to_documents() -> None:
    assert first_occurrence(["a", "b", "a", "c", "b", "d"], k=3) == {"a": 3.0, "b": 2.0, "c": 1.0}


def test_percentiles_by_hand() -> None:
    p50, p95 = percentiles([1.0, 2.0, 3.0, 4.0, 100.0])
    assert p50 == 3.0 and p95 == pytest.approx(4.0 + 0.8 * 96.0)
    assert all(math.isnan(x) for x in percentiles([]))


def test_sweep_grid_is_100_distinct_valid_configs() -> None:
    configs = grid()
    assert len(configs) == 100 and len(set(configs)) == 100
    assert {c.fusion for c in configs} == {"joint", "rrf"}  # the default's order, and RRF
    assert max(c.pool for c in configs) == 200


def test_unknown_group_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--only", "vectors,nope"]) == 2
    assert "unknown bench group(s) nope" in capsys.readouterr().err


def test_numpy_peer_equals_engine_exact_search() -> None:
    from hybridmem.bench.vectors import numpy_topk
    from hybridmem.retrieve.vectors import VectorMatrix

    rng = np.random.default_rng(3)
    m = rng.standard_normal((2000, 32)).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    vm = VectorMatrix(np.arange(2000), m, ["memory"] * 2000, ["p"] * 2000)
    for q in m[:10]:
        assert numpy_topk(m, q).tolist() == [c for c, _ in vm.search(q, 10)]


def test_backends_group_measures_both_engines(quick_run: tuple[dict, Path]) -> None:
    f, _ = quick_run
    for engine in ("sqlite", "postgres"):
        assert f[f"backend_{engine}_sync_chunks_per_s_1k"] > 0
        for clients in ("1c", "16c"):
            assert 0 < f[f"backend_{engine}_p50_ms_1k_{clients}"] <= f[f"backend_{engine}_p95_ms_1k_{clients}"]
    assert f["backend_postgres_hnsw_used_1k"] == 0.0  # 1k is below pg_hnsw_min_rows: exact
    assert f["backend_postgres_hnsw_recall10_1k"] == 1.0  # both searches exact
