"""Where a workspace and its index are: the one resolution the facade and the CLI share.

Example:
    >>> from hybridmem.config import Settings
    >>> str(resolve_index_path(None, Path("/notes"), Settings()))
    '/notes/.hybridmem/index.sqlite'
    >>> str(resolve_index_path(None, Path("/notes"), Settings().override(store={"path": "idx/m.sqlite"})))
    '/notes/idx/m.sqlite'
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hybridmem.config.base import INDEX_DIRNAME, INDEX_FILENAME
from hybridmem.errors import WorkspaceError

if TYPE_CHECKING:  # pragma: no cover
    from hybridmem.config.settings import Settings


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
