"""``hybridmem mcp``: the memory tools served to agents over the Model Context Protocol.

Modules: :mod:`~hybridmem.serve.service` (one long-lived index, its watcher, settings reloads, the query log),
:mod:`~hybridmem.serve.server` (the MCP tools on the ``mcp`` SDK), :mod:`~hybridmem.serve.http` (Streamable HTTP:
bind and token checks, Host/Origin validation), :mod:`~hybridmem.serve.write` (``memory_write``, the flush prompt),
:mod:`~hybridmem.serve.notefile` (locked, journaled appends) and :mod:`~hybridmem.serve.cli` (the command). Nothing
is imported here, so the CLI stays fast to start.
"""

__all__: list[str] = []
