"""The Streamlit workbench behind ``app.py``: one module per page, plus shared state and the sidebar.

Pages hold UI only. They call :class:`hybridmem.MemoryIndex`, :func:`hybridmem.ranking.rank` and
:mod:`hybridmem.eval`; nothing here scores or touches SQL. ``hybridmem.eval`` (ranx, numba) is imported lazily, inside
the pages that need it, so the first paint stays fast.
"""

from pathlib import Path

PAGES_DIR = Path(__file__).resolve().parent

__all__ = ["PAGES_DIR"]
