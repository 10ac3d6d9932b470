"""``hybridmem mcp [WORKSPACE]``: the MCP server on stdio, or on Streamable HTTP with ``--http [HOST:]PORT``.

Importing this module is cheap (the CLI imports it for every command); the SDK loads only when the server starts.

Examples::

    hybridmem mcp ~/agent-memory                          # stdio, for Claude Code / Desktop, Cursor, OpenClaw
    hybridmem mcp ~/agent-memory --http 8765              # http://127.0.0.1:8765/mcp
    hybridmem mcp ~/agent-memory --http 0.0.0.0:8765 --token T --allow-host mem.example.org
    hybridmem mcp ~/agent-memory --allow-write            # adds memory_write and the memory_flush prompt
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from hybridmem.commands import command
from hybridmem.config.base import seconds


def add_parsers(sub: Any) -> None:
    sp = sub.add_parser("mcp", help="serve memory_search/memory_get to agents over MCP (stdio or --http)")
    sp.add_argument("workspace", nargs="?", default=".", help="memory workspace (default: .)")
    sp.add_argument("--index", default=None, help="index file (default: WORKSPACE/.hybridmem/index.sqlite)")
    sp.add_argument("--config", default=None, help="settings TOML (default: WORKSPACE/hybridmem.toml)")
    sp.add_argument("--http", nargs="?", const="", default=None, metavar="[HOST:]PORT",
                    help="serve Streamable HTTP at http://HOST:PORT/mcp instead of stdio (default serve.http_host, "
                         "127.0.0.1, and serve.http_port, 8765)")
    sp.add_argument("--token", default=None,
                    help="bearer token HTTP clients must send (default: $HYBRIDMEM_MCP_TOKEN); required off loopback")
    sp.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                    help="a further name clients may reach the HTTP server by (Host header), e.g. a DNS name or a "
                         "proxy's; repeatable (loopback, the bound address and, for 0.0.0.0, this machine's "
                         "addresses and name are always accepted)")
    sp.add_argument("--allow-write", action="store_true",
                    help="add memory_write (append notes under memory/) and the pre-compaction flush prompt")
    sp.add_argument("--keyword-only", action="store_true", help="no embeddings")
    sp.add_argument("--no-watch", dest="watch", action="store_false", help="do not sync on file changes")
    sp.add_argument("--debounce", type=seconds, default=None, metavar="SECONDS",
                    help="quiet time after a change before syncing (default: sync.watch_debounce_s)")


@command("mcp")
def cmd_mcp(args: argparse.Namespace) -> int:
    """Open the workspace once, then serve until the client disconnects (stdio) or until interrupted (HTTP)."""
    from hybridmem.serve.http import TOKEN_ENV, check_bind, parse_bind

    try:
        import mcp  # noqa: F401
    except ImportError:
        from hybridmem.errors import HybridMemError

        raise HybridMemError("the MCP SDK is not installed: pip install 'hybridmem[serve]'") from None

    token = args.token or os.environ.get(TOKEN_ENV) or None
    bind = None
    if args.http is not None:
        from hybridmem.config import load_settings

        serve_cfg = load_settings(args.config, workspace=args.workspace).serve
        bind = parse_bind(args.http, serve_cfg.http_host, serve_cfg.http_port)
        check_bind(bind[0], token)  # refuse before any work
    from hybridmem.serve.server import build_server, serve_stdio
    from hybridmem.serve.service import MemoryService

    service = MemoryService(args.workspace, config=args.config, index_path=args.index,
                            keyword_only=args.keyword_only, watch=args.watch, debounce_s=args.debounce)
    try:
        if bind is None:
            import anyio

            anyio.run(serve_stdio, service, args.allow_write)
        else:
            from hybridmem.serve.http import serve_http

            def ready(port: int) -> None:
                print(f"hybridmem: serving MCP at http://{bind[0]}:{port}/mcp", file=sys.stderr, flush=True)

            serve_http(build_server(service, args.allow_write), bind[0], bind[1], token, ready,
                       tuple(args.allow_host), service.settings.serve.request_timeout_s)
    except KeyboardInterrupt:
        pass
    finally:
        service.close()
    return 0
