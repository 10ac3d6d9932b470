"""The CI gate fails when a metric drops beyond its tolerance and passes when it does not; the CLI exits non-zero."""

from __future__ import annotations

import json

import pytest

from hybridmem.cli import main
from hybridmem.eval.gate import GateError, GateResult, check_baseline, gate


def beir_folder(root):
    (root / "qrels").mkdir(parents=True)
    docs = [("d1", "apple banana orchard"), ("d2", "cherry blossom"), ("d3", "durian smell"), ("d4", "mango season")]
    (root / "corpus.jsonl").write_text("".join(json.dumps({"_id": i, "title": "", "text": t}) + "\n" for i, t in docs))
    qs = [("q1", "cherry"), ("q2", "apple"), ("q3", "durian mango")]
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in qs))
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\r\nq1\td2\t1\r\nq2\td3\t1\r\nq3\td4\t1\r\n")
    return root


@pytest.fixture
def suite(tmp_path):
    data = beir_folder(tmp_path / "tiny")
    path = tmp_path / "suite.toml"
    path.write_text(f"""tolerance = 0.01
[settings.embedding]
provider = "none"
[[check]]
dataset = "{data.as_posix()}"
split = "test"
configs = ["keyword"]
metrics = ["ndcg@10", "recall@10"]
[check.tolerances]
"recall@10" = 0.05
""")
    return path


def test_gate_passes_then_fails_on_a_drop(suite, tmp_path, monkeypatch):
    monkeypatch.setenv("HYBRIDMEM_CACHE", str(tmp_path / "cache"))
    baseline = tmp_path / "baseline.json"
    with pytest.raises(GateError, match="--update-baseline"):
        gate(suite, baseline, progress=False)
    made = gate(suite, baseline, update=True, progress=False)
    assert made.passed
    saved = json.loads(baseline.read_text())["values"]
    key = "tiny/test/keyword/ndcg@10"
    # q1 finds d2 at rank 1; q2 finds d1 (not d3); q3 finds d3 and d4 (BM25 order decides): recall@10 = 2/3
    assert saved["tiny/test/keyword/recall@10"] == {"value": pytest.approx(2 / 3, abs=1e-6), "tolerance": 0.05}
    assert saved[key]["tolerance"] == 0.01

    ok = gate(suite, baseline, progress=False)
    assert ok.passed and ok.failures == []

    # a baseline above today's value by more than the tolerance means today's value dropped
    saved[key]["value"] += 0.02
    baseline.write_text(json.dumps({"values": saved}))
    bad = gate(suite, baseline, progress=False)
    assert not bad.passed
    assert len(bad.failures) == 1 and bad.failures[0].startswith(key)

    # within tolerance passes
    saved[key]["value"] -= 0.015
    baseline.write_text(json.dumps({"values": saved}))
    assert gate(suite, baseline, progress=False).passed


def test_cli_gate_exit_codes_name_the_metric(suite, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HYBRIDMEM_CACHE", str(tmp_path / "cache"))
    baseline = tmp_path / "b.json"
    assert main(["eval", "gate", "--suite", str(suite), "--baseline", str(baseline), "--update-baseline"]) == 0
    assert main(["eval", "gate", "--suite", str(suite), "--baseline", str(baseline)]) == 0
    data = json.loads(baseline.read_text())
    data["values"]["tiny/test/keyword/recall@10"]["value"] = 0.9
    baseline.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["eval", "gate", "--suite", str(suite), "--baseline", str(baseline)]) == 1
    out, err = capsys.readouterr()
    assert "tiny/test/keyword/recall@10 dropped from 0.9000 to 0.6667" in err
    assert out.splitlines()[-1].endswith(": 1 metric dropped beyond tolerance")  # singular, and what failed
    data["values"]["tiny/test/keyword/ndcg@10"]["value"] = 1.0
    baseline.write_text(json.dumps(data))
    assert main(["eval", "gate", "--suite", str(suite), "--baseline", str(baseline)]) == 1
    assert capsys.readouterr().out.splitlines()[-1].endswith(": 2 metrics dropped beyond tolerance")


def test_check_baseline_reports_new_and_missing_keys():
    failures, lines = check_baseline({"a": 0.5, "new": 0.1}, {"values": {"a": {"value": 0.5, "tolerance": 0.0},
                                                                         "gone": {"value": 0.3}}})
    assert failures == ["gone is in the baseline but was not measured (suite changed? rerun with --update-baseline)"]
    assert any(line.startswith("NEW   new") for line in lines)
    kinds: dict[str, int] = {}
    check_baseline({"a": 0.4, "b": 0.1}, {"values": {"a": {"value": 0.5, "tolerance": 0.0}, "gone": {"value": 0.3}},
                                        "queries": {"d/test": 3}}, {"d/test": 5}, kinds)
    assert kinds == {"dropped": 1, "unmeasured": 1, "queries": 1}
    assert GateResult({}, {}, ["x"] * 3, [], 0.0, kinds).summary == (
        "the labeled queries changed since the baseline (added or removed) and 1 baseline metric no longer measured "
        "(the suite changed?): rerun with --update-baseline; 1 metric dropped beyond tolerance")


def test_cli_gate_fails_when_the_queries_changed_since_the_baseline(suite, tmp_path, monkeypatch, capsys):
    """The baseline keeps how many queries each dataset/split was measured on: labels added since make the same
    metric another figure, which the gate says instead of comparing; a baseline without the counts still works."""
    monkeypatch.setenv("HYBRIDMEM_CACHE", str(tmp_path / "cache"))
    baseline = tmp_path / "b.json"
    assert main(["eval", "gate", "--suite", str(suite), "--baseline", str(baseline), "--update-baseline"]) == 0
    data = json.loads(baseline.read_text())
    assert data["queries"] and all(isinstance(n, int) and n > 0 for n in data["queries"].values())
    assert main(["eval", "gate", "--suite", str(suite), "--baseline", str(baseline)]) == 0
    key = next(iter(data["queries"]))
    data["queries"][key] += 4
    baseline.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["eval", "gate", "--suite", str(suite), "--baseline", str(baseline)]) == 1
    out, err = capsys.readouterr()
    assert f"{key} was measured on {data['queries'][key] - 4} queries, the baseline on {data['queries'][key]}" in err
    # every metric is as good as the baseline's: the summary says the labels changed, not that a metric dropped
    summary = out.splitlines()[-1]
    assert summary.startswith("gate FAILED") and "dropped" not in summary, summary
    assert summary.endswith(": the labeled queries changed since the baseline (added or removed): rerun with "
                            "--update-baseline"), summary
    del data["queries"]  # a baseline from before the counts were kept
    baseline.write_text(json.dumps(data))
    assert main(["eval", "gate", "--suite", str(suite), "--baseline", str(baseline)]) == 0


def test_cli_eval_json_shape(suite, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HYBRIDMEM_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "tiny"
    out = tmp_path / "r" / "report.md"
    assert main(["eval", "--dataset", str(data), "--keyword-only", "--config", "keyword", "rrf",
                 "--metrics", "ndcg@10", "recall@10", "--json", "--out", str(out)]) == 0
    js = json.loads(capsys.readouterr().out)
    assert js["dataset"] == "tiny" and js["queries"] == 3
    assert set(js["configs"]) == {"keyword", "rrf"}
    assert js["configs"]["keyword"]["recall@10"] == pytest.approx(0.6667, abs=1e-4)
    assert out.is_file() and out.with_suffix(".json").is_file()
    assert "| keyword |" in out.read_text()
    assert main(["eval", "--dataset", str(data), "--config", "nope"]) == 2


def test_cli_sweep_json(suite, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HYBRIDMEM_CACHE", str(tmp_path / "cache"))
    assert main(["sweep", "--dataset", str(tmp_path / "tiny"), "--keyword-only", "--base", "keyword",
                 "--param", "bm25_norm=minmax,rank", "--param", "min_score=0,0.5", "--json"]) == 0
    js = json.loads(capsys.readouterr().out)
    assert js["split"] == "all" and len(js["rows"]) == 4
    assert {r["bm25_norm"] for r in js["rows"]} == {"minmax", "rank"}
    assert main(["sweep", "--dataset", str(tmp_path / "tiny"), "--param", "bogus=1"]) == 2
    capsys.readouterr()
    # a value that is no number, a fraction where a whole number goes, an unknown fusion: one line, before retrieval
    for bad in ("vector_weight=a,b", "rrf_k=abc", "candidate_multiplier=2.5", "fusion=bogus"):
        assert main(["sweep", "--dataset", "no-such-dataset", "--param", bad]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "no-such-dataset" not in err, (bad, err)


def test_sweep_grid_defaults_to_the_shipped_default(suite, tmp_path, monkeypatch, capsys):
    """Without --base the grid changes the shipped default (what a user runs), and the output says which base."""
    monkeypatch.setenv("HYBRIDMEM_CACHE", str(tmp_path / "cache"))
    assert main(["sweep", "--dataset", str(tmp_path / "tiny"), "--keyword-only", "--param", "min_score=0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["base"] == "default"
    assert main(["sweep", "--dataset", str(tmp_path / "tiny"), "--keyword-only", "--param", "min_score=0"]) == 0
    assert "--base default" in capsys.readouterr().out


@pytest.mark.slow
def test_ci_suite_passes_against_its_baseline():
    """The real CI gate (the default model, e5; the index is cached under .cache/ or $HYBRIDMEM_CACHE after the first run)."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    res = gate(root / "eval" / "suites" / "ci.toml", root / "eval" / "baselines" / "ci.json", progress=False)
    assert res.passed, "\n".join(res.failures)


def test_eval_on_a_users_folder_says_what_is_wrong_in_one_line(tmp_path, monkeypatch, capsys):
    """A malformed judgments file, a folder without labels, a path that does not exist, a gate on a folder: one
    line each, exit 2 (tracebacks before, or an 'unknown dataset' list that never mentions labels)."""
    monkeypatch.setenv("HYBRIDMEM_CACHE", str(tmp_path / "cache"))
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "n1.md").write_text("# n1\nline two\nline three\n")
    q = tmp_path / "q.jsonl"
    q.write_text('{"id": "q1", "text": "line two"}\n')
    cases = {'{"query_id": "q1", "path": "memory/n1.md", "start_line": "six", "end_line": 3}': "judgment 1 is malformed",
             "[1, 2]": "j.jsonl:1: expected a JSON object, got [1, 2]",
             '{"query_id": "q1", "path": "memory/n1.md", "start_line": 9, "end_line": 2}': "has start_line 9 and end_line 2"}
    for row, why in cases.items():
        j = tmp_path / "j.jsonl"
        j.write_text(row + "\n")
        capsys.readouterr()
        assert main(["eval", "--dataset", str(ws), "--queries", str(q), "--judgments", str(j), "--keyword-only"]) == 2
        err = capsys.readouterr().err
        assert why in err and err.count("\n") == 1, err
    for argv, why in ((["eval", "--dataset", str(ws), "--keyword-only"], "has no labels yet"),
                      (["eval", "--dataset", str(tmp_path / "nope")], "(no such file or folder)"),
                      (["eval", "gate", "--suite", str(ws)], "is a folder without labels"),
                      (["eval", "--dataset", str(ws), "--queries", str(q)], "--queries needs --judgments beside it")):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert why in err and err.count("\n") == 1, err


def test_an_unknown_config_name_lists_every_name_eval_takes(tmp_path):
    from hybridmem.eval.gate import GateError, resolve_check_configs

    with pytest.raises(GateError, match=r"unknown config 'nosuch': expected one of default, .*, workspace$"):
        resolve_check_configs(["default", "nosuch"], tmp_path)
    assert list(resolve_check_configs(["rrf", "workspace"], tmp_path)) == ["rrf", "workspace"]


def test_an_out_path_ending_in_json_keeps_the_markdown_beside_it(suite, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HYBRIDMEM_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "r" / "report.json"
    assert main(["eval", "--dataset", str(tmp_path / "tiny"), "--keyword-only", "--config", "keyword",
                 "--metrics", "ndcg@10", "--split", "all", "--out", str(out)]) == 0
    assert "| keyword |" in out.with_suffix(".md").read_text() and json.loads(out.read_text())["split"] == "all"
