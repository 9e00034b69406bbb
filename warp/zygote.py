"""Warps forked from one pre-imported parent (docs/warp.md, "Many agents on one machine").

``warp --zygote SOCKET`` imports what a Warp imports once and forks a child for every
``warp`` started with ``LOOM_WARP_ZYGOTE=SOCKET``; the mechanism (the hand-off, the
stand-in, the lifeline) and what every agent's server imports are :mod:`shared.zygote`.
Here: what else a Warp imports beforehand, and what each forked Warp sets up before it runs.

Only the standard library is imported here at module level: ``warp.cli`` imports this
module in every started ``warp``, the stand-ins included.
"""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING, Any

from shared.zygote import Program, agent_server_preload

if TYPE_CHECKING:
    from shared.mcp.tools import ToolSpec

ZYGOTE_ENV = "LOOM_WARP_ZYGOTE"


def _preload() -> list[ToolSpec]:
    """Warp's own modules, imported before it answers (``warp.cli.main``'s lazy imports) and
    once connected, and its tools (the rest: :func:`shared.zygote.agent_server_preload`).

    Only modules that hold no per-process state, or renew it in each child
    (``warp.instances.PROCESS_NONCE``). Not the agent protocol's package (``synadia_ai``):
    its module-level NUIDs would give every child the same inbox names."""
    os.environ.setdefault("PYDANTIC_ERRORS_INCLUDE_URL", "0")  # as warp.cli.main sets it
    import warp.control
    import warp.instances
    import warp.runtime
    import warp.server
    import warp.services  # the runtime's once connected: loaded late by a Warp of its own
    import warp.settings
    import warp.stdio  # noqa: F401
    from warp.tools import specs

    return specs()


def _in_child(conn: socket.socket, request: dict[str, Any]) -> None:
    from shared.agents.local import forked_for
    from shared.zygote import die_if_stand_in_gone
    from warp import server

    forked_for(int(request["host"]))  # its hooks look for it under their host's pid
    server.SESSION_ENDED.append(lambda: die_if_stand_in_gone(conn))


PROGRAM = Program("warp", ZYGOTE_ENV, agent_server_preload(_preload), _in_child)
