"""``/api/agents``: the registry as Warp wrote it, with stale agents shown offline."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, status
from pydantic import BaseModel, ConfigDict, Field

from shared.models import AgentEntry, AgentStatus
from shared.names import validate_agent_type, validate_boundary, validate_capability, validate_handle
from shared.registry import AgentNotFound
from weft.agents import AgentQuery, AgentState
from weft.deps import ADMIN, Cursor, Limit, ProjectDep, require_token
from weft.errors import ERROR_RESPONSES, error_body
from weft.routes.common import HEX32, AgentId
from weft.schemas import BatchOut, BatchResult, PageOut

router = APIRouter(
    prefix="/api/agents", tags=["agents"], dependencies=[Depends(require_token)], responses=ERROR_RESPONSES
)


class AgentView(AgentEntry):
    """A registry entry; ``status`` is the effective one (offline once heartbeats stop)."""

    reported_status: AgentStatus = Field(description="The status the agent last wrote itself")
    stale: bool = Field(description="No heartbeat for 3 intervals: shown offline whatever it reported")


def view(state: AgentState) -> AgentView:
    """The entry was validated when read from the registry; constructing (not re-validating)
    keeps a 1,000-agent page cheap."""
    data = dict(state.entry.__dict__)
    data.update(status=state.status, reported_status=state.entry.status, stale=state.stale)
    return AgentView.model_construct(**data)


class ShutdownRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str = Field(default="", max_length=2000)
    grace_s: float = Field(default=30, ge=0, le=3600, description="How long the agent may take to drain")


class ShutdownBatchRequest(ShutdownRequest):
    agent_ids: list[Annotated[str, Field(pattern=HEX32)]] = Field(min_length=1, max_length=1000)


class ShutdownOut(BaseModel):
    agent_id: str
    requested: bool
    status: AgentStatus


@router.get("", response_model=PageOut[AgentView], summary="List agents, by handle")
async def list_agents(
    project: ProjectDep,
    limit: Limit = 50,
    cursor: Cursor = None,
    agent_type: Annotated[str | None, Query(alias="type", description="Agent type")] = None,
    status_: Annotated[AgentStatus | None, Query(alias="status", description="Effective status")] = None,
    capability: str | None = None,
    boundary: str | None = None,
    handle: str | None = None,
) -> PageOut[AgentView]:
    query = AgentQuery(
        agent_type=None if agent_type is None else validate_agent_type(agent_type, "type"),
        status=status_,
        capability=None if capability is None else validate_capability(capability),
        boundary=None if boundary is None else validate_boundary(boundary),
        handle=None if handle is None else validate_handle(handle),
    )
    page = await project.agents.list_page(query, limit=limit, cursor=cursor)
    return PageOut[AgentView](
        items=[view(s) for s in page.items], next_cursor=page.next_cursor, total=page.total
    )


@router.post(
    "/shutdown-batch", response_model=BatchOut, dependencies=ADMIN, summary="Ask several agents to shut down"
)
async def shutdown_batch(body: ShutdownBatchRequest, project: ProjectDep) -> BatchOut:
    results: list[BatchResult] = []
    for agent_id in dict.fromkeys(body.agent_ids):
        try:
            state = await project.agents.request_shutdown(agent_id, reason=body.reason, grace_s=body.grace_s)
        except AgentNotFound as exc:
            results.append(BatchResult(id=agent_id, ok=False, error=error_body(exc)))
        else:
            results.append(BatchResult(id=agent_id, ok=True, status=state.status.value))
    return BatchOut.of(results)


@router.get("/{agent_id}", response_model=AgentView, summary="Show one agent")
async def get_agent(agent_id: AgentId, project: ProjectDep) -> AgentView:
    return view(await project.agents.get(agent_id))


@router.post(
    "/{agent_id}/shutdown",
    response_model=ShutdownOut,
    status_code=status.HTTP_202_ACCEPTED,
    dependencies=ADMIN,
    summary="Ask an agent to shut down",
)
async def shutdown_agent(
    agent_id: AgentId, project: ProjectDep, body: ShutdownRequest | None = None
) -> ShutdownOut:
    """Publishes a shutdown request on the agent's control subject; Warp drains, deregisters and exits."""
    request = body or ShutdownRequest()
    state = await project.agents.request_shutdown(agent_id, reason=request.reason, grace_s=request.grace_s)
    return ShutdownOut(agent_id=agent_id, requested=True, status=state.status)
