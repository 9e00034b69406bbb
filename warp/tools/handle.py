"""warp_handle_set, warp_handle_get: this session's human-readable handle.

Both answer with the agent id only once Warp has taken its instance id: until
then another Warp in the same folder may hold the plain id, so the answer says
"not known yet" (``agent_id`` and ``instance`` null) rather than show someone
else's.
"""

from __future__ import annotations

from typing import Annotated

from mcp_types import CallToolResult

from shared.mcp.tools import tool
from warp.runtime import WarpRuntime
from warp.schemas import Handle, HandleInfo
from warp.tools.base import result


async def _info(rt: WarpRuntime) -> HandleInfo:
    identity = await rt.settled_identity()
    registered = rt.ready and rt.services_now().presence.registered
    return HandleInfo(
        handle=rt.handle,
        agent_id=identity.agent_id if identity else None,
        project_id=rt.names.project_id,
        instance=identity.instance if identity else None,
        registered=registered,
        connected=rt.ready,
    )


def _text(info: HandleInfo, rt: WarpRuntime) -> str:
    state = "registered" if info.registered else "not registered"
    if info.agent_id is None:
        return (
            f"Handle: {info.handle}\nAgent id: not known yet: Warp takes its instance id on NATS first "
            f"({rt.not_ready_reason()}); try again shortly\nProject: {info.project_id}\nInstance: - ({state})"
        )
    return (
        f"Handle: {info.handle}\nAgent id: {info.agent_id}\nProject: {info.project_id}\n"
        f"Instance: {info.instance} ({state})"
    )


async def warp_handle_set(rt: WarpRuntime, handle: Handle) -> Annotated[CallToolResult, HandleInfo]:
    """Set this session's handle (the name other agents see). Updates the registry entry
    when registered."""
    rt.handle = handle
    if rt.ready:
        svc = await rt.services()
        await svc.presence.set_handle(handle)
    info = await _info(rt)
    return result(info, f"Handle set.\n{_text(info, rt)}")


async def warp_handle_get(rt: WarpRuntime) -> Annotated[CallToolResult, HandleInfo]:
    """This session's handle, agent id, project and instance (the id and instance are
    null until Warp has reached NATS and taken its instance id)."""
    info = await _info(rt)
    return result(info, _text(info, rt))


TOOLS = (
    tool(warp_handle_set, title="Set handle", idempotent=True),
    tool(warp_handle_get, title="Get handle", read_only=True, idempotent=True),
)
