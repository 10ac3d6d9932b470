"""The registry of ``hybridmem`` subcommands and the output helper they share.

Every module that defines subcommands (``cli`` itself, ``eval.cli``, ``serve.cli``, ``bench``) registers them here
with :func:`command`; ``cli`` imports those modules and dispatches through :data:`COMMANDS`. Nothing here imports the
rest of the package, so no subcommand module needs ``hybridmem.cli`` (which imports them: that was a cycle).

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
from typing import Any, Callable, NoReturn

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

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def print_json(obj: Any) -> None:
    """``obj`` as indented JSON on stdout (non-ASCII kept, anything else through ``str``)."""
    print(json.dumps(obj, ensure_ascii=False, indent=2, default=str))
