"""A project's work queue for tests and benches, wired the way Warp and Weft wire theirs:
the caller (here) builds the context store, trace log and usage ledger and hands them in."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any, TypeVar

from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext

from shared.context.store import ContextStore
from shared.models import WorkItem, Workstream, utcnow
from shared.names import ProjectNames
from shared.trace.tracing import TraceLog
from shared.usage.ledger import UsageLedger
from shared.work.queue import WorkQueue
from shared.work.rules import WorkError

T = TypeVar("T")

LATE = "deadline: must be in the future"
"""The rule's message when a submission's deadline has already passed."""


def work_queue(
    nc: NatsClient,
    names: ProjectNames,
    *,
    js: JetStreamContext | None = None,
    ack_wait_s: float | None = None,
    contexts: ContextStore | None = None,
    traces: TraceLog | None = None,
    ledger: UsageLedger | None = None,
) -> WorkQueue:
    """A queue with its own collaborators, or those given (a test that reads the context
    trees or the ledger passes its own and keeps the reference)."""
    js = js or nc.jetstream()
    return WorkQueue(
        nc,
        names,
        js=js,
        ack_wait_s=ack_wait_s,
        contexts=ContextStore(nc, names, js=js) if contexts is None else contexts,
        traces=TraceLog(nc, names) if traces is None else traces,
        ledger=UsageLedger(js, names) if ledger is None else ledger,
    )


async def submit_due_soon(
    submit: Callable[[datetime], Awaitable[T | None]], *, ahead_s: float = 2.0, attempts: int = 5
) -> T:
    """Submit an item whose deadline is ``ahead_s`` seconds away, for a test of what happens
    when it passes. A machine that stalls longer than that between taking the time and the
    queue's check makes the submission (rightly) late: it is made again with a new deadline,
    since such a test asserts the expiry, not the machine's speed. ``submit`` returns None,
    or raises the rule's WorkError, when the submission was refused as late."""
    for _ in range(attempts):
        try:
            submitted = await submit(utcnow() + timedelta(seconds=ahead_s))
        except WorkError as error:
            if error.field != "deadline":
                raise
            continue
        if submitted is not None:
            return submitted
    raise AssertionError(f"every submission {ahead_s} s ahead was late, {attempts} times")


async def hand_in(
    queue: WorkQueue,
    work_id: str,
    agent_id: str,
    branch: str,
    *,
    base_sha: str = "c" * 40,
    head_sha: str = "d" * 40,
) -> WorkItem:
    """What a worker's Warp records when it hands in one commit on ``branch`` (no git
    behind it) and completes the item it holds: the item as the completion left it, queued
    for landing."""
    ws = Workstream(branch=branch, base_ref="main", base_sha=base_sha, head_sha=head_sha, commits=1)
    await queue.record_workstream(work_id, agent_id, ws, step="handed-in")
    return await queue.complete(work_id, agent_id)


def bottleneck_plan(dependents: int = 3) -> dict[str, Any]:
    """A plan (``POST /api/work/plan``) where ``dependents`` items (``use0``...) wait on one,
    ``schema``: a bottleneck at the default threshold of 3."""
    schema = {"name": "schema", "task_id": "schema", "description": "the schema", "capability": "code"}
    uses = [
        {
            "name": f"use{n}",
            "task_id": f"use{n}",
            "description": "d",
            "capability": "code",
            "after": ["schema"],
        }
        for n in range(dependents)
    ]
    return {"items": [schema, *uses]}
