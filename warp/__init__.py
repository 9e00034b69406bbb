"""Warp: the per-agent MCP server of the Loom fabric (channels, registry, inbox, work, DLQ)."""

__version__ = "0.1.0"
