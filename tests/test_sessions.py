"""Session transcripts: parsing, redaction, line maps, malformed lines, and the 100 KB / 50 message delta thresholds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hybridmem.config import Settings
from hybridmem.embeddings.fake import HashEmbedder
from hybridmem.errors import ConfigError
from hybridmem.index import MemoryIndex
from hybridmem.sessions import (
    appended_delta, compile_redactions, count_messages, defer_session_reindex, parse_transcript, redact,
)


def msg(role: str, content: object, **extra: object) -> str:
    return json.dumps({"type": "message", "message": {"role": role, "content": content}, **extra})


def test_parse_formats_roles_content_parts_and_line_map() -> None:
    lines = [
        json.dumps({"type": "session", "id": "s1"}),
        msg("user", "  How do   we retry\n payments? "),
        "",
        json.dumps({"type": "tool_call", "name": "grep"}),
        msg("assistant", [{"type": "text", "text": "With exponential"}, {"type": "tool_use", "id": "x"},
                          {"type": "text", "text": "backoff."}]),
        msg("system", "You are helpful"),
        json.dumps({"role": "user", "content": [{"type": "input_text", "text": "Bare record"}]}),
    ]
    tr = parse_transcript(lines)
    assert tr.text == "User: How do we retry payments?\nAssistant: With exponential backoff.\nUser: Bare record"
    assert tr.line_map == (2, 5, 7)
    assert (tr.messages, tr.malformed) == (3, 0)


def test_malformed_lines_are_skipped_and_counted() -> None:
    lines = [msg("user", "first"), "{not json", '"a string"', "[1, 2]", json.dumps({"type": "message", "message": 3}),
             msg("assistant", "second"), "\x00\xff garbage"]
    tr = parse_transcript(lines)
    assert tr.text == "User: first\nAssistant: second"
    assert tr.line_map == (1, 6)
    assert tr.malformed == 5


@pytest.mark.parametrize(
    "text, expected",
    [
        ("key sk-proj-abcdefghijklmnop1234 ok", "key [REDACTED] ok"),
        ("Authorization: Bearer abc.def.ghijkl", "Authorization: Bearer [REDACTED]"),
        ("postgres://app:hunter2@db:5432/x", "postgres://app:[REDACTED]@db:5432/x"),
        ("password=correct-horse", "password=[REDACTED]"),
        ("AKIAABCDEFGHIJKLMNOP", "[REDACTED]"),
        # line breaks kept (line numbers of memory files stay right); a transcript collapses them anyway
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----", "[REDACTED PRIVATE KEY]\n\n"),
        ("plain text stays", "plain text stays"),
    ],
)
def test_redaction(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_configurable_redaction_and_invalid_pattern() -> None:
    pats = compile_redactions([r"EMP-\d{6}"])
    assert redact("employee EMP-123456 and sk-live-abcdefghijklmnop12", pats) == "employee [REDACTED] and [REDACTED]"
    with pytest.raises(ConfigError, match="invalid setting sources.redact_patterns: '\\[' is not a valid"):
        compile_redactions(["["])
    with pytest.raises(ConfigError, match="sources.redact_patterns"):
        Settings().override(sources={"redact_patterns": ["(unclosed"]})


def test_redaction_happens_before_storage(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "sessions").mkdir(parents=True)
    (ws / "sessions" / "s1.jsonl").write_text("\n".join([
        msg("user", "my token is sk-proj-abcdefghijklmnop1234 and id EMP-654321"),
        msg("assistant", "noted"),
    ]) + "\n")
    settings = Settings().override(sources={"redact_patterns": [r"EMP-\d{6}"]})
    with MemoryIndex(ws, settings=settings, embedder=HashEmbedder()) as idx:
        idx.sync()
        stored = idx.store.chunk_rows([1])[1]
        assert "sk-proj" not in stored[4] and "EMP-654321" not in stored[4]
        assert stored[4] == "User: my token is [REDACTED] and id [REDACTED]\nAssistant: noted"
        assert "sk-proj" not in stored[5]  # the FTS token column
        cache_texts = idx.search("token", min_score=0.0, answer_threshold=0.0).results[0].snippet
        assert "sk-proj" not in cache_texts
        got = idx.get("sessions/s1.jsonl")
        assert got["line_numbers"] == [1, 2] and "[REDACTED]" in got["text"]


def test_citations_point_at_jsonl_lines(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "sessions").mkdir(parents=True)
    lines = [json.dumps({"type": "session"})] * 3 + [msg("user", "the kafka consumer lag is high")]
    (ws / "sessions" / "s2.jsonl").write_text("\n".join(lines) + "\n")
    with MemoryIndex(ws, embedder=HashEmbedder()) as idx:
        idx.sync()
        hit = idx.search("kafka lag", min_score=0.0, session="s2").results[0]
        assert hit.citation == "sessions/s2.jsonl#L4" and hit.source == "sessions"


def test_role_labels_are_not_keyword_terms(tmp_path: Path) -> None:
    """Every transcript line starts with User: or Assistant:, so as words they matched any query about users."""
    ws = tmp_path / "ws"
    (ws / "sessions").mkdir(parents=True)
    (ws / "memory").mkdir()
    (ws / "memory" / "db.md").write_text("# db\n\nThe user table migration runs on Sundays.\n")
    (ws / "sessions" / "s1.jsonl").write_text("\n".join([msg("user", "deploy the billing service"),
                                                         msg("assistant", "deployed billing at noon")]) + "\n")
    (ws / "sessions" / "s2.jsonl").write_text(msg("user", "which user owns the cron job?") + "\n")
    with MemoryIndex(ws, settings=Settings().override(embedding={"provider": "none"}), embedder=None) as idx:
        idx.sync()
        cited = [h.citation for h in idx.search("user", min_score=0.0, answer_threshold=0.0).results]
        assert sorted(cited) == ["memory/db.md#L1-L3", "sessions/s2.jsonl#L1"]  # a user the text names; no label
        assert [h.citation for h in idx.search("assistant", min_score=0.0, answer_threshold=0.0).results] == []
        hit = idx.search("billing", min_score=0.0, answer_threshold=0.0).results[0]
        assert hit.snippet.startswith("User: deploy the billing service")  # shown as written


def test_session_scope_follows_the_configured_session_folders(tmp_path: Path) -> None:
    """``session=`` finds a transcript in whichever configured folder holds it, not only ``sessions/``."""
    ws = tmp_path / "ws"
    for folder, sid, text in (("chats", "s3", "the kafka consumer lag is high"), ("logs", "s4", "kafka lag again")):
        (ws / folder).mkdir(parents=True)
        (ws / folder / f"{sid}.jsonl").write_text(msg("user", text) + "\n")
    settings = Settings().override(sources={"session_paths": ["chats", "logs"]})
    with MemoryIndex(ws, settings=settings, embedder=HashEmbedder()) as idx:
        idx.sync()
        for sid, citation in (("s3", "chats/s3.jsonl#L1"), ("s4.jsonl", "logs/s4.jsonl#L1")):
            hits = idx.search("kafka lag", min_score=0.0, answer_threshold=0.0, session=sid).results
            assert [h.citation for h in hits] == [citation]
        missing = idx.search("kafka lag", min_score=0.0, answer_threshold=0.0, session="s9")
        assert missing.results == ()
        assert missing.notice == "no transcript 's9' in the session folders (chats, logs), so nothing was searched"
        assert idx.search("kafka lag", min_score=0.0, answer_threshold=0.0, session="s3").notice is None


def test_a_session_no_folder_holds_is_said_once(tmp_path: Path, capsys) -> None:
    """A mistyped session id: the empty result's one sentence names it (memory_search, the CLI, the MCP text), and no
    note beside it says the same again, nor "no indexed file matches the search's scope"."""
    from hybridmem.cli import main
    from hybridmem.serve.server import render
    from hybridmem.tools import NOTHING_FOUND, nothing_found

    ws = tmp_path / "ws"
    (ws / "sessions").mkdir(parents=True)
    (ws / "sessions" / "s3.jsonl").write_text(msg("user", "the kafka consumer lag is high") + "\n")
    (ws / "hybridmem.toml").write_text('[embedding]\nprovider = "none"\n')
    said = f"{NOTHING_FOUND} No transcript 's9' in the session folders (sessions), so nothing was searched."
    with MemoryIndex(ws, embedder=HashEmbedder()) as idx:
        idx.sync()
        resp = idx.search("kafka lag", session="s9")
        assert resp.results == () and nothing_found(resp) == said
        out = {"results": [], "message": nothing_found(resp), "notice": resp.notice}
        assert render("memory_search", out) == said  # the MCP text: the sentence alone
        assert nothing_found(idx.search("kafka lag", session="s3")) != said
    for argv in (["search", "kafka lag", str(ws), "--session", "s9"],
                 ["search", "kafka lag", str(ws), "--session", "s9", "--preset", "keyword"]):
        assert main(argv) == 0
        printed = capsys.readouterr()
        assert printed.out.strip() == said and "s9" not in printed.err and "scope" not in printed.out


def test_malformed_lines_reported_in_sync(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "sessions").mkdir(parents=True)
    (ws / "sessions" / "s.jsonl").write_text(msg("user", "hello there") + "\n{broken\n{\"also\": \n")
    with MemoryIndex(ws, embedder=HashEmbedder()) as idx:
        report = idx.sync()
        assert report.warnings == ["sessions/s.jsonl: 2 malformed JSONL lines skipped"]
        assert report.chunks == 1


def test_count_and_delta_read_only_the_appended_bytes(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    head = msg("user", "a") + "\n"
    p.write_text(head + msg("assistant", "b") + "\n" + json.dumps({"type": "tool"}) + "\n" + msg("user", "c") + "\n")
    size = p.stat().st_size
    assert count_messages(p.read_text().splitlines()) == 3
    assert appended_delta(str(p), len(head), size, 100_000) == (size - len(head), 2)
    assert appended_delta(str(p), len(head), size, 10) == (size - len(head), 0)  # over the byte bound: not read
    assert defer_session_reindex(str(p), len(head), size, 100_000, 50) is True
    assert defer_session_reindex(str(p), len(head), size, 100_000, 2) is False
    assert defer_session_reindex(str(p), size + 5, size, 100_000, 50) is False  # shrunk: rewritten, reindex


def _append(p: Path, n: int, start: int, pad: int = 0) -> None:
    with p.open("a") as fh:
        for i in range(n):
            fh.write(msg("user" if i % 2 else "assistant", f"message {start + i} " + "x" * pad) + "\n")


def test_session_reindex_waits_for_50_messages(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "sessions").mkdir(parents=True)
    p = ws / "sessions" / "live.jsonl"
    _append(p, 5, 0)
    with MemoryIndex(ws, embedder=HashEmbedder()) as idx:
        assert idx.sync().added == 1
        _append(p, 49, 5)  # 49 new messages, far below 100 KB
        r = idx.sync()
        assert (r.deferred, r.changed) == (1, 0)
        assert not idx.search("53", min_score=0.0, vector_weight=0.0).results
        _append(p, 1, 54)  # the 50th new message
        r = idx.sync()
        assert (r.deferred, r.changed) == (0, 1)
        assert idx.search("53", min_score=0.0, vector_weight=0.0).results


def test_a_transcript_rewritten_longer_is_read_now_not_deferred(tmp_path: Path) -> None:
    """A client that saves the whole session again (new messages, a longer file) was taken for one that appended a
    few lines: the index served text no longer in the file, cited at lines that say something else now."""
    ws = tmp_path / "ws"
    (ws / "sessions").mkdir(parents=True)
    p = ws / "sessions" / "live.jsonl"
    p.write_text("\n".join(msg("user", f"oldtoken{i} was discussed") for i in range(10)) + "\n")
    with MemoryIndex(ws, embedder=HashEmbedder()) as idx:
        assert idx.sync().added == 1
        p.write_text("\n".join(msg("user", f"newtoken{i} replaces everything said before") for i in range(12)) + "\n")
        r = idx.sync()
        assert (r.deferred, r.changed) == (0, 1)
        assert not idx.search("oldtoken3", min_score=0.0, vector_weight=0.0).results
        assert idx.search("newtoken11", min_score=0.0, vector_weight=0.0).results[0].citation.startswith(
            "sessions/live.jsonl#")
        with p.open("a") as fh:  # appending still waits, and the check of what was indexed is cached
            fh.write(msg("assistant", "appendedtoken") + "\n")
        assert (idx.sync().deferred, idx.sync().deferred) == (1, 1)
        assert idx.syncer._appended


def test_hybridmem_index_reads_a_grown_transcript_now(tmp_path: Path, capsys) -> None:
    """The deferral spares a watcher and a search re-reading a live transcript on every change; `hybridmem index`,
    asked to index, reads what was appended (it said "unchanged" and left the new lines unsearchable)."""
    from hybridmem.cli import main

    ws = tmp_path / "ws"
    (ws / "sessions").mkdir(parents=True)
    p = ws / "sessions" / "live.jsonl"
    _append(p, 5, 0)
    kw = ["--keyword-only"]
    assert main(["index", str(ws), *kw]) == 0
    _append(p, 3, 5)
    with MemoryIndex(ws, settings=Settings().override(embedding={"provider": "none"})) as idx:
        assert idx.sync().deferred == 1  # a watcher's sync waits
    capsys.readouterr()
    assert main(["index", str(ws), *kw]) == 0
    assert "changed 1" in capsys.readouterr().out
    with MemoryIndex(ws, settings=Settings().override(embedding={"provider": "none"})) as idx:
        hits = idx.search("message 7", min_score=0.0, vector_weight=0.0).results
        assert hits and max(h.end_line for h in hits) == 8  # the appended lines 6-8 are indexed


def test_session_reindex_after_100_kb(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "sessions").mkdir(parents=True)
    p = ws / "sessions" / "big.jsonl"
    _append(p, 2, 0)
    with MemoryIndex(ws, embedder=HashEmbedder()) as idx:
        idx.sync()
        _append(p, 3, 2, pad=20_000)  # about 60 KB in 3 messages: wait
        assert idx.sync().deferred == 1
        _append(p, 2, 5, pad=20_000)  # about 100 KB in total since indexing: reindex
        r = idx.sync()
        assert (r.deferred, r.changed) == (0, 1)


def test_thresholds_come_from_settings(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "sessions").mkdir(parents=True)
    p = ws / "sessions" / "s.jsonl"
    _append(p, 2, 0)
    settings = Settings().override(sync={"session_delta_messages": 2})
    with MemoryIndex(ws, settings=settings, embedder=HashEmbedder()) as idx:
        idx.sync()
        _append(p, 1, 2)
        assert idx.sync().deferred == 1
        _append(p, 1, 3)
        assert idx.sync().changed == 1
    with pytest.raises(ConfigError, match="sync.session_delta_messages"):
        Settings().override(sync={"session_delta_messages": -5})


def test_lone_surrogate_costs_nothing_but_a_warning(tmp_path: Path) -> None:
    # a cut emoji: json.loads turns "\ud83d" into a lone surrogate that no UTF-8 encoder accepts
    ws = tmp_path / "ws"
    (ws / "sessions").mkdir(parents=True)
    (ws / "sessions" / "s.jsonl").write_text("\n".join([
        msg("user", "the kafka consumer lag is high"),
        '{"role": "assistant", "content": "cut emoji \\ud83d about zebras"}',
        msg("user", "retry payments with backoff \U0001f600"),
    ]) + "\n")
    with MemoryIndex(ws, settings=Settings().override(embedding={"provider": "none"}), embedder=None) as idx:
        report = idx.sync()
        assert (report.files, report.chunks) == (1, 1)
        assert report.warnings == ["sessions/s.jsonl: a lone surrogate (a cut emoji?) replaced by U+FFFD on line 2"]
        assert [h.citation for h in idx.search("zebras", min_score=0.0, answer_threshold=0.0).results] == ["sessions/s.jsonl#L1-L3"]
        assert [h.citation for h in idx.search("kafka", min_score=0.0, answer_threshold=0.0).results] == ["sessions/s.jsonl#L1-L3"]
        assert idx.get("sessions/s.jsonl", from_line=2, lines=1)["text"] == "Assistant: cut emoji \ufffd about zebras"


def test_parse_transcript_replaces_lone_surrogates_and_keeps_pairs() -> None:
    tr = parse_transcript(['{"role": "user", "content": "a \\udc00 b \\ud83d\\ude00 c \\ud83d"}'])
    assert tr.text == "User: a \ufffd b \U0001f600 c \ufffd" and tr.surrogate_lines == (1,)
    assert parse_transcript([msg("user", "fine")]).surrogate_lines == ()


# OpenAI Responses API items, as an agent built on it logs them: a top-level "message" item carries role and
# content itself (no nested "message"); reasoning and function-call items are not chat and are skipped quietly.
RESPONSES_LINES = [
    '{"type":"message","role":"developer","content":[{"type":"input_text","text":"You are an ops assistant."}]}',
    '{"type":"message","role":"user","content":"How do I rotate the API key?"}',
    '{"id":"rs_68a1","type":"reasoning","summary":[{"type":"summary_text","text":"Look for a rotation script."}]}',
    '{"id":"fc_68a2","type":"function_call","status":"completed","call_id":"call_9x","name":"shell",'
    '"arguments":"{\\"cmd\\": \\"ls scripts\\"}"}',
    '{"type":"function_call_output","call_id":"call_9x","output":"rotate_keys.sh"}',
    '{"id":"msg_68a3","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text",'
    '"text":"Run rotate_keys.sh; the new key is sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c.","annotations":[]},'
    '{"type":"refusal","refusal":"not this part"}]}',
    '',
    '{"type":"message","role":"user","content":[{"type":"input_text","text":"And the staging one?"},'
    '{"type":"input_image","image_url":"data:image/png;base64,AAAA"}]}',
    '{"type":"message","role":"system","content":"Session resumed."}',
]


def test_responses_api_message_items_are_read_with_their_line_numbers() -> None:
    tr = parse_transcript(RESPONSES_LINES)
    assert tr.text == ("User: How do I rotate the API key?\n"
                       "Assistant: Run rotate_keys.sh; the new key is [REDACTED].\n"
                       "User: And the staging one?")
    assert tr.line_map == (2, 6, 8)
    assert (tr.messages, tr.malformed) == (3, 0)
    assert "sk-live" not in tr.text
    assert count_messages(RESPONSES_LINES) == 3


def test_every_supported_shape_in_one_transcript() -> None:
    lines = [
        msg("user", "nested string", timestamp="2026-03-10T10:00:01Z"),
        json.dumps({"role": "assistant", "content": "bare string"}),
        json.dumps({"type": "message", "role": "user", "content": "top-level string", "timestamp": 1773136805}),
        json.dumps({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "top parts"}]}),
        # a nested message wins over top-level fields, as before
        json.dumps({"type": "message", "role": "user", "content": "ignored", "message": {"role": "assistant",
                                                                                         "content": "nested wins"}}),
    ]
    tr = parse_transcript(lines)
    assert tr.text == ("User: nested string\nAssistant: bare string\nUser: top-level string\n"
                       "Assistant: top parts\nAssistant: nested wins")
    assert tr.line_map == (1, 2, 3, 4, 5)
    assert (tr.messages, tr.malformed) == (5, 0)
    assert tr.last_timestamp == 1773136805.0
    assert count_messages(lines) == 5


def test_message_lines_without_a_message_are_still_malformed() -> None:
    lines = [
        '{"type":"message","role":"user","content":"fine"}',
        "this is not json",
        '{"type":"message","message":"oops"}',
        '{"type":"message","content":"no role anywhere"}',
        '{"type":"message"}',
        '{"type":"message","role":"assistant","content":[{"type":"output_text","text":"also fine"}]}',
        '{"type":"message","role":"assistant","content":[{"type":"output_text","text":"cut',
    ]
    tr = parse_transcript(lines)
    assert tr.text == "User: fine\nAssistant: also fine"
    assert tr.line_map == (1, 6)
    assert tr.malformed == 5
    assert count_messages(lines) == 2


def test_responses_api_transcript_is_indexed_searched_and_read(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "sessions").mkdir(parents=True)
    (ws / "sessions" / "abc123.jsonl").write_text("\n".join(RESPONSES_LINES) + "\n")
    with MemoryIndex(ws, settings=Settings().override(embedding={"provider": "none"}), embedder=None) as idx:
        report = idx.sync()
        assert report.warnings == [] and (report.files, report.chunks) == (1, 1)
        hit = idx.search("rotate_keys", min_score=0.0, answer_threshold=0.0).results[0]
        assert hit.citation == "sessions/abc123.jsonl#L2-L8" and "sk-live" not in hit.snippet
        got = idx.get("sessions/abc123.jsonl")
        assert got["line_numbers"] == [2, 6, 8] and "[REDACTED]" in got["text"] and "sk-live" not in got["text"]


def test_claude_code_transcript_lines() -> None:
    """Claude Code writes {"type": "user" | "assistant", "message": {"role", "content"}} with the timestamp outside;
    its tool results (user turns of tool_result parts only), tool calls and summary lines say nothing to index."""
    lines = [
        json.dumps({"type": "summary", "summary": "Key rotation", "leafUuid": "u0"}),
        json.dumps({"type": "user", "timestamp": "2026-11-20T09:15:00Z", "uuid": "u1", "sessionId": "s",
                    "message": {"role": "user", "content": "Where does rotate_keys.sh keep the old key?"}}),
        json.dumps({"type": "assistant", "timestamp": "2026-11-20T09:15:07Z", "uuid": "u2",
                    "message": {"role": "assistant", "model": "m", "content": [
                        {"type": "text", "text": "It moves it to /etc/keys/retired with sk-live-abcdefghijklmnop12."},
                        {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]}}),
        json.dumps({"type": "user", "timestamp": "2026-11-20T09:15:09Z", "uuid": "u3",
                    "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                                             "content": "retired"}]}}),
        json.dumps({"type": "user", "message": "not an object"}),  # another tool's line that happens to say user
    ]
    tr = parse_transcript(lines)
    assert tr.text == ("User: Where does rotate_keys.sh keep the old key?\n"
                       "Assistant: It moves it to /etc/keys/retired with [REDACTED].")
    assert tr.line_map == (2, 3) and tr.malformed == 0
    assert tr.last_timestamp == pytest.approx(1795166107.0)  # 2026-11-20T09:15:07Z, the last line kept
