"""Property-based fuzzing (hypothesis): the FTS5 query builder against a real FTS5 table, the JSONL transcript parser,
redaction, and path validation. Each test prints how many cases it ran."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from hybridmem.config import TokenizerConfig
from hybridmem.errors import PathError
from hybridmem.reader import validate_relative
from hybridmem.sessions import count_messages, parse_transcript, redact
from hybridmem.store import Store
from hybridmem.tokenization import fts_query, tokenize

FTS_SYNTAX = ['"', "*", "(", ")", ":", "^", "-", "+", "NEAR", "AND", "OR", "NOT", "{", "}", "'", "\\", "\x00"]
COUNTS: dict[str, int] = {}

# Text that mixes FTS5 syntax, words, every Unicode category (surrogates and NUL included) and CJK/Thai runs.
query_text = st.one_of(
    st.text(max_size=80),
    st.lists(st.one_of(st.sampled_from(FTS_SYNTAX), st.text(alphabet=st.characters(), max_size=8),
                       st.sampled_from(["payment", "thanh toán", "支付重试", "การชำระเงิน", "paymentProcessor", "x_y"])),
             max_size=12).map(" ".join),
)


@pytest.fixture(scope="module")
def store():  # noqa: ANN201
    s = Store(":memory:")
    yield s
    s.close()


def _index(store: Store, text: str) -> None:
    tokens = " ".join(tokenize(text))
    with store.transaction():
        store.upsert_file(
            {"path": "doc.md", "abspath": None, "source": "memory", "hash": "h", "mtime": 0.0, "size": 0,
             "date": None, "evergreen": 0},
            [{"start_line": 1, "end_line": 1, "hash": "c", "text": text, "tokens": tokens, "timestamp": 0.0,
              "evergreen": False}],
            [None],
        )


_TERM = re.compile(r'"((?:[^"]|"")*)"')


@pytest.mark.slow
@settings(max_examples=2500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(q=query_text, mode=st.sampled_from(["or", "and"]))
@example(q="๏", mode="or")  # Thai punctuation: kept by the n-grams, read as nothing by FTS5 (found by this test in CI)
@example(q="ジョン・スミス ๛", mode="and")
def test_fts_query_never_raises_never_leaks_syntax_and_finds_itself(store: Store, q: str, mode: str) -> None:
    COUNTS["fts"] = COUNTS.get("fts", 0) + 1
    cfg = TokenizerConfig(query_mode=mode)
    match = fts_query(q, cfg)
    if match is None:
        return
    joiner = " AND " if mode == "and" else " OR "
    terms = match.split(joiner)
    for term in terms:  # every term is one quoted token: no operator, column filter or prefix star gets through
        m = _TERM.fullmatch(term)
        assert m, f"unquoted term {term!r} in {match!r}"
        assert '"' not in m.group(1) and "\x00" not in m.group(1)
    _index(store, q.encode("utf-8", "replace").decode("utf-8"))  # files are decoded with errors="replace"
    rows = store.keyword_search(match, 5)  # a real FTS5 MATCH: must not raise
    assert len(rows) == 1, f"{q!r} did not find itself via {match!r}"


def teardown_module() -> None:
    print(f"\nfuzz cases run: {json.dumps(COUNTS)}")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=6,
)
content = st.one_of(
    st.text(max_size=60),
    st.lists(st.one_of(st.text(max_size=20), st.fixed_dictionaries({"type": st.sampled_from(["text", "image", "x"]),
                                                                     "text": st.one_of(st.text(max_size=20),
                                                                                       json_values)})),
             max_size=4),
    json_values,
)
record = st.one_of(
    st.builds(lambda r, c, ts: {"type": "message", "message": {"role": r, "content": c}, "timestamp": ts},
              st.one_of(st.sampled_from(["user", "assistant", "system", "tool"]), json_values), content,
              st.one_of(json_values, st.sampled_from(["2026-05-01T10:00:00Z", "9999-12-31T23:59:59", "0001-01-01",
                                                      1e300, -5, 1.7e12]))),
    st.builds(lambda r, c: {"role": r, "content": c}, st.sampled_from(["user", "assistant"]), content),
    json_values,
)
jsonl_line = st.one_of(record.map(lambda r: json.dumps(r, allow_nan=True)), st.text(max_size=40),
                       st.just("{\"type\": \"message\", \"message\": "), st.just("[" * 5000))


@pytest.mark.slow
@settings(max_examples=1200, deadline=None)
@given(lines=st.lists(jsonl_line, max_size=8))
def test_jsonl_parser_never_raises_and_keeps_its_invariants(lines: list[str]) -> None:
    COUNTS["jsonl"] = COUNTS.get("jsonl", 0) + 1
    lines = [ln for line in lines for ln in re.split(r"\r\n|\r|\n", line)]  # as the file reader splits them
    tr = parse_transcript(lines)
    out = tr.text.split("\n") if tr.text else []
    assert len(out) == tr.messages == len(tr.line_map)
    assert all(o.startswith(("User: ", "Assistant: ")) for o in out)
    assert list(tr.line_map) == sorted(set(tr.line_map))
    assert all(1 <= n <= len(lines) for n in tr.line_map)
    non_blank = sum(1 for ln in lines if ln.strip())
    assert tr.messages + tr.malformed <= non_blank
    assert count_messages(lines) >= tr.messages
    assert tr.last_timestamp is None or tr.last_timestamp == tr.last_timestamp  # never NaN


@settings(max_examples=1500, deadline=None)
@given(before=st.text(max_size=40), after=st.text(max_size=40),
       secret=st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", min_size=20,
                      max_size=40))
def test_planted_secrets_are_always_redacted(before: str, after: str, secret: str) -> None:
    assume(secret not in before and secret not in after)
    COUNTS["redact"] = COUNTS.get("redact", 0) + 1
    key = f"sk-proj-{secret}"
    tr = parse_transcript([json.dumps({"role": "user", "content": f"{before} {key} {after}"})])
    assert key not in tr.text and secret not in redact(f"{before} Bearer {secret} {after}")


@settings(max_examples=1500, deadline=None)
@given(path=st.one_of(st.text(max_size=30), st.lists(st.sampled_from(["..", ".", "memory", "a.md", "/", "\\", "~",
                                                                       "C:", "x"]), max_size=6).map("/".join)))
def test_validate_relative_never_escapes(path: str) -> None:
    COUNTS["paths"] = COUNTS.get("paths", 0) + 1
    try:
        clean = validate_relative(path)
    except PathError:
        return
    parts = clean.split("/")
    assert ".." not in parts and not clean.startswith(("/", "~")) and "\x00" not in clean
    assert not re.match(r"^[A-Za-z]:", clean)
