"""``/api/agents``: the registry as Warp wrote it, with stale agents shown offline."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, status
from pydantic import BaseModel, ConfigDict, Field

from shared.agents.registry import AgentNotFound
from shared.models import AgentStatus
from shared.names import (
    USER_ID_PATTERN,
    anchored,
    validate_agent_type,
    validate_boundary,
    validate_capability,
    validate_handle,
)
from shared.refs import Candidate, RefIndex
from shared.views import AgentView
from weft.credentials import MAX_TTL_S, CredentialsUnavailable
from weft.deps import ADMIN, Cursor, Limit, ProjectDep, StateDep, require_token
from weft.errors import ERROR_RESPONSES, error_body
from weft.interop import ProtocolAgentsOut
from weft.project.agents import AgentQuery, AgentState
from weft.routes.common import HEX32, TOKEN, AgentId
from weft.schemas import BatchOut, BatchResult, PageOut, RefQuery, ResolvedOut
from weft.strictquery import STRICT_QUERY

router = APIRouter(
    prefix="/api/agents",
    tags=["agents"],
    dependencies=[STRICT_QUERY, Depends(require_token)],
    responses=ERROR_RESPONSES,
)


def view(state: AgentState) -> AgentView:
    """The entry was validated when read from the registry; constructing (not re-validating)
    keeps a 1,000-agent page cheap."""
    data = dict(state.entry.__dict__)
    data.update(
        status=state.status, reported_status=state.entry.status, stale=state.stale, revision=state.revision
    )
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


class CredentialsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    agent_id: str | None = Field(
        default=None, pattern=HEX32, description="The agent's id (32 hex); default: a new one"
    )
    user_id: str | None = Field(
        default=None, pattern=anchored(USER_ID_PATTERN), description="Its user (16 hex): personal memories"
    )
    channels: list[Annotated[str, Field(pattern=TOKEN)]] = Field(
        default_factory=list,
        max_length=64,
        description="Channels besides the built-in ones and those the project has now",
    )
    ttl_s: float | None = Field(
        default=None, ge=60, le=MAX_TTL_S, description="Lifetime; default WEFT_AGENT_CREDENTIALS_TTL_S"
    )


class CredentialsOut(BaseModel):
    project_id: str
    agent_id: str
    user_key: str = Field(description="The credentials' public key: what a revocation names")
    expires_at: datetime
    creds: str = Field(
        description="The creds file (a secret): save it with mode 0600, point NATS_CREDS at it"
    )
    env: dict[str, str] = Field(description="What Warp needs besides NATS_CREDS")


class RevokedOut(BaseModel):
    user_key: str
    revoked: bool


UserKey = Annotated[str, Path(pattern="^U[A-Z2-7]{55}$", description="A NATS user public key")]


@router.post(
    "/credentials",
    response_model=CredentialsOut,
    status_code=status.HTTP_201_CREATED,
    dependencies=ADMIN,
    summary="Mint NATS credentials for a hand-attached agent",
)
async def mint_credentials(
    project: ProjectDep, state: StateDep, body: CredentialsRequest | None = None
) -> CredentialsOut:
    """Credentials that let one agent of this project do what Warp does, and nothing else,
    until they expire or are revoked (scoped NATS auth only; 409 otherwise)."""
    if state.credentials is None:
        raise CredentialsUnavailable()
    request = body or CredentialsRequest()
    issued = await state.credentials.issue(
        project.project_id,
        agent_id=request.agent_id,
        user_id=request.user_id,
        channels=tuple(request.channels),
        ttl_s=request.ttl_s,
    )
    return CredentialsOut(
        project_id=issued.project_id,
        agent_id=issued.agent_id,
        user_key=issued.user_key,
        expires_at=issued.expires_at,
        creds=issued.creds.get_secret_value(),
        env={
            "NATS_URL": state.nats.url,
            "LOOM_PROJECT_ID": issued.project_id,
            "LOOM_AGENT_ID": issued.agent_id,
        },
    )


@router.delete(
    "/credentials/{user_key}",
    response_model=RevokedOut,
    dependencies=ADMIN,
    summary="Revoke NATS credentials",
)
async def revoke_credentials(user_key: UserKey, state: StateDep) -> RevokedOut:
    """The servers refuse the credentials from now on and close their connections."""
    if state.credentials is None:
        raise CredentialsUnavailable()
    await state.credentials.revoke(user_key)
    return RevokedOut(user_key=user_key, revoked=True)


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


@router.get(
    "/protocol",
    response_model=ProtocolAgentsOut,
    summary="Agents of Synadia's Agent Protocol on this NATS account that are not Loom's",
)
async def protocol_agents(state: StateDep) -> ProtocolAgentsOut:
    """Coding agents of other hosts that serve the protocol (docs/interop.md); Loom's own
    agents, of any project, are left out: the registry shows them to their project."""
    return await state.interop.foreign()


@router.get("/resolve", response_model=ResolvedOut, summary="The agent an id, a handle or an id prefix names")
async def resolve_agent(ref: RefQuery, project: ProjectDep) -> ResolvedOut:
    """What a person typed for an agent (shared.refs): its id, its handle, or the start of its
    id; a handle several agents carry is refused with their ids."""
    mirror = project.agents.mirror

    def index() -> RefIndex:  # heartbeats change the registry every few seconds: built per call
        return RefIndex(Candidate(e.agent_id, (e.handle,)) for _, e in mirror.items())

    return await ResolvedOut.from_copy(ref, mirror, index, "agent")


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
