"""warp_registry_register, _discover, _get_info, _update_presence, _deregister."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp_types import CallToolResult
from pydantic import Field

from shared.mcp.tools import tool
from shared.models import AgentEntry, AgentStatus, Scope
from shared.paging import CursorError, decode_cursor, encode_cursor
from warp.runtime import WarpRuntime
from warp.schemas import (
    AgentId,
    AgentList,
    AgentOut,
    AgentType,
    Boundary,
    Capability,
    Cursor,
    Deregistered,
    Handle,
    Metadata,
)
from warp.tools.base import result


def agent_out(entry: AgentEntry, status: AgentStatus, me: str) -> AgentOut:
    return AgentOut(
        agent_id=entry.agent_id,
        handle=entry.handle,
        agent_type=entry.agent_type,
        status=status.value,
        capabilities=entry.capabilities,
        boundaries=entry.boundaries,
        current_tasks=entry.current_tasks,
        max_concurrent_tasks=entry.max_concurrent_tasks,
        hostname=entry.hostname,
        scope=entry.scope,
        project_id=entry.project_id,
        instance=entry.instance,
        parent_id=entry.parent_id,
        target_id=entry.target_id,
        spinup_id=entry.spinup_id,
        registered_at=entry.registered_at,
        last_heartbeat=entry.last_heartbeat,
        last_activity=entry.last_activity,
        metadata=entry.metadata,
        is_self=entry.agent_id == me,
    )


def agent_line(a: AgentOut) -> str:
    caps = ",".join(a.capabilities) or "-"
    me = " (you)" if a.is_self else ""
    return (
        f"{a.handle}{me} [{a.status}] id={a.agent_id} type={a.agent_type} caps={caps} "
        f"boundaries={','.join(a.boundaries)} tasks={a.current_tasks}/{a.max_concurrent_tasks}"
    )


def agent_text(a: AgentOut) -> str:
    lines = [
        agent_line(a),
        f"  host: {a.hostname or '-'}  project: {a.project_id}  scope: {a.scope.value}  "
        f"instance: {a.instance}",
        f"  last heartbeat: {a.last_heartbeat.isoformat()}  last activity: {a.last_activity.isoformat()}",
    ]
    if a.target_id or a.spinup_id:
        lines.append(f"  target: {a.target_id or '-'}  spin-up: {a.spinup_id or '-'}")
    if a.metadata:
        lines.append("  " + ", ".join(f"{k}={v}" for k, v in sorted(a.metadata.items())))
    return "\n".join(lines)


async def warp_registry_register(
    rt: WarpRuntime,
    handle: Annotated[Handle | None, Field(description="Defaults to the session's handle")] = None,
    agent_type: Annotated[AgentType | None, Field(description="Defaults to LOOM_AGENT_TYPE")] = None,
    capabilities: Annotated[
        list[Capability] | None,
        Field(max_length=64, description="What work you can take (default: LOOM_CAPABILITIES)"),
    ] = None,
    boundaries: Annotated[
        list[Boundary] | None,
        Field(
            min_length=1,
            max_length=64,
            description="Boundaries you may work in (default: LOOM_BOUNDARIES)",
        ),
    ] = None,
    max_concurrent_tasks: Annotated[int | None, Field(ge=1, le=1000)] = None,
    scope: Annotated[
        Scope | None, Field(description="Who can discover you (default team: this project)")
    ] = None,
    metadata: Metadata | None = None,
) -> Annotated[CallToolResult, AgentOut]:
    """Register (or re-register) this agent in the project's registry and start its heartbeat.
    Work claims use the capabilities, boundaries and agent type registered here."""
    svc = await rt.services()
    request = svc.presence.defaults()
    if handle is not None:
        rt.handle = handle
        request.handle = handle
    if agent_type is not None:
        request.agent_type = agent_type
    if capabilities is not None:
        request.capabilities = capabilities
    if boundaries is not None:
        request.boundaries = boundaries
    if max_concurrent_tasks is not None:
        request.max_concurrent_tasks = max_concurrent_tasks
    if scope is not None:
        request.scope = scope
    if metadata is not None:
        request.metadata.update(metadata)
    await rt.recover_held_work(svc)
    entry = await svc.presence.register(request)
    out = agent_out(entry, entry.effective_status(), svc.agent_id)
    return result(out, f"Registered.\n{agent_text(out)}")


async def warp_registry_discover(
    rt: WarpRuntime,
    capability: Capability | None = None,
    agent_type: AgentType | None = None,
    status: Literal["online", "busy", "offline"] | None = None,
    boundary: Boundary | None = None,
    handle: Handle | None = None,
    limit: Annotated[int, Field(ge=1, le=500)] = 100,
    cursor: Cursor | None = None,
) -> Annotated[CallToolResult, AgentList]:
    """Find agents you can see, by capability, agent type, status, boundary and handle (all given
    filters must match). Status is effective: an agent that stopped heartbeating shows offline."""
    from shared.agents.registry import AgentFilter

    svc = await rt.services()
    await svc.presence.flush()
    found = await svc.registry.discover(
        viewer_agent_id=svc.agent_id,
        viewer_user_id=svc.identity.user_id,
        filters=AgentFilter(
            capability=capability,
            agent_type=agent_type,
            status=AgentStatus(status) if status else None,
            boundary=boundary,
            handle=handle,
        ),
    )
    state = decode_cursor(cursor)
    start = 0
    if state is not None:
        if not isinstance(state.get("offset"), int) or state["offset"] < 0:
            raise CursorError()
        start = int(state["offset"])
    page = found[start : start + limit]
    more = start + limit < len(found)
    agents = [agent_out(entry, eff, svc.agent_id) for entry, eff in page]
    out = AgentList(
        agents=agents,
        count=len(found),
        next_cursor=encode_cursor({"offset": start + limit}) if more else None,
    )
    text = "\n".join(agent_line(a) for a in agents) if agents else "No agents match."
    if more:
        text += f"\n({len(found) - start - limit} more: pass next_cursor)"
    return result(out, f"{len(found)} agent(s)\n{text}")


async def warp_registry_get_info(
    rt: WarpRuntime,
    agent_id: Annotated[AgentId | None, Field(description="Omit for yourself")] = None,
) -> Annotated[CallToolResult, AgentOut]:
    """Full registry entry of one agent (yourself by default)."""
    from shared.agents.registry import AgentNotFound
    from warp.errors import NotFound

    svc = await rt.services()
    await svc.presence.flush()
    target = agent_id or svc.agent_id
    try:
        entry = await svc.registry.get(target)
    except AgentNotFound:
        entry = None
    viewer = {
        "project_id": svc.names.project_id,
        "user_id": svc.identity.user_id,
        "agent_id": svc.agent_id,
    }
    if entry is not None and entry.visible_to(**viewer):
        out = agent_out(entry, entry.effective_status(), svc.agent_id)
        return result(out, agent_text(out))
    # Not in this project: an agent of another project that chose personal/public scope.
    for found, eff in await svc.registry.discover(
        viewer_agent_id=svc.agent_id, viewer_user_id=svc.identity.user_id
    ):
        if found.agent_id == target:
            out = agent_out(found, eff, svc.agent_id)
            return result(out, agent_text(out))
    if target == svc.agent_id:
        raise NotFound("you are not registered yet; call warp_registry_register", field="agent_id")
    raise NotFound("no agent with this id that you can see is registered", field="agent_id")


async def warp_registry_update_presence(
    rt: WarpRuntime,
    status: Annotated[
        Literal["online", "busy"] | None,
        Field(description="Omit to let Warp derive it from your task count"),
    ] = None,
    note: Annotated[str | None, Field(max_length=500, description="Short status note ('' clears it)")] = None,
) -> Annotated[CallToolResult, AgentOut]:
    """Update your status (online/busy) and an optional note; also counts as a heartbeat."""
    svc = await rt.services()
    entry = await svc.presence.update_presence(AgentStatus(status) if status else None, note)
    out = agent_out(entry, entry.effective_status(), svc.agent_id)
    return result(out, f"Presence updated.\n{agent_text(out)}")


async def warp_registry_deregister(rt: WarpRuntime) -> Annotated[CallToolResult, Deregistered]:
    """Mark this agent offline and stop its heartbeat (register again to come back)."""
    svc = await rt.services()
    entry = await svc.presence.deregister("deregistered by the agent")
    out = Deregistered(agent_id=svc.agent_id, status="offline", was_registered=entry is not None)
    text = "Deregistered: you are offline." if entry else "You were not registered; nothing to do."
    return result(out, text)


TOOLS = (
    tool(warp_registry_register, title="Register this agent", idempotent=True),
    tool(warp_registry_discover, title="Discover agents", read_only=True, idempotent=True),
    tool(warp_registry_get_info, title="Agent details", read_only=True, idempotent=True),
    tool(warp_registry_update_presence, title="Update presence", idempotent=True),
    tool(warp_registry_deregister, title="Deregister", idempotent=True),
)
