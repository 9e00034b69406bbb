"""warp_handle_set, warp_handle_get: this session's human-readable handle."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from mcp.server.mcpserver.tools import Tool
from mcp_types import CallToolResult

from warp.schemas import Handle, HandleInfo
from warp.tools.base import make_tool, result

if TYPE_CHECKING:
    from warp.runtime import WarpRuntime


def _info(rt: WarpRuntime) -> HandleInfo:
    registered = rt.ready and rt.services_now().presence.registered
    return HandleInfo(
        handle=rt.handle,
        agent_id=rt.identity.agent_id,
        project_id=rt.names.project_id,
        instance=rt.identity.instance,
        registered=registered,
        connected=rt.ready,
    )


def _text(info: HandleInfo) -> str:
    state = "registered" if info.registered else "not registered"
    pending = "" if info.connected else " (agent id final once NATS is reachable)"
    return (
        f"Handle: {info.handle}\nAgent id: {info.agent_id}{pending}\nProject: {info.project_id}\n"
        f"Instance: {info.instance} ({state})"
    )


def tools(rt: WarpRuntime) -> list[Tool]:
    async def warp_handle_set(handle: Handle) -> Annotated[CallToolResult, HandleInfo]:
        """Set this session's handle (the name other agents see). Updates the registry entry
        when registered."""
        rt.handle = handle
        if rt.ready:
            svc = await rt.services()
            await svc.presence.set_handle(handle)
        info = _info(rt)
        return result(info, f"Handle set.\n{_text(info)}")

    async def warp_handle_get() -> Annotated[CallToolResult, HandleInfo]:
        """This session's handle, agent id, project and instance."""
        info = _info(rt)
        return result(info, _text(info))

    return [
        make_tool(rt, warp_handle_set, title="Set handle", idempotent=True),
        make_tool(rt, warp_handle_get, title="Get handle", read_only=True, idempotent=True),
    ]
