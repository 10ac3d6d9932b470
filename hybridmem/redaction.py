"""Secret redaction: gitleaks' rule set, plus a few contextual rules of our own, applied before text is indexed.

Rules, in two sets:

- **gitleaks** (https://github.com/gitleaks/gitleaks, ``config/gitleaks.toml`` at commit ``b58d3f1``, 222 rules,
  MIT License, Copyright (c) 2019 Zachary Rice; the file and its license are vendored unchanged as
  ``hybridmem/data/gitleaks.toml`` and ``gitleaks.LICENSE``; to update, copy a newer file over it). Applied as gitleaks'
  ``detect.go`` applies them: a rule runs only when one of its keywords occurs (case-insensitively), the secret is
  ``secretGroup`` or else the first non-empty capture group, a rule with an ``entropy`` needs a secret of higher
  Shannon entropy, and the global and per-rule allowlists (regexes on the secret, match or line; stopwords) drop
  findings. Path and commit allowlists do not apply to text. RE2 syntax Python lacks is translated (a ``(?i)`` in mid
  pattern becomes a scoped ``(?i:...)``; ``\\z`` becomes ``\\Z``).
- **hybridmem**: what a chat says that a code scanner never sees, and the patterns redacted before gitleaks was
  adopted: ``password: x`` and ``DB_PASSWORD=x`` assignments, JSON ``"password": "x"``, "my password is x",
  "password Tr0ub4dor&3" (a bare one, when the value looks like a password),
  "api key X", an AWS secret key near ``aws``/``secret``/an access key id, ``Bearer`` tokens, passwords in URLs,
  ``sk-``/``AKIA``/``ASIA`` keys, JWTs and private-key blocks (also cut ones). Their values skip placeholders
  (gitleaks' global allowlist), short numbers and plain English words where the context is weak.

Every finding's span is replaced by ``[REDACTED]`` (``[REDACTED PRIVATE KEY]``, ``[REDACTED JWT]``); overlapping
spans merge; a span over several lines keeps its line breaks, so line numbers of memory files stay right.

Measured on the corpus in ``tests/test_redaction.py`` and on the shipped datasets: see that file's docstring.

Example:
    >>> redact("export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLE1")
    'export AWS_SECRET_ACCESS_KEY=[REDACTED]'
"""

from __future__ import annotations

import hashlib
import math
import re
import tomllib
import warnings
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Sequence

from hybridmem.errors import ConfigError

GITLEAKS_TOML = Path(__file__).parent / "data" / "gitleaks.toml"
RULESET_VERSION = 2  # bump when a hybridmem rule changes (the fingerprint covers the vendored file by content)


@dataclass(frozen=True)
class Allowlist:
    """A gitleaks allowlist: findings whose target matches ``regex`` or whose secret holds a stopword are kept."""

    regexes: tuple[re.Pattern[str], ...]
    stopwords: tuple[str, ...]
    target: str = "secret"  # "secret", "match" or "line"
    condition_and: bool = False
    has_paths: bool = False

    def allows(self, secret: str, match: str, line: str) -> bool:
        target = {"match": match, "line": line}.get(self.target, secret)
        checks = []
        if self.regexes:
            checks.append(any(r.search(target) for r in self.regexes))
        if self.stopwords:
            low = secret.lower()
            checks.append(any(w in low for w in self.stopwords))
        if self.condition_and:
            return not self.has_paths and bool(checks) and all(checks)  # a path condition never holds for text
        return any(checks)


@dataclass(frozen=True)
class Rule:
    """One detector: a regex whose secret group is redacted, with gitleaks' filters and our context checks."""

    id: str
    regex: re.Pattern[str]
    keywords: tuple[str, ...] = ()
    entropy: float = 0.0
    secret_group: int = 0
    allowlists: tuple[Allowlist, ...] = ()
    replacement: str = "[REDACTED]"
    origin: str = "hybridmem"
    check: Callable[[str], bool] | None = None  # the secret must pass this
    context: re.Pattern[str] | None = None  # ... and this must match within 160 chars before the secret


def shannon_entropy(s: str) -> float:
    """Bits per character, as gitleaks computes it."""
    if not s:
        return 0.0
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


def _python_regex(pattern: str) -> str:
    """RE2 -> Python ``re``: ``\\z`` -> ``\\Z``; a ``(?i)`` after the start scopes the rest of its group."""
    pattern = pattern.replace(r"\z", r"\Z")
    while True:
        k = pattern.find("(?i)", 1)
        if k < 0:
            return pattern
        depth, i, in_class = 0, k + 4, False
        while i < len(pattern):
            ch = pattern[i]
            if ch == "\\":
                i += 2
                continue
            if in_class:
                in_class = ch != "]"
            elif ch == "[":
                in_class = True
                if pattern[i + 1 : i + 2] == "]":
                    i += 1
            elif ch == "(":
                depth += 1
            elif ch == ")":
                if depth == 0:
                    break
                depth -= 1
            i += 1
        pattern = pattern[:k] + "(?i:" + pattern[k + 4 : i] + ")" + pattern[i:]


# gitleaks' global allowlist means a secret that is just "true", "false" or "null"; as written, its alternation allows
# any secret that starts with "true", holds "false" or ends in "null" (a password "Zq9falsetto#Kp2" was kept)
_BREAKS = re.compile(r"\r\n|\r|\n")
_MEANT = {r"(?i)^true|false|null$": r"(?i)^(?:true|false|null)$"}


def _allowlist(spec: dict[str, Any]) -> Allowlist:
    regexes = tuple(re.compile(_python_regex(_MEANT.get(r, r))) for r in spec.get("regexes") or ())
    return Allowlist(regexes, tuple(w.lower() for w in spec.get("stopwords") or ()), spec.get("regexTarget", "secret"),
                     spec.get("condition", "OR").upper() == "AND", bool(spec.get("paths")))


@lru_cache(maxsize=1)
def gitleaks_rules() -> tuple[tuple[Rule, ...], Allowlist]:
    """The vendored gitleaks rules (path-only rules left out) and its global allowlist."""
    data = tomllib.loads(GITLEAKS_TOML.read_text(encoding="utf-8"))
    with warnings.catch_warnings():  # "possible nested set": gitleaks writes [[ inside classes, meaning a literal [
        warnings.simplefilter("ignore", FutureWarning)
        return _compile_gitleaks(data)


def _compile_gitleaks(data: dict[str, Any]) -> tuple[tuple[Rule, ...], Allowlist]:
    rules = []
    for spec in data["rules"]:
        if "regex" not in spec:
            continue  # a rule on file paths only
        label = "[REDACTED PRIVATE KEY]" if spec["id"] == "private-key" else "[REDACTED]"
        rules.append(Rule(
            id=spec["id"], regex=re.compile(_python_regex(spec["regex"])),
            keywords=tuple(k.lower() for k in spec.get("keywords", ())), entropy=float(spec.get("entropy", 0.0)),
            secret_group=int(spec.get("secretGroup", 0)),
            allowlists=tuple(_allowlist(a) for a in spec.get("allowlists", ())), replacement=label, origin="gitleaks",
        ))
    return tuple(rules), _allowlist(data.get("allowlist", {}))


# -- hybridmem's rules ---------------------------------------------------------------------------------------------
_KEY_WORD = (r"(?:password|passwd|passphrase|pwd|secret|api[_-]?key|apikey|access[_-]?key|secret[_-]?key|"
             r"(?:access|auth|refresh|session|bearer)[_-]?token|token|client[_-]?secret|private[_-]?key|credentials?)")
# a key name: DB_PASSWORD, aws_secret_access_key, "password", app.api-key
_KEY_NAME = rf"(?<![A-Za-z0-9])(?:[A-Za-z0-9]+[_.-])*{_KEY_WORD}(?:[_.-](?:access[_.-])?(?:key|token|secret))?"
_VALUE = r"(?:\"([^\"\n]{3,200})\"|'([^'\n]{3,200})'|`([^`\n]{3,200})`|([^\s\"'`,;<>(){}\[\]]{4,200}))"
_TOKENISH = r"(?=[A-Za-z0-9_\-./+=]*[0-9])(?=[A-Za-z0-9_\-./+=]*[A-Za-z])([A-Za-z0-9_\-./+=]{8,200})"
_PLAIN_WORDS = frozenset("""
    is was the a an in on at to of for and or not no set stored saved kept being been still now also too very
    required optional wrong incorrect correct valid invalid expired expiring changed reset rotated updated missing
    empty blank hidden same different secret strong weak long short here there below above same new old ok none null
    true false yes changeme redacted masked encrypted hashed unknown generated different""".split())


# "password" in the languages the project serves (English is the rules below): the prefilter and the rule's words
_PASSWORD_WORDS = ("mật khẩu", "mat khau", "密码", "密碼", "口令", "パスワード", "暗証番号", "비밀번호", "암호", "contraseña",
                   "senha", "mot de passe", "passwort", "kennwort", "пароль", "şifre", "parola", "كلمة المرور",
                   "كلمة السر", "รหัสผ่าน", "पासवर्ड", "kata sandi", "κωδικός")


def _not_placeholder(secret: str) -> bool:
    s = secret.strip(".,;:!?")
    return not (re.fullmatch(r"\d{1,7}", s) or s.lower() in _PLAIN_WORDS or s.startswith(("[REDACTED", "<", "${", "{{"))
                or re.fullmatch(r"[*xX.•-]+|\$\w+|%\w+%|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+", s)  # YOUR_API_KEY
                or s.lower().startswith(("your_", "your-", "my_", "my-", "example")))


def _mixed(secret: str) -> bool:
    """Not a lowercase word: digits, capitals or symbols in it (a real password, not 'stored')."""
    return _not_placeholder(secret) and not re.fullmatch(r"[a-z]+", secret.strip(".,;:!?"))


def _password_like(secret: str) -> bool:
    """What follows a bare "password" (no "is", no ":") is a password only when it looks like one: 8+ characters with
    a letter and a digit, or capitals, small letters and a symbol ("password reset-flow" and "password policy" stay)."""
    s = secret.strip(".,;:!?")
    if len(s) < 8 or not _not_placeholder(s) or not re.search(r"[A-Za-z]", s):
        return False
    return bool(re.search(r"[0-9]", s)) or bool(re.search(r"[^A-Za-z0-9]", s) and re.search(r"[a-z]", s)
                                                and re.search(r"[A-Z]", s))


def _aws_secret(secret: str) -> bool:
    return (bool(re.search(r"[A-Z]", secret)) and bool(re.search(r"[a-z]", secret))
            and bool(re.search(r"[0-9/+]", secret)) and shannon_entropy(secret) > 4.0)


HYBRIDMEM_RULES: tuple[Rule, ...] = (
    Rule("private-key-block", re.compile(
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|$)"),
        ("private key",), replacement="[REDACTED PRIVATE KEY]"),
    Rule("bearer", re.compile(r"(?i)\bbearer\s+([A-Za-z0-9._~+/=-]{8,})"), ("bearer",), check=_not_placeholder),
    Rule("prefixed-key", re.compile(r"\b(?:sk|pk|rk)[-_](?:proj-|live[-_]|test[-_]|ant-|svcacct-|admin-)?"
                                    r"[A-Za-z0-9_-]{16,}"), ("sk", "pk", "rk")),
    Rule("aws-key-id", re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[0-9A-Z]{16}\b"),
         ("akia", "asia", "abia", "acca", "a3t")),
    Rule("aws-secret-key", re.compile(r"(?<![A-Za-z0-9/+=])([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"),
         ("aws", "secret", "akia", "asia"),
         check=_aws_secret, context=re.compile(r"(?i)aws|secret|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    Rule("github-token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_\w{40,})"), ("gh", "github_pat_")),
    Rule("slack-token", re.compile(r"\bxox[abposre]-[A-Za-z0-9-]{10,}"), ("xox",)),
    Rule("slack-webhook", re.compile(r"hooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9_/+-]{20,})"),
         ("hooks.slack.com",)),
    Rule("google-api-key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"), ("aiza",)),
    Rule("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"), ("eyj",),
         replacement="[REDACTED JWT]"),
    Rule("token-prefixes", re.compile(r"\b(?:hf_[A-Za-z0-9]{30,}|glpat-[A-Za-z0-9_-]{20,}|npm_[A-Za-z0-9]{36}|"
                                      r"pypi-[A-Za-z0-9_-]{50,}|SG\.[\w-]{22}\.[\w-]{43}|xapp-[\w-]{20,}|key-[0-9a-f]{32})\b"),
         ("hf_", "glpat-", "npm_", "pypi-", "sg.", "xapp-", "key-")),
    # detect-secrets 1.5.0's TelegramBotTokenDetector (Apache License 2.0, Copyright (c) 2018 Yelp, Inc.)
    Rule("telegram-bot-token", re.compile(r"(?<![\w:])\d{8,10}:([0-9A-Za-z_-]{35})(?![\w-])"), (":",)),
    # bounded repeats: an unbounded scheme run made this pattern quadratic on long words (20 KB took 2.6 s)
    Rule("url-password", re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]{0,31}://[^\s:/@]{1,256}:([^\s@/]{1,256})@"), ("://",),
         check=_not_placeholder),
    Rule("key-assignment", re.compile(rf"(?i){_KEY_NAME}[\"'`]?[ \t]*(?:=|:=|=>|:|\bis\b)[ \t]*{_VALUE}"),
         ("pass", "pwd", "secret", "key", "token", "credential"), check=_not_placeholder),
    Rule("password-sentence", re.compile(
        r"(?i)\b(?:password|passwd|passphrase|passcode|pin)\b(?:\s+(?:for|to|of|on)(?:\s+[^\s,;.]{1,40}){1,3}?)?"
        r"\s+(?:is|was|=)\s*:?\s+[\"'`]?([^\s\"'`]{3,200})"), ("pass", "pin"), check=_mixed),
    Rule("password-bare", re.compile(r"(?i)\b(?:password|passwd|passphrase|passcode)\s+[\"'`]?([^\s\"'`]{8,200})"),
         ("pass",), check=_password_like),
    Rule("my-password", re.compile(
        r"(?i)\b(?:my|our|the|your|his|her|their)\s+(?:[\w-]+\s+){0,2}?(?:password|passwd|passphrase|passcode)"
        r"\s+(?:is|was)\s*:?\s+[\"'`]?([^\s\"'`]{3,200})"), ("pass",), check=_not_placeholder),
    # "password" in other languages, then up to a few words ("wifi nhà mình là", "是", "は") and a password-looking
    # token: "Mật khẩu wifi là Tr0ub4dor&3", "密码是 Xy9#kLm2Pq", "パスワードは Tr0ub4dor&3 です" were kept verbatim
    Rule("password-word", re.compile(rf"(?i)(?:{'|'.join(_PASSWORD_WORDS)})[^\n.!?;。！？]{{0,40}}?"
                                     r"(?<![!-~])[\"'`]?((?=[!-~]*[0-9])(?=[!-~]*[A-Za-z])[!#-&(-_a-~]{8,200}(?<![.,;:!?]))"),
         _PASSWORD_WORDS, check=_password_like),
    Rule("key-sentence", re.compile(
        rf"(?i)\b(?:api[ _-]?key|secret[ _-]?key|access[ _-]?key|access[ _-]?token|auth[ _-]?token|token|secret)"
        rf"(?:\s+(?:is|was|=|:))?\s*:?\s+[\"'`]?{_TOKENISH}"), ("key", "token", "secret")),
)


def _user_rules(extra: Sequence[str]) -> tuple[Rule, ...]:
    out = []
    for i, p in enumerate(extra):
        try:
            out.append(Rule(f"redact_patterns[{i}]", re.compile(p), origin="settings"))
        except (re.error, TypeError) as exc:
            raise ConfigError(f"invalid setting sources.redact_patterns: {p!r} is not a valid regular expression "
                              f"({exc})") from None
    return tuple(out)


MEMO_MESSAGES = 200_000  # messages one rule set remembers redacting (about 100 bytes each); then it forgets them all
_UNSEEN = object()


class _Memo:
    """Transcript messages one rule set redacted: each one's digest, and what it became where a secret was replaced
    (None where it came back as it was). A sync reads a grown transcript whole again: in a process that keeps running
    (``watch``, the MCP server) only its new messages are redacted. Neither a message nor a secret is kept."""

    def __init__(self) -> None:
        self.got: dict[bytes, str | None] = {}

    @staticmethod
    def key(text: str) -> bytes:
        return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()

    def put(self, key: bytes, text: str, out: str) -> None:
        if len(self.got) >= MEMO_MESSAGES:
            self.got = {}
        self.got[key] = None if out is text else out


@dataclass(frozen=True)
class Redactor:
    """A compiled rule set; call :meth:`redact` or :meth:`findings`."""

    rules: tuple[Rule, ...]
    allow: Allowlist | None
    # The rules each keyword lets run, and those that always run (no keywords): a text is searched once per keyword,
    # not once per rule naming it, and only the rules whose keywords it holds are tried.
    by_keyword: dict[str, tuple[int, ...]] = field(init=False, repr=False, compare=False)
    always: frozenset[int] = field(init=False, repr=False, compare=False)
    memo: _Memo = field(init=False, repr=False, compare=False, default_factory=_Memo)

    def __post_init__(self) -> None:
        by_keyword: dict[str, list[int]] = {}
        for i, rule in enumerate(self.rules):
            for k in rule.keywords:
                by_keyword.setdefault(k, []).append(i)
        object.__setattr__(self, "by_keyword", {k: tuple(v) for k, v in by_keyword.items()})
        object.__setattr__(self, "always", frozenset(i for i, rule in enumerate(self.rules) if not rule.keywords))

    def findings(self, text: str) -> list[tuple[int, int, str, str]]:
        """``(start, end, rule id, replacement)`` of every secret in ``text``, in text order (spans may overlap)."""
        low = text.lower()
        tried = set(self.always)
        for k, rules in self.by_keyword.items():
            if k in low:
                tried.update(rules)
        out = []
        for rule in (self.rules[i] for i in sorted(tried)):
            for m in rule.regex.finditer(text):
                if m.end() == m.start():
                    continue
                g = rule.secret_group or next((i for i in range(1, (m.re.groups or 0) + 1) if m.group(i)), 0)
                start, end = m.span(g)
                secret = text[start:end]
                if rule.entropy and shannon_entropy(secret) <= rule.entropy:
                    continue
                if rule.check is not None and not rule.check(secret):
                    continue
                if rule.context is not None and not rule.context.search(text, max(0, start - 160), start):
                    continue
                if rule.origin != "settings" and (rule.allowlists or self.allow):
                    ls, le = text.rfind("\n", 0, start) + 1, text.find("\n", end)
                    line = text[ls : le if le >= 0 else len(text)]
                    lists = ((self.allow,) if self.allow else ()) + rule.allowlists
                    if any(a.allows(secret, m.group(0), line) for a in lists):
                        continue
                out.append((start, end, rule.id, rule.replacement))
        return sorted(out)

    def redact(self, text: str, remember: bool = False) -> str:
        """``text`` with every finding replaced; a replaced span keeps its line breaks. ``remember``: look it up among
        the texts redacted so, and remember it (a transcript's messages, read whole again each time it grows)."""
        if not remember or not self.rules:
            return self._redact(text)
        key = self.memo.key(text)
        got = self.memo.got.get(key, _UNSEEN)
        if got is _UNSEEN:
            got = self._redact(text)
            self.memo.put(key, text, got)
        return text if got is None else got  # type: ignore[return-value]

    def _redact(self, text: str) -> str:
        spans = self.findings(text)
        if not spans:
            return text
        merged: list[list[Any]] = []
        for start, end, _, repl in spans:
            if merged and start < merged[-1][1]:
                last = merged[-1]
                if end - start > last[1] - last[0]:
                    last[2] = repl
                last[1] = max(last[1], end)
            else:
                merged.append([start, end, repl])
        parts, pos = [], 0
        for start, end, repl in merged:
            parts += [text[pos:start], repl, "".join(_BREAKS.findall(text, start, end))]  # a span's lines stay lines
            pos = end
        parts.append(text[pos:])
        return "".join(parts)


@lru_cache(maxsize=32)
def _redactor(extra: tuple[str, ...], gitleaks: bool) -> Redactor:
    g_rules, allow = gitleaks_rules() if gitleaks else ((), None)
    return Redactor(HYBRIDMEM_RULES + g_rules + _user_rules(extra), allow)


def redactor(extra: Sequence[str] = (), gitleaks: bool = True) -> Redactor:
    """The built-in rules plus ``extra`` regexes (each whole match redacted); compiled once per rule set.

    Raises:
        ConfigError: an extra pattern is not a valid regular expression (the message names the setting).
    """
    return _redactor(tuple(extra), gitleaks)


def redact(text: str, extra: Sequence[str] = ()) -> str:
    """``text`` with every secret the built-in rules (and ``extra`` regexes) find replaced."""
    return redactor(extra).redact(text)


@lru_cache(maxsize=1)
def _ruleset_digest() -> str:
    return hashlib.sha256(GITLEAKS_TOML.read_bytes()).hexdigest()


def redaction_fingerprint(settings: Any) -> str:
    """A short hash of everything that decides what redaction leaves in the index: the vendored gitleaks file, the
    version of our rules, ``sources.redact_patterns``, ``redact_sessions`` and ``redact_memory``. Fold it into the
    index's settings hash so that changing any of them re-indexes on the next sync.
    """
    src = settings.sources
    h = hashlib.sha256(_ruleset_digest().encode())
    h.update(repr((RULESET_VERSION, tuple(src.redact_patterns), src.redact_sessions, src.redact_memory)).encode())
    return h.hexdigest()[:16]
