"""Pattern: hierarchical agent memory over NATS KV (docs/pattern.md).

``pattern.service.MemoryService`` is the domain layer; ``pattern.tools``
mounts the MCP tools on any ``MCPServer`` (the ``pattern`` console script, or
Warp with ``--with-memory``).
"""
