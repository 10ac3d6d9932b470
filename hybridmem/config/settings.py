"""All settings together (:class:`Settings`), loaded from TOML and overridden per call."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping

from hybridmem.config.base import (
    TOKENIZER_VERSION, _is_int, provider_model,
)
from hybridmem.config.ranking import (
    RankConfig,
)
from hybridmem.config.sections import (
    ChunkingConfig, EmbeddingConfig, ServeConfig, SourcesConfig, StoreConfig, SyncConfig, TokenizerConfig,
)
from hybridmem.errors import ConfigError


_SECTIONS = {
    "chunking": ChunkingConfig, "tokenizer": TokenizerConfig, "embedding": EmbeddingConfig, "ranking": RankConfig,
    "sources": SourcesConfig, "sync": SyncConfig, "store": StoreConfig, "serve": ServeConfig,
}


@dataclass(frozen=True)
class Settings:
    """All settings. ``index_hash()`` covers what changes the index's content."""

    chunking: ChunkingConfig = field(default_factory=ChunkingConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    ranking: RankConfig = field(default_factory=RankConfig)
    sources: SourcesConfig = field(default_factory=SourcesConfig)
    sync: SyncConfig = field(default_factory=SyncConfig)
    store: StoreConfig = field(default_factory=StoreConfig)
    serve: ServeConfig = field(default_factory=ServeConfig)

    def override(self, **sections: Mapping[str, Any] | Any) -> "Settings":
        """A copy with fields changed: ``override(ranking={"rrf_k": 30})`` or a whole section object."""
        changes: dict[str, Any] = {}
        for name, value in sections.items():
            if name not in _SECTIONS:
                raise ConfigError(f"unknown settings section {name!r}: expected one of {', '.join(_SECTIONS)}")
            if isinstance(value, _SECTIONS[name]):
                changes[name] = value
            else:
                changes[name] = _build(_SECTIONS[name], dict(value), base=getattr(self, name), section=name)
        return replace(self, **changes)

    def index_hash(self, dims: int | None = None) -> str:
        """Stable hash of the settings that change what the index holds (model, provider, chunking, tokenizer, dims,
        redaction rules)."""
        from hybridmem.redaction import redaction_fingerprint

        tok = dataclasses.asdict(self.tokenizer)
        for query_only in ("query_mode", "query_stopwords", "max_query_terms", "max_query_chars",
                           "query_term_frequency"):
            tok.pop(query_only)
        payload = {
            "provider": self.embedding.provider,
            "model": provider_model(self.embedding.provider, self.embedding.model),
            "base_url": self.embedding.base_url,
            "chunking": dataclasses.asdict(self.chunking),
            "tokenizer": tok,
            "dims": dims if dims is not None else self.embedding.dims,
            "schema": 1,
            "redaction": redaction_fingerprint(self),  # a new redact_patterns entry re-indexes on the next sync
            "tokenizer_version": TOKENIZER_VERSION,
        }
        blob = json.dumps(payload, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _build(cls: type, values: dict[str, Any], base: Any = None, section: str = "") -> Any:
    known = {f.name: f for f in fields(cls)}
    for key in values:
        if key not in known:
            raise ConfigError(
                f"unknown setting {section}.{key}: expected one of {', '.join(sorted(known))}"
            )
    coerced: dict[str, Any] = {}
    for key, value in values.items():
        default = getattr(base if base is not None else cls(), key)
        if isinstance(default, tuple) and isinstance(value, list):
            value = tuple(value)
        elif isinstance(default, float) and _is_int(value):
            value = float(value)
        elif default is not None and (not isinstance(value, type(default)) or (
            isinstance(value, bool) and not isinstance(default, bool)  # rrf_k = true is not an integer
        )):
            expected = "a list" if isinstance(default, tuple) else type(default).__name__  # TOML has no tuples
            raise ConfigError(f"invalid setting {section}.{key}={value!r}: expected {expected}")
        coerced[key] = value
    return replace(base, **coerced) if base is not None else cls(**coerced)


def settings_from_dict(data: Mapping[str, Any], base: Settings | None = None) -> Settings:
    """Settings from a nested mapping such as a parsed TOML file."""
    base = base or Settings()
    for name, value in data.items():
        if name not in _SECTIONS:
            raise ConfigError(f"unknown settings section {name!r}: expected one of {', '.join(_SECTIONS)}")
        if not isinstance(value, Mapping):
            raise ConfigError(f"settings section {name!r} must be a table")
    return base.override(**{k: dict(v) for k, v in data.items()})


def load_settings(path: str | Path | None = None, workspace: str | Path | None = None) -> Settings:
    """Load settings from ``path``, else ``<workspace>/hybridmem.toml`` when it exists, else the defaults."""
    candidates = []
    if path is not None:
        candidates.append(Path(path))
    elif workspace is not None:
        candidates.append(Path(workspace) / "hybridmem.toml")
    for p in candidates:
        if p.is_file():
            try:
                data = tomllib.loads(p.read_text(encoding="utf-8"))
            except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
                raise ConfigError(f"cannot parse settings file {p}: {exc}") from None
            except OSError as exc:
                raise ConfigError(f"cannot read settings file {p}: {exc.strerror or exc}") from None
            return settings_from_dict(data)
        if os.path.lexists(p):  # a folder, or a link to nothing: the defaults would be served without a word
            raise ConfigError(f"settings file {p} is not a readable file (a folder, or a link to nothing)")
        if path is not None:
            raise ConfigError(f"settings file not found: {p}")
    return Settings()
