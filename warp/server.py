"""The Warp MCP server: tools plus a lifespan that owns the runtime.

The lifespan starts the runtime (which connects to NATS in the background; ``warp``
on stdio has started it already, while the SDK loaded) and, when the session ends
(stdin closed, HTTP server stopping), marks the agent offline and closes the connection.
The server's name, title and instructions are :mod:`warp.handshake`'s, which answers
``initialize`` before the SDK is up.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio
from mcp.server.mcpserver import MCPServer

from shared.mcp.toolerrors import UnknownTools
from warp import __version__
from warp.handshake import INSTRUCTIONS, NAME, TITLE
from warp.runtime import WarpRuntime
from warp.tools import all_tools

if TYPE_CHECKING:
    from mcp.server.mcpserver.tools import Tool

SESSION_ENDED: list[Callable[[], None]] = []
"""Called when the MCP session ends, however it ends (stdin closed on Warp's own pipes or the
SDK's transport, HTTP server stopping), before the runtime stops: a Warp forked by the zygote
dies here as killed when its stand-in was (:func:`shared.zygote.die_if_stand_in_gone`),
rather than deregistering as a session that ended."""


def build_server(rt: WarpRuntime, *, also: Sequence[Tool] = ()) -> MCPServer[WarpRuntime]:
    """Warp's server for ``rt``; ``also``: more tools served after Warp's own (``--with-memory``)."""

    @asynccontextmanager
    async def lifespan(_: MCPServer[WarpRuntime]) -> AsyncIterator[WarpRuntime]:
        rt.start()
        try:
            yield rt
        finally:
            for hook in SESSION_ENDED:
                hook()
            with anyio.CancelScope(shield=True):
                await rt.stop("MCP session ended")

    server = MCPServer(
        NAME,
        title=TITLE,
        instructions=INSTRUCTIONS,
        version=__version__,
        tools=[*all_tools(rt), *also],
        lifespan=lifespan,
        log_level=rt.settings.log_level,  # type: ignore[arg-type]
    )
    server.middleware.append(UnknownTools(server))
    return server
