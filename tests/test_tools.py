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
