"""Session transcripts (``*.jsonl``) turned into ``User:`` / ``Assistant:`` lines, secrets redacted first.

Each message record becomes one line; :attr:`Transcript.line_map` maps every produced line back to its JSONL line
number, so citations point at the transcript itself. Malformed lines are skipped and counted, never fatal.

Accepted records: ``{"type": "message", "message": {"role": ..., "content": ...}}`` and the bare
``{"role": ..., "content": ...}``; content is a string or a list of parts whose ``text`` parts are kept.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable, Sequence

ROLES = {"user": "User", "assistant": "Assistant"}

# Built-in secret patterns: (regex, replacement).
DEFAULT_REDACTIONS: tuple[tuple[str, str], ...] = (
    (r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)", "[REDACTED PRIVATE KEY]"),
    (r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}", "Bearer [REDACTED]"),
    (r"\b(?:sk|pk|rk)-(?:proj-|live-|test-|ant-)?[A-Za-z0-9_-]{16,}", "[REDACTED]"),
    (r"\bAKIA[0-9A-Z]{16}\b", "[REDACTED]"),
    (r"\bgh[pousr]_[A-Za-z0-9]{30,}\b", "[REDACTED]"),
    (r"\bxox[abposr]-[A-Za-z0-9-]{10,}", "[REDACTED]"),
    (r"\bAIza[0-9A-Za-z_-]{35}\b", "[REDACTED]"),
    (r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}", "[REDACTED JWT]"),
    (r"([a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/@]+:)[^\s@/]+@", r"\1[REDACTED]@"),
    (r"(?i)\b(password|passwd|pwd|secret|api[_-]?key|access[_-]?token|auth[_-]?token)(\s*[=:]\s*)[\"']?[^\s\"',;]{4,}",
     r"\1\2[REDACTED]"),
)


def compile_redactions(extra: Sequence[str] = ()) -> list[tuple[re.Pattern[str], str]]:
    """The built-in patterns plus ``extra`` regexes (each replaced by ``[REDACTED]``)."""
    out = [(re.compile(p), r) for p, r in DEFAULT_REDACTIONS]
    out += [(re.compile(p), "[REDACTED]") for p in extra]
    return out


def redact(text: str, patterns: Sequence[tuple[re.Pattern[str], str]] | None = None) -> str:
    """``text`` with every secret replaced.

    Example:
        >>> redact("curl -H 'Authorization: Bearer abc.def.ghijkl' postgres://u:hunter2@db")
        "curl -H 'Authorization: Bearer [REDACTED]' postgres://u:[REDACTED]@db"
    """
    for pat, repl in patterns if patterns is not None else compile_redactions():
        text = pat.sub(repl, text)
    return text


@dataclass(frozen=True)
class Transcript:
    """The indexable form of one transcript."""

    text: str
    line_map: tuple[int, ...]
    messages: int
    malformed: int
    last_timestamp: float | None


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


def _timestamp(value: Any) -> float | None:
    if isinstance(value, (int, float)) and value > 0:
        return float(value) / (1000.0 if value > 1e12 else 1.0)
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def parse_transcript(
    lines: Iterable[str], patterns: Sequence[tuple[re.Pattern[str], str]] | None = None
) -> Transcript:
    """Parse JSONL lines (numbered from 1) into ``User:``/``Assistant:`` lines with their source line numbers."""
    pats = patterns if patterns is not None else compile_redactions()
    out: list[str] = []
    line_map: list[int] = []
    messages = malformed = 0
    last_ts: float | None = None
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
        msg = record.get("message") if record.get("type") == "message" else record
        if not isinstance(msg, dict):
            if record.get("type") == "message":
                malformed += 1
            continue
        role = ROLES.get(str(msg.get("role", "")))
        if role is None:
            continue
        text = " ".join(redact(_content_text(msg.get("content")), pats).split())
        if not text:
            continue
        ts = _timestamp(record.get("timestamp", msg.get("timestamp")))
        if ts is not None:
            last_ts = ts if last_ts is None else max(last_ts, ts)
        out.append(f"{role}: {text}")
        line_map.append(number)
        messages += 1
    return Transcript("\n".join(out), tuple(line_map), messages, malformed, last_ts)
