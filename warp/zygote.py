"""Warps forked from one pre-imported parent (docs/warp.md, "Many agents on one machine").

``warp --zygote SOCKET`` imports what a Warp imports once and forks a child for every
``warp`` started with ``LOOM_WARP_ZYGOTE=SOCKET``; the mechanism (the hand-off, the
stand-in, the lifeline) is :mod:`shared.zygote`. Here: what a Warp imports beforehand, and
what each forked Warp sets up before it runs.

Only the standard library is imported here at module level: ``warp.cli`` imports this
module in every started ``warp``, the stand-ins included.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from shared.zygote import Program

ZYGOTE_ENV = "LOOM_WARP_ZYGOTE"


def _preload() -> None:
    """Everything a stdio Warp imports before it answers (``warp.cli.main``'s lazy imports)
    and once connected, and its tools' schemas, so that each child starts with them in place.

    Only modules that hold no per-process state, or renew it in each child
    (``warp.instances.PROCESS_NONCE``). Not the agent protocol's package (``synadia_ai``):
    its module-level NUIDs would give every child the same inbox names."""
    os.environ.setdefault("PYDANTIC_ERRORS_INCLUDE_URL", "0")  # as warp.cli.main sets it
    from shared.footprint import leave_out_unused_imports

    leave_out_unused_imports(None)  # aiohttp too: a child whose NATS is ws:// runs on its own
    import mcp.server.mcpserver  # noqa: F401
    import uvloop  # noqa: F401

    import shared.errors
    import shared.identity
    import shared.legacy
    import shared.loop
    import shared.nats.auth
    import shared.redact
    import shared.settings
    import shared.trace.tracing  # noqa: F401
    import warp.control
    import warp.instances
    import warp.runtime
    import warp.server
    import warp.services  # the runtime's once connected: loaded late by a Warp of its own
    import warp.settings
    import warp.stdio  # noqa: F401
    from shared.loop import keep_startup_heap
    from shared.mcp.tools import prepare
    from warp.tools import specs

    prepare(specs())  # every tool's schema and validator, built once for all the children
    keep_startup_heap()  # frozen before forking: no child's collector touches (and copies) it


def _in_child(conn: socket.socket, request: dict[str, Any]) -> None:
    from shared.agents.local import forked_for
    from shared.zygote import die_if_stand_in_gone
    from warp import stdio

    forked_for(int(request["host"]))  # its hooks look for it under their host's pid
    stdio.END_OF_INPUT.append(lambda: die_if_stand_in_gone(conn))


PROGRAM = Program("warp", ZYGOTE_ENV, _preload, _in_child)
