"""Where things live: a workspace and its index (the one resolution the facade and the CLI share), and the user-level
cache folder shared by every workspace and checkout.

Example:
    >>> from hybridmem.config import Settings
    >>> str(resolve_index_path(None, Path("/notes"), Settings()))
    '/notes/.hybridmem/index.sqlite'
    >>> str(resolve_index_path(None, Path("/notes"), Settings().override(store={"path": "idx/m.sqlite"})))
    '/notes/idx/m.sqlite'
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from hybridmem.config.base import INDEX_DIRNAME, INDEX_FILENAME
from hybridmem.errors import WorkspaceError

if TYPE_CHECKING:  # pragma: no cover
    from hybridmem.config.settings import Settings

CACHE_ENV = "HYBRIDMEM_CACHE_DIR"


def default_index_path(workspace: str | Path) -> Path:
    """``<workspace>/.hybridmem/index.sqlite``."""
    return Path(workspace) / INDEX_DIRNAME / INDEX_FILENAME


def resolve_workspace(workspace: str | Path | None) -> Path | None:
    """The absolute workspace folder (None stays None: a documents-only index).

    Raises:
        WorkspaceError: it does not exist or is not a folder.
    """
    if workspace is None:
        return None
    ws = Path(workspace)
    if not ws.exists():
        raise WorkspaceError(f"workspace not found: {ws}")
    if not ws.is_dir():
        raise WorkspaceError(f"workspace is not a folder: {ws}")
    return ws.absolute()


def resolve_index_path(index_path: str | Path | None, workspace: Path | None, settings: Settings) -> Path | str:
    """The index file: ``index_path`` if given, else ``store.path`` (relative to the workspace), else the default;
    ``":memory:"`` stays a string.

    Raises:
        WorkspaceError: none of them is given and there is no workspace.
    """
    if index_path is None and settings.store.path:
        configured = Path(settings.store.path).expanduser()
        index_path = configured if configured.is_absolute() or workspace is None else workspace / configured
    if index_path is None:
        if workspace is None:
            raise WorkspaceError("an index path is needed when there is no workspace")
        index_path = default_index_path(workspace)
    return Path(index_path) if str(index_path) != ":memory:" else str(index_path)


def user_cache_dir(setting: str = "") -> Path:
    """The user-level cache folder: ``$HYBRIDMEM_CACHE_DIR``, else the ``setting`` (``embedding.shared_cache_dir``)
    when given, else ``$XDG_CACHE_HOME/hybridmem``, else ``~/.cache/hybridmem``.

    Example:
        >>> saved = os.environ.pop(CACHE_ENV, None)
        >>> str(user_cache_dir("/srv/hm-cache"))
        '/srv/hm-cache'
        >>> os.environ[CACHE_ENV] = "/tmp/hm-cache"; str(user_cache_dir("/srv/hm-cache"))
        '/tmp/hm-cache'
        >>> _ = os.environ.pop(CACHE_ENV) if saved is None else os.environ.update({CACHE_ENV: saved})
    """
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    if setting:
        return Path(setting).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "hybridmem"
