"""The event loop an agent's own long-lived processes (Warp, Pattern, the lander) run on.

uvloop where it is installed (it comes with ``uvicorn[standard]``, so Weft's server already
runs on it), else asyncio's own loop. An agent's process spends a third of its CPU in the
event loop itself: every MCP call and every NATS round trip is a few turns of it. On uvloop
a Warp claim and its completion cost 5 to 8% less of the Warp's CPU (docs/performance.md,
"the agent's event loop"). Nothing in Loom depends on which loop runs: both implement
asyncio's loop interface, pipes and signal handlers included."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def uvloop_installed() -> bool:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


def run_main(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on uvloop where it is installed."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)


def anyio_options() -> dict[str, Any]:
    """``anyio.run``'s backend options for the same choice (the MCP SDK's HTTP transport)."""
    return {"use_uvloop": uvloop_installed()}
