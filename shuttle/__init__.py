"""Shuttle: the operators' command line for the Loom fabric (talks to Weft over HTTP/WebSocket)."""

__version__ = "0.1.0"
