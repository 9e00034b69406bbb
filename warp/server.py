"""The Warp MCP server: tools plus a lifespan that owns the runtime.

The lifespan starts the runtime (which connects to NATS in the background, so
``initialize`` is answered at once) and, when the session ends (stdin closed,
HTTP server stopping), marks the agent offline and closes the connection.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio
from mcp.server.mcpserver import MCPServer

from shared.mcp.toolerrors import UnknownTools
from warp import __version__
from warp.runtime import WarpRuntime
from warp.tools import all_tools

if TYPE_CHECKING:
    from mcp.server.mcpserver.tools import Tool

INSTRUCTIONS = """\
Warp connects this agent to the other agents of the project (Loom fabric over NATS).
- Channels: warp_channels_list / _read / _send for project-wide notes (roadmap, parallel-work, errors).
- Registry: warp_registry_register once (capabilities, boundaries), then warp_registry_discover
  to find others.
- Direct messages: warp_messages_send_direct to an agent id from discover; warp_messages_read_direct
  returns what is waiting and marks it read.
- Work: warp_work_broadcast offers work; warp_work_claim takes the best item you are eligible for
  (with its context: what earlier attempts did); report with warp_work_progress, then
  warp_work_complete or warp_work_fail. Dead letters: warp_dlq_*.
- Context: warp_context_* keep shared trees of notes (a work item's tree has its id; append your
  notes under your attempt's node); reply_to on a channel or direct message starts a thread
  (warp_channels_thread, warp_messages_thread).
Errors name the argument at fault and the rule (a code is in the result's _meta["loom/error"]);
NATS outages are reported and retried automatically."""


def build_server(rt: WarpRuntime, *, also: Sequence[Tool] = ()) -> MCPServer[WarpRuntime]:
    """Warp's server for ``rt``; ``also``: more tools served after Warp's own (``--with-memory``)."""

    @asynccontextmanager
    async def lifespan(_: MCPServer[WarpRuntime]) -> AsyncIterator[WarpRuntime]:
        rt.start()
        try:
            yield rt
        finally:
            with anyio.CancelScope(shield=True):
                await rt.stop("MCP session ended")

    server = MCPServer(
        "warp",
        title="Loom Warp",
        instructions=INSTRUCTIONS,
        version=__version__,
        tools=[*all_tools(rt), *also],
        lifespan=lifespan,
        log_level=rt.settings.log_level,  # type: ignore[arg-type]
    )
    server.middleware.append(UnknownTools(server))
    return server
