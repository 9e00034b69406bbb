"""``/api/leases``: who holds which files, and ending a lease as an operator
(docs/leases.md; docs/weft.md, Routes)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query
from pydantic import BaseModel, ConfigDict, Field

from shared.leases.book import LeaseFilter
from shared.leases.patterns import MAX_PATTERN
from shared.models import Lease, LeaseMode
from shared.names import validate_agent_id, validate_work_id
from weft.deps import OPERATE, ProjectDep, require_token
from weft.errors import ERROR_RESPONSES
from weft.routes.common import HEX32
from weft.strictquery import STRICT_QUERY

router = APIRouter(
    prefix="/api/leases",
    tags=["leases"],
    dependencies=[STRICT_QUERY, Depends(require_token)],
    responses=ERROR_RESPONSES,
)

MAX_PATHS = 16
"""Paths per check (each up to 512 characters): the request line stays within what the HTTP
server accepts (loom-guard asks in batches of this size)."""

LeaseId = Annotated[str, Path(pattern=HEX32, description="Lease id: 32 lowercase hex")]


class LeaseList(BaseModel):
    model_config = ConfigDict(extra="forbid")
    items: list[Lease]
    conflicts: list[dict[str, Any]] = Field(
        default_factory=list, description="With ?path=: who holds what overlaps those paths, and where"
    )


@router.get("", response_model=LeaseList, summary="Live leases, soonest expiry first")
async def list_leases(
    project: ProjectDep,
    holder: str | None = None,
    work_id: str | None = None,
    path: Annotated[
        list[Annotated[str, Field(max_length=MAX_PATTERN)]] | None,
        Query(max_length=MAX_PATHS, description="Only leases in the way of these paths or patterns"),
    ] = None,
    mode: LeaseMode = LeaseMode.EXCLUSIVE,
    as_agent: Annotated[
        str | None, Query(description="With ?path=: whose request it would be (their own leases pass)")
    ] = None,
) -> LeaseList:
    book = project.leases.book
    asking = None if as_agent is None else validate_agent_id(as_agent, "as_agent")
    if path:
        clashes = await book.conflicting(path, holder=asking, mode=mode)
        items = list({c.lease.id: c.lease for c in clashes}.values())
        return LeaseList(items=items, conflicts=[c.as_dict() for c in clashes])
    filters = LeaseFilter(
        holder=None if holder is None else validate_agent_id(holder, "holder"),
        work_id=None if work_id is None else validate_work_id(work_id),
    )
    return LeaseList(items=await book.listing(filters))


@router.get("/{lease_id}", response_model=Lease, summary="Show one lease")
async def get_lease(lease_id: LeaseId, project: ProjectDep) -> Lease:
    return await project.leases.book.get(lease_id)


@router.delete("/{lease_id}", response_model=Lease, dependencies=OPERATE, summary="End a lease (operator)")
async def revoke_lease(lease_id: LeaseId, project: ProjectDep) -> Lease:
    """Ends the lease whoever holds it (a ``lease.revoked`` event says so); its holder's next
    renewal is refused, and its fencing token tells any later write of it apart."""
    return await project.leases.book.release(lease_id, holder=None, why="revoked by operator")
