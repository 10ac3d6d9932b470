"""Exceptions raised by hybridmem. Messages say what was wrong and what to do."""

from __future__ import annotations


class HybridMemError(Exception):
    """Base class of every error hybridmem raises on purpose."""


class ConfigError(HybridMemError, ValueError):
    """A setting has an invalid value; the message names the setting."""


class PathError(HybridMemError):
    """A path was refused: outside the memory root, absolute, a symlink leading elsewhere, or not a memory file."""


class IndexCorruptError(HybridMemError):
    """The index file cannot be read; rebuild it with `hybridmem index --rebuild`."""


class ProviderError(HybridMemError):
    """An embedding provider failed or is unavailable."""


class DatasetError(HybridMemError):
    """A dataset is missing, malformed or has no queries."""


class WorkspaceError(HybridMemError):
    """The workspace folder does not exist or holds nothing to index."""


class ArgumentError(HybridMemError, ValueError):
    """An argument has an invalid value (a line number, a limit, a name); the message names the argument."""
