"""A workspace's own labels: storage and undo, TREC pools, query-log suggestions, imports, the loader, the gate, the
tomlkit writer and the ``labels`` CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hybridmem.config import PRESETS, SourcesConfig, load_settings
from hybridmem.config.write import ranking_changes, write_ranking
from hybridmem.embeddings.fake import HashEmbedder
from hybridmem.errors import DatasetError
from hybridmem.eval.datasets import load_dataset
from hybridmem.eval.labels import (
    LabelStore, has_labels, labels_dir, parse_citation, parse_lines, pool, pool_configs, unjudged,
)
from hybridmem.eval.labelsources import import_labels, logged_queries
from hybridmem.index import MemoryIndex
from hybridmem.querylog import QueryLog, log_path
from hybridmem.sources import discover

FILES = {
    "MEMORY.md": "# Memory\n\nLinh prefers the Gruvbox theme.\n",
    "memory/2026-01-02.md": "# Jan 2\n\nRenewed the TLS certificate.\nIt expires in March.\n",
    "memory/ops.md": "# Ops\n\nRetry backoff: 3 attempts.\n",
}


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    for rel, text in FILES.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    return tmp_path


def rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_judge_writes_demo_format_replaces_overlaps_and_undo_restores(ws):
    s = LabelStore(ws)
    s.judge("tls renewal", "memory/2026-01-02.md", 1, 4)
    s.judge("tls renewal", "memory/2026-01-02.md", 3, 3, grade=2)  # narrowed: replaces the overlapping judgment
    s.judge("editor theme", "MEMORY.md", 3, 3, grade=0)
    assert [(q["id"], q["text"], q["split"]) for q in rows(labels_dir(ws) / "queries.jsonl")] == [
        ("u001", "tls renewal", "test"), ("u002", "editor theme", "test")]
    assert rows(labels_dir(ws) / "judgments.jsonl") == [
        {"query_id": "u001", "path": "memory/2026-01-02.md", "start_line": 3, "end_line": 3, "grade": 2},
        {"query_id": "u002", "path": "MEMORY.md", "start_line": 3, "end_line": 3, "grade": 0}]
    assert s.counts() == {"queries": 2, "labeled": 1, "judgments": 2, "relevant": 1}
    assert s.undo() and [j.grade for j in s.judgments()] == [2]  # the not-relevant judgment is gone
    assert s.undo() and [j.grade for j in s.judgments()] == [2] and len(s.queries()) == 1  # its query too
    assert s.undo() and [(j.start_line, j.end_line) for j in s.judgments()] == [(1, 4)]
    s.delete_query("u001")
    assert s.queries() == [] and s.judgments() == []
    with pytest.raises(DatasetError, match="1-based"):
        s.judge("q", "MEMORY.md", 5, 2)


def test_labels_load_as_a_dataset_only_with_a_relevant_judgment_and_are_never_indexed(ws):
    s = LabelStore(ws)
    s.judge("editor theme", "MEMORY.md", 3, 3, grade=0)
    assert not has_labels(ws)
    with pytest.raises(DatasetError, match="no labeled query"):
        load_dataset(ws)
    s.judge("tls renewal", "memory/2026-01-02.md", 3, 3)
    ds = load_dataset(ws)
    assert ds.workspace == ws.resolve() and [q.id for q in ds.queries] == ["u002"]
    assert dict(ds.qrels) == {"u002": {"memory/2026-01-02.md#L3-L3": 1}}
    cfg = SourcesConfig(extra_paths=(".",), session_paths=(".",))  # even when told to look everywhere
    assert not any(".hybridmem-labels" in f.path for f in discover(ws, cfg))


def test_pool_is_the_union_of_four_runs_at_depth_ten(ws):
    idx = MemoryIndex(ws, index_path=":memory:", embedder=HashEmbedder())
    idx.sync()
    configs = pool_configs(PRESETS["default"])
    assert list(configs) == ["keyword", "vector", "current", "rrf"]
    assert {c.max_results for c in configs.values()} == {10} and {c.min_score for c in configs.values()} == {0.0}
    cands = idx.retrieve("TLS certificate", max(c.pool for c in configs.values()))
    items = pool(idx, cands, configs)
    assert sorted(i.citation for i in items) == ["MEMORY.md#L1-L3", "memory/2026-01-02.md#L1-L4", "memory/ops.md#L1-L3"]
    assert items[0].citation == "memory/2026-01-02.md#L1-L4" and items[0].runs["keyword"] == 1
    s = LabelStore(ws)
    s.judge("TLS certificate", "memory/2026-01-02.md", 3, 3)
    assert unjudged(items, s.judgments()) == 2


def test_logged_memory_gets_become_suggestions_and_nothing_is_judged_until_accepted(ws):
    log = QueryLog(log_path(ws))
    a = log.search("claude", "when does the TLS cert expire", {}, "h", [("memory/2026-01-02.md#L1-L4", 0.9),
                                                                       ("MEMORY.md#L1-L3", 0.2)])
    log.get("claude", "memory/2026-01-02.md", 3, 2)  # read lines 3-4
    log.get("claude", "memory/2026-01-02.md", 3, 2)  # the same read twice: one suggestion
    log.search("cursor", "retry policy", {}, "h", [("memory/ops.md#L1-L3", 0.7)])
    log.get("cursor", "memory/ops.md", None, None)  # no lines asked: the cited hit's lines
    logged = logged_queries(ws)
    assert [q.query for q in logged] == ["retry policy", "when does the TLS cert expire"]  # newest first
    assert [(s.citation, s.rank) for s in logged[1].suggestions] == [("memory/2026-01-02.md#L3-L4", 1)]
    assert [(s.citation, s.rank) for s in logged[0].suggestions] == [("memory/ops.md#L1-L3", 1)]
    assert logged[1].id == a["id"]
    assert not labels_dir(ws).exists()  # suggestions write nothing
    s = logged[1].suggestions[0]
    LabelStore(ws).judge(logged[1].query, s.path, s.start_line, s.end_line, source="log")  # a person accepts
    ds = load_dataset(ws)
    assert [q.text for q in ds.queries] == ["when does the TLS cert expire"]
    assert LabelStore(ws).queries()[0].source == "log"


def test_import_qmd_beir_and_demo_formats(ws, tmp_path_factory):
    src = tmp_path_factory.mktemp("src")
    (src / "qmd.json").write_text(json.dumps({"queries": [
        {"id": "a", "query": "tls", "expected_files": ["memory/2026-01-02.md", "missing.md"], "type": "exact"}]}))
    rep = import_labels(src / "qmd.json", ws)
    assert (rep.format, rep.queries, rep.judgments) == ("qmd", 1, 1) and "missing.md" in rep.skipped[0]
    beir = src / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "queries.jsonl").write_text(json.dumps({"_id": "7", "text": "retry"}) + "\n")
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n7\tmemory/ops.md\t2\n")
    assert import_labels(beir, ws).judgments == 1
    demo = src / "demo"
    demo.mkdir()
    (demo / "queries.jsonl").write_text(json.dumps({"id": "q1", "text": "theme"}) + "\n")
    (demo / "judgments.jsonl").write_text(json.dumps({"query_id": "q1", "path": "MEMORY.md", "start_line": 3,
                                                      "end_line": 3, "grade": 2}) + "\n")
    assert import_labels(demo / "judgments.jsonl", ws).format == "demo"
    assert [(j.path, j.start_line, j.end_line, j.grade, j.whole_file) for j in LabelStore(ws).judgments()] == [
        ("memory/2026-01-02.md", 1, 4, 1, True), ("memory/ops.md", 1, 3, 2, True), ("MEMORY.md", 3, 3, 2, False)]
    ds = load_dataset(ws)
    assert ds.evidence["memory/ops.md#L1-L3"].whole and len(ds.queries) == 3
    with pytest.raises(DatasetError, match="cannot import"):
        import_labels(src, ws)
    with pytest.raises(DatasetError, match="^cannot import .*nosuch.json: it does not exist$"):
        import_labels(src / "nosuch.json", ws)


def test_whole_file_units_match_any_chunk_of_the_file():
    from hybridmem.eval.datasets import Evidence
    from hybridmem.eval.units import judged_units

    ev = {"a.md#L1-L90": Evidence("a.md", 1, 90, whole=True)}
    assert judged_units(["b.md", "a.md"], [1, 2], [1, 40], [9, 60], {"a.md#L1-L90": 1}, ev, "evidence") == (
        ["chunk:1", "a.md#L1-L90"], {"a.md#L1-L90": 2})


def test_parse_lines_and_citations():
    assert parse_lines("5-9", (1, 2)) == (5, 9) and parse_lines("L7", (1, 2)) == (7, 7) and parse_lines("", (1, 2)) == (1, 2)
    with pytest.raises(DatasetError):
        parse_lines("9-5", (1, 1))
    assert parse_citation("m/a.md#L5-L9") == ("m/a.md", 5, 9) and parse_citation("a.md#L3") == ("a.md", 3, 3)


def test_write_ranking_keeps_comments_and_other_settings(tmp_path):
    original = "# mine\n[embedding]\nprovider = \"none\"  # laptop\n\n[ranking]\n# tuned by hand\nrrf_k = 30\n"
    (tmp_path / "hybridmem.toml").write_text(original)
    wanted = load_settings(workspace=tmp_path).ranking.replace(fusion="rrf", min_score=0.01, rrf_k=30)
    changes = ranking_changes(wanted, tmp_path)
    assert changes == {"fusion": "rrf", "min_score": 0.01}
    diff = write_ranking(tmp_path, changes)
    assert "+fusion = \"rrf\"" in diff and "+min_score = 0.01" in diff
    assert (tmp_path / "hybridmem.toml").read_text() == original + "fusion = \"rrf\"\nmin_score = 0.01\n"
    s = load_settings(workspace=tmp_path)
    assert (s.ranking.fusion, s.ranking.rrf_k, s.ranking.min_score, s.embedding.provider) == ("rrf", 30, 0.01, "none")


def test_running_server_ranks_with_the_saved_settings_on_its_next_call(ws):
    from hybridmem.serve.service import MemoryService

    (ws / "hybridmem.toml").write_text("[embedding]\nprovider = \"none\"\n")
    svc = MemoryService(ws, preload=False, watch=False)
    try:
        first = svc.index.settings.ranking.fusion
        svc.search("TLS", client="t")
        write_ranking(ws, {"fusion": "rrf", "min_score": 0.0})
        svc.search("TLS", client="t")
        assert (first, svc.index.settings.ranking.fusion) == ("joint", "rrf")
    finally:
        svc.close()


def test_labels_cli_import_and_list(ws, tmp_path_factory, capsys):
    from hybridmem.cli import main

    src = tmp_path_factory.mktemp("src") / "qmd.json"
    src.write_text(json.dumps({"queries": [{"query": "tls", "expected_files": ["memory/2026-01-02.md"]}]}))
    assert main(["labels", "import", str(src), str(ws)]) == 0
    capsys.readouterr()
    assert main(["labels", "list", str(ws), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["labeled"], out["queries"][0]["text"], out["queries"][0]["evidence"]) == (
        1, "tls", ["memory/2026-01-02.md#L1-L4 (file)"])
    assert (out["queries"][0]["split"], out["queries"][0]["category"]) == ("test", "")
    demo = src.parent / "demo"  # the demo set's format carries each query's split and category
    demo.mkdir()
    (demo / "queries.jsonl").write_text(json.dumps({"id": "d1", "text": "cert renewal", "split": "train",
                                                    "category": "ops"}) + "\n")
    (demo / "judgments.jsonl").write_text(json.dumps({"query_id": "d1", "path": "memory/2026-01-02.md",
                                                      "start_line": 1, "end_line": 2}) + "\n")
    assert main(["labels", "import", str(demo), str(ws)]) == 0
    capsys.readouterr()
    assert main(["labels", "list", str(ws)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "1 rel / 0 not  [test]  tls" in lines[1] and "1 rel / 0 not  [train] [ops]  cert renewal" in lines[3]
    with pytest.raises(SystemExit):  # only the action is required: `labels list` takes no path
        main(["labels"])
    assert "required: action (see" in capsys.readouterr().err


@pytest.mark.parametrize("name, damage, why", [
    ("judgments.jsonl", "{oops\n", "judgments.jsonl:2: not valid JSON"),
    ("judgments.jsonl", '{"query_id": "u001", "start_line": 1, "end_line": 2}\n', "row 2 is malformed"),
    ("judgments.jsonl", '{"query_id": "u001", "path": "MEMORY.md", "start_line": "a", "end_line": 2}\n',
     "row 2 is malformed"),
    ("queries.jsonl", '{"id": "u050"}\n', "row 2 is malformed: expected an object with id and text"),
])
def test_a_damaged_label_file_is_one_line_on_every_command(ws, capsys, name, damage, why):
    """A label file edited by hand: `labels list` and `eval` gave a Python traceback (a KeyError, a ValueError)."""
    from hybridmem.cli import main

    LabelStore(ws).judge("tls renewal", "memory/2026-01-02.md", 3, 3)
    with open(labels_dir(ws) / name, "a", encoding="utf-8") as fh:
        fh.write(damage)
    before = {p: p.read_bytes() for p in ws.rglob("*.md")}
    for argv, said in ((["labels", "list", str(ws)], why), (["eval", "--dataset", str(ws), "--keyword-only"], name)):
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert said in err and err.count("\n") == 1, (argv, err)
    assert {p: p.read_bytes() for p in ws.rglob("*.md")} == before


def test_a_label_file_saved_in_utf16_and_a_broken_meta_are_one_line(ws, capsys):
    from hybridmem.cli import main

    LabelStore(ws).judge("tls renewal", "memory/2026-01-02.md", 3, 3)
    q = labels_dir(ws) / "queries.jsonl"
    q.write_text(q.read_text(encoding="utf-8"), encoding="utf-16")
    for argv in (["labels", "list", str(ws)], ["eval", "--dataset", str(ws), "--keyword-only"]):
        capsys.readouterr()
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "queries.jsonl is not UTF-8 text: save it as UTF-8" in err and err.count("\n") == 1, err
    (labels_dir(ws) / "meta.json").write_text("{not json", encoding="utf-8")
    q.write_text('{"id": "u001", "text": "tls renewal"}\n', encoding="utf-8")
    capsys.readouterr()
    assert main(["eval", "--dataset", str(ws), "--keyword-only"]) == 2
    assert "meta.json is not a JSON object" in capsys.readouterr().err


def test_labels_that_no_longer_match_the_workspace_are_refused_or_reported(ws):
    """A duplicate query id counted one query twice; a judgment on a deleted note, or on lines a shortened note no
    longer has, lowered every score without a word."""
    s = LabelStore(ws)
    s.judge("tls renewal", "memory/2026-01-02.md", 3, 3)
    s.judge("retry backoff", "memory/ops.md", 3, 3)
    s.judge("editor theme", "MEMORY.md", 3, 3)
    (ws / "memory" / "ops.md").unlink()
    (ws / "MEMORY.md").write_text("# Memory\n", encoding="utf-8")
    notes = load_dataset(ws).notes
    assert any(n.startswith("Relevant judgments name 1 file the workspace no longer holds (memory/ops.md)")
               for n in notes), notes
    assert any(n.startswith("1 span of relevant judgments start past the file's last line (MEMORY.md#L3-L3)")
               for n in notes), notes
    with open(labels_dir(ws) / "queries.jsonl", "a", encoding="utf-8") as fh:
        fh.write('{"id": "u001", "text": "another"}\n')
    with pytest.raises(DatasetError, match="query id 'u001' appears twice"):
        load_dataset(ws)


def test_labels_and_the_gate_refuse_what_they_would_ignore(ws, tmp_path, capsys):
    """`labels import FILE /no/such/dir` said it imported 0 judgments; `eval gate --keyword-only` wrote e5's
    figures as the keyword-only baseline."""
    from hybridmem.cli import main

    src = tmp_path / "qmd.json"
    src.write_text(json.dumps({"queries": [{"query": "tls", "expected_files": ["memory/2026-01-02.md"]}]}))
    for argv, why in ((["labels", "import", str(src), str(tmp_path / "nope")], "workspace folder not found"),
                      (["labels", "list", str(tmp_path / "nope")], "workspace folder not found"),
                      (["eval", "gate", "--suite", str(ws), "--keyword-only", "--update-baseline"],
                       "eval gate takes its models and settings from the suite, not --keyword-only")):
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert why in err and err.count("\n") == 1, err
    assert not (labels_dir(ws) / "baseline.json").exists()
