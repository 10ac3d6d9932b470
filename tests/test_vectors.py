"""The in-memory vector matrix: exact search against brute force and sqlite-vec, the int8-bounded exact scan against
the float32 scan (its error bound, and equal results), the quantized path (int8 principal-subspace pre-filter + exact
rescoring) against exact search (synthetic clustered vectors, and real all-MiniLM-L6-v2 vectors in a slow test). The
int8 kernel is checked against float64 row by row and split across threads exactly as it runs alone."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridmem.store import Store
from hybridmem.retrieve.vectors import Int8Rows, VectorMatrix


def unit(rows: np.ndarray) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def clustered(n: int, dims: int = 64, centers: int = 20, spread: float = 0.6, seed: int = 0) -> np.ndarray:
    """Unit vectors around a few centres plus a shared offset, the shape real sentence embeddings have."""
    rng = np.random.default_rng(seed)
    c = rng.standard_normal((centers, dims)) + 1.5
    return unit(c[rng.integers(0, centers, n)] + spread * rng.standard_normal((n, dims)))


def matrix_of(vectors: np.ndarray, ids: np.ndarray | None = None, paths: list[str] | None = None,
              int8_min_rows: int = 0) -> VectorMatrix:
    """A matrix that scans float32 (the reference) unless ``int8_min_rows`` is set."""
    n = vectors.shape[0]
    ids = np.arange(1, n + 1, dtype=np.int64) if ids is None else ids
    paths = paths or [f"memory/{i % 3}.md" for i in range(n)]
    sources = ["sessions" if p.startswith("sessions/") else "memory" for p in paths]
    return VectorMatrix(ids, vectors, sources, paths, int8_min_rows=int8_min_rows)


def brute(vectors: np.ndarray, ids: np.ndarray, q: np.ndarray, k: int) -> list[tuple[int, float]]:
    scores = vectors.astype(np.float64) @ q.astype(np.float64)
    order = sorted(range(len(ids)), key=lambda i: (-scores[i], ids[i]))[:k]
    return [(int(ids[i]), float(scores[i])) for i in order]


# -- exact ---------------------------------------------------------------------------------------------------------
def test_exact_search_equals_brute_force() -> None:
    v = unit(np.random.default_rng(1).standard_normal((500, 32)))
    vm = matrix_of(v)
    for q in unit(np.random.default_rng(2).standard_normal((20, 32))):
        got = vm.search(q, 10)
        want = brute(v, vm.ids, q, 10)
        assert [c for c, _ in got] == [c for c, _ in want]
        np.testing.assert_allclose([s for _, s in got], [s for _, s in want], atol=1e-5)


def test_ties_are_broken_by_chunk_id() -> None:
    v = unit(np.array([[1, 0], [0, 1], [1, 0], [1, 0]], dtype=np.float32))
    vm = matrix_of(v, ids=np.array([40, 10, 30, 20]))
    assert [c for c, _ in vm.search(np.array([1.0, 0.0]), 3)] == [20, 30, 40]
    assert [c for c, _ in vm.search(np.array([1.0, 0.0]), 4)] == [20, 30, 40, 10]


def test_scoped_search_matches_brute_force_on_the_subset() -> None:
    v = unit(np.random.default_rng(3).standard_normal((300, 16)))
    paths = [("sessions/a.jsonl" if i % 4 == 0 else f"memory/{i % 5}.md") for i in range(300)]
    vm = matrix_of(v, paths=paths)
    q = v[7]
    keep = np.array([p.startswith("memory/3") for p in paths])
    want = brute(v[keep], vm.ids[keep], q, 5)
    assert [c for c, _ in vm.search(q, 5, path_prefix="memory/3")] == [c for c, _ in want]
    assert [c for c, _ in vm.search_quantized(q, 5, path_prefix="memory/3")] == [c for c, _ in want]
    sess = np.array([s == "sessions" for s in vm.sources])
    assert [c for c, _ in vm.search(q, 3, source="sessions")] == [c for c, _ in brute(v[sess], vm.ids[sess], q, 3)]
    assert vm.search(q, 3, path_prefix="nowhere/") == []
    assert vm.search_quantized(q, 3, path_prefix="nowhere/") == []


def test_k_larger_than_rows_and_empty_matrix() -> None:
    v = unit(np.eye(3))
    vm = matrix_of(v)
    assert [c for c, _ in vm.search(np.array([0.0, 1.0, 0.0]), 10)] == [2, 1, 3]
    empty = VectorMatrix(np.zeros(0, np.int64), np.zeros((0, 3), np.float32), [], [])
    assert empty.search(np.ones(3), 5) == [] and empty.search_quantized(np.ones(3), 5) == []


def test_search_batch_equals_search() -> None:
    v = unit(np.random.default_rng(4).standard_normal((400, 24)))
    vm = matrix_of(v)
    qs = unit(np.random.default_rng(5).standard_normal((70, 24)))  # more than one block of 64
    batch = vm.search_batch(qs, 7)
    one = [vm.search(q, 7) for q in qs]
    assert [[c for c, _ in r] for r in batch] == [[c for c, _ in r] for r in one]
    np.testing.assert_allclose([[s for _, s in r] for r in batch], [[s for _, s in r] for r in one], atol=1e-6)


# -- quantized path: int8 pre-filter in the principal subspace ----------------------------------------------------
@pytest.mark.parametrize("kernel", ["int8", "float32"])
def test_pca_prefilter_scores_are_q_dot_x_up_to_a_constant(kernel: str, monkeypatch) -> None:
    """With every principal component kept, the pre-filter's score is ``q . x`` shifted by one constant per query
    (``m . m - q . m``), so it orders rows as the exact scan does, up to int8 rounding; with fewer components it is
    the projection's. The basis is orthonormal and fitted without queries."""
    from hybridmem.retrieve.vectors import PcaPrefilter

    if kernel == "float32":  # no int8 kernel (numba missing): the projection is scanned in float32
        monkeypatch.setattr("hybridmem.retrieve.int8scan.load_kernels", lambda: None)
    v = clustered(3000, dims=48, centers=40, seed=51)
    full = PcaPrefilter.build(v, 48)
    np.testing.assert_allclose(full.basis.T @ full.basis, np.eye(48), atol=1e-5)
    assert (full.int8 is None) == (kernel == "float32" or Int8Rows.build(v[:2]) is None)
    tol = 1e-5 if full.int8 is None else 0.02
    for q in unit(np.random.default_rng(52).standard_normal((5, 48))):
        shift = full.scores(q) - v @ q
        assert np.ptp(shift) < tol, np.ptp(shift)
        np.testing.assert_allclose(shift.mean(), full.mean @ full.mean - q @ full.mean, atol=tol)
    assert PcaPrefilter.build(v, 8).basis.shape == (48, 8) and PcaPrefilter.build(v, 500).basis.shape == (48, 48)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 20_000), want=st.integers(1, 3000), seed=st.integers(0, 2**16), ties=st.booleans())
def test_top_rows_keeps_exactly_the_largest_in_row_order(n: int, want: int, seed: int, ties: bool) -> None:
    """The sampled-threshold selection returns the same multiset of scores as a full sort's top ``want``, sorted
    row indices, exactly ``min(want, n)`` of them; with heavy ties too (scores rounded to a few values)."""
    from hybridmem.retrieve.vectors import top_rows

    scores = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    if ties:
        scores = np.round(scores * 2) / 2
    rows = top_rows(scores, want)
    k = min(want, n)
    assert rows.shape[0] == k and np.all(np.diff(rows) > 0)
    np.testing.assert_array_equal(np.sort(scores[rows]), np.sort(scores)[n - k :])


def test_quantized_scoped_search_rescores_only_rows_in_scope() -> None:
    v = clustered(5000, dims=64, centers=50, seed=53)
    paths = [("sessions/" if i % 3 == 0 else "memory/") + f"{i % 5}.md" for i in range(len(v))]
    vm = matrix_of(v, paths=paths)
    ref = matrix_of(v, paths=paths)
    for q in v[:5] + 0.05:
        for scope in ({"source": "sessions"}, {"path_prefix": "memory/2"}, {"path_prefix": "nowhere/"}):
            got = vm.search_quantized(q, 10, rescore=500, **scope)
            allowed = {int(c) for c, p in zip(vm.ids, paths) if
                       (scope.get("source") is None or p.startswith("sessions/")) and
                       p.startswith(scope.get("path_prefix", ""))}
            assert {c for c, _ in got} <= allowed
            want = ref.search(q, 10, **scope)
            assert len(got) == len(want)
            assert len({c for c, _ in got} & {c for c, _ in want}) >= min(9, len(want))  # 500 of ~1,700 rescored


# -- int8-bounded exact scan ---------------------------------------------------------------------------------------
needs_int8 = pytest.mark.skipif(Int8Rows.build(np.ones((2, 4), np.float32)) is None,
                                reason="the int8 kernel (numba) is not available here")


@needs_int8
@pytest.mark.parametrize("kind", ["clustered", "random", "mixed scale"])
def test_int8_error_bound_holds_for_every_row(kind: str) -> None:
    rng = np.random.default_rng(20)
    if kind == "clustered":
        v = clustered(3000, dims=96, seed=21)
    else:
        v = unit(rng.standard_normal((3000, 96)))
    if kind == "mixed scale":  # not unit rows, a zero row, a query that is not unit either
        v = v * rng.uniform(0.01, 30, (3000, 1)).astype(np.float32)
        v[7] = 0.0
    rows = Int8Rows.build(v)
    assert rows is not None and rows.nbytes == v.shape[0] * (v.shape[1] + 4)  # int8 rows and a float32 scale each
    for q in list(rng.standard_normal((20, 96)).astype(np.float32) * 3) + list(clustered(10, dims=96, seed=22)):
        approx, bound = rows.scores(q)
        exact = v.astype(np.float64) @ q.astype(np.float64)
        assert np.all(np.abs(exact - approx) <= bound), float(np.max(np.abs(exact - approx) - bound))
        # and tight enough to prune: a few percent of the largest possible score
        assert np.median(bound) < 0.05 * np.linalg.norm(q) * np.linalg.norm(v, axis=1).max()


@needs_int8
def test_int8_scan_returns_the_exact_top_k() -> None:
    """Through ``search``: the int8 scan (built when the matrix is big enough) gives the float32 scan's ids and
    scores, scoped or not, and prunes to a short list of rows to rescore."""
    v = clustered(30_000, dims=64, centers=300, spread=0.5, seed=23)
    ids = np.random.default_rng(24).permutation(len(v)).astype(np.int64) + 5
    paths = [("sessions/" if i % 4 == 0 else "memory/") + f"{i % 7}.md" for i in range(len(v))]
    fast = matrix_of(v, ids=ids, paths=paths, int8_min_rows=20_000)
    ref = matrix_of(v, ids=ids, paths=paths)
    assert fast.int8 is not None and fast.int8_built and not ref.int8_built
    rng = np.random.default_rng(25)
    queries = list(v[rng.integers(0, len(v), 15)] + 0.1 * rng.standard_normal((15, 64)).astype(np.float32))
    queries += list(unit(rng.standard_normal((5, 64))))
    queries.append(np.zeros(64, dtype=np.float32))  # every bound ties: falls back to the full scan
    for q in queries:
        for scope in ({}, {"source": "sessions"}, {"path_prefix": "memory/3"}, {"path_prefix": "nowhere/"}):
            got, want = fast.search(q, 10, **scope), ref.search(q, 10, **scope)
            assert [c for c, _ in got] == [c for c, _ in want]
            np.testing.assert_allclose([s for _, s in got], [s for _, s in want], atol=1e-6)
        if q.any():
            assert fast.int8.candidates(q, 10)[0].shape[0] < len(v) // 10


def test_int8_copy_waits_for_the_second_search() -> None:
    """A one-shot search scans float32 and never builds the int8 copy; the second search starts it in the
    background; searches give the same results before and after it is ready."""
    v = clustered(2500, dims=32, seed=26)
    vm = matrix_of(v, int8_min_rows=2000)
    q = clustered(1, dims=32, seed=27)[0]
    first = vm.search(q, 10)
    assert not vm.int8_built
    second = vm.search(q, 10)
    for _ in range(200):  # the background build takes milliseconds here
        if vm.int8_built or Int8Rows.build(v[:2]) is None:
            break
        import time

        time.sleep(0.02)
    third = vm.search(q, 10)
    # the same rows in the same order; before the int8 copy (and its kernels) are loaded, scores come from one float32
    # product over the matrix and may differ from the gather kernel's in the last bit
    assert [c for c, _ in first] == [c for c, _ in second] == [c for c, _ in third]
    np.testing.assert_allclose([s for _, s in first], [s for _, s in third], atol=1e-6)
    assert matrix_of(v, int8_min_rows=0).int8 is None and matrix_of(v, int8_min_rows=5000).int8 is None


def test_quantized_with_full_rescoring_is_exact() -> None:
    v = clustered(2000, seed=6)
    vm = matrix_of(v)
    for q in clustered(10, seed=7):
        got, want = vm.search_quantized(q, 10, rescore=len(vm)), vm.search(q, 10)
        # same ids in the same order; a score computed over a subset of rows may differ in its last float32 bit
        assert [c for c, _ in got] == [c for c, _ in want]
        np.testing.assert_allclose([s for _, s in got], [s for _, s in want], atol=1e-6)


def test_quantized_recall_on_clustered_vectors() -> None:
    v = clustered(20_000, dims=128, centers=500, spread=0.5, seed=8)
    vm = matrix_of(v)
    rng = np.random.default_rng(9)
    qs = v[rng.integers(0, len(v), 100)] + 0.05 * rng.standard_normal((100, 128)).astype(np.float32)
    exact = [{c for c, _ in vm.search(q, 10)} for q in qs]
    approx = [{c for c, _ in vm.search_quantized(q, 10, rescore=400)} for q in qs]  # 2% of the rows rescored
    recall = np.mean([len(e & a) / 10 for e, a in zip(exact, approx)])
    assert recall >= 0.99


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 300), k=st.integers(1, 20), rescore=st.integers(1, 50), seed=st.integers(0, 2**16))
def test_quantized_results_carry_exact_scores_in_exact_order(n: int, k: int, rescore: int, seed: int) -> None:
    v = clustered(n, dims=16, seed=seed)
    vm = matrix_of(v)
    q = clustered(1, dims=16, seed=seed + 1)[0]
    got = vm.search_quantized(q, k, rescore=rescore)
    assert len(got) == min(k, n)
    exact = dict((c, s) for c, s in vm.search(q, n))
    for c, s in got:
        assert s == pytest.approx(exact[c], abs=1e-5)
    assert got == sorted(got, key=lambda cs: (-cs[1], cs[0]))
    # the best row found is never worse than any row it returned, and rescoring everything is exact
    full, want = vm.search_quantized(q, k, rescore=n), vm.search(q, k)
    assert [c for c, _ in full] == [c for c, _ in want]  # scores may differ in the last float32 bit (row subsets)
    np.testing.assert_allclose([s for _, s in full], [s for _, s in want], atol=1e-6)


# -- against sqlite-vec --------------------------------------------------------------------------------------------
def test_matrix_topk_equals_sqlite_vec_knn(tmp_path) -> None:  # noqa: ANN001
    store = Store(tmp_path / "idx.sqlite")
    if not store.vec_available:
        pytest.skip(f"sqlite-vec cannot load here: {store.vec_error}")
    dims = 48
    v = clustered(600, dims=dims, seed=10)
    store.ensure_vec_table(dims)
    with store.transaction():
        for f in range(0, 600, 50):
            chunks = [{"start_line": i + 1, "end_line": i + 1, "hash": hashlib.sha256(f"{f}-{i}".encode()).hexdigest(),
                       "text": f"chunk {f + i}", "tokens": f"chunk {f + i}", "timestamp": 0.0, "evergreen": True}
                      for i in range(50)]
            path = f"memory/f{f}.md"
            store.upsert_file({"path": path, "abspath": None, "source": "memory", "hash": path, "mtime": 0.0,
                               "size": 0, "date": None, "evergreen": 1}, chunks, list(v[f : f + 50]))
            store.cache_put("t", "m", "", {c["hash"]: v[f + i] for i, c in enumerate(chunks)})
    ids, mat, sources, paths = store.load_vectors("t", "m", "")
    vm = VectorMatrix(ids, mat, sources, paths)
    assert len(vm) == 600
    for q in clustered(15, dims=dims, seed=11):
        mine = vm.search(q, 10)
        knn = store.vector_knn(q, 10)
        assert [c for c, _ in mine] == [c for c, _ in knn]
        np.testing.assert_allclose([s for _, s in mine], [s for _, s in knn], atol=1e-5)
        assert [c for c, _ in vm.search_quantized(q, 10)] == [c for c, _ in knn]
        # source scoping runs inside sqlite-vec's KNN (an equality on a metadata column)
        assert [c for c, _ in vm.search(q, 5, source="memory")] == [c for c, _ in store.vector_knn(q, 5, "memory")]
    store.close()


@pytest.mark.slow
def test_quantized_recall_on_real_minilm_vectors() -> None:
    """Real all-MiniLM-L6-v2 vectors of SciFact sentences: recall@10 of the int8 PCA pre-filter + rescoring >= 0.99
    against exact, rescoring 20% of 1,500 rows (the bench measures SciFact's 8,860 chunk vectors at 1% and more: see
    eval/bench/bench.md)."""
    import json
    import re

    from hybridmem.embeddings.local import SentenceTransformerEmbedder
    from hybridmem.eval.datasets.base import data_dir

    root = data_dir("scifact")
    sents: list[str] = []
    with open(root / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            sents += [s for s in re.split(r"(?<=[.!?])\s+", json.loads(line)["text"]) if len(s) > 30]
            if len(sents) >= 1500:
                break
    queries = [json.loads(line)["text"] for line in open(root / "queries.jsonl", encoding="utf-8")][:100]
    e = SentenceTransformerEmbedder()
    vm = matrix_of(e.embed_documents(sents[:1500]))
    qv = e.embed_documents(queries)
    exact = [{c for c, _ in vm.search(q, 10)} for q in qv]
    approx = [{c for c, _ in vm.search_quantized(q, 10, rescore=300)} for q in qv]
    recall = float(np.mean([len(a & b) / 10 for a, b in zip(exact, approx)]))
    assert recall >= 0.99, recall


@pytest.mark.parametrize("int8_min_rows", [0, 20_000])
def test_ties_at_the_kth_score_go_to_the_smallest_chunk_ids(int8_min_rows: int) -> None:
    """Duplicate rows tie exactly; whichever rows hold them, the top k are the tied rows with the smallest chunk ids
    (a partition alone keeps an arbitrary subset of a tie at the k-th place). Same for a zero query, where every row
    ties at 0, and through the int8 scan's two-phase rescoring."""
    rng = np.random.default_rng(31)
    base = unit(rng.standard_normal((30_000, 32)))
    dup = unit(rng.standard_normal((1, 32)))[0]
    dup_rows = rng.choice(len(base), 40, replace=False)
    base[dup_rows] = dup
    ids = rng.permutation(len(base)).astype(np.int64) + 1
    vm = matrix_of(base, ids=ids, int8_min_rows=int8_min_rows)
    if int8_min_rows:
        assert vm.int8 is not None or Int8Rows.build(base[:2]) is None
    want = sorted(int(i) for i in ids[dup_rows])[:10]
    assert [c for c, _ in vm.search(dup, 10)] == want
    assert [c for c, _ in vm.search(np.zeros(32, np.float32), 10)] == list(range(1, 11))


@needs_int8
def test_int8_kernel_split_over_threads_equals_one_pass() -> None:
    """Rows are scored by the same kernel whichever thread takes them: a scan split over threads is bit-identical to
    one pass, and both are within the float32 part of the bound of the float64 product."""
    from hybridmem.retrieve.int8scan import _UNIT_ROUNDOFF
    from hybridmem.retrieve.kernels import int8_scores, load_kernels

    rng = np.random.default_rng(61)
    w = rng.integers(-127, 128, (70_000, 200), dtype=np.int8)
    scale = rng.uniform(1e-4, 1e-2, 70_000).astype(np.float32)
    q = rng.standard_normal(200).astype(np.float32) * 3
    split = int8_scores(w, scale, q)
    whole = np.empty(70_000, np.float32)
    load_kernels().int8(w, scale, q, whole, 0, 70_000)
    assert np.array_equal(split, whole)
    exact = (w.astype(np.float64) @ q.astype(np.float64)) * scale
    gamma = 201 * _UNIT_ROUNDOFF / (1 - 201 * _UNIT_ROUNDOFF)
    limit = gamma * (np.abs(w.astype(np.float64)) @ np.abs(q.astype(np.float64))) * scale
    assert np.all(np.abs(split - exact) <= limit)


@needs_int8
def test_kernels_refuse_a_query_of_the_wrong_width_and_rows_out_of_range() -> None:
    """The compiled kernels do not bounds-check, so their wrappers do: a mismatched query or row index is an error,
    never a read past the matrix."""
    from hybridmem.retrieve.kernels import gathered_scores, int8_scores

    m = unit(np.random.default_rng(71).standard_normal((100, 16)))
    rows = Int8Rows.build(m)
    with pytest.raises(ValueError, match="shape"):
        int8_scores(rows.w, rows.scale, np.ones(17, np.float32))
    with pytest.raises(ValueError, match="shape"):
        gathered_scores(m, np.arange(3), np.ones(8, np.float32))
    with pytest.raises(IndexError):
        gathered_scores(m, np.array([0, 100]), np.ones(16, np.float32))
    with pytest.raises(IndexError):
        gathered_scores(m, np.array([-1]), np.ones(16, np.float32))
    np.testing.assert_allclose(gathered_scores(m, np.array([5, 2]), m[0]), m[[5, 2]] @ m[0], atol=1e-6)
