"""The Streamlit workbench behind ``app.py``: one module per page, plus shared state and the sidebar.

Pages hold UI only. They reach ranking through :class:`hybridmem.MemoryIndex` (``retrieve``, ``rank``) and
:mod:`hybridmem.eval`, never :mod:`hybridmem.ranking` itself; nothing here scores or touches SQL.
``hybridmem.eval`` (ranx, numba) is imported lazily, inside the pages that need it, so the first paint stays fast.
"""
