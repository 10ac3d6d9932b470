"""Making a folder's entries durable: after a file is created or renamed into a folder, the folder itself is synced,
so a power cut cannot lose the new name (ext4's ordered journal keeps it anyway; other file systems may not)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["fsync_dir"]


def fsync_dir(folder: str | Path) -> None:
    """``fsync`` the folder ``folder``, as far as the file system allows (a folder that cannot be opened or synced,
    as on Windows, is left as it is)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
