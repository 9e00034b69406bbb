"""warp_lease_acquire, _renew, _release, _list: say which files you are changing.

Thin adapters over :class:`shared.leases.book.LeaseBook` (docs/leases.md). Patterns are
relative to the repository root (this Warp's project path); an absolute path inside it
is made relative. A lease tied to a work item ends when the agent no longer holds the
item (completed, failed, handed in, cancelled, claim lost), as it does when the agent
goes offline or its TTL passes without a renewal.
"""

from __future__ import annotations

from typing import Annotated

from mcp_types import CallToolResult
from pydantic import Field

from shared.leases.book import DEFAULT_TTL_S, MAX_TTL_S, MAX_WAIT_S, MIN_TTL_S, LeaseFilter, holds
from shared.mcp.tools import tool
from shared.models import MAX_LEASE_REASON, Lease, LeaseMode
from shared.work.rules import NotClaimant
from warp.errors import Conflict
from warp.runtime import WarpRuntime
from warp.schemas import LeaseId, LeaseListOut, LeaseOut, LeasePattern, LeaseReleaseOut, WorkId
from warp.tools.base import result

Patterns = Annotated[list[LeasePattern], Field(min_length=1, max_length=64)]


def lease_line(lease: Lease) -> str:
    work = f" for work {lease.work_id}" if lease.work_id else ""
    if lease.branch:
        work += f" on branch {lease.branch}"
    reason = f" ({lease.reason[:120]})" if lease.reason else ""
    return (
        f"{lease.id} [{lease.mode.value}] token {lease.token} {', '.join(lease.patterns)} held by "
        f"{lease.holder_handle or lease.holder}{work} until {lease.expires_at.isoformat()}{reason}"
    )


async def warp_lease_acquire(
    rt: WarpRuntime,
    patterns: Patterns,
    mode: Annotated[
        LeaseMode, Field(description="exclusive: nobody else may touch them; shared: others may read too")
    ] = LeaseMode.EXCLUSIVE,
    ttl_s: Annotated[
        float, Field(ge=MIN_TTL_S, le=MAX_TTL_S, description="Seconds until it lapses unless renewed")
    ] = DEFAULT_TTL_S,
    reason: Annotated[str, Field(max_length=MAX_LEASE_REASON, description="What you are doing")] = "",
    work_id: Annotated[
        WorkId | None, Field(description="Work you hold that it serves: it ends when that work does")
    ] = None,
    wait_s: Annotated[
        float,
        Field(ge=0, le=MAX_WAIT_S, description="Wait up to this long for conflicting leases to end"),
    ] = 0,
) -> Annotated[CallToolResult, LeaseOut]:
    """Lease paths before changing them. Refused while another agent holds an
    overlapping lease: the error names its holder, work, patterns and expiry (message
    them, or wait with wait_s). Keep the token: it grows with every grant."""
    svc = await rt.services()
    if not svc.presence.registered:
        raise Conflict(
            "register first (warp_registry_register): a lease lives as long as you are online",
            field="registration",
        )

    async def check_held(held: str) -> None:
        if not holds(await svc.work.get(held), svc.agent_id):
            raise NotClaimant("work_id: you do not hold this work item", field="work_id")

    # Work in a workstream: paths are the worktree's, and the lease names the branch.
    place = svc.workstreams.place(work_id) if work_id is not None else None
    lease = await svc.leases.acquire(
        svc.agent_id,
        patterns,
        mode=mode,
        ttl_s=ttl_s,
        reason=reason,
        work_id=work_id,
        handle=rt.handle,
        wait_s=wait_s,
        root=str(place.directory if place is not None else svc.identity.project_path),
        holds_work=check_held,
        branch=place.branch if place is not None and not place.review else None,
    )
    said = "Leased. Renew with warp_lease_renew before it lapses; release it when done."
    return result(LeaseOut(lease=lease), f"{said}\n{lease_line(lease)}")


async def warp_lease_renew(
    rt: WarpRuntime,
    lease_id: LeaseId,
    ttl_s: Annotated[
        float | None,
        Field(ge=MIN_TTL_S, le=MAX_TTL_S, description="New TTL from now (default: as before)"),
    ] = None,
) -> Annotated[CallToolResult, LeaseOut]:
    """Extend a lease you hold. A lease that already lapsed is gone: acquire it again."""
    svc = await rt.services()
    lease = await svc.leases.renew(lease_id, svc.agent_id, ttl_s)
    return result(LeaseOut(lease=lease), f"Renewed.\n{lease_line(lease)}")


async def warp_lease_release(
    rt: WarpRuntime,
    lease_id: Annotated[LeaseId | None, Field(description="The lease to release")] = None,
    work_id: Annotated[WorkId | None, Field(description="Or: every lease you hold for this work")] = None,
) -> Annotated[CallToolResult, LeaseReleaseOut]:
    """Release a lease you hold (or all of yours for one work item)."""
    if (lease_id is None) == (work_id is None):
        raise Conflict("give lease_id or work_id (one of them)", field="lease_id")
    svc = await rt.services()
    if lease_id is not None:
        released = [await svc.leases.release(lease_id, holder=svc.agent_id)]
    else:
        assert work_id is not None
        await svc.leases.start()
        released = await svc.leases.release_work(work_id, svc.agent_id)
    text = "\n".join(lease_line(lease) for lease in released) or "You held no lease for that work."
    return result(LeaseReleaseOut(released=released), f"Released {len(released)} lease(s).\n{text}")


async def warp_lease_list(
    rt: WarpRuntime,
    scope: Annotated[
        str, Field(pattern="^(mine|all)$", description="mine: your leases; all: the project's")
    ] = "mine",
    paths: Annotated[
        list[LeasePattern] | None,
        Field(max_length=64, description="Only the leases (of others) that conflict with these paths"),
    ] = None,
    mode: Annotated[
        LeaseMode, Field(description="With paths: the lease you would ask for")
    ] = LeaseMode.EXCLUSIVE,
) -> Annotated[CallToolResult, LeaseListOut]:
    """Live leases of this project: yours, everyone's, or those in the way of paths."""
    svc = await rt.services()
    if paths:
        clashes = await svc.leases.conflicting(
            paths, holder=svc.agent_id, mode=mode, root=str(svc.identity.project_path)
        )
        items = list({c.lease.id: c.lease for c in clashes}.values())
        text = "\n".join(c.describe() for c in clashes) or "Nothing in the way: the paths are free."
        return result(LeaseListOut(items=items, conflicts=[c.as_dict() for c in clashes]), text)
    wanted = LeaseFilter(holder=svc.agent_id if scope == "mine" else None)
    items = await svc.leases.listing(wanted)
    text = "\n".join(lease_line(lease) for lease in items) or "No leases."
    return result(LeaseListOut(items=items), f"{len(items)} lease(s)\n{text}")


TOOLS = (
    tool(warp_lease_acquire, title="Lease paths"),
    tool(warp_lease_renew, title="Renew a lease", idempotent=True),
    tool(warp_lease_release, title="Release leases", destructive=True, idempotent=True),
    tool(warp_lease_list, title="List leases", read_only=True, idempotent=True),
)
