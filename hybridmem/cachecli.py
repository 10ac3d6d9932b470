"""``hybridmem cache stats|prune``: the user-level embedding cache shared by every workspace and checkout, and
beside it the answer gate's token states of passages (``tokens.sqlite``, capped at 512 MB or the embedding cache's cap
if lower; :mod:`hybridmem.store.shared_cache`).

Examples::

    hybridmem cache stats                 # where they are, rows and bytes per model, the caps
    hybridmem cache prune --max-mb 500    # least recently used rows first, down to 500 MB (each file)
    hybridmem cache prune --older-than 90 # rows no sync or search has read for 90 days
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from typing import Any

from hybridmem.commands import command, print_json
from hybridmem.config import load_settings
from hybridmem.errors import ArgumentError
from hybridmem.store.shared_cache import TOKENS_FILENAME, SharedCache, default_path, tokens_cap_mb


def add_parsers(sub: Any) -> None:
    sp = sub.add_parser("cache", help="the shared embedding cache (stats, prune)")
    sp.add_argument("action", choices=("stats", "prune"))
    sp.add_argument("--config", default=None,
                    help="settings TOML (embedding.shared_cache_dir, embedding.shared_cache_max_mb)")
    sp.add_argument("--workspace", default=None, help=argparse.SUPPRESS)
    sp.add_argument("--max-mb", dest="max_mb", type=float, default=None,
                    help="prune: keep at most this many megabytes (default: embedding.shared_cache_max_mb)")
    sp.add_argument("--older-than", dest="older_than", type=float, default=None, metavar="DAYS",
                    help="prune: also drop rows unused for DAYS days")
    sp.add_argument("--json", action="store_true", help="machine-readable output")


def _mb(n: float) -> str:
    return f"{n / (1 << 20):,.1f} MB"


@command("cache")
def cmd_cache(args: argparse.Namespace) -> int:
    """Show or prune the shared embedding cache."""
    for flag, value in (("--max-mb", args.max_mb), ("--older-than", args.older_than)):
        # a typo such as --max-mb -5 must not empty every workspace's cache
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise ArgumentError(f"{flag} must be a number >= 0, got {value:g}; nothing was pruned")
    cfg = load_settings(getattr(args, "config", None), workspace=getattr(args, "workspace", None)).embedding
    out = _one(args, SharedCache(default_path(cfg.shared_cache_dir), cfg.shared_cache_max_mb << 20))
    out["tokens"] = _one(args, SharedCache(default_path(cfg.shared_cache_dir, TOKENS_FILENAME),
                                           tokens_cap_mb(cfg) << 20))
    if not cfg.shared_cache:
        out["note"] = "embedding.shared_cache = false: syncs and searches neither read nor write these caches"
    if args.json:
        print_json(out)
        return 0
    for part, rows in ((out, "vectors"), (out["tokens"], "passages' token states")):
        if "removed" in part:
            print(f"pruned {part['removed']:,} rows ({_mb(part['freed_bytes'])})")
        print(f"{part['path']}: {part['rows']:,} {rows}, {_mb(part['bytes'])} (cap {_mb(part['max_bytes'])}; file "
              f"{_mb(part['file_bytes'])})")
        for m in part["models"]:
            used = time.strftime("%Y-%m-%d %H:%M", time.localtime(m["last_used"])) if m["last_used"] else "-"
            print(f"  {m['provider']} {m['model']} {m['provider_key']} weights {m['weights'] or '-'}: {m['rows']:,} "
                  f"{rows}, {_mb(m['bytes'])}, last used {used}")
    for key in ("error", "note"):
        for part in (out, out["tokens"]):
            if part.get(key):
                print(f"note: {part[key]}", file=sys.stderr)
    return 0


def _one(args: argparse.Namespace, cache: SharedCache) -> dict[str, Any]:
    """One cache file's stats, after pruning it when ``args.action`` is prune."""
    try:
        out: dict[str, Any] = {}
        if args.action == "prune":
            before = cache.stats()["bytes"]
            # --max-mb 0 empties it; without --max-mb the configured cap (0 there: only --older-than prunes)
            cap = cache.max_bytes if args.max_mb is None else max(1, int(args.max_mb * (1 << 20)))
            out["removed"] = cache.prune(cap, args.older_than)
            cache.vacuum()
            out["freed_bytes"] = before - cache.stats()["bytes"]
        out.update(cache.stats())
    finally:
        cache.close()
    return out
