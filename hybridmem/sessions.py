"""Session transcripts (``*.jsonl``) turned into ``User:`` / ``Assistant:`` lines, secrets redacted first
(:mod:`hybridmem.redaction`).

Each message record becomes one line; :attr:`Transcript.line_map` maps every produced line back to its JSONL line
number, so citations point at the transcript itself. Malformed lines are skipped and counted, never fatal.

Accepted records: ``{"type": "message", "message": {"role": ..., "content": ...}}``, the OpenAI Responses API item
``{"type": "message", "role": ..., "content": ...}``, Claude Code's ``{"type": "user", "message": {"role": "user",
"content": ...}}`` (and ``"assistant"``) and the bare ``{"role": ..., "content": ...}``; content is a
string or a list of parts whose ``text`` / ``input_text`` / ``output_text`` parts are kept. Only ``user`` and
``assistant`` messages are kept; other roles (``system``, ``developer``) and non-chat records (``reasoning``,
``function_call``, ``function_call_output``, tool and session lines) are skipped quietly. A ``"type": "message"``
line that holds neither a nested message object nor a role of its own is malformed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Iterable, Sequence

from hybridmem.redaction import Redactor, redactor

ROLES = {"user": "User", "assistant": "Assistant"}

NO_REDACTION = Redactor((), None)  # sources.redact_sessions = false
_BREAK = re.compile(r"[^\S \t]")  # whitespace a key-value rule does not read across (a line break, a form feed)
_ROLE_LABEL = re.compile(r"^(?:%s): " % "|".join(ROLES.values()), re.MULTILINE)


def keyword_text(text: str) -> str:
    r"""A transcript chunk's text as the keyword leg indexes it: without the ``User:`` / ``Assistant:`` label that
    starts each line. Every chunk of every transcript holds them, so as words they matched any query that says
    "user" (``user table``, ``userProfile``) in every transcript; the text shown and embedded keeps them.

    Example:
        >>> keyword_text("User: rotate the user token\nAssistant: done")
        'rotate the user token\ndone'
    """
    return _ROLE_LABEL.sub("", text)


def compile_redactions(extra: Sequence[str] = ()) -> Redactor:
    """The built-in rules (:mod:`hybridmem.redaction`) plus ``extra`` regexes (each replaced by ``[REDACTED]``).

    Raises:
        ConfigError: an extra pattern is not a valid regular expression (the message names the setting).
    """
    return redactor(extra)


def redact(text: str, patterns: Redactor | None = None) -> str:
    """``text`` with every secret replaced.

    Example:
        >>> redact("curl -H 'Authorization: Bearer abc.def.ghijkl' postgres://u:hunter2@db")
        "curl -H 'Authorization: Bearer [REDACTED]' postgres://u:[REDACTED]@db"
    """
    return (patterns if patterns is not None else redactor()).redact(text)


@dataclass(frozen=True)
class Transcript:
    """The indexable form of one transcript."""

    text: str
    line_map: tuple[int, ...]
    messages: int
    malformed: int
    last_timestamp: float | None
    surrogate_lines: tuple[int, ...] = ()  # JSONL lines whose text held lone surrogates (replaced by U+FFFD)


_SURROGATE = re.compile("[\ud800-\udfff]")


def replace_surrogates(text: str) -> tuple[str, int]:
    """``text`` with every lone surrogate replaced by U+FFFD, and how many there were.

    JSON may escape half of a surrogate pair (a cut emoji, ``"\\ud83d"``); ``json.loads`` turns it into a lone
    surrogate, which no UTF-8 encoder (SQLite, FTS, an embedding tokenizer) accepts. Paired escapes decode to one
    character and are kept.

    Example:
        >>> replace_surrogates("cut emoji \\ud83d here")
        ('cut emoji \ufffd here', 1)
    """
    if _SURROGATE.search(text) is None:
        return text, 0
    return _SURROGATE.subn("\ufffd", text)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and part.get("type", "text") in ("text", "input_text", "output_text"):
                if isinstance(part.get("text"), str):
                    parts.append(part["text"])
        return "\n".join(parts)
    return ""


def _message_of(record: dict[str, Any]) -> dict[str, Any] | None:
    """The object holding ``role`` and ``content`` in a record; None when a ``"type": "message"`` record has neither
    a nested message object nor a role of its own (a malformed line).

    A nested ``message`` object wins (the nested shape); a Responses API item carries its role and content itself.
    """
    nested = record.get("message")
    if record.get("type") != "message":
        # Claude Code's transcripts: {"type": "user" | "assistant", "message": {"role": ..., "content": [...]}}
        if record.get("type") in ROLES and "role" not in record and isinstance(nested, dict) and "role" in nested:
            return nested
        return record
    if isinstance(nested, dict):
        return nested
    return record if "role" in record else None


def _timestamp(value: Any) -> float | None:
    """Epoch seconds from epoch seconds, epoch milliseconds or ISO 8601; None for anything odd."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1e16:
        return float(value) / (1000.0 if value > 1e12 else 1.0)
    if isinstance(value, str) and len(value) < 64:
        try:
            dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
            if dt.tzinfo is None:
                dt = dt.replace(tzinfo=timezone.utc)
            return dt.timestamp()
        except (ValueError, OverflowError, OSError):
            return None
    return None


def count_messages(lines: Iterable[str]) -> int:
    """How many JSONL lines are user/assistant message records (what :func:`parse_transcript` would keep)."""
    n = 0
    for raw in lines:
        if '"role"' not in raw:
            continue
        try:
            record = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        if isinstance(record, dict):
            msg = _message_of(record)
            if msg is not None and str(msg.get("role", "")) in ROLES:
                n += 1
    return n


def appended_delta(path: str, indexed_size: int, size: int, max_bytes: int) -> tuple[int, int]:
    """Bytes and message records appended to a transcript since it was indexed at ``indexed_size`` bytes.

    Reads only the appended bytes, and at most ``max_bytes`` of them (past that the byte threshold decides anyway).
    """
    delta = size - indexed_size
    if delta <= 0 or delta >= max_bytes:
        return delta, 0
    with open(path, "rb") as fh:
        fh.seek(indexed_size)
        tail = fh.read(delta)
    return delta, count_messages(tail.decode("utf-8", "replace").split("\n"))  # records end in "\n" alone


def defer_session_reindex(path: str, indexed_size: int, size: int, delta_bytes: int, delta_messages: int) -> bool:
    """True when a grown transcript should wait: fewer than ``delta_bytes`` new bytes and ``delta_messages`` new
    messages since it was indexed (the reference's 100 KB / 50 messages). A shrunk or rewritten file never waits."""
    if size <= indexed_size:
        return False
    try:
        added_bytes, added_messages = appended_delta(path, indexed_size, size, delta_bytes)
    except OSError:
        return False
    return added_bytes < delta_bytes and added_messages < delta_messages


def parse_transcript(lines: Iterable[str], patterns: Redactor | None = None) -> Transcript:
    """Parse JSONL lines (numbered from 1) into ``User:``/``Assistant:`` lines with their source line numbers;
    secrets redacted by ``patterns`` (default: the built-in rules)."""
    pats = patterns if patterns is not None else compile_redactions()
    out: list[str] = []
    line_map: list[int] = []
    messages = malformed = 0
    last_ts: float | None = None
    surrogate_lines: list[int] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except (json.JSONDecodeError, RecursionError, ValueError):
            malformed += 1
            continue
        if not isinstance(record, dict):
            malformed += 1
            continue
        msg = _message_of(record)
        if msg is None:
            malformed += 1
            continue
        role = ROLES.get(str(msg.get("role", ""))[:16])
        if role is None:
            continue
        text, bad = replace_surrogates(_content_text(msg.get("content")))
        if bad:
            surrogate_lines.append(number)
        redacted = pats.redact(text, remember=True)  # as written: a secret over several lines (a private key)
        text = " ".join(redacted.split())
        if _BREAK.search(redacted):  # and as indexed: a key and its value the message wrote on two lines
            text = pats.redact(text, remember=True)
        if not text:
            continue
        ts = _timestamp(record.get("timestamp", msg.get("timestamp")))
        if ts is not None:
            last_ts = ts if last_ts is None else max(last_ts, ts)
        out.append(f"{role}: {text}")
        line_map.append(number)
        messages += 1
    return Transcript("\n".join(out), tuple(line_map), messages, malformed, last_ts, tuple(surrogate_lines))
