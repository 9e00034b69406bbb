"""Weft: the Loom fabric's coordinator (REST + WebSocket over NATS JetStream)."""

__version__ = "0.1.0"
