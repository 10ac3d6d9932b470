"""Write ranking settings into a workspace's ``hybridmem.toml``, keeping every other setting and comment.

A round trip through ``tomlkit`` (not string editing): only the changed keys of ``[ranking]`` are set, anything else
in the file stays byte for byte. The CLI reads the file on every call and a running MCP server reloads it when it
changes, so what is written here is used from their next call.

Example:
    >>> old, new = ranking_update("ws/hybridmem.toml", {"fusion": "rrf", "min_score": 0.0})   # doctest: +SKIP
    >>> print(unified_diff(old, new, "hybridmem.toml"))                                   # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

from hybridmem.config.ranking import RankConfig
from hybridmem.config.settings import load_settings, settings_from_dict
from hybridmem.errors import ConfigError

CONFIG_FILENAME = "hybridmem.toml"


def ranking_changes(wanted: RankConfig, workspace: str | Path, fields: Iterable[str] | None = None) -> dict[str, Any]:
    """The ranking fields (of ``fields``, default all) where ``wanted`` differs from what the workspace uses now."""
    current = load_settings(workspace=workspace).ranking
    names = list(fields) if fields is not None else [f.name for f in dataclasses.fields(RankConfig)]
    return {n: getattr(wanted, n) for n in names if getattr(wanted, n) != getattr(current, n)}


def ranking_update(path: str | Path, changes: Mapping[str, Any]) -> tuple[str, str]:
    """``(old text, new text)`` of the settings file with ``[ranking]`` keys set to ``changes``.

    Raises:
        ConfigError: the file is not valid TOML, or the result is not valid settings.
    """
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    p = Path(path)
    old = p.read_text(encoding="utf-8") if p.is_file() else ""
    try:
        doc = tomlkit.parse(old)
    except TOMLKitError as exc:
        raise ConfigError(f"cannot parse settings file {p}: {exc}") from None
    if "ranking" not in doc:
        doc["ranking"] = tomlkit.table()
    table = doc["ranking"]
    for k, v in changes.items():
        table[k] = list(v) if isinstance(v, tuple) else v
    new = tomlkit.dumps(doc)
    settings_from_dict(tomlkit.parse(new).unwrap())  # refuse to write a file the engine would not load
    return old, new


def unified_diff(old: str, new: str, name: str = CONFIG_FILENAME) -> str:
    return "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{name}", f"b/{name}"))


def write_ranking(workspace: str | Path, changes: Mapping[str, Any]) -> str:
    """Set ``changes`` in ``<workspace>/hybridmem.toml`` (created when missing, written atomically); the diff."""
    p = Path(workspace) / CONFIG_FILENAME
    old, new = ranking_update(p, changes)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    tmp.write_text(new, encoding="utf-8")
    os.replace(tmp, p)
    return unified_diff(old, new)


__all__ = ["CONFIG_FILENAME", "ranking_changes", "ranking_update", "unified_diff", "write_ranking"]
