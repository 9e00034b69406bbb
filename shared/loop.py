"""The event loop an agent's own long-lived processes (Warp, Pattern, the lander) run on.

uvloop where it is installed (it comes with ``uvicorn[standard]``, so Weft's server already
runs on it), else asyncio's own loop. An agent's process spends a third of its CPU in the
event loop itself: every MCP call and every NATS round trip is a few turns of it. On uvloop
a Warp claim and its completion cost 5 to 8% less of the Warp's CPU (docs/performance.md,
"the agent's event loop"). Nothing in Loom depends on which loop runs: both implement
asyncio's loop interface, pipes and signal handlers included."""

from __future__ import annotations

import asyncio
import gc
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


def keep_startup_heap() -> None:
    """Leave everything the process has built so far out of the collector's later passes.

    A long-lived process's modules, classes, model schemas and tools (about 113,000 objects
    in a Warp, 178,000 in Weft) live as long as the process, yet each full collection of the
    cyclic garbage collector walks every one of them: 85 to 170 ms of CPU on the two-core
    machine, a pause in whatever the process was answering (a claim, a heartbeat). Frozen
    (``gc.freeze``), they are skipped by every later collection and still freed by
    reference counting; only a reference cycle among them would stay. Called once, by a
    process's own entry point when its start-up is done (Warp, Weft, Pattern, the lander,
    Shuttle's zygote), never in a process that runs other code, such as a test run
    (docs/performance.md, "the collector's pauses")."""
    gc.freeze()


def anyio_options() -> dict[str, Any]:
    """``anyio.run``'s backend options for the same choice (the MCP SDK's HTTP transport)."""
    return {"use_uvloop": uvloop_installed()}
