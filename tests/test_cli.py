from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hybridmem.cli import main
from hybridmem.config import DEFAULT_PROVIDER, PROVIDER_MODELS
from tests.conftest import write


@pytest.fixture
def kw_workspace(workspace: Path) -> Path:
    write(workspace, "hybridmem.toml", '[embedding]\nprovider = "none"\n')
    return workspace


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_index_status_search_get_json(kw_workspace: Path, capsys):
    code, out, _ = run(capsys, "index", str(kw_workspace), "--json")
    data = json.loads(out)
    assert code == 0 and {"files", "chunks", "embedded", "cache_hits"} <= set(data) and data["files"] == 4
    code, out, _ = run(capsys, "status", str(kw_workspace), "--json")
    st = json.loads(out)
    assert {"files", "chunks", "provider", "model", "dims", "vector_backend", "fts_tokenizer"} <= set(st)
    assert st["vector_backend"] in ("sqlite-vec", "numpy") and st["provider"] == "none"
    code, out, _ = run(capsys, "search", "timing belt", str(kw_workspace), "--json")
    res = json.loads(out)
    assert {"results", "provider", "model", "fallback"} <= set(res)
    r0 = res["results"][0]
    assert {"path", "start_line", "end_line", "score", "snippet", "citation", "vector_score", "text_score"} <= set(r0)
    assert r0["citation"] == "memory/topics/cars.md#L1-L3"
    code, out, _ = run(capsys, "get", "memory/topics/cars.md", str(kw_workspace), "--from", "3", "--lines", "1")
    assert out.strip() == "The mechanic swapped the timing belt on the Civic in March."
    # the workspace after an option, as a user types it: argparse alone read it as an unrecognized argument
    code, out, _ = run(capsys, "search", "timing belt", "--json", str(kw_workspace))
    assert code == 0 and json.loads(out)["results"][0]["citation"] == "memory/topics/cars.md#L1-L3"
    code, out, _ = run(capsys, "get", "memory/topics/cars.md", "--from", "3", "--lines", "1", str(kw_workspace))
    assert out.strip() == "The mechanic swapped the timing belt on the Civic in March."
    # -n, as grep, head and most search tools write it
    wide = json.loads(run(capsys, "search", "the", str(kw_workspace), "--json", "--answer-threshold", "0")[1])
    code, out, _ = run(capsys, "search", "the", str(kw_workspace), "--json", "--answer-threshold", "0", "-n", "1")
    assert len(wide["results"]) > 1 and json.loads(out)["results"] == wide["results"][:1]
    with pytest.raises(SystemExit) as stop:  # two workspaces, or one beside an explicit ".", is still a mistake
        main(["search", "timing belt", ".", "--json", str(kw_workspace)])
    assert stop.value.code == 2 and "unrecognized arguments: " + str(kw_workspace) in capsys.readouterr().err


def test_status_says_how_many_files_changed_on_disk_since_the_last_sync(kw_workspace: Path, capsys):
    """``dirty`` was a flag of the process's own watcher, so a one-shot ``status`` read False after an edit."""
    run(capsys, "index", str(kw_workspace))
    code, out, err = run(capsys, "status", str(kw_workspace))
    assert code == 0 and re.search(r"dirty: False\n changed_on_disk: 0\n", out) and "changed on disk" not in err
    assert "vec_error: -" in out or "vec_error" not in out  # no Python None in the plain output
    p = kw_workspace / "memory/topics/cars.md"
    p.write_text(p.read_text() + "\nAlso replaced the brake pads.\n")
    code, out, err = run(capsys, "status", str(kw_workspace))
    assert code == 0 and re.search(r"dirty: True\n changed_on_disk: 1\n", out)
    assert "note: 1 file changed on disk since the last sync" in err
    assert json.loads(run(capsys, "status", str(kw_workspace), "--json")[1])["changed_on_disk"] == 1
    run(capsys, "index", str(kw_workspace))
    assert json.loads(run(capsys, "status", str(kw_workspace), "--json")[1])["changed_on_disk"] == 0


def test_status_lists_plain_values_not_python_reprs(tmp_path: Path, capsys):
    """`vectors` printed as Python's dict repr ({'embedded': 65, 'total': 65})."""
    ws = tmp_path / "ws"
    write(ws, "memory/a.md", "The payment service retries with exponential backoff.\n")
    run(capsys, "index", str(ws))
    code, out, _ = run(capsys, "status", str(ws))
    assert code == 0 and re.search(r"\n +vectors: 1 of 1 chunks embedded\n", out), out
    assert "{" not in out and "None" not in out


def test_search_explain_lists_every_candidate(kw_workspace: Path, capsys):
    code, out, _ = run(capsys, "search", "payment thanh toán", str(kw_workspace), "--explain", "--fusion", "rrf")
    assert code == 0 and "citation" in out and "status" in out and "fusion=rrf" in out
    assert "kept" in out


@pytest.mark.parametrize(
    "argv,message",
    [
        (["get", "../etc/passwd"], "escapes the memory root"),
        (["get", "memory/../../etc/passwd"], "escapes the memory root"),
        (["get", "/etc/passwd"], "absolute paths are refused"),
        (["search", "x", "/definitely/not/here"], "workspace not found"),
        (["search", "x", "--fusion", "bogus"], "bogus"),
    ],
)
def test_user_errors_are_one_line_and_exit_2(kw_workspace: Path, capsys, argv, message):
    if argv[0] == "get" or argv[-2] == "--fusion":
        argv = argv[:2] + [str(kw_workspace)] + argv[2:]
    code, out, err = run(capsys, *argv)
    assert code == 2 and message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_version(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0 and capsys.readouterr().out == f"hybridmem {version('hybridmem')}\n"


def test_one_file_is_counted_in_the_singular(tmp_path: Path, capsys):
    write(tmp_path, "hybridmem.toml", '[embedding]\nprovider = "none"\n')
    write(tmp_path, "MEMORY.md", "# Memory\nOne note.\n")
    code, out, _ = run(capsys, "index", str(tmp_path))
    assert code == 0 and out.startswith("indexed 1 file, 1 chunk in ")


def test_every_search_and_get_option_has_help():
    import argparse

    from hybridmem.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name in ("search", "get"):
        bare = [a.option_strings for a in sub.choices[name]._actions if a.option_strings and not a.help]
        assert bare == [], name
    rrf_k = next(a for a in sub.choices["search"]._actions if "--rrf-k" in a.option_strings)
    assert "ignored under joint" in rrf_k.help


def test_an_invalid_option_value_names_the_option_and_the_setting(kw_workspace: Path, capsys):
    code, _, err = run(capsys, "search", "timing belt", str(kw_workspace), "--mmr", "1.5")
    assert code == 2 and err == ("hybridmem: error: argument --mmr: invalid setting ranking.mmr_lambda=1.5: expected "
                                 "a number from 0 to 1\n")


def test_get_folds_a_dotdot_that_stays_inside_the_workspace(kw_workspace: Path, capsys):
    code, out, err = run(capsys, "get", "memory/topics/../../MEMORY.md", str(kw_workspace), "--lines", "1")
    assert code == 0 and out.strip() == "# Memory" and err == ""


@pytest.mark.parametrize("argv,message", [
    (["search", "--preset", "nope", "q"], "hybridmem search: error: argument --preset: invalid choice: 'nope'"),
    (["search", "q", "--max-results", "abc"], "hybridmem search: error: argument -n/--max-results: invalid int value"),
    (["bogus"], "hybridmem: error: argument command: invalid choice: 'bogus'"),
    (["eval", "--metrics"], "hybridmem eval: error: argument --metrics: expected at least one argument"),
])
def test_usage_mistakes_are_one_line_and_exit_2(capsys, argv, message):
    """What argparse catches reads like every other user mistake: one line naming the command's help, not the
    whole usage; --help still prints it."""
    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.startswith(message) and err.count("\n") == 1, err
    assert err.rstrip().endswith(f"(see {message.split(': ')[0]} --help)")
    with pytest.raises(SystemExit) as stop:
        main(["search", "--dry-run", "ws"])  # a query that looks like an option: say how to give it
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and err.startswith(
        "hybridmem: error: unrecognized arguments: --dry-run; if '--dry-run' is the query, put it after every option "
        "and '--': hybridmem search [OPTIONS] -- '--dry-run' [WORKSPACE]"), err
    for argv in (["search", "-foo"], ["search", "--json", "-foo", "ws"], ["recall", "-x"]):  # the query alone
        with pytest.raises(SystemExit) as stop:
            main(argv)
        err, first = capsys.readouterr().err, argv[-1 - (argv[-1] == "ws")]
        assert stop.value.code == 2 and err.count("\n") == 1 and err.startswith(
            f"hybridmem: error: unrecognized arguments: {first}; if '{first}' is the query, put it after every "
            f"option and '--': hybridmem {argv[0]} [OPTIONS] -- '{first}' [WORKSPACE]"), err
    with pytest.raises(SystemExit) as stop:
        main(["search", "--json"])  # no query at all: argparse's own words
    assert capsys.readouterr().err.startswith("hybridmem search: error: the following arguments are required: query")
    with pytest.raises(SystemExit) as stop:
        main(["search", "--help"])
    assert stop.value.code == 0 and "usage: hybridmem search" in capsys.readouterr().out


def test_reading_a_missing_index_says_so_and_creates_nothing(kw_workspace: Path, tmp_path: Path, capsys):
    """status, and a search or recall told not to sync, on an index file that is not there: one line, and no empty
    index (nor its folders) left behind; the human status shows when the last sync ran, not an epoch number."""
    missing = tmp_path / "no" / "such" / "index.sqlite"
    for argv in (["status", str(kw_workspace)], ["search", "x", str(kw_workspace), "--no-sync"],
                 ["recall", "x", str(kw_workspace), "--no-sync"]):
        code, _, err = run(capsys, *argv, "--index", str(missing))
        assert code == 2 and err == f"hybridmem: error: no index at {missing}: `hybridmem index` builds it\n", argv
    assert not (tmp_path / "no").exists()
    assert run(capsys, "index", str(kw_workspace), "--index", str(missing))[0] == 0
    code, out, _ = run(capsys, "status", str(kw_workspace), "--index", str(missing))
    assert code == 0 and re.search(r"last_sync: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d .* s ago\)", out), out


def test_bad_config_names_the_setting(kw_workspace: Path, capsys):
    write(kw_workspace, "hybridmem.toml", "[ranking]\nmmr_lambda = 3.0\n")
    code, _, err = run(capsys, "status", str(kw_workspace))
    assert code == 2 and "ranking.mmr_lambda" in err


@pytest.mark.slow
def test_entry_point_with_real_model(demo_copy: Path, tmp_path: Path):
    index = tmp_path / "i.sqlite"
    cmd = [sys.executable, "-m", "hybridmem.cli"]
    out = subprocess.run(cmd + ["index", str(demo_copy), "--index", str(index), "--json"], capture_output=True,
                         text=True, check=True)
    assert json.loads(out.stdout)["chunks"] > 40
    out = subprocess.run(cmd + ["search", "car repair history", str(demo_copy), "--index", str(index), "--json"],
                         capture_output=True, text=True, check=True)
    res = json.loads(out.stdout)
    assert (res["provider"], res["model"]) == (DEFAULT_PROVIDER, PROVIDER_MODELS[DEFAULT_PROVIDER]) and res["results"]


def test_module_entry_point_dispatches_registered_subcommands() -> None:
    """``python -m hybridmem.cli eval`` reaches the eval module's command (registered with ``hybridmem.cli``)."""
    out = subprocess.run([sys.executable, "-m", "hybridmem.cli", "eval", "--dataset", "no-such-set"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "unknown dataset 'no-such-set'" in out.stderr and "Traceback" not in out.stderr


def test_switching_to_rrf_takes_its_preset_min_score(kw_workspace: Path, capsys):
    code, out, _ = run(capsys, "search", "payment thanh toán", str(kw_workspace), "--fusion", "rrf", "--json")
    res = json.loads(out)
    assert code == 0 and res["results"] and res["rescued"] is False


def test_unknown_source_is_an_error_naming_the_valid_ones(kw_workspace: Path, capsys):
    code, out, err = run(capsys, "search", "timing belt", str(kw_workspace), "--source", "bogus")
    assert (code, out) == (2, "")
    assert err == "hybridmem: error: unknown source 'bogus': expected one of memory, sessions\n"


def test_non_string_extra_paths_is_a_one_line_config_error(kw_workspace: Path, capsys):
    write(kw_workspace, "hybridmem.toml", '[embedding]\nprovider = "none"\n[sources]\nextra_paths = [1, 2]\n')
    code, _, err = run(capsys, "index", str(kw_workspace))
    assert code == 2
    assert err == "hybridmem: error: invalid setting sources.extra_paths=[1, 2]: expected a list of strings\n"


def test_keyword_only_search_prints_no_empty_note(kw_workspace: Path, capsys):
    run(capsys, "index", str(kw_workspace))
    code, out, err = run(capsys, "search", "timing belt", str(kw_workspace))
    assert code == 0 and "memory/topics/cars.md#L1-L3" in out and err == ""


def test_index_of_an_empty_folder_says_where_it_looked(tmp_path: Path, capsys):
    write(tmp_path, "hybridmem.toml", '[embedding]\nprovider = "none"\n[sources]\nextra_paths = ["docs"]\n')
    code, out, err = run(capsys, "index", str(tmp_path))
    assert code == 0 and out.startswith("indexed 0 files, 0 chunks")
    assert err == (f"warning: sources.extra_paths: docs does not exist ({tmp_path / 'docs'}), so nothing is indexed "
                   f"from it\nnote: no memory files found in {tmp_path}: looked for MEMORY.md, memory.md, "
                   "memory/**/*.md, docs (extra path) and sessions/**/*.jsonl\n")


def test_an_extra_path_that_does_not_exist_is_named_and_the_rest_is_indexed(kw_workspace: Path, capsys):
    write(kw_workspace, "hybridmem.toml", '[embedding]\nprovider = "none"\n[sources]\nextra_paths = ["docs/decisons"]\n')
    code, out, err = run(capsys, "index", str(kw_workspace))
    assert code == 0 and out.startswith("indexed 4 files")
    assert err == (f"warning: sources.extra_paths: docs/decisons does not exist ({kw_workspace / 'docs/decisons'}), "
                   "so nothing is indexed from it\n")


def test_a_query_past_max_query_chars_is_cut_and_the_cli_says_so(kw_workspace: Path, capsys):
    run(capsys, "index", str(kw_workspace))
    code, out, err = run(capsys, "search", "timing belt " + "x " * 3000, str(kw_workspace))
    assert code == 0 and "memory/topics/cars.md#L1-L3" in out
    assert err == "note: the query was cut to its first 2000 of 6012 characters (tokenizer.max_query_chars)\n"
    code, out, _ = run(capsys, "search", "timing belt " + "x " * 3000, str(kw_workspace), "--json")
    assert json.loads(out)["notice"].startswith("the query was cut to its first 2000 of 6012 characters")


@pytest.mark.parametrize("exc, code", [(BrokenPipeError(32, "Broken pipe"), 0),
                                       (RuntimeError("database disk image is malformed"), None)])
def test_a_closed_pipe_ends_quietly_and_other_errors_are_not_swallowed(monkeypatch, capsys, exc, code):
    """``hybridmem search ... | head -1``: the reader went away, exit 0 without a traceback. The corrupt-index
    handler reads only SQLite's DatabaseError: another exception that happens to say "malformed" still raises."""
    from hybridmem import commands

    def boom(args):
        raise exc

    monkeypatch.setitem(commands.COMMANDS, "status", boom)
    if code is None:
        with pytest.raises(RuntimeError):
            main(["status", "."])
    else:
        assert main(["status", "."]) == code
        assert capsys.readouterr().err == ""


def test_empty_query_is_a_usage_error_and_json_says_why_nothing_came_back(kw_workspace: Path, capsys):
    assert run(capsys, "index", str(kw_workspace))[0] == 0
    code, out, err = run(capsys, "search", "   ", str(kw_workspace))
    assert (code, out) == (2, "") and err.count("\n") == 1 and "the query is empty" in err
    code, out, _ = run(capsys, "search", "zzyzx qwxv", str(kw_workspace), "--json")
    js = json.loads(out)
    assert code == 0 and js["results"] == [] and js["message"].startswith("Nothing relevant was found in memory")
    code, out, _ = run(capsys, "search", "zzyzx qwxv", str(kw_workspace))
    assert out.strip() == js["message"]


def test_a_bad_fusion_in_the_settings_fails_every_command_not_only_search(kw_workspace: Path, capsys):
    """hybridmem.toml names a fusion that does not exist: index used to exit 0, and only the first search failed."""
    assert run(capsys, "index", str(kw_workspace))[0] == 0
    write(kw_workspace, "hybridmem.toml", '[ranking]\nfusion = "nope"\n')
    for argv in (["index", str(kw_workspace)], ["status", str(kw_workspace)], ["search", "x", str(kw_workspace)]):
        code, _, err = run(capsys, *argv)
        assert code == 2 and "unknown fusion ranking.fusion='nope'" in err and err.count("\n") == 1, argv


def test_a_question_in_simplified_chinese_finds_a_note_in_traditional_and_back(kw_workspace: Path, capsys):
    write(kw_workspace, "memory/tw.md", "週三下午在臺北辦公室開預算會議，討論明年的招聘計畫。\n")
    write(kw_workspace, "memory/cn.md", "服务器迁移到新的数据中心，周末停机两小时。\n")
    for query, path in (("台北办公室预算会议", "memory/tw.md"), ("伺服器遷移到新的數據中心", "memory/cn.md")):
        code, out, _ = run(capsys, "search", query, str(kw_workspace), "--json")
        assert code == 0 and [r["path"] for r in json.loads(out)["results"]][:1] == [path], query
    write(kw_workspace, "hybridmem.toml", '[embedding]\nprovider = "none"\n[tokenizer]\nfold_chinese = false\n')
    code, out, _ = run(capsys, "search", "台北办公室预算会议", str(kw_workspace), "--json")  # rebuilt without folding
    assert code == 0 and "memory/tw.md" not in [r["path"] for r in json.loads(out)["results"]]


def test_a_one_character_word_finds_its_note_in_chinese_japanese_and_korean(kw_workspace: Path, capsys):
    write(kw_workspace, "memory/zh.md", "周六带我的猫去打了狂犬疫苗。\n")
    write(kw_workspace, "memory/ja.md", "玄関の鍵は郵便受けの中にある。\n")
    write(kw_workspace, "memory/ko.md", "이사할 집은 역에서 가깝다.\n")
    for query, path in (("猫", "memory/zh.md"), ("猫 疫苗", "memory/zh.md"), ("鍵", "memory/ja.md"),
                        ("집", "memory/ko.md")):
        code, out, _ = run(capsys, "search", "--preset", "keyword", query, str(kw_workspace), "--json")
        assert code == 0 and [r["path"] for r in json.loads(out)["results"]][:1] == [path], query


def test_stem_scripts_lets_the_keyword_leg_find_an_arabic_word_without_its_article(kw_workspace: Path, capsys):
    write(kw_workspace, "memory/ar.md", "اجتمع الفريق مع الإدارة يوم الأحد لمناقشة الميزانية.\n")
    code, out, _ = run(capsys, "search", "فريق ادارة", str(kw_workspace), "--json")
    assert code == 0 and not json.loads(out)["results"]  # unstemmed: "team" is not "the team"
    write(kw_workspace, "hybridmem.toml", '[embedding]\nprovider = "none"\n[tokenizer]\nstem_scripts = true\n')
    code, out, _ = run(capsys, "search", "فريق ادارة", str(kw_workspace), "--json")  # the sync rebuilds the index
    assert code == 0 and [r["path"] for r in json.loads(out)["results"]][:1] == ["memory/ar.md"]


def test_get_of_a_long_file_prints_the_capped_lines_and_one_note(kw_workspace: Path, capsys):
    """`hybridmem get` printed a whole file however large; now the lines up to sources.get_max_lines on stdout, and
    one note on stderr naming the line to read on from (as memory_get's reply does)."""
    from hybridmem.config import SourcesConfig

    cap = SourcesConfig().get_max_lines
    write(kw_workspace, "memory/long.md", "".join(f"line {i}\n" for i in range(1, 1001)))
    code, out, err = run(capsys, "get", "memory/long.md", str(kw_workspace))
    assert code == 0 and out.splitlines() == [f"line {i}" for i in range(1, cap + 1)]
    assert err.count("\n") == 1 and err.startswith(f"note: cut at {cap} of 1000 lines") and f"--from {cap + 1}" in err
    code, out, err = run(capsys, "get", "memory/long.md", str(kw_workspace), "--from", str(cap + 1), "--lines", "1000")
    assert code == 0 and len(out.splitlines()) == 1000 - cap and err == ""
    code, out, _ = run(capsys, "get", "memory/long.md", str(kw_workspace), "--json")
    data = json.loads(out)
    assert (data["lines"], data["truncated"], data["next_from"]) == (cap, True, cap + 1)


@pytest.mark.parametrize("command", ["search", "recall"])
@pytest.mark.parametrize("text", ["", "   "])
def test_an_empty_query_or_message_is_one_line_and_exit_2(kw_workspace: Path, capsys, command: str, text: str):
    """`recall ""` indexed the workspace, searched nothing and exited 0 where `search ""` (and the MCP recall prompt)
    refuse an empty one: both are a user mistake in one line, exit 2, before anything is indexed."""
    code, out, err = run(capsys, command, text, str(kw_workspace))
    assert (code, out) == (2, "") and err.count("\n") == 1 and err.startswith("hybridmem: error: the ")
    assert "is empty" in err and not (kw_workspace / ".hybridmem").exists()


@pytest.mark.slow
def test_an_index_built_keyword_only_stays_so_under_search_and_recall(workspace: Path, capsys):
    """`index --keyword-only`, then a plain `search` (the settings name the default model): the search's sync rebuilt
    the index for the model and embedded it (all 3 chunks here, a warning nobody saw), so the flag did not stick, and
    the next `index --keyword-only` rebuilt it again. Now `search` and `recall` keep it keyword-only (no model, no
    rebuild) and say that `hybridmem index` embeds it, which it then does."""
    from hybridmem.searching import KEYWORD_INDEX

    assert run(capsys, "index", str(workspace), "--keyword-only")[0] == 0
    code, out, err = run(capsys, "search", "timing belt", str(workspace))
    assert code == 0 and "memory/topics/cars.md" in out and f"note: {KEYWORD_INDEX}" in err
    assert run(capsys, "recall", "who swapped the timing belt on the Civic", str(workspace))[0] == 0
    data = json.loads(run(capsys, "search", "timing belt", str(workspace), "--json")[1])
    assert (data["provider"], data["fallback_reason"]) == ("none", KEYWORD_INDEX) and data["results"]
    st = json.loads(run(capsys, "status", str(workspace), "--json")[1])
    assert (st["provider"], st["embedded_chunks"]) == ("none", 0)
    assert run(capsys, "index", str(workspace))[0] == 0  # without the flag: embedded with the configured model
    st = json.loads(run(capsys, "status", str(workspace), "--json")[1])
    assert st["provider"] == DEFAULT_PROVIDER and st["embedded_chunks"] == st["chunks"] > 0
    data = json.loads(run(capsys, "search", "timing belt", str(workspace), "--json")[1])
    assert data["provider"] == DEFAULT_PROVIDER and not data["fallback"]
