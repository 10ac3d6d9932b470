from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hybridmem.embeddings.fake import HashEmbedder
from hybridmem.index import MemoryIndex
from hybridmem.tools import MemoryTools
from tests.conftest import write


@pytest.fixture
def tools(workspace: Path) -> MemoryTools:
    idx = MemoryIndex(workspace, embedder=HashEmbedder())
    idx.sync()
    return MemoryTools(idx, citations="on")


def test_definitions_in_each_format(tools):
    oa = tools.definitions("openai")
    assert [d["function"]["name"] for d in oa] == ["memory_search", "memory_get"]
    assert oa[0]["function"]["parameters"]["required"] == ["query"]
    an = tools.definitions("anthropic")
    assert an[1]["input_schema"]["properties"]["path"]["type"] == "string"
    json.dumps(tools.definitions("json_schema"))


def test_search_handler_returns_json_with_citations(tools):
    out = json.loads(tools.handle("memory_search", json.dumps({"query": "timing belt", "min_score": 0})))
    assert out["results"][0]["citation"] == "memory/topics/cars.md#L1-L3"
    assert out["citations"] is True and out["provider"] == "hash"
    assert sum(len(r["snippet"]) for r in out["results"]) <= 4000


def test_answer_threshold_is_the_gates_bar_for_one_search(tools):
    """An agent that knows memory holds the answer (a note in another language than its question, which the gate
    reads less well) can lower the answer gate's bar for one search; the refusal says how, and the schema shows the
    served threshold."""
    schema = tools.definitions("json_schema")[0]
    props = schema.get("parameters", schema.get("input_schema", schema))["properties"]
    assert props["answer_threshold"]["default"] == 0.07 and props["answer_threshold"]["exclusiveMaximum"] == 1
    refused = json.loads(tools.handle("memory_search", {"query": "belt of my bag"}))
    assert refused["results"] == [] and "under its threshold of 0.07 (an answer threshold of 0 lists the nearest notes " \
        "anyway)." in refused["message"]
    # a quarter of this memory's chunks is Chinese and a quarter Thai (mixed lines, read by their most of it)
    assert sorted(refused["ask_in"]) == ["th", "zh"] and "ask it again in " in refused["message"], refused
    listed = json.loads(tools.handle("memory_search", {"query": "belt of my bag", "answerThreshold": 0}))
    assert listed["results"][0]["path"] == "memory/topics/cars.md" and listed["answer_probability"] is None
    for value, said in ((-0.5, "answer_threshold must be >= 0, got -0.5"),
                        (1, "answer_threshold must be from 0 up to (not including) 1, got 1")):
        bad = json.loads(tools.handle("memory_search", {"query": "timing belt", "answer_threshold": value}))
        assert bad["error"] == said and bad["bad_arguments"] is True


def test_citation_modes(workspace):
    idx = MemoryIndex(workspace, embedder=HashEmbedder())
    idx.sync()
    off = json.loads(MemoryTools(idx, citations="off").handle("memory_search", {"query": "timing belt"}))
    assert off["citations"] is False and "citation" not in off["results"][0]
    group = MemoryTools(idx, citations="auto", chat_type="group")
    assert group.include_citations is False
    assert MemoryTools(idx, citations="auto").include_citations is True


def test_get_handler_and_refusals(tools, workspace, tmp_path):
    out = json.loads(tools.handle("memory_get", {"path": "memory/topics/cars.md", "from": 3, "lines": 1}))
    assert out["text"].startswith("The mechanic")
    # the citation a search result gives reads its lines; explicit ones win
    cited = json.loads(tools.handle("memory_get", {"path": "memory/topics/cars.md#L3-L3"}))
    assert (cited["path"], cited["from"], cited["lines"], cited["text"]) == ("memory/topics/cars.md", 3, 1, out["text"])
    assert json.loads(tools.handle("memory_get", {"path": "memory/topics/cars.md#L3", "from": 1}))["from"] == 1
    # past the end: one sentence saying how long the file is, not an empty reply
    past = json.loads(tools.handle("memory_get", {"path": "memory/topics/cars.md", "from": 1000}))
    assert past["error"].endswith(f"has {out['total_lines']} lines: line 1000 is past its end"), past
    outside = write(tmp_path, "o.md", "secret")
    os.symlink(outside, workspace / "memory" / "o.md")
    for args in [{"path": "../o.md"}, {"path": "/etc/passwd"}, {"path": "memory/o.md"}, {"path": "notes/ignored.md"}]:
        res = json.loads(tools.handle("memory_get", args))
        assert "error" in res and "secret" not in json.dumps(res)


@pytest.mark.parametrize(
    "name,args,message",
    [
        ("memory_search", "{not json", "not a JSON object"),
        ("memory_search", {}, "query is required (a string)"),
        ("memory_search", {"query": "x", "max_results": 0}, "max_results"),
        ("memory_search", {"query": "x", "bogus": 1}, "unknown argument"),
        ("memory_get", {"path": 3}, "path must be a string"),
        ("memory_get", {}, "path is required (a string)"),
        ("memory_get", {"path": "memory/o.md", "from": 1e308}, "from must be between 1 and 2147483647, got 1e+308"),
        ("nope", {}, "unknown tool"),
    ],
)
def test_bad_arguments_are_errors_not_exceptions(tools, name, args, message):
    assert message in json.loads(tools.handle(name, args))["error"]


def test_backend_failure_is_reported_as_unavailable(tools):
    class Broken:
        def search(self, *a, **k):
            raise RuntimeError("disk on fire")

        def get(self, *a, **k):
            raise RuntimeError("disk on fire")

    out = json.loads(MemoryTools(Broken()).handle("memory_search", {"query": "x"}))
    assert out["unavailable"] is True and "disk on fire" in out["error"]


def test_tools_over_backend_manager_fall_back_and_never_raise(workspace):
    from hybridmem.fallback import BackendManager

    class Broken:
        def search(self, *a, **k):
            raise RuntimeError("primary engine is down")

        def close(self):
            pass

    def builtin():
        idx = MemoryIndex(workspace, embedder=HashEmbedder())
        idx.sync()
        return idx

    mgr = BackendManager(Broken, builtin)
    tools = MemoryTools(mgr, citations="on")
    out = json.loads(tools.handle("memory_search", {"query": "timing belt", "min_score": 0}))
    assert out["results"][0]["path"] == "memory/topics/cars.md"
    assert mgr.status()["primary_failed"] and "primary engine is down" in mgr.status()["last_error"]
    assert json.loads(tools.handle("memory_get", {"path": "MEMORY.md"}))["total_lines"] == 4

    def broken_builtin():
        raise RuntimeError("index file missing")

    dead = MemoryTools(BackendManager(Broken, broken_builtin))
    out = json.loads(dead.handle("memory_search", {"query": "x"}))
    assert out["unavailable"] is True and "index file missing" in out["error"] and out["results"] == []


@pytest.mark.parametrize(
    "name,args,message",
    [
        ("memory_search", {"query": "x", "max_results": float("nan")}, "max_results must be an integer, got nan"),
        ("memory_search", {"query": "x", "max_results": float("inf")}, "max_results must be an integer, got inf"),
        ("memory_search", '{"query": "x", "maxResults": Infinity}', "max_results must be an integer, got inf"),
        ("memory_search", {"query": "x", "max_results": 51}, "max_results must be between 1 and 50, got 51"),
        ("memory_search", {"query": "x", "min_score": float("nan")}, "min_score must be a finite number, got nan"),
        ("memory_search", {"query": "x", "max_results": True}, "max_results must be an integer, got True"),
        ("memory_search", {"query": "x", "source": "bogus"}, "source must be one of 'memory', 'sessions'"),
        ("memory_search", {"query": "x", "max_results": 2, "maxResults": 3}, "max_results given twice"),
        ("memory_get", {"path": "MEMORY.md", "from": float("-inf")}, "from must be an integer, got -inf"),
        ("memory_get", {"path": "MEMORY.md", "lines": 2001}, "lines must be between 1 and 2000, got 2001"),
        ("memory_search", {"query": " \t "}, "query is empty: give the words to search for"),
        ("memory_search", {"query": ""}, "query is empty: give the words to search for"),
    ],
)
def test_bad_numbers_are_bad_arguments_not_an_outage(tools, name, args, message):
    out = json.loads(tools.handle(name, args))
    assert out["error"] == message or out["error"].startswith(message)
    assert out.get("bad_arguments") is True and "unavailable" not in out


def test_camel_case_arguments_are_accepted(tools):
    snake = json.loads(tools.handle("memory_search", {"query": "payment", "max_results": 1, "min_score": 0,
                                                      "path_prefix": "MEMORY"}))
    camel = json.loads(tools.handle("memory_search", {"query": "payment", "maxResults": 1, "minScore": 0,
                                                      "pathPrefix": "MEMORY"}))
    assert [r["citation"] for r in camel["results"]] == [r["citation"] for r in snake["results"]] == ["MEMORY.md#L1-L4"]
    for key in ("from", "from_line", "fromLine"):
        got = json.loads(tools.handle("memory_get", {"path": "memory/topics/cars.md", key: 3, "lines": 1}))
        assert got["text"] == "The mechanic swapped the timing belt on the Civic in March."


def test_schema_limits_and_defaults_come_from_one_place(tools):
    from hybridmem.config import DEFAULT_RANKING
    from hybridmem.tools import SEARCH_ARGS

    props = tools.definitions("json_schema")[0]["parameters"]["properties"]
    limit = next(a for a in SEARCH_ARGS if a.name == "max_results")
    assert (props["max_results"]["minimum"], props["max_results"]["maximum"]) == (limit.minimum, limit.maximum)
    assert props["max_results"]["default"] == DEFAULT_RANKING.max_results == 6
    assert props["source"]["enum"] == ["memory", "sessions"]
    err = json.loads(tools.handle("memory_search", {"query": "x", "max_results": limit.maximum + 1}))["error"]
    assert err == f"max_results must be between 1 and {limit.maximum}, got {limit.maximum + 1}"


def test_a_path_longer_than_any_file_can_have_is_refused_without_echoing_it(tools):
    """A 5,000-character path came back whole in the error; paths are capped at PATH_MAX in the schema and the check."""
    from hybridmem.serve.write import WRITE_ARGS
    from hybridmem.tools import MAX_PATH_CHARS, parse_args

    get = tools.definitions("json_schema")[1]
    assert get["name"] == "memory_get" and get["parameters"]["properties"]["path"]["maxLength"] == MAX_PATH_CHARS
    err = json.loads(tools.handle("memory_get", {"path": "../" * 2000}))["error"]
    assert err == f"path must be at most {MAX_PATH_CHARS} characters, got 6000"
    with pytest.raises(Exception, match=rf"^file must be at most {MAX_PATH_CHARS} characters, got 5000$"):
        parse_args({"text": "a note", "file": "a" * 4997 + ".md"}, WRITE_ARGS)
    assert parse_args({"text": "a note", "file": "memory/a.md"}, WRITE_ARGS)["file"] == "memory/a.md"


def test_a_huge_or_long_argument_gets_a_short_argument_error(tools):
    """`max_results: 10**400` was "memory is unavailable: OverflowError" (math.isfinite), and a megabyte sent as a
    value, an argument name or a tool name came back whole in the error."""
    def error(name, args):
        return json.loads(tools.handle(name, args))["error"]

    assert error("memory_search", {"query": "x", "max_results": 10 ** 400}) == \
        "max_results must be between 1 and 50, got an integer of 401 digits"
    assert error("memory_get", {"path": "memory/x.md", "lines": -10 ** 400}).startswith("lines must be between 1 and ")
    for args in ({"query": "x", "max_results": "x" * 10 ** 6}, {"query": "x", "source": "x" * 10 ** 6},
                 {"query": "x", "x" * 10 ** 6: 1}):
        assert len(error("memory_search", args)) < 300
    assert len(error("x" * 10 ** 5, {})) < 300


def test_get_of_a_long_file_is_capped_and_says_where_to_read_on(workspace):
    """memory_get with no line count returned a whole file however large (10 MB of a 200,000-line note): now at most
    sources.get_max_lines lines, marked truncated, with the line to read on from; an explicit count reads past it."""
    from hybridmem.config import Settings, SourcesConfig

    write(workspace, "memory/long.md", "".join(f"line {i}\n" for i in range(1, 1001)))
    tools = MemoryTools(MemoryIndex(workspace, settings=Settings().override(embedding={"provider": "none"})))
    cap = SourcesConfig().get_max_lines
    out = json.loads(tools.handle("memory_get", {"path": "memory/long.md"}))
    assert (out["lines"], out["total_lines"], out["truncated"], out["next_from"]) == (cap, 1000, True, cap + 1)
    assert out["text"].splitlines()[-1] == f"line {cap}" and f"from={cap + 1}" in out["note"]
    rest = json.loads(tools.handle("memory_get", {"path": "memory/long.md", "from": out["next_from"]}))
    assert rest["text"].splitlines()[0] == f"line {cap + 1}" and rest["lines"] == min(cap, 1000 - cap)
    whole = json.loads(tools.handle("memory_get", {"path": "memory/long.md", "lines": 1000}))
    assert whole["lines"] == 1000 and "truncated" not in whole and "note" not in whole
    short = json.loads(tools.handle("memory_get", {"path": "memory/topics/cars.md"}))
    assert short["lines"] == short["total_lines"] == 3 and "truncated" not in short


def test_get_is_capped_in_characters_even_with_a_count(workspace):
    """A few huge lines pass any line cap: sources.get_max_chars bounds every reply; a line longer than the cap alone
    comes back cut, and the reply says the rest of it cannot be read."""
    from hybridmem.config import Settings

    write(workspace, "memory/wide.md", "".join(f"{i:03d} " + "x" * 96 + "\n" for i in range(1, 11)) + "y" * 500 + "\n")
    settings = Settings().override(embedding={"provider": "none"}, sources={"get_max_chars": 350})
    tools = MemoryTools(MemoryIndex(workspace, settings=settings))
    out = json.loads(tools.handle("memory_get", {"path": "memory/wide.md", "lines": 5}))
    assert (out["lines"], out["next_from"], out["truncated"]) == (3, 4, True) and len(out["text"]) <= 350
    assert out["note"].startswith("cut at 350 characters, after 3 lines (sources.get_max_chars)")
    long = json.loads(tools.handle("memory_get", {"path": "memory/wide.md", "from": 11}))
    assert long["text"] == "y" * 350 and long["next_from"] is None
    assert long["note"].startswith("line 11 was cut at its first 350 characters")
