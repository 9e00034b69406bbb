"""warp_work_broadcast, _claim, _list, _queue_status, _progress, _complete, _fail.

Thin adapters over :class:`shared.work.WorkQueue`; a claim uses the agent's
registered capabilities, boundaries and type, and the agent's ``current_tasks``
follows what it holds.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver.tools import Tool
from mcp_types import CallToolResult
from pydantic import AwareDatetime, Field

from shared.models import Scope, WorkItem, WorkStatus
from warp.errors import Conflict
from warp.schemas import (
    AgentId,
    AgentType,
    Boundary,
    Capability,
    ClaimOut,
    Cursor,
    HandOffOut,
    QueueStatusOut,
    WorkId,
    WorkListOut,
    WorkOut,
)
from warp.tools.base import make_tool
from warp.tools.base import result as tool_result

if TYPE_CHECKING:
    from shared.workcontext import WorkHandOff
    from warp.runtime import WarpRuntime
    from warp.services import Services


def hand_off_out(handed: WorkHandOff) -> HandOffOut:
    return HandOffOut(
        tree_id=handed.tree_id,
        attempt_node=handed.attempt_node,
        nodes=handed.nodes,
        next_cursor=handed.next_cursor,
        total=handed.total,
        truncated=handed.truncated,
        dependencies=handed.dependencies,
    )


def hand_off_text(out: HandOffOut) -> str:
    lines = [f"Context ({out.total} node(s), newest first; add notes under node {out.attempt_node}):"]
    for node in out.nodes:
        attempt = f" attempt {node.meta['attempt']}" if "attempt" in node.meta else ""
        text = " ".join((node.text or "").split())[:200]
        lines.append(f"  [{node.kind}{attempt}] {node.at:%Y-%m-%d %H:%M:%S} {node.author[:8]}: {text}")
    for node in out.dependencies:
        lines.append(f"  [dependency result] {node.tree_id}: {' '.join((node.text or '').split())[:200]}")
    if out.next_cursor:
        lines.append(f"  older: warp_work_context with cursor {out.next_cursor}")
    return "\n".join(lines)


def item_line(item: WorkItem) -> str:
    who = f" -> {item.assigned_to}" if item.assigned_to else ""
    return (
        f"{item.id} [{item.status.value}] p{item.priority} {item.capability}/{item.boundary} "
        f"task={item.task_id} attempts={item.attempts}/{item.max_attempts}{who}: {item.description[:120]}"
    )


def item_text(item: WorkItem) -> str:
    lines = [item_line(item)]
    if item.required_agent_type:
        lines.append(f"  requires agent type {item.required_agent_type}")
    if item.deadline:
        lines.append(f"  deadline {item.deadline.isoformat()}")
    if item.progress:
        lines.append(f"  progress {item.progress.percent}% {item.progress.note}")
    if item.context:
        lines.append(f"  context: {item.context}")
    for err in item.errors:
        lines.append(f"  attempt {err.attempt} failed: {err.error}")
    return "\n".join(lines)


def tools(rt: WarpRuntime) -> list[Tool]:
    def _check_cancelled(work_id: str) -> None:
        cancelled = rt.cancelled
        message = cancelled.message(work_id) if cancelled is not None else None
        if message:
            raise Conflict(message)

    async def _finish(svc: Services, work_id: str, op: Awaitable[WorkItem]) -> WorkItem:
        """Run a holder operation; whatever happens, an item no longer ours stops counting."""
        from shared.work import NotClaimant, WorkConflict

        try:
            item = await op
        except (NotClaimant, WorkConflict):
            svc.presence.tasks_changed(released=work_id)
            raise
        if item.status is not WorkStatus.IN_PROGRESS:
            svc.presence.tasks_changed(released=work_id)
        return item

    async def warp_work_broadcast(
        description: Annotated[str, Field(min_length=1, max_length=32_000)],
        capability: Capability,
        task_id: Annotated[
            str | None,
            Field(min_length=1, max_length=200, description="Your own reference (default: generated)"),
        ] = None,
        boundary: Boundary = "default",
        priority: Annotated[int, Field(ge=1, le=10, description="1-10, 10 is taken first")] = 5,
        required_agent_type: AgentType | None = None,
        preferred_agent_type: AgentType | None = None,
        deadline: Annotated[AwareDatetime | None, Field(description="ISO 8601 with a timezone")] = None,
        context: Annotated[
            dict[str, Any] | None, Field(description="Any JSON object the worker needs")
        ] = None,
        scope: Scope = Scope.TEAM,
        max_attempts: Annotated[int, Field(ge=1, le=100)] = 3,
    ) -> Annotated[CallToolResult, WorkOut]:
        """Offer a work item to every agent with the capability (same queue as Weft's REST API)."""
        from shared.models import WorkSubmission

        svc = await rt.services()
        submission = WorkSubmission(
            task_id=task_id or f"task-{uuid.uuid4().hex[:8]}",
            description=description,
            capability=capability,
            boundary=boundary,
            priority=priority,
            required_agent_type=required_agent_type,
            preferred_agent_type=preferred_agent_type,
            deadline=deadline,
            context=context or {},
            scope=scope,
            max_attempts=max_attempts,
        )
        item = await svc.work.submit(submission, submitted_by=svc.agent_id)
        return tool_result(WorkOut(item=item), f"Queued.\n{item_text(item)}")

    async def warp_work_claim(
        capability: Annotated[
            Capability | None, Field(description="Only this one of your registered capabilities")
        ] = None,
    ) -> Annotated[CallToolResult, ClaimOut]:
        """Claim the highest-priority work you are eligible for (your registered capabilities,
        boundaries and agent type). Report on it with warp_work_progress, then complete or fail it."""
        from shared.work import Claimant

        if rt.draining is not None:
            raise Conflict(
                f"Warp is shutting down (requested by {rt.draining.requested_by}); it claims no new work",
                field="claim",
            )
        svc = await rt.services()
        presence = svc.presence
        if not presence.registered or presence.entry is None:
            raise Conflict(
                "register first (warp_registry_register): a claim uses your registered capabilities",
                field="registration",
            )
        entry = presence.entry
        caps = tuple(entry.capabilities)
        if capability is not None:
            if capability not in caps:
                raise Conflict(
                    f"is not one of your registered capabilities ({', '.join(caps) or 'none'})",
                    field="capability",
                )
            caps = (capability,)
        if len(presence.held) >= entry.max_concurrent_tasks:
            raise Conflict(
                f"you already hold {len(presence.held)} item(s), your maximum; complete or fail one first",
                field="max_concurrent_tasks",
            )
        if not caps:
            out = ClaimOut(claimed=False, reason="you registered no capabilities")
            return tool_result(out, "Nothing claimed: you registered no capabilities.")
        item = await svc.work.claim(
            Claimant(
                agent_id=svc.agent_id,
                agent_type=entry.agent_type,
                capabilities=caps,
                boundaries=tuple(entry.boundaries),
            )
        )
        if item is None:
            out = ClaimOut(claimed=False, reason="no eligible work is queued")
            return tool_result(out, f"No eligible work queued for {', '.join(caps)}.")
        presence.tasks_changed(claimed=item.id)
        from shared.workcontext import work_hand_off

        context = hand_off_out(await work_hand_off(svc.contexts, item))
        out = ClaimOut(claimed=True, item=item, context=context)
        return tool_result(out, f"Claimed.\n{item_text(item)}\n{hand_off_text(context)}")

    async def warp_work_list(
        status: WorkStatus | None = None,
        capability: Capability | None = None,
        boundary: Boundary | None = None,
        assigned_to: AgentId | None = None,
        mine: Annotated[bool, Field(description="Only items assigned to you")] = False,
        limit: Annotated[int, Field(ge=1, le=200)] = 50,
        cursor: Cursor | None = None,
    ) -> Annotated[CallToolResult, WorkListOut]:
        """List the project's work items, newest first, with filters."""
        from shared.work import WorkFilter

        svc = await rt.services()
        if mine and assigned_to is not None and assigned_to != svc.agent_id:
            raise Conflict("cannot be combined with mine=true for another agent", field="assigned_to")
        page = await svc.work.list_items(
            WorkFilter(
                status=status,
                capability=capability,
                boundary=boundary,
                assigned_to=svc.agent_id if mine else assigned_to,
            ),
            limit=limit,
            cursor=cursor,
        )
        out = WorkListOut(items=page.items, next_cursor=page.next_cursor, total=page.total)
        text = "\n".join(item_line(i) for i in page.items) if page.items else "No work items match."
        if page.next_cursor:
            text += "\nMore: pass next_cursor."
        return tool_result(out, f"{page.total} item(s)\n{text}")

    async def warp_work_queue_status() -> Annotated[CallToolResult, QueueStatusOut]:
        """Items waiting per capability, dead letters, and the items you hold."""
        svc = await rt.services()
        depths = await svc.work.queue_depths()
        info = await svc.js.stream_info(svc.names.dlq_stream)
        out = QueueStatusOut(
            depths=depths,
            total=sum(depths.values()),
            dead_letters=int(info.state.messages or 0),
            held_by_me=sorted(svc.presence.held),
            draining=rt.draining is not None,
        )
        lines = [f"{cap}: {n}" for cap, n in sorted(depths.items())] or ["queues empty"]
        lines.append(f"dead letters: {out.dead_letters}")
        lines.append(f"you hold: {', '.join(out.held_by_me) or 'nothing'}")
        return tool_result(out, "\n".join(lines))

    async def warp_work_progress(
        work_id: WorkId,
        percent: Annotated[int, Field(ge=0, le=100)],
        note: Annotated[str, Field(max_length=2000)] = "",
    ) -> Annotated[CallToolResult, WorkOut]:
        """Report progress on work you claimed; this also extends its deadline (keeps the claim)."""
        _check_cancelled(work_id)
        svc = await rt.services()
        item = await _finish(svc, work_id, svc.work.progress(work_id, svc.agent_id, percent, note))
        return tool_result(WorkOut(item=item), f"Progress recorded.\n{item_text(item)}")

    async def warp_work_complete(
        work_id: WorkId,
        result: Annotated[Any, Field(description="Any JSON value describing the outcome")] = None,
    ) -> Annotated[CallToolResult, WorkOut]:
        """Mark work you claimed as completed, with an optional result."""
        _check_cancelled(work_id)
        svc = await rt.services()
        item = await _finish(svc, work_id, svc.work.complete(work_id, svc.agent_id, result))
        return tool_result(WorkOut(item=item), f"Completed.\n{item_text(item)}")

    async def warp_work_fail(
        work_id: WorkId,
        error: Annotated[str, Field(min_length=1, max_length=8000, description="What went wrong")],
        retryable: Annotated[
            bool, Field(description="false sends it straight to the dead-letter queue")
        ] = True,
    ) -> Annotated[CallToolResult, WorkOut]:
        """Report that work you claimed failed: it is queued again, or dead-lettered once its
        attempts are used up (or at once when retryable is false)."""
        _check_cancelled(work_id)
        svc = await rt.services()
        item = await _finish(svc, work_id, svc.work.fail(work_id, svc.agent_id, error, retryable=retryable))
        where = "dead-letter queue" if item.status is WorkStatus.DEAD_LETTERED else "queue again"
        return tool_result(
            WorkOut(item=item), f"Failure recorded; item is in the {where}.\n{item_text(item)}"
        )

    async def warp_work_context(
        work_id: WorkId,
        limit: Annotated[int, Field(ge=1, le=200, description="Nodes per page, newest first")] = 20,
        cursor: Annotated[Cursor | None, Field(description="next_cursor of the previous page")] = None,
    ) -> Annotated[CallToolResult, HandOffOut]:
        """A work item's context: its submission, every attempt, progress notes, results and
        failures, newest first (what a claim hands over; pass next_cursor for older nodes)."""
        from shared.workcontext import work_hand_off

        svc = await rt.services()
        item = await svc.work.get(work_id)
        out = hand_off_out(await work_hand_off(svc.contexts, item, limit=limit, cursor=cursor))
        return tool_result(out, hand_off_text(out))

    return [
        make_tool(rt, warp_work_broadcast, title="Offer work"),
        make_tool(rt, warp_work_claim, title="Claim work"),
        make_tool(rt, warp_work_list, title="List work", read_only=True, idempotent=True),
        make_tool(rt, warp_work_queue_status, title="Queue status", read_only=True, idempotent=True),
        make_tool(rt, warp_work_progress, title="Report progress"),
        make_tool(rt, warp_work_complete, title="Complete work"),
        make_tool(rt, warp_work_fail, title="Fail work"),
        make_tool(rt, warp_work_context, title="Work context", read_only=True, idempotent=True),
    ]
