"""The registry of ``hybridmem`` subcommands and the output helper they share.

Every module that defines subcommands (``cli`` itself, ``eval.cli``, ``serve.cli``, ``bench``) registers them here
with :func:`command`; ``cli`` imports those modules and dispatches through :data:`COMMANDS`. Nothing here imports the
rest of the package at import time (what opens an index imports it when called), so no subcommand module needs
``hybridmem.cli`` (which imports them: that was a cycle).

Example:
    >>> @command("hello")
    ... def cmd_hello(args) -> int:
    ...     print_json({"hello": "world"})
    ...     return 0
    >>> COMMANDS["hello"] is cmd_hello
    True
    >>> _ = COMMANDS.pop("hello")
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable, NoReturn, Sequence

Command = Callable[[argparse.Namespace], int]

COMMANDS: dict[str, Command] = {}


def command(name: str) -> Callable[[Command], Command]:
    """Register the decorated function as the subcommand ``name``."""

    def wrap(fn: Command) -> Command:
        COMMANDS[name] = fn
        return fn

    return wrap


class Parser(argparse.ArgumentParser):
    """A usage mistake is one line on stderr and exit 2, as every other user mistake (argparse prints the whole
    usage first); ``--help`` still shows it. Subcommands' parsers are of the same class."""

    _argv: list[str] = []

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        Parser._argv = list(sys.argv[1:] if args is None else args)  # a subcommand's parser reads it in error()
        got, extra = self.parse_known_args(self._argv, namespace)
        # argparse reads positionals before options only: in `search QUERY --json WORKSPACE` the last one is the
        # workspace (unless one was given, "." included)
        if len(extra) == 1 and not extra[0].startswith("-") and getattr(got, "workspace", None) == "." \
                and self._argv.count(".") == (extra[0] == "."):
            got.workspace = extra[0]
        elif extra:
            self.error(f"unrecognized arguments: {' '.join(extra)}")
        return got

    def error(self, message: str) -> NoReturn:
        command = self._argv[0] if self._argv else ""
        unknown = [a for a in self._argv[1:] if a.startswith("-") and a != "--" and a.split("=")[0] not in
                   self._option_string_actions]
        if command in ("search", "recall") and self.prog.endswith(command) and unknown \
                and message.startswith("the following arguments are required: "):
            # `search -foo`: argparse took the query for an option and says none was given
            message, self.prog = f"unrecognized arguments: {' '.join(unknown)}", self.prog[: -len(command) - 1]
        if message.startswith("unrecognized arguments: -") and command in ("search", "recall"):
            first = message.split(": ", 1)[1].split()[0]
            self.exit(2, f"{self.prog}: error: {message}; if '{first}' is the query, put it after every option and "
                         f"'--': {self.prog} {command} [OPTIONS] -- '{first}' [WORKSPACE]\n")
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def print_json(obj: Any) -> None:
    """``obj`` as indented JSON on stdout (non-ASCII kept, anything else through ``str``)."""
    print(json.dumps(obj, ensure_ascii=False, indent=2, default=str))


def settings_of(args: argparse.Namespace) -> Any:
    """The settings a command runs with: ``--config`` (else the workspace's ``hybridmem.toml``) over the defaults."""
    from hybridmem.config import load_settings

    return load_settings(getattr(args, "config", None), workspace=getattr(args, "workspace", None))


def open_index(args: argparse.Namespace, keyword_only: bool = False, as_built: bool = False,
               settings: Any = None) -> Any:
    """The command's :class:`~hybridmem.index.MemoryIndex` (``keyword_only``: no embedding model). ``as_built``: an
    index built keyword-only (``index --keyword-only``, ``watch``/``mcp --keyword-only``) is opened keyword-only too,
    so a search's or a recall's sync keeps it as built (it rebuilt it for the configured model and embedded it: the
    flag did not stick); ``hybridmem index`` without the flag embeds it. See :meth:`MemoryIndex.built_keyword_only`.
    ``settings``: the command's settings when it has read them already (:func:`settings_of`)."""
    from hybridmem.index import MemoryIndex

    settings = settings or settings_of(args)
    if keyword_only:
        settings = settings.override(embedding={"provider": "none"})
    idx = MemoryIndex(args.workspace, index_path=args.index, settings=settings)
    if not as_built or settings.embedding.provider == "none" or not idx.built_keyword_only():
        return idx
    idx.close()
    keyword = settings.override(embedding={"provider": "none"})
    return MemoryIndex(args.workspace, index_path=args.index, settings=keyword)


def require_index(args: argparse.Namespace) -> None:
    """ArgumentError when the index a reading command would open was never built: a SQLite file that does not exist,
    or a PostgreSQL namespace no sync has written (opening either would create an empty index, and report nothing as
    if the memory were empty); see :func:`hybridmem.store.factory.missing_index`."""
    from hybridmem.config import resolve_index_path, resolve_workspace
    from hybridmem.errors import ArgumentError
    from hybridmem.store.factory import missing_index

    settings = settings_of(args)
    missing = missing_index(settings, resolve_index_path(args.index, resolve_workspace(args.workspace), settings))
    if missing:
        raise ArgumentError(missing)


def storage_failure(exc: BaseException) -> str | None:
    """One sentence for what the index's storage raised after it opened, or None (a bug: let it show): a damaged page
    (the header and schema read fine), or a full disk (SQLite's SQLITE_FULL, the file system's ENOSPC)."""
    import errno

    from hybridmem.store.connection import is_corruption

    if any(c.__name__ == "DatabaseError" for c in type(exc).__mro__) and is_corruption(exc):
        return f"the index is corrupt ({exc}); rebuild it with `hybridmem index --rebuild`"
    cause: BaseException | None = exc
    while cause is not None:
        if "database or disk is full" in str(cause) or getattr(cause, "errno", None) == errno.ENOSPC:
            return (f"the disk is full ({cause}): the index keeps what it held before; free some space and run the "
                    "command again")
        cause = cause.__cause__ or cause.__context__
    return None
