"""warp_work_broadcast, _claim, _list, _queue_status, _progress, _complete, _fail.

Thin adapters over :class:`shared.work.queue.WorkQueue`; a claim uses the agent's
registered capabilities, boundaries and type, and the agent's ``current_tasks``
follows what it holds.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any

from mcp_types import CallToolResult
from pydantic import AwareDatetime, Field

from shared.artifacts import MAX_ARTIFACTS, MAX_ARTIFACTS_BYTES, MAX_FILE_BYTES, Artifacts
from shared.base import AnyJson
from shared.limits import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_PRIORITY,
    DESCRIPTION_MAX_LENGTH,
    MAX_ATTEMPTS_LIMIT,
    MAX_DEPENDENCIES,
    PRIORITY_MAX,
    PRIORITY_MIN,
    TASK_ID_MAX_LENGTH,
)
from shared.mcp.tools import tool
from shared.models import ReviewSpec, Scope, WorkItem, WorkStatus, Workstream
from shared.names import LAND_CAPABILITY
from shared.usage.rules import Budget, Usage, stopped_by_budget, totals_of
from warp.errors import Conflict, Unavailable
from warp.runtime import WarpRuntime
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
    WorkPlaceOut,
)
from warp.tools.base import result as tool_result

log = logging.getLogger("loom.warp.work")

if TYPE_CHECKING:
    from shared.context.store import ContextStore
    from shared.git.repository import Repository
    from shared.work.context import WorkHandOff
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
        simplified=handed.simplified,
    )


def hand_off_text(out: HandOffOut) -> str:
    lines = [f"Context ({out.total} node(s), newest first; add notes under node {out.attempt_node}):"]
    if out.simplified:
        lines.append(
            "  This is the item's last attempt: only the essentials are handed over. Keep the "
            "approach simple; older nodes: warp_work_context."
        )
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
    if item.review is not None:
        lines.append(
            f"  reviewed by {item.review.capability}: round {item.review_round} of {item.review.rounds}"
        )
    for past in item.reviews:
        verdict = past.verdict or ("being reviewed" if past.reviewer else "waiting for a reviewer")
        said = f": {past.feedback}" if past.feedback else ""
        score = f" (score {past.score:g})" if past.score is not None else ""
        lines.append(f"  round {past.round} by {past.author}, result {json.dumps(past.result)[:300]}")
        lines.append(f"    review: {verdict}{score}{said}")
    if item.blocked_on:
        lines.append(f"  blocked until these complete: {', '.join(item.blocked_on)}")
    elif item.depends_on:
        lines.append(f"  depends on: {', '.join(item.depends_on)}")
    if item.dependents:
        lines.append(f"  waited for by: {', '.join(item.dependents)}")
    for err in item.errors:
        lines.append(f"  attempt {err.attempt} failed: {err.error}")
    lines.extend(_landing_lines(item))
    return "\n".join(lines)


def _landing_lines(item: WorkItem) -> list[str]:
    """What a landing said about the item (docs/landing.md): where it stands and, when it
    was sent back, what to fix: the conflicting files, or the gate's output tail."""
    landing = item.landing
    if landing is None:
        return []
    if landing.landed_sha:
        return [f"  landed on {landing.target} in {landing.landed_sha[:12]}"]
    lines = [f"  landing on {landing.target}: {landing.failures} failed landing(s)"]
    last = landing.attempts[-1] if landing.attempts else None
    if last is not None and last.outcome == "conflict":
        lines.append(
            f"  sent back: it conflicts with {landing.target} in {', '.join(last.files) or 'its changes'}; "
            f"merge {landing.target} into the branch, settle the conflicts, then complete it again"
        )
    elif last is not None and last.outcome == "gate-failed":
        lines.append(f"  sent back: the gate failed; its output ends with:\n{last.detail[-1500:]}")
    elif last is not None and last.outcome == "vetoed":
        lines.append(
            f"  sent back by the operator, who would not land it; their reason:\n{last.detail[-1500:]}\n"
            "  change the branch accordingly, then complete it again"
        )
    if item.status is WorkStatus.LANDING and item.question_id is not None:
        lines.append('  waiting for the operator\'s answer to "land this?"')
    return lines


STILL_HELD = frozenset({WorkStatus.IN_PROGRESS, WorkStatus.REVIEWING, WorkStatus.WAITING_ON_OPERATOR})
"""After one of its operations, an item in one of these still counts among the agent's tasks."""


async def held_operation(
    rt: WarpRuntime, svc: Services, work_id: str, op: Callable[[], Awaitable[WorkItem]]
) -> WorkItem:
    """Run an operation of the agent holding ``work_id``; whatever happens, an item it no
    longer holds stops counting among its tasks. Work Weft cancelled is refused first."""
    from shared.work.rules import NotClaimant, WorkConflict

    cancelled = rt.cancelled
    message = cancelled.message(work_id) if cancelled is not None else None
    if message:
        raise Conflict(message)
    try:
        item = await op()
    except (NotClaimant, WorkConflict):
        svc.presence.tasks_changed(released=work_id)
        await release_leases(svc, work_id)
        await svc.workstreams.release(work_id)
        raise
    if item.status not in STILL_HELD or item.assigned_to != svc.agent_id:
        svc.presence.tasks_changed(released=work_id)
        await release_leases(svc, work_id)
        await svc.workstreams.release(work_id)
    return item


async def release_leases(svc: Services, work_id: str) -> None:
    """The agent's leases for work it no longer holds end now (Weft's sweep would end them
    too, a moment later, and without Weft they would otherwise wait for their TTL)."""
    from shared.tasks import raise_if_cancelling

    try:
        await svc.leases.release_work(work_id, svc.agent_id)
    except Exception as exc:
        raise_if_cancelling()
        log.warning("leases of work %s not released now (Weft's sweep will): %s", work_id, exc)


USAGE_FIELD = Field(
    description="What the work used since your last report (added up per item, agent, target, "
    "model and day): input_tokens, output_tokens, cost (the project's currency unit), model"
)


def _target_of(svc: Services) -> str | None:
    entry = svc.presence.entry
    return entry.target_id if entry is not None else None


def stopped_text(item: WorkItem) -> str:
    """What the agent is told when its report took the item over its budget."""
    used = totals_of(item.usage)
    return (
        f"Stopped: {item.error}. Stop working on it; it failed for good (used {used.tokens} tokens, "
        f"cost {used.cost:g}).\n{item_text(item)}"
    )


async def warp_work_broadcast(
    rt: WarpRuntime,
    description: Annotated[str, Field(min_length=1, max_length=DESCRIPTION_MAX_LENGTH)],
    capability: Capability,
    task_id: Annotated[
        str | None,
        Field(
            min_length=1, max_length=TASK_ID_MAX_LENGTH, description="Your own reference (default: generated)"
        ),
    ] = None,
    boundary: Boundary = "default",
    priority: Annotated[
        int,
        Field(
            ge=PRIORITY_MIN,
            le=PRIORITY_MAX,
            description=f"{PRIORITY_MIN}-{PRIORITY_MAX}, {PRIORITY_MAX} is taken first",
        ),
    ] = DEFAULT_PRIORITY,
    required_agent_type: AgentType | None = None,
    preferred_agent_type: AgentType | None = None,
    deadline: Annotated[AwareDatetime | None, Field(description="ISO 8601 with a timezone")] = None,
    context: Annotated[dict[str, Any] | None, Field(description="Any JSON object the worker needs")] = None,
    scope: Scope = Scope.TEAM,
    max_attempts: Annotated[int, Field(ge=1, le=MAX_ATTEMPTS_LIMIT)] = DEFAULT_MAX_ATTEMPTS,
    depends_on: Annotated[
        list[WorkId] | None,
        Field(
            max_length=MAX_DEPENDENCIES,
            description="Ids of work in this project that must complete first; until then it is blocked",
        ),
    ] = None,
    review: Annotated[
        ReviewSpec | None,
        Field(
            description="Have another agent with this capability review the result before it counts "
            "(rounds: rejections after which it fails for good)"
        ),
    ] = None,
    budget: Annotated[
        Budget | None,
        Field(
            description="Limit on cost and/or tokens (input plus output); usage reported over it "
            "stops the item: it fails for good with 'budget exceeded'"
        ),
    ] = None,
    isolated: Annotated[
        bool,
        Field(
            description="Work in its own branch and worktree when the project has a repository "
            "(docs/workstreams.md); false: in the agent's own checkout"
        ),
    ] = True,
    veto: Annotated[
        bool | None,
        Field(
            description='The coordinator\'s veto: an operator answers "land this?" before it lands '
            "(docs/landing.md); null: as the project's repository says"
        ),
    ] = None,
) -> Annotated[CallToolResult, WorkOut]:
    """Offer a work item to every agent with the capability (same queue as Weft's REST API).
    With depends_on it waits (blocked) until every one of those items has completed; with
    review, each result is approved or sent back by another agent before it counts."""
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
        depends_on=depends_on or [],
        review=review,
        budget=budget,
        isolated=isolated,
        veto=veto,
    )
    item = await svc.work.submit(submission, submitted_by=svc.agent_id)
    said = "Blocked until its dependencies complete." if item.status is WorkStatus.BLOCKED else "Queued."
    return tool_result(WorkOut(item=item), f"{said}\n{item_text(item)}")


async def warp_work_claim(
    rt: WarpRuntime,
    capability: Annotated[
        Capability | None, Field(description="Only this one of your registered capabilities")
    ] = None,
) -> Annotated[CallToolResult, ClaimOut]:
    """Claim the highest-priority work you are eligible for (your registered capabilities,
    boundaries and agent type). Report on it with warp_work_progress, then complete or fail it.
    With a review capability you may get a review task instead (review: true): another
    agent's result to approve or reject with warp_work_review."""
    from shared.work.rules import Claimant

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
    caps = tuple(c for c in entry.capabilities if c != LAND_CAPABILITY)  # loom-lander lands
    if capability is not None:
        if capability not in caps:
            raise Conflict(
                f"is not one of your registered capabilities ({', '.join(caps) or 'none'})",
                field="capability",
            )
        caps = (capability,)
    if len(presence.held) >= entry.max_concurrent_tasks:
        raise Conflict(
            f"you already hold {len(presence.held)} item(s) ({', '.join(sorted(presence.held))}), your "
            "maximum; complete or fail one first",
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
            target_id=entry.target_id,
        )
    )
    if item is None:
        out = ClaimOut(claimed=False, reason="no eligible work is queued")
        return tool_result(out, f"No eligible work queued for {', '.join(caps)}.")
    presence.tasks_changed(claimed=item.id, traceparent=item.traceparent)
    context, repository = await asyncio.gather(  # the tree as the claim found it; the repository
        _claimed_context(svc.contexts, item), svc.workstreams.repository_for(item), return_exceptions=True
    )
    if isinstance(context, BaseException):
        raise context
    place, place_text = await _claimed_place(svc, item, repository)
    context_text = hand_off_text(context) if context is not None else CONTEXT_LATER
    texts = [item_text(item), *([place_text] if place_text else []), context_text]
    if item.status is WorkStatus.REVIEWING:
        said = (
            "Claimed for review: judge the result of the latest round below, then give your "
            "verdict with warp_work_review (approve; conditional, with the follow_ups left to do; "
            "or reject with feedback)."
        )
        out = ClaimOut(claimed=True, item=item, review=True, context=context, workstream=place)
        return tool_result(out, "\n".join([said, *texts]))
    out = ClaimOut(claimed=True, item=item, context=context, workstream=place)
    return tool_result(out, "\n".join(["Claimed.", *texts]))


async def _claimed_place(
    svc: Services, item: WorkItem, repository: Repository | BaseException | None
) -> tuple[WorkPlaceOut | None, str]:
    """The item's worktree on this host in ``repository`` (or the error reading it), made
    now (docs/workstreams.md), and what to tell the agent about it. A worker's is made
    fail-closed: if it cannot be made, the claim is given back (the item is queued again
    for another attempt) and the tool says why; nothing runs in the main checkout instead.
    A reviewer without one is told so and reviews the handed-in branch as it can."""
    from shared.git.workstream import WorkstreamError
    from shared.nats.failures import nats_failure

    try:
        if isinstance(repository, BaseException):
            raise repository
        place = await svc.workstreams.open(item, svc.work, repository)
    except WorkstreamError as exc:
        if item.status is WorkStatus.REVIEWING:
            return None, f"No worktree for the review ({exc.message}); the branch is {_branch_of(item)}."
        await _give_back(svc, item, exc.message)
        raise Conflict(
            f"{exc.message}. The claim was given back and the item queued again; nothing was "
            "started in the main checkout",
            field="workstream",
        ) from None
    except Exception as exc:
        # NATS went away between the claim and its worktree: the claim stands (the agent holds
        # the item), and nothing may start in the main checkout. Say which item, so the agent
        # (told "you already hold <id>" by its next claim) can go on with it once NATS is back.
        if nats_failure(exc) is None:
            raise
        raise Unavailable(
            f"claimed {item.id}, but NATS went away before its worktree was made; the claim "
            "stands: once NATS is back, complete or fail it",
            field="workstream",
        ) from exc
    if place is None:
        return None, ""
    out = WorkPlaceOut(
        directory=str(place.directory),
        branch=place.branch,
        base_ref=place.base_ref,
        base_sha=place.base_sha,
        resumed_from=place.resumed_from,
        review=place.review,
    )
    if place.review:
        return out, (
            f"Review in {place.directory}: branch {place.branch} as handed in, detached "
            f"(base {place.base_ref} at {place.base_sha[:12]})."
        )
    said = (
        f"Work in {place.directory}, on branch {place.branch} (made from {place.base_ref} at "
        f"{place.base_sha[:12]}); only there, never in the main checkout. Loom checkpoints it on "
        "every progress report and pushes the branch when you complete."
    )
    if place.resumed_from:
        said += (
            f" It starts from checkpoint {place.resumed_from[:12]} of the previous attempt: its "
            "files as they were, uncommitted work included."
        )
    return out, said


def _branch_of(item: WorkItem) -> str:
    return item.workstream.branch if item.workstream is not None else "(none recorded)"


async def _give_back(svc: Services, item: WorkItem, why: str) -> None:
    """Fail closed: the claim goes back to the queue with the reason as its error."""
    svc.presence.tasks_changed(released=item.id)
    try:
        await svc.work.fail(item.id, svc.agent_id, f"{why} (on agent {svc.identity.handle})"[:8000])
    except Exception as exc:  # the claim then lapses and is redelivered: still nothing started
        log.warning("claim of %s not given back now (%s); it will lapse", item.id, type(exc).__name__)


CONTEXT_LATER = "Context: could not be read just now; read it with warp_work_context."


async def _claimed_context(contexts: ContextStore, item: WorkItem) -> HandOffOut | None:
    """The hand-off for an item this agent now holds, or None when NATS cannot give it now.

    The claim already stands: failing the tool here would leave the agent holding an item
    it was told it did not get (the soak lost one that way under load), so a failed read
    is said in the text and the agent reads the context later."""
    from shared.nats.failures import nats_failure
    from shared.work.context import work_hand_off

    try:
        return hand_off_out(await work_hand_off(contexts, item, simplified=item.simplify))
    except Exception as exc:
        if nats_failure(exc) is None:
            raise
        log.warning("claimed %s; its context could not be read now (%s)", item.id, type(exc).__name__)
        return None


async def warp_work_list(
    rt: WarpRuntime,
    status: WorkStatus | None = None,
    capability: Capability | None = None,
    boundary: Boundary | None = None,
    assigned_to: AgentId | None = None,
    mine: Annotated[bool, Field(description="Only items assigned to you")] = False,
    limit: Annotated[int, Field(ge=1, le=200)] = 50,
    cursor: Cursor | None = None,
) -> Annotated[CallToolResult, WorkListOut]:
    """List the project's work items, newest first, with filters."""
    from shared.work.rules import WorkFilter

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


async def warp_work_queue_status(rt: WarpRuntime) -> Annotated[CallToolResult, QueueStatusOut]:
    """Items waiting per capability, dead letters, the items you hold, and why claims are
    refused if a daily budget is reached or an operator paused the project."""
    svc = await rt.services()
    depths = await svc.work.queue_depths()
    info = await svc.js.stream_info(svc.names.dlq_stream)
    from shared.models import utcnow

    hold = await svc.ledger.hold(utcnow(), target_id=_target_of(svc))
    out = QueueStatusOut(
        depths=depths,
        total=sum(depths.values()),
        dead_letters=int(info.state.messages or 0),
        held_by_me=sorted(svc.presence.held),
        draining=rt.draining is not None,
        budget_hold=None if hold is None else hold.message,
    )
    lines = [f"{cap}: {n}" for cap, n in sorted(depths.items())] or ["queues empty"]
    lines.append(f"dead letters: {out.dead_letters}")
    lines.append(f"you hold: {', '.join(out.held_by_me) or 'nothing'}")
    if out.budget_hold:
        lines.append(f"on hold: {out.budget_hold}")
    return tool_result(out, "\n".join(lines))


async def warp_work_progress(
    rt: WarpRuntime,
    work_id: WorkId,
    percent: Annotated[int, Field(ge=0, le=100)],
    note: Annotated[str, Field(max_length=2000)] = "",
    usage: Annotated[Usage | None, USAGE_FIELD] = None,
) -> Annotated[CallToolResult, WorkOut]:
    """Report progress on work you claimed; this also extends its deadline (keeps the claim).
    With usage: what the work used since your last report; going over the item's budget
    stops it."""
    svc = await rt.services()
    item = await held_operation(
        rt,
        svc,
        work_id,
        lambda: svc.work.progress(
            work_id, svc.agent_id, percent, note, usage=usage, target_id=_target_of(svc)
        ),
    )
    if stopped_by_budget(item):
        return tool_result(WorkOut(item=item), stopped_text(item))
    said = await _checkpoint_text(svc, work_id, item)
    paused = (await svc.ledger.budgets()).paused
    if paused is not None:  # an operator's pause reaches the agents working through Warp
        why = f" ({paused.reason})" if paused.reason else ""
        working = item.status in (WorkStatus.CLAIMED, WorkStatus.IN_PROGRESS)  # not a review
        if paused.stop_running and working:  # ... and stops running work here, at its checkpoint
            item = await svc.work.hand_back(work_id, svc.agent_id, f"project paused by {paused.by}{why}")
            said += (
                f" The project is paused by {paused.by}{why} and running work stops at its checkpoint: "
                "the item was handed back to the queue (not a failed attempt; the next attempt starts "
                "from this checkpoint). Stop working on it; claim nothing new."
            )
        else:
            said += f" The project is paused by {paused.by}{why}: finish what you hold; claim nothing new."
    return tool_result(WorkOut(item=item), f"Progress recorded.{said}\n{item_text(item)}")


async def _checkpoint_text(svc: Services, work_id: str, item: WorkItem | None = None) -> str:
    """Checkpoint the item's worktree (if it has one here and it changed) and say so; a
    checkpoint that cannot be taken now is said, not an error of the report."""
    from shared.git.workstream import WorkstreamError

    try:
        if item is None and svc.workstreams.place(work_id) is None:
            item = await svc.work.get(work_id)  # Warp started again: its worktree is taken up
        made = await svc.workstreams.checkpoint(work_id, svc.work, item)
    except WorkstreamError as exc:
        return f" Checkpoint not taken: {exc.message}"
    except Exception as exc:
        log.warning("checkpoint of %s not taken: %s", work_id, type(exc).__name__)
        return " Checkpoint not taken now; the next report tries again."
    return f" Checkpoint {made.sha[:12]} ({made.files} file(s) changed)." if made is not None else ""


async def warp_work_complete(
    rt: WarpRuntime,
    work_id: WorkId,
    result: Annotated[AnyJson, Field(description="Any JSON value describing the outcome")] = None,
    usage: Annotated[Usage | None, USAGE_FIELD] = None,
    artifacts: Annotated[
        Artifacts | None,
        Field(
            description=(
                "Named outputs besides the result, each with parts: text, data (JSON), file "
                f"(name, media_type, bytes in base64, at most {MAX_FILE_BYTES} bytes) or url; at most "
                f"{MAX_ARTIFACTS} artifacts and {MAX_ARTIFACTS_BYTES} bytes in all (larger files as url)"
            )
        ),
    ] = None,
    reply: Annotated[
        bool,
        Field(
            description=(
                "True: the result is your direct answer to whoever asked (an A2A client that waited "
                "on its message receives it as a message, not as a task)"
            )
        ),
    ] = False,
) -> Annotated[CallToolResult, WorkOut]:
    """Mark work you claimed as completed, with an optional result and artifacts. Work that
    asks for review is handed in instead: it counts once another agent approved it. With
    usage: what the work used since your last report (over the item's budget, it fails instead)."""
    svc = await rt.services()
    handed = await _hand_in(svc, work_id)
    item = await held_operation(
        rt,
        svc,
        work_id,
        lambda: svc.work.complete(
            work_id,
            svc.agent_id,
            result,
            usage=usage,
            target_id=_target_of(svc),
            artifacts=artifacts or (),
            reply=reply,
        ),
    )
    if stopped_by_budget(item):
        return tool_result(WorkOut(item=item), stopped_text(item))
    pushed = (
        f" Branch {handed.branch} pushed at {handed.head_sha[:12]} ({handed.commits} commit(s), "
        f"{handed.files_changed} file(s), +{handed.insertions} -{handed.deletions})."
        if handed is not None and handed.head_sha
        else ""
    )
    if item.status is WorkStatus.IN_REVIEW:
        said = "Handed in for review: another agent will approve it or send it back with feedback."
        return tool_result(WorkOut(item=item), f"{said}{pushed}\n{item_text(item)}")
    if item.status is WorkStatus.LANDING:
        said = (
            "Queued for landing: it completes once a lander has put it on the target branch; a "
            "conflict or a failing gate sends it back to the queue with what to fix."
        )
        return tool_result(WorkOut(item=item), f"{said}{pushed}\n{item_text(item)}")
    return tool_result(WorkOut(item=item), f"Completed.{pushed}\n{item_text(item)}")


async def _hand_in(svc: Services, work_id: str) -> Workstream | None:
    """Push before done: the item's worktree (if it works in one) is committed and its
    branch pushed before the completion is recorded; if that fails, the item stays the
    agent's and the tool says why. After Warp started again, the worktree is taken up
    from where the item's record says it is."""
    from shared.git.workstream import WorkstreamError

    if svc.workstreams.plain(work_id):
        return None  # claimed here without a worktree
    item = await svc.work.get(work_id)
    if item.assigned_to != svc.agent_id:
        return None  # the completion below is refused with the reason
    if item.workstream is None and svc.workstreams.place(work_id) is None:
        return None
    try:
        return await svc.workstreams.hand_in(item, svc.work)
    except WorkstreamError as exc:
        raise Conflict(f"{exc.message}; nothing was completed", field="workstream") from None


async def warp_work_fail(
    rt: WarpRuntime,
    work_id: WorkId,
    error: Annotated[str, Field(min_length=1, max_length=8000, description="What went wrong")],
    retryable: Annotated[bool, Field(description="false sends it straight to the dead-letter queue")] = True,
) -> Annotated[CallToolResult, WorkOut]:
    """Report that work you claimed failed: it is queued again, or dead-lettered once its
    attempts are used up (or at once when retryable is false)."""
    svc = await rt.services()
    await _checkpoint_text(svc, work_id)  # the next attempt starts from these files
    item = await held_operation(
        rt, svc, work_id, lambda: svc.work.fail(work_id, svc.agent_id, error, retryable=retryable)
    )
    where = "dead-letter queue" if item.status is WorkStatus.DEAD_LETTERED else "queue again"
    return tool_result(WorkOut(item=item), f"Failure recorded; item is in the {where}.\n{item_text(item)}")


async def warp_work_context(
    rt: WarpRuntime,
    work_id: WorkId,
    limit: Annotated[int, Field(ge=1, le=200, description="Nodes per page, newest first")] = 20,
    cursor: Annotated[Cursor | None, Field(description="next_cursor of the previous page")] = None,
) -> Annotated[CallToolResult, HandOffOut]:
    """A work item's context: its submission, every attempt, progress notes, results and
    failures, newest first (what a claim hands over; pass next_cursor for older nodes)."""
    from shared.work.context import work_hand_off

    svc = await rt.services()
    item = await svc.work.get(work_id)
    out = hand_off_out(await work_hand_off(svc.contexts, item, limit=limit, cursor=cursor))
    return tool_result(out, hand_off_text(out))


TOOLS = (
    tool(warp_work_broadcast, title="Offer work"),
    tool(warp_work_claim, title="Claim work"),
    tool(warp_work_list, title="List work", read_only=True, idempotent=True),
    tool(warp_work_queue_status, title="Queue status", read_only=True, idempotent=True),
    tool(warp_work_progress, title="Report progress"),
    tool(warp_work_complete, title="Complete work"),
    tool(warp_work_fail, title="Fail work"),
    tool(warp_work_context, title="Work context", read_only=True, idempotent=True),
)
