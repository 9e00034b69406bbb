"""What an agent's own process (and Weft's) leaves out of its imports.

A fleet runs one Warp per agent, so whatever each process imports and never uses is paid
once per agent (docs/scaling.md, Memory per agent); Weft pays it at every start. Two
libraries import an optional dependency eagerly whenever it is installed:

* nats-py imports aiohttp for its WebSocket transport, about 20 MB of every process, used
  only when a server URL is ``ws://`` or ``wss://``;
* the MCP SDK's server imports rich to build a log handler that it installs only in a
  process that configured no logging (Warp always has).

Python's import system treats a ``None`` entry in ``sys.modules`` as a module that is not
installed; both libraries then take the path their authors wrote for that case."""

from __future__ import annotations

import sys

WEBSOCKET_SCHEMES = ("ws://", "wss://")


def unused_optionals(nats_url: str | None, *, mcp_server: bool = True) -> list[str]:
    """The optional modules a process reaching NATS at ``nats_url`` can do without (rich
    only in an MCP server: Weft's CLI, Typer, prints its errors with it)."""
    parts = [part.strip().lower() for part in (nats_url or "").split(",")]
    websocket = any(part.startswith(WEBSOCKET_SCHEMES) for part in parts)
    return ([] if websocket else ["aiohttp"]) + (["rich"] if mcp_server else [])


def leave_out_unused_imports(nats_url: str | None, *, mcp_server: bool = True) -> list[str]:
    """Mark :func:`unused_optionals` absent; returns those marked. Only before nats-py and
    the MCP SDK are imported, and never over a module already loaded (in a process that has
    imported them already, such as a test calling ``main()``, this changes nothing)."""
    if "nats" in sys.modules or "mcp" in sys.modules:
        return []
    left_out = [name for name in unused_optionals(nats_url, mcp_server=mcp_server) if name not in sys.modules]
    for name in left_out:
        sys.modules[name] = None  # type: ignore[assignment]
    return left_out
