"""Where user-level files live: the cache folder shared by every workspace and checkout."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "HYBRIDMEM_CACHE_DIR"


def user_cache_dir(setting: str = "") -> Path:
    """The user-level cache folder: ``$HYBRIDMEM_CACHE_DIR``, else the ``setting`` (``embedding.shared_cache_dir``)
    when given, else ``$XDG_CACHE_HOME/hybridmem``, else ``~/.cache/hybridmem``.

    Example:
        >>> os.environ[CACHE_ENV] = "/tmp/hm-cache"; str(user_cache_dir())
        '/tmp/hm-cache'
    """
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    if setting:
        return Path(setting).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "hybridmem"
