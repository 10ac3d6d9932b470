"""The ``hybridmem`` command: a thin layer over :class:`~hybridmem.index.MemoryIndex` and :mod:`hybridmem.eval`.

Every command prints a readable table for people, or JSON with ``--json``. User mistakes print one line on stderr and
exit with status 2; nothing prints a traceback unless ``HYBRIDMEM_DEBUG=1``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import TYPE_CHECKING, Any, Sequence

from hybridmem.commands import (
    COMMANDS, Parser, command, open_index, print_json, require_index, settings_of, storage_failure,
)
from hybridmem.config import PRESETS, RankConfig
from hybridmem.config.base import seconds
from hybridmem.errors import ConfigError, HybridMemError
from hybridmem.explain import fmt, print_explain
from hybridmem.wording import counted

if TYPE_CHECKING:  # pragma: no cover
    from hybridmem.index import MemoryIndex
    from hybridmem.sync import SyncReport

__all__ = ["COMMANDS", "build_parser", "command", "main", "open_index", "print_json"]


def _progress_bar(enabled: bool):  # noqa: ANN202
    if not enabled or not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    bars: dict[str, Any] = {}

    def cb(stage: str, done: int, total: int) -> None:
        if stage == "embed-tokens":  # the embedder's token count: a tokens/s rate beside the chunks/s
            embed = bars.get("embed")
            if embed is not None and (elapsed := embed.format_dict.get("elapsed") or 0) > 0:
                embed.set_postfix_str(f"{done / elapsed:,.0f} tokens/s", refresh=False)
            return
        bar = bars.get(stage)
        if bar is None:
            bar = bars[stage] = tqdm(total=total, desc=stage, unit="chunk" if stage == "embed" else "file",
                                     leave=False, file=sys.stderr)
        bar.n = done
        bar.refresh()
        if done >= total:
            bar.close()
            bars.pop(stage, None)

    return cb


@command("index")
def cmd_index(args: argparse.Namespace) -> int:
    """Index (or incrementally re-index) a workspace."""
    if args.rebuild:  # a corrupt index file is moved aside and rebuilt
        from hybridmem.config import resolve_index_path, resolve_workspace
        from hybridmem.sync.reindex import open_or_quarantine

        target = resolve_index_path(args.index, resolve_workspace(args.workspace), settings_of(args))

        def unsound(idx: MemoryIndex) -> str | None:
            problems = idx.check() if idx.settings.store.backend == "sqlite" else []
            why = " ".join("; ".join(problems).split())  # quick_check's report spans lines
            if why:
                print(f"note: the index {target} is damaged ({why}); it is moved aside and rebuilt",
                      file=sys.stderr, flush=True)
            return why or None

        idx_cm = open_or_quarantine(lambda: open_index(args, keyword_only=args.keyword_only), target, unsound)
    else:
        idx_cm = open_index(args, keyword_only=args.keyword_only)
    with idx_cm as idx:
        if idx.indexing_elsewhere():
            print("note: another process is indexing this workspace; waiting for it", file=sys.stderr, flush=True)
        report = idx.sync(force=args.rebuild, progress=_progress_bar(not args.json), wait=True, defer_sessions=False)
        status = idx.status()
    out = {**report.to_dict(), "provider": status["provider"], "model": status["model"], "dims": status["dims"],
           "index_path": status["index_path"]}
    if args.json:
        print_json(out)
    else:
        print(f"indexed {counted(out['files'], 'file')}, {counted(out['chunks'], 'chunk')} in {report.seconds:.2f}s "
              f"(added {report.added}, changed {report.changed}, deleted {report.deleted}, unchanged {report.unchanged}; "
              f"embedded {report.embedded}, cache hits {report.cache_hits}"
              + (f"; deferred {report.deferred} growing transcript(s)" if report.deferred else "") + ")")
        print(f"provider {out['provider']} {out['model']} ({out['dims']} dims) -> {out['index_path']}")
        for w in report.warnings:
            print(f"warning: {w}", file=sys.stderr)
        if status.get("fallback_reason"):
            print(f"note: {status['fallback_reason']}", file=sys.stderr)
    if out["files"] == 0:
        # exit 0: an empty workspace is a valid state (a new agent, or a cron job that indexes before the first note),
        # but a newcomer who pointed at the wrong folder must learn where we looked
        from hybridmem.sources import describe_sources

        print(f"note: {describe_sources(args.workspace, idx.settings.sources)}", file=sys.stderr)
    return 0


@command("status")
def cmd_status(args: argparse.Namespace) -> int:
    """Show what the index holds, after checking it (``quick_check`` and row counts); exit 1 when the check fails."""
    require_index(args)
    with open_index(args) as idx:
        problems = idx.check()
        try:
            status = idx.status(disk=True)
        except Exception as exc:  # noqa: BLE001 - a page too broken to count: report the check, not a traceback
            if not problems:
                raise
            status = {"index_path": str(idx.index_path), "status": f"unreadable ({type(exc).__name__}: {exc})"}
    status.pop("last_sync_report", None)
    status["integrity"] = "; ".join(problems) if problems else "ok"
    if args.json:
        print_json(status)
    else:
        for k, v in status.items():
            if k == "unread_note":  # a sentence: said below, with the other notes
                continue
            if k == "last_sync" and v:
                v = f"{time.strftime('%Y-%m-%d %H:%M:%S %z', time.localtime(v))} ({time.time() - v:,.0f} s ago)"
            elif k == "vectors" and v:  # not Python's repr of the dict in a plain listing
                v = f"{v['embedded']:,} of {v['total']:,} chunks embedded"
            elif k == "languages":  # chunks per language, most first
                v = ", ".join(f"{lang} {n:,}" for lang, n in sorted(v.items(), key=lambda kv: -kv[1])) or None
            print(f"{k:>16}: {'-' if v is None else v}")
    if status.get("changed_on_disk"):
        print(f"note: {counted(status['changed_on_disk'], 'file')} changed on disk since the last sync; "
              "`hybridmem index` (or a search, which syncs first) picks them up", file=sys.stderr)
    if status.get("unread_note"):
        print(f"note: {status['unread_note']}", file=sys.stderr)
    if status.get("sync_interrupted"):
        print("note: the last sync stopped before it finished (killed or failed): some files may be missing or out "
              "of date; `hybridmem index` finishes it", file=sys.stderr)
    if problems:
        print(f"hybridmem: error: the index {status['index_path']} failed its check ({status['integrity']}); "
              "rebuild it with `hybridmem index --rebuild`", file=sys.stderr)
        return 1
    return 0


# The ranking settings search's options set, and each option's name (an invalid value names both).
_RANK_FLAGS = {"max_results": "--max-results", "min_score": "--min-score", "answer_threshold": "--answer-threshold",
               "half_life_days": "--half-life", "vector_weight": "--vector-weight", "text_weight": "--text-weight",
               "rrf_k": "--rrf-k", "candidate_multiplier": "--candidate-multiplier", "mmr_lambda": "--mmr"}


def _rank_config(args: argparse.Namespace, base: RankConfig) -> RankConfig:
    changes: dict[str, Any] = {}
    if args.preset:
        base = PRESETS[args.preset]
    if args.fusion:
        base = base.with_fusion(args.fusion)  # and that preset's min score (--min-score below still wins)
    for name in _RANK_FLAGS:
        value = getattr(args, name, None)
        if value is not None:
            changes[name] = value
    if args.half_life_days is not None:
        changes["decay"] = True
    if args.mmr is not None:
        changes["mmr"], changes["mmr_lambda"] = True, args.mmr
    try:
        return base.replace(**changes) if changes else base
    except ConfigError as exc:  # the message names the setting: name the option that set it too
        flag = next((f for n, f in _RANK_FLAGS.items() if n in changes and f"ranking.{n}=" in str(exc)), None)
        if flag is None:
            raise
        raise ConfigError(f"argument {flag}: {exc}") from None


@command("search")
def cmd_search(args: argparse.Namespace) -> int:
    """Hybrid search over a workspace."""
    from hybridmem.searching import KEYWORD_INDEX, NOTHING_SEARCHED, notice_beside_empty
    from hybridmem.sources import SOURCES
    from hybridmem.tools import nothing_found

    if args.source is not None and args.source not in SOURCES:
        raise HybridMemError(f"unknown source {args.source!r}: expected one of {', '.join(SOURCES)}")
    if not args.query.strip():
        raise HybridMemError("the query is empty: give the words to search for")
    if not args.sync:
        require_index(args)
    configured = settings_of(args)
    with open_index(args, as_built=True, settings=configured) as idx:  # built keyword-only: stays so (`index` embeds)
        if args.sync and idx.read_only:
            print(f"note: not synced: {idx.read_only}; searching the index as it is", file=sys.stderr)
        elif args.sync:
            _sync_unless_busy(idx)
        cfg = _rank_config(args, idx.settings.ranking)
        resp = idx.search(args.query, config=cfg, source=args.source, path_prefix=args.path_prefix,
                          session=args.session)
    if resp.fallback and not resp.fallback_reason and configured.embedding.provider != idx.settings.embedding.provider:
        from dataclasses import replace  # kept keyword-only, though the settings name a model: say how to embed

        resp = replace(resp, fallback_reason=KEYWORD_INDEX)
    if args.json:
        out = resp.to_dict()
        if not resp.results:
            out["message"] = nothing_found(resp)  # the same sentence the text output and memory_search give
        if args.explain:
            out["candidates"] = [h.__dict__ | {"text": None} for h in resp.ranking.candidates]
        print_json(out)
        return 0
    if not resp.results:
        print(nothing_found(resp))
    for h in resp.results:
        print(f"{h.position}. {h.citation}  score {h.final_score:.3f}  (vector {fmt(h.vector_score)}, "
              f"text {fmt(h.text_score)})")
        for line in h.snippet.splitlines()[:8]:
            print(f"     {line}")
    # a keyword-only index has no reason to give; an empty result has already said that there was nothing to search
    if resp.fallback and resp.fallback_reason and (resp.results or resp.fallback_reason not in NOTHING_SEARCHED):
        print(f"note: {resp.fallback_reason}", file=sys.stderr)
    notice = resp.notice if resp.results else notice_beside_empty(resp.notice)
    if notice:
        print(f"note: {notice}", file=sys.stderr)
    if resp.vectors_note:
        print(f"note: {resp.vectors_note}", file=sys.stderr)
    if args.explain:
        print_explain(resp)
    return 0


SEARCH_EMBED_LIMIT = 64  # a search's sync embeds a few changed chunks itself; more wait for `hybridmem index`


def _sync_unless_busy(idx: Any) -> None:
    """Sync before a search, unless another process is indexing: then search what it has stored so far (keywords
    for every stored chunk, vectors for the embedded ones) rather than index the same files a second time. The
    search's own sync stores every change (keyword first) but embeds only up to :data:`SEARCH_EMBED_LIMIT` chunks."""
    if idx.indexing_elsewhere():
        print(f"note: not synced: another process is indexing {idx.index_path}; searching what it has stored so far",
              file=sys.stderr)
        return
    idx.sync(embed_limit=SEARCH_EMBED_LIMIT)


@command("recall")
def cmd_recall(args: argparse.Namespace) -> int:
    """The context block an agent gets before it starts: passing hits with citations, or nothing."""
    from hybridmem.tools import recall_context

    if not args.message.strip():  # as search's empty query and the MCP recall prompt's empty message
        raise HybridMemError("the message is empty: give the message to recall memories for")
    if not args.sync:
        require_index(args)
    with open_index(args, as_built=True) as idx:  # an index built keyword-only stays so (hybridmem index embeds it)
        if args.sync:
            _sync_unless_busy(idx)
        block, why = recall_context(idx, args.message)
    if args.json:
        print_json({"message": args.message, "context": block, "injected": bool(block), "why_not": why or None})
    elif block:
        print(block)
    else:
        print(f"({why})", file=sys.stderr)
    return 0


@command("get")
def cmd_get(args: argparse.Namespace) -> int:
    """Read lines of a memory file."""
    with open_index(args, keyword_only=True) as idx:
        out = idx.get(args.path, from_line=args.from_line, lines=args.lines)
    if args.json:
        print_json(out)
    else:
        print(out["text"])
        if out.get("note"):  # cut at sources.get_max_lines or get_max_chars
            print(f"note: {out['note']}", file=sys.stderr)
    return 0


def _version() -> str:
    """The installed distribution's version (the package's own in a source tree that was never installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hybridmem")
    except PackageNotFoundError:
        from hybridmem import __version__

        return __version__


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="hybridmem", description="Hybrid memory search for AI agents.")
    p.add_argument("--version", action="version", version=f"hybridmem {_version()}")
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp: argparse.ArgumentParser, workspace: bool = True) -> None:
        if workspace:
            sp.add_argument("workspace", nargs="?", default=".", help="memory workspace (default: .)")
        sp.add_argument("--index", default=None, help="index file (default: WORKSPACE/.hybridmem/index.sqlite)")
        sp.add_argument("--config", default=None, help="settings TOML (default: WORKSPACE/hybridmem.toml)")
        sp.add_argument("--json", action="store_true", help="machine-readable output")

    sp = sub.add_parser("index", help="index a workspace incrementally")
    common(sp)
    sp.add_argument("--rebuild", action="store_true", help="full reindex")
    sp.add_argument("--keyword-only", action="store_true", help="no embeddings")

    sp = sub.add_parser("status", help="what the index holds")
    common(sp)

    sp = sub.add_parser("search", help="hybrid search")
    sp.add_argument("query")
    common(sp)
    sp.add_argument("--preset", choices=sorted(PRESETS), default=None,
                    help="a named ranking configuration instead of the workspace's (the options below override it)")
    sp.add_argument("--fusion", default=None, help="joint (the default's order), weighted, rrf, or a ranx fusion method")
    sp.add_argument("--answer-threshold", dest="answer_threshold", type=float, default=None,
                    help="the answer gate: return nothing below this probability that memory holds an answer (0: off)")
    sp.add_argument("-n", "--max-results", dest="max_results", type=int, default=None, metavar="N",
                    help="return at most N hits (default: ranking.max_results)")
    sp.add_argument("--min-score", dest="min_score", type=float, default=None, metavar="X",
                    help="drop hits scoring below X (default: ranking.min_score, or the --fusion's own)")
    sp.add_argument("--mmr", type=float, default=None, metavar="LAMBDA", help="enable MMR with this lambda")
    sp.add_argument("--half-life", dest="half_life_days", type=float, default=None, metavar="DAYS",
                    help="enable temporal decay with this half-life")
    sp.add_argument("--vector-weight", dest="vector_weight", type=float, default=None,
                    help="the vector leg's weight (0 leaves the leg out; joint reads only its ratio to --text-weight)")
    sp.add_argument("--text-weight", dest="text_weight", type=float, default=None,
                    help="the keyword leg's weight (0 leaves the leg out; joint reads only its ratio to "
                         "--vector-weight)")
    sp.add_argument("--rrf-k", dest="rrf_k", type=int, default=None,
                    help="RRF's rank constant k (read by --fusion rrf only; ignored under joint, the default)")
    sp.add_argument("--candidate-multiplier", dest="candidate_multiplier", type=int, default=None, metavar="N",
                    help="fetch N x --max-results candidates per leg (default: ranking.candidate_multiplier)")
    sp.add_argument("--source", default=None, help="memory or sessions")
    sp.add_argument("--path-prefix", dest="path_prefix", default=None,
                    help="only files whose path starts with this (a folder: end it with /, as memory/projects/)")
    sp.add_argument("--session", default=None, help="restrict to one session transcript")
    sp.add_argument("--no-sync", dest="sync", action="store_false", help="do not sync before searching")
    sp.add_argument("--explain", action="store_true", help="every candidate with every stage's score")

    sp = sub.add_parser("recall", help="the memory context block for a message (empty when nothing is relevant)")
    sp.add_argument("message")
    common(sp)
    sp.add_argument("--no-sync", dest="sync", action="store_false", help="do not sync first")

    sp = sub.add_parser("get", help="read lines of a memory file")
    sp.add_argument("path")
    common(sp)
    sp.add_argument("--from", dest="from_line", type=int, default=None, metavar="LINE",
                    help="first line to read, from 1 (default: 1, or the citation's first line)")
    sp.add_argument("--lines", type=int, default=None, metavar="N",
                    help="number of lines to read (default: the citation's lines, else to the end, at most "
                         "sources.get_max_lines)")

    _add_watch_parser(sub)
    # Modules with subcommands of their own: each has ``add_parsers(sub)`` and registers its ``@command`` functions
    # with hybridmem.commands (never with this module, which imports them). Imported here: only a run needs them.
    from hybridmem.bench import add_parsers as bench_parsers
    from hybridmem.eval.cli import add_parsers as eval_parsers
    from hybridmem.cachecli import add_parsers as cache_parsers
    from hybridmem.serve.cli import add_parsers as serve_parsers

    for add_parsers in (eval_parsers, bench_parsers, serve_parsers, cache_parsers):
        add_parsers(sub)
    return p


def _add_watch_parser(sub: Any) -> None:
    sp = sub.add_parser("watch", help="keep the index fresh: sync on file changes (debounced) and on an interval")
    sp.add_argument("workspace", nargs="?", default=".", help="memory workspace (default: .)")
    sp.add_argument("--index", default=None, help="index file (default: WORKSPACE/.hybridmem/index.sqlite)")
    sp.add_argument("--config", default=None, help="settings TOML (default: WORKSPACE/hybridmem.toml)")
    sp.add_argument("--json", action="store_true", help="one JSON object per sync")
    sp.add_argument("--keyword-only", action="store_true", help="no embeddings")
    sp.add_argument("--debounce", type=seconds, default=None, metavar="SECONDS",
                    help="quiet time after a change before syncing (default: sync.watch_debounce_s)")
    sp.add_argument("--interval", type=seconds, default=None, metavar="SECONDS",
                    help="also sync every SECONDS (default: sync.interval_s; 0 = off)")
    sp.add_argument("--duration", type=float, default=None, metavar="SECONDS", help="stop after SECONDS")



def _sync_line(report: SyncReport, as_json: bool) -> str:
    if as_json:
        return json.dumps(report.to_dict(), default=str)
    return (f"synced {counted(report.files, 'file')}, {counted(report.chunks, 'chunk')} in {report.seconds:.2f}s "
            f"(added {report.added}, changed {report.changed}, deleted {report.deleted}"
            + (", full reindex" if report.full_reindex else "") + ")"
            + "".join(f"\nwarning: {w}" for w in report.warnings))


@command("watch")
def cmd_watch(args: argparse.Namespace) -> int:
    """Sync once, then on every change until interrupted (or ``--duration`` seconds)."""
    from hybridmem.watch import Watcher

    with open_index(args, keyword_only=args.keyword_only) as idx:
        print(_sync_line(idx.sync(), args.json), flush=True)

        def on_report(r: SyncReport) -> None:
            print(_sync_line(r, args.json), flush=True)

        def on_error(exc: BaseException) -> None:
            print(f"hybridmem: sync failed: {exc}", file=sys.stderr, flush=True)

        watcher = Watcher(idx, args.debounce, args.interval, on_report, on_error)
        if not args.json:
            print(f"watching {', '.join(str(r) for r in watcher.roots())} (debounce {watcher.debounce_s:g}s"
                  + (f", every {watcher.interval_s:g}s" if watcher.interval_s else "") + "); Ctrl-C stops",
                  file=sys.stderr, flush=True)
        with watcher:
            try:
                deadline = None if args.duration is None else time.monotonic() + args.duration
                while deadline is None or time.monotonic() < deadline:
                    time.sleep(0.1 if deadline is None else min(0.1, max(0.0, deadline - time.monotonic())))
            except KeyboardInterrupt:
                pass
            watcher.wait_idle(timeout=60)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except HybridMemError as exc:
        if os.environ.get("HYBRIDMEM_DEBUG"):
            raise
        print(f"hybridmem: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("hybridmem: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:
        message = None if os.environ.get("HYBRIDMEM_DEBUG") else storage_failure(exc)
        if message is None:
            raise
        print(f"hybridmem: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # ``python -m hybridmem.cli``: every module registers with hybridmem.commands
    sys.exit(main())
