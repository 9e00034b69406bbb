"""The work lifecycle on JetStream (docs/architecture.md, Work): submit, claim, progress,
complete, fail, cancel, expire, retry, dead-letter.

Both Warp (agents) and Weft (coordinator) drive work through this module, so
an item submitted over REST and one broadcast by an agent are the same thing
in the same queue.

Layout (names from :class:`shared.names.ProjectNames`):

* the **record** of each item lives in the project's work KV bucket (key = work
  id) and is the source of truth; every change is compare-and-set;
* the **queue** is a work-queue stream with one subject per (capability,
  boundary, required agent type, priority) and one shared durable pull
  consumer per subject, so competing agents each get a message exactly once;
* a **claim** holds the JetStream message unacknowledged; its ack subject is
  stored in the record, so any process can later complete (``+ACK``), report
  progress (``+WPI``, extends the ack deadline), retry (``-NAK``) or terminate
  (``+TERM``) it. A claim that goes silent past the ack deadline is redelivered
  by JetStream and counted as a failed attempt;
* after ``max_attempts`` the item moves to the dead-letter stream, addressed by
  the sequence stored in its record (no scanning);
* what each operation does to a record is a pure **rule** (section "rules"),
  checked against ``shared.models.WORK_LIFECYCLE``; :class:`WorkQueue` does the
  I/O: compare-and-set of the rule's record, then the acks, events and clean-up
  its :class:`Change` names.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Concatenate, ParamSpec, TypeVar

from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import KeyWrongLastSequenceError, NotFoundError
from nats.js.kv import KeyValue
from opentelemetry.trace import SpanKind
from pydantic import Field

from shared.context.store import ContextStore
from shared.errors import Conflict, Forbidden, LoomError, NotFound
from shared.events import ensure_events_stream, publish_event
from shared.models import (
    WORK_LIFECYCLE,
    AttemptError,
    ControlRequest,
    LoomModel,
    Progress,
    ReviewRound,
    WorkItem,
    WorkMove,
    WorkStatus,
    WorkSubmission,
    move_allowed,
    new_id,
    utcnow,
)
from shared.names import ProjectNames, validate_agent_id, validate_capability, validate_work_id
from shared.nats.jetstream import (
    CAS_RETRIES,
    cas_backoff,
    delete_unchanged,
    ensure_kv,
    ensure_stream,
    get_or_none,
    snapshot,
)
from shared.nats.jsapi import JetStreamReplyError, consumer_next
from shared.paging import Page, decode_cursor, encode_cursor
from shared.trace.tracing import TraceLog, ensure_traces_stream, timed, traceparent_of, with_trace_headers
from shared.usage.ledger import UsageLedger
from shared.usage.rules import (
    Budget,
    Hold,
    Usage,
    add_usage,
    budget_error,
    exceeded,
    stopped_by_budget,
    totals_of,
)
from shared.work.context import work_nodes
from shared.work.graph import (
    DEAD_ENDS,
    PlanStep,
    check_dependencies,
    dead_end,
    plan_order,
)
from shared.work.policy import BoundaryPolicy, config_bucket, read_policy

log = logging.getLogger("loom.work")

T = TypeVar("T")
R = TypeVar("R")
P = ParamSpec("P")

DEFAULT_ACK_WAIT_S = 60.0
POLICY_CACHE_S = 2.0
CLAIM_LINGER_S = 0.05
DLQ_MAX_AGE_S = 30 * 24 * 3600
CLAIMABLE = WORK_LIFECYCLE[WorkMove.CLAIM].sources
"""Waiting for an agent: the statuses a claim may start from."""
HELD = WORK_LIFECYCLE[WorkMove.LAPSE].sources
"""Claimed and not finished: the statuses whose claim can lapse."""
EXPIRABLE = WORK_LIFECYCLE[WorkMove.EXPIRE].sources
"""Not started yet: the statuses an item's deadline can expire it from."""
REVIEWABLE = WORK_LIFECYCLE[WorkMove.CLAIM_REVIEW].sources
"""Handed in, waiting for a reviewer."""
WAITING = CLAIMABLE | REVIEWABLE
"""Waiting for an agent (a worker or a reviewer): what routing looks after."""
HOLDING = HELD | WORK_LIFECYCLE[WorkMove.REVIEW_LAPSE].sources | WORK_LIFECYCLE[WorkMove.RESUME].sources
"""Held by an agent (working, reviewing, or waiting on the operator): what counts among its tasks."""
MAX_FEEDBACK = 8000
DEPENDENTS_AT_ONCE = 32
"""How many dependents of one item are told about it concurrently."""


def default_ack_wait() -> float:
    raw = os.environ.get("LOOM_WORK_ACK_WAIT_S")
    if not raw:
        return DEFAULT_ACK_WAIT_S
    rule = "LOOM_WORK_ACK_WAIT_S: must be a number of seconds from 0.5 to 86400"
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(rule) from None  # the value is not repeated: it may be a pasted secret
    if not 0.5 <= value <= 86_400:
        raise ValueError(rule)
    return value


# -- errors ----------------------------------------------------------------------


class WorkError(LoomError):
    """A refused work operation; ``code`` maps to an HTTP status / tool error."""


class WorkNotFound(WorkError, NotFound):
    def __init__(self, work_id: str) -> None:
        # The id is not repeated: the caller sent it, and it may not be an id at all.
        super().__init__("no work item with this id in this project", field="work_id")
        self.work_id = work_id


class WorkConflict(WorkError, Conflict):
    """The item is not in a state that allows the operation."""


class NotClaimant(WorkError, Forbidden):
    pass


class BudgetReached(WorkError, Conflict):
    """A daily budget is reached: no new claims until the next UTC day or a higher budget."""

    def __init__(self, hold: Hold) -> None:
        super().__init__(hold.message, field="budget", rule="daily budget reached")
        self.hold = hold


# -- stored shapes -----------------------------------------------------------------


class Delivery(LoomModel):
    ack_subject: str
    stream_seq: int
    delivered: int


class WorkRecord(LoomModel):
    """What the KV bucket holds: the public item plus queue bookkeeping."""

    item: WorkItem
    queue_seq: int | None = None
    enqueues: int = 0
    delivery: Delivery | None = None
    dlq_seq: int | None = None
    dlq_at: datetime | None = None
    notes: list[str] = Field(default_factory=list)


@dataclass(frozen=True)
class Claimant:
    """Who is claiming: what the agent is allowed to take."""

    agent_id: str
    agent_type: str
    capabilities: tuple[str, ...]
    boundaries: tuple[str, ...] = ("default",)
    target_id: str | None = None
    """The target that started the agent, if one did (its daily budget applies too)."""

    def __post_init__(self) -> None:
        validate_agent_id(self.agent_id)


@dataclass(frozen=True)
class WorkFilter:
    status: WorkStatus | None = None
    capability: str | None = None
    boundary: str | None = None
    assigned_to: str | None = None

    def matches(self, item: WorkItem) -> bool:
        return (
            (self.status is None or item.status == self.status)
            and (self.capability is None or item.capability == self.capability)
            and (self.boundary is None or item.boundary == self.boundary)
            and (self.assigned_to is None or item.assigned_to == self.assigned_to)
        )


@dataclass
class DeadLetter:
    item: WorkItem
    dlq_seq: int
    dead_lettered_at: datetime


# -- rules ---------------------------------------------------------------------------
#
# Pure functions from a record (and an operation's inputs, ``now`` among them) to a
# ``Change``: the record to store and what the queue must then do, or a refusal
# (WorkError and its kin). They do no I/O and never change the record they are given:
# ``_fork`` hands them shallow copies stamped ``updated_at=now``, and fields are
# replaced, never changed in place (lists are rebuilt). Every status move goes through
# ``_move``, which checks it against ``shared.models.WORK_LIFECYCLE``. WorkQueue stores
# the new record compare-and-set, then acks, publishes and cleans up as the Change says.
# A new status or operation: one row in that table, one rule here.

CLAIM_LAPSED = "claim expired: no progress or completion before the ack deadline"


class Ack(StrEnum):
    """Verbs for the ack subject of a JetStream delivery."""

    DONE = "+ACK"  # finished: remove the message
    WORKING = "+WPI"  # still at it: extend the ack deadline
    AGAIN = "-NAK"  # redeliver it now
    STOP = "+TERM"  # never redeliver it


class Then(StrEnum):
    """A second step the queue takes once the change is stored."""

    REQUEUE = "requeue"  # back to queued (rule ``requeue``), then release the message
    DEAD_LETTER = "dead-letter"  # publish to the DLQ, then bury the record (rule ``bury``)
    ENQUEUE = "enqueue"  # publish a fresh queue message for the record


@dataclass(frozen=True, slots=True)
class WorkEvent:
    """A ``work.<action>`` event to publish: the item plus ``data``."""

    action: str
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Change:
    """What a rule decided. ``record`` is None when the stored record stays as it is."""

    record: WorkRecord | None = None
    events: tuple[WorkEvent, ...] = ()
    ack: Ack | None = None
    ack_subject: str | None = None  # the delivery ``ack`` is for
    then: Then | None = None
    notify: str | None = None  # the agent to send a cancel-work control request
    drop_queue_seq: int | None = None  # a queue message nobody should get any more
    drop_dlq_seq: int | None = None  # a dead letter to remove


def check_percent(percent: int) -> None:
    if not 0 <= percent <= 100:
        raise WorkError("percent: must be between 0 and 100", field="percent")


def check_error(error: str) -> None:
    if not error.strip():
        raise WorkError("error: must describe what went wrong", field="error")


def is_due(item: WorkItem, now: datetime) -> bool:
    """Whether the item's deadline has passed."""
    return item.deadline is not None and item.deadline <= now


def _fork(record: WorkRecord, now: datetime) -> tuple[WorkRecord, WorkItem]:
    """Shallow copies of the record and its item, changed at ``now``, for a rule to change.

    Cheaper than parsing the stored bytes again, let alone a deep copy; safe because
    rules replace fields and never change a list or model they did not create."""
    item = record.item.model_copy(update={"updated_at": now})
    return record.model_copy(update={"item": item}), item


def _move(record: WorkRecord, move: WorkMove, now: datetime) -> tuple[WorkRecord, WorkItem] | None:
    """Copies with the move's target status, or None when the lifecycle table does not
    allow ``move`` from the record's status (the one place rules consult it)."""
    if not move_allowed(move, record.item.status):
        return None
    new, item = _fork(record, now)
    item.status = WORK_LIFECYCLE[move].target
    return new, item


def _holder_move(
    record: WorkRecord, agent_id: str, move: WorkMove, operation: str, now: datetime
) -> tuple[WorkRecord, WorkItem]:
    """A move only the agent holding the claim may make."""
    moved = _move(record, move, now)
    item = record.item
    if moved is None:
        if item.status == WorkStatus.CANCELLED:
            raise WorkConflict(f"work_id: {item.id} was cancelled; stop working on it", field="work_id")
        if stopped_by_budget(item):
            raise WorkConflict(
                f"work_id: {item.id} was stopped: {item.error}; stop working on it", field="work_id"
            )
        raise WorkConflict(
            f"work_id: cannot {operation} {item.id}: it is {item.status.value}, not claimed", field="work_id"
        )
    if item.assigned_to != agent_id:
        raise NotClaimant(
            f"work_id: {item.id} is claimed by another agent (its claim may have expired and "
            "been redelivered)",
            field="work_id",
        )
    return moved


def _ack_subject(record: WorkRecord) -> str | None:
    return record.delivery.ack_subject if record.delivery is not None else None


def admit(
    submission: WorkSubmission,
    *,
    project_id: str,
    submitted_by: str | None,
    now: datetime,
    work_id: str | None = None,
    dependents: Iterable[str] = (),
) -> WorkRecord:
    """A new item: created queued (its queue message is published next), or blocked
    until every item it ``depends_on`` has completed (it has no queue message until then).

    ``work_id``: an id chosen beforehand (a new one otherwise): a plan's, so each item can
    name the items of the plan that wait for it (``dependents``), or a caller's that listens
    for the item's events before it exists."""
    if submission.deadline is not None and submission.deadline <= now:
        raise WorkError("deadline: must be in the future", field="deadline")
    item = WorkItem(
        **submission.model_dump(),
        **({"id": validate_work_id(work_id)} if work_id is not None else {}),
        project_id=project_id,
        status=WorkStatus.BLOCKED if submission.depends_on else WorkStatus.QUEUED,
        submitted_by=submitted_by,
        created_at=now,
        updated_at=now,
        blocked_on=list(submission.depends_on),
        dependents=list(dependents),
    )
    return WorkRecord(item=item)


def store_seq(record: WorkRecord, seq: int, epoch: int, now: datetime) -> Change:
    """Remember the queue message of enqueue number ``epoch`` (whatever the status by now)."""
    new, _ = _fork(record, now)
    new.queue_seq = seq
    new.enqueues = max(record.enqueues, epoch)
    return Change(new)


def take(record: WorkRecord, agent_id: str, delivery: Delivery, now: datetime) -> Change:
    """A queue message delivered to ``agent_id`` meets the record: a claim, or what to do
    with the message.

    A redelivery of a held claim means that claim went silent: it lapses (a failed
    attempt), then the item is dead-lettered, expired or claimed like any failed one."""
    if record.queue_seq is not None and record.queue_seq != delivery.stream_seq:
        return Change(ack=Ack.STOP, ack_subject=delivery.ack_subject)  # superseded by a later enqueue
    if record.item.status in REVIEWABLE | {WorkStatus.REVIEWING}:
        return _take_review(record, agent_id, delivery, now)
    if record.item.status is WorkStatus.WAITING_ON_OPERATOR:
        return _keep_waiting(record, delivery)
    events: tuple[WorkEvent, ...] = ()
    lapsed = _move(record, WorkMove.LAPSE, now)
    if lapsed is not None:
        if record.delivery is None or delivery.delivered <= record.delivery.delivered:
            return Change()  # the holder's own delivery: the message stays with the claim
        new, item = lapsed
        previous = record.item
        item.errors = [
            *previous.errors,
            AttemptError(
                attempt=previous.attempts, agent_id=previous.assigned_to, error=CLAIM_LAPSED, at=now
            ),
        ]
        item.error = CLAIM_LAPSED
        item.assigned_to = None
        new.delivery = None
        events = (
            WorkEvent("redelivered", {"previous_agent": previous.assigned_to, "attempt": previous.attempts}),
        )
        if item.attempts >= item.max_attempts:
            return Change(new, events, ack=Ack.STOP, ack_subject=delivery.ack_subject, then=Then.DEAD_LETTER)
        record = new
    if is_due(record.item, now):
        expired = _move(record, WorkMove.EXPIRE, now)
        if expired is not None:
            new, item = expired
            item.finished_at = now
            return Change(
                new, (*events, WorkEvent("expired")), ack=Ack.STOP, ack_subject=delivery.ack_subject
            )
    claimed = _move(record, WorkMove.CLAIM, now)
    if claimed is None:
        return Change(ack=Ack.STOP, ack_subject=delivery.ack_subject)  # finished or cancelled meanwhile
    new, item = claimed
    item.attempts += 1
    item.assigned_to = agent_id
    item.claimed_at = now
    item.progress = None
    item.waiting_reason = None
    new.delivery = delivery
    return Change(new, (*events, WorkEvent("claimed", {"agent_id": agent_id})))


def _take_review(record: WorkRecord, agent_id: str, delivery: Delivery, now: datetime) -> Change:
    """A review task's message meets the record: a reviewer's claim. A redelivery while a
    reviewer holds it means that reviewer went silent: the review lapses (back to
    ``in-review``, nothing else lost) and the new claimant gets it. The agent that did the
    work never does: its claim gives the message back for someone else."""
    events: tuple[WorkEvent, ...] = ()
    lapsed = _move(record, WorkMove.REVIEW_LAPSE, now)
    if lapsed is not None:
        if record.delivery is None or delivery.delivered <= record.delivery.delivered:
            return Change()  # the reviewer's own delivery
        new, item = lapsed
        previous = record.item.assigned_to
        item.assigned_to = None
        new.delivery = None
        events = (WorkEvent("redelivered", {"previous_agent": previous, "review_round": item.review_round}),)
        record = new
    if agent_id == record.item.author:
        return Change(record if events else None, events, ack=Ack.AGAIN, ack_subject=delivery.ack_subject)
    moved = _move(record, WorkMove.CLAIM_REVIEW, now)
    assert moved is not None  # in review, checked by the caller or lapsed just now
    new, item = moved
    item.assigned_to = agent_id
    item.progress = None
    item.waiting_reason = None
    if item.reviews:
        item.reviews = [*item.reviews[:-1], item.reviews[-1].model_copy(update={"reviewer": agent_id})]
    new.delivery = delivery
    claimed = WorkEvent("review-claimed", {"agent_id": agent_id, "round": item.review_round})
    return Change(new, (*events, claimed))


def _keep_waiting(record: WorkRecord, delivery: Delivery) -> Change:
    """A claim waiting on the operator does not lapse. Its keep-alive (``+WPI``, see
    :func:`keep_alive_subject`) normally stops the redelivery; should one happen anyway (the
    agent's Warp was down for a while), the record takes the new delivery, so the claim
    stays with its agent and whoever acts on it later acknowledges the current delivery.
    Not the agent's activity: ``updated_at`` stays."""
    if record.delivery is None or delivery.delivered <= record.delivery.delivered:
        return Change()
    return Change(record.model_copy(update={"delivery": delivery}))


def keep_alive_subject(record: WorkRecord, agent_id: str) -> str | None:
    """The ack subject to send ``+WPI`` on while ``agent_id`` waits on the operator about
    this item (None when it does not)."""
    item = record.item
    if item.status is not WorkStatus.WAITING_ON_OPERATOR or item.assigned_to != agent_id:
        return None
    return _ack_subject(record)


def wait_on(record: WorkRecord, agent_id: str, question_id: str, now: datetime, question: str = "") -> Change:
    """The holder asked the operator a question about the item: it waits, claim kept. The
    question's text goes out with the event (the item's context tree records it)."""
    new, item = _holder_move(record, agent_id, WorkMove.ASK, "ask about", now)
    item.question_id = question_id
    told = {"agent_id": agent_id, "question_id": question_id, "question": question}
    event = WorkEvent("waiting-on-operator", told)
    return Change(new, (event,), ack=Ack.WORKING, ack_subject=_ack_subject(record))


def resume(record: WorkRecord, question_id: str, answered: bool, now: datetime, answer: str = "") -> Change:
    """The question the item waited on was answered (or its deadline passed): back in
    progress, the claim's ack deadline restarted. Anything else is left alone. ``answer``
    (the answer, or why there is none) goes out with the event."""
    if record.item.question_id != question_id:
        return Change()
    moved = _move(record, WorkMove.RESUME, now)
    if moved is None:
        return Change()
    new, item = moved
    item.question_id = None
    event = WorkEvent("resumed", {"question_id": question_id, "answered": answered, "answer": answer})
    return Change(new, (event,), ack=Ack.WORKING, ack_subject=_ack_subject(record))


def report(record: WorkRecord, agent_id: str, percent: int, note: str, now: datetime) -> Change:
    """Progress from the holder (a worker, or a reviewer: its review stays a review): the
    claim's ack deadline extended."""
    check_percent(percent)
    move = WorkMove.REVIEW_PROGRESS if record.item.status is WorkStatus.REVIEWING else WorkMove.PROGRESS
    new, item = _holder_move(record, agent_id, move, "report progress on", now)
    item.progress = Progress(percent=percent, note=note, at=now)
    event = WorkEvent("progress", {"agent_id": agent_id, "percent": percent, "note": note})
    return Change(new, (event,), ack=Ack.WORKING, ack_subject=_ack_subject(record))


def finish(record: WorkRecord, agent_id: str, result: Any, now: datetime) -> Change:
    """Completion by the holder: the message is acknowledged for good. Work that asks for
    review is handed in instead (:func:`hand_in`)."""
    if record.item.review is not None:
        return hand_in(record, agent_id, result, now)
    new, item = _holder_move(record, agent_id, WorkMove.COMPLETE, "complete", now)
    item.result = result
    item.error = None
    item.finished_at = now
    if item.progress is not None:
        item.progress = Progress(percent=100, note=item.progress.note, at=now)
    new.delivery = None
    event = WorkEvent("completed", {"agent_id": agent_id})
    return Change(new, (event,), ack=Ack.DONE, ack_subject=_ack_subject(record))


def hand_in(record: WorkRecord, agent_id: str, result: Any, now: datetime) -> Change:
    """The worker is done with work that asks for review: a new round with its result, and
    a review task (a message on the reviewers' queue subject, which leaves this agent out)."""
    new, item = _holder_move(record, agent_id, WorkMove.HAND_IN, "complete", now)
    item.result = result
    item.error = None
    if item.progress is not None:
        item.progress = Progress(percent=100, note=item.progress.note, at=now)
    item.review_round = record.item.review_round + 1
    item.reviews = [
        *item.reviews,
        ReviewRound(round=item.review_round, author=agent_id, result=result, handed_in_at=now),
    ]
    item.assigned_to = None
    new.delivery = None
    new.queue_seq = None  # the next queue message is the review task
    event = WorkEvent("in-review", {"agent_id": agent_id, "round": item.review_round})
    return Change(new, (event,), ack=Ack.DONE, ack_subject=_ack_subject(record), then=Then.ENQUEUE)


def charge(
    record: WorkRecord,
    agent_id: str,
    usage: Usage | None,
    target_id: str | None,
    now: datetime,
    rule: Callable[[WorkRecord], Change],
) -> Change:
    """``rule`` (progress or completion by the holder) with ``usage`` added to the item.

    When the item's usage then goes over its budget, the holder's operation becomes a
    failure for good instead: the claim terminated, the item on its way to the DLQ with
    the error ``budget exceeded: ...``, its usage and (on completion) its result kept."""
    change = rule(record)
    if usage is None or usage.empty or change.record is None:
        return change
    entries = add_usage(change.record.item.usage, usage, agent_id=agent_id, target_id=target_id, now=now)
    change.record.item.usage = entries
    why = exceeded(totals_of(entries), record.item.budget)
    if why is None:
        return change
    moved = _move(record, WorkMove.FAIL, now)
    if moved is None:  # a reviewer's report: counted; the next worker's report stops it
        return change
    new, item = moved
    error = budget_error(why)
    item.usage = entries
    item.result = change.record.item.result
    item.errors = [*item.errors, AttemptError(attempt=item.attempts, agent_id=agent_id, error=error, at=now)]
    item.error = error
    item.assigned_to = None
    new.delivery = None
    event = WorkEvent("failed", {"agent_id": agent_id, "error": error, "budget": True})
    return Change(new, (event,), ack=Ack.STOP, ack_subject=_ack_subject(record), then=Then.DEAD_LETTER)


def rebudget(record: WorkRecord, budget: Budget | None, now: datetime) -> Change:
    """An operator's new budget for an item that may still run (None: no limit): anything but
    completed, cancelled or expired, so a dead letter's budget can be raised before its retry."""
    if record.item.status in (WorkStatus.COMPLETED, WorkStatus.CANCELLED, WorkStatus.EXPIRED):
        raise WorkConflict(
            f"work_id: {record.item.id} is {record.item.status.value}; its budget can no longer change",
            field="work_id",
        )
    new, item = _fork(record, now)
    item.budget = None if budget is None or budget.unlimited else budget
    return Change(
        new, (WorkEvent("budget", {"budget": None if item.budget is None else item.budget.model_dump()}),)
    )


def check_verdict(verdict: str, feedback: str, score: float | None) -> None:
    if verdict not in ("approve", "reject"):
        raise WorkError("verdict: must be approve or reject", field="verdict")
    if verdict == "reject" and not feedback.strip():
        raise WorkError("feedback: must say what to change when rejecting", field="feedback")
    if len(feedback) > MAX_FEEDBACK:
        raise WorkError(f"feedback: must be at most {MAX_FEEDBACK} characters", field="feedback")
    if score is not None and not 0 <= score <= 100:
        raise WorkError("score: must be between 0 and 100", field="score")


def judge(
    record: WorkRecord, agent_id: str, verdict: str, feedback: str, score: float | None, now: datetime
) -> Change:
    """The reviewer's verdict on the round it holds. Approve: completed, the verdict in the
    record. Reject: back to the queue for workers with the feedback in ``reviews`` (the next
    worker sees every round's result and feedback), or after the last round failed for good,
    into the DLQ with all the feedback."""
    check_verdict(verdict, feedback, score)
    item = record.item
    last = item.review is None or item.review_round >= item.review.rounds
    move = WorkMove.APPROVE if verdict == "approve" else WorkMove.REJECT_LAST if last else WorkMove.REJECT
    new, changed = _holder_move(record, agent_id, move, "review", now)
    said = {
        "reviewer": agent_id,
        "verdict": verdict,
        "feedback": feedback,
        "score": score,
        "reviewed_at": now,
    }
    if changed.reviews:
        changed.reviews = [*changed.reviews[:-1], changed.reviews[-1].model_copy(update=said)]
    new.delivery = None
    done = _ack_subject(record)
    told = {"agent_id": agent_id, "round": item.review_round, "score": score}
    if move is WorkMove.APPROVE:
        changed.assigned_to = item.author
        changed.finished_at = now
        events = (WorkEvent("approved", told), WorkEvent("completed", {"agent_id": item.author}))
        return Change(new, events, ack=Ack.DONE, ack_subject=done)
    changed.assigned_to = None
    rejected = WorkEvent("rejected", {**told, "feedback": feedback, "final": last})
    if move is WorkMove.REJECT:
        new.queue_seq = None  # the next queue message is the workers' again
        queued = WorkEvent("queued", {"retry": True})
        return Change(new, (rejected, queued), ack=Ack.DONE, ack_subject=done, then=Then.ENQUEUE)
    rounds = item.review.rounds if item.review is not None else 1
    error = f"rejected in review round {item.review_round} of {rounds}: {feedback}"
    changed.error = error
    changed.errors = [
        *item.errors,
        AttemptError(attempt=item.attempts, agent_id=item.author, error=error, at=now),
    ]
    return Change(new, (rejected,), ack=Ack.DONE, ack_subject=done, then=Then.DEAD_LETTER)


def record_failure(record: WorkRecord, agent_id: str, error: str, retryable: bool, now: datetime) -> Change:
    """A failed attempt reported by the holder: requeued, or dead-lettered when the
    error is not retryable or the attempts are used up."""
    check_error(error)
    new, item = _holder_move(record, agent_id, WorkMove.FAIL, "fail", now)
    item.errors = [*item.errors, AttemptError(attempt=item.attempts, agent_id=agent_id, error=error, at=now)]
    item.error = error
    item.assigned_to = None
    new.delivery = None
    dead = not retryable or item.attempts >= item.max_attempts
    return Change(
        new,
        (WorkEvent("failed", {"agent_id": agent_id, "error": error}),),
        ack=Ack.STOP if dead else Ack.AGAIN,
        ack_subject=_ack_subject(record),
        then=Then.DEAD_LETTER if dead else Then.REQUEUE,
    )


def requeue(record: WorkRecord, now: datetime) -> Change:
    """A failed item back to the queue; left alone if something moved it meanwhile."""
    moved = _move(record, WorkMove.REQUEUE, now)
    if moved is None:
        return Change()
    return Change(moved[0], (WorkEvent("queued", {"retry": True}),))


def bury(record: WorkRecord, dlq_seq: int, now: datetime) -> Change:
    """A failed item into the dead-letter queue at ``dlq_seq``; left alone if something
    moved it meanwhile (then that dead letter is dropped)."""
    moved = _move(record, WorkMove.DEAD_LETTER, now)
    if moved is None:
        return Change(drop_dlq_seq=dlq_seq)
    new, item = moved
    item.finished_at = now
    item.assigned_to = None
    new.dlq_seq = dlq_seq
    new.dlq_at = now
    new.delivery = None
    return Change(new, (WorkEvent("dead-lettered", {"errors": len(item.errors)}),))


def stop(record: WorkRecord, reason: str, by: str, now: datetime) -> Change:
    """Cancellation: a held claim is terminated and its agent told; a waiting item's
    queue message is dropped."""
    moved = _move(record, WorkMove.CANCEL, now)
    item = record.item
    if moved is None:
        raise WorkConflict(
            f"work_id: {item.id} is {item.status.value} and can no longer be cancelled", field="work_id"
        )
    new, changed = moved
    changed.finished_at = now
    changed.error = f"cancelled by {by}" + (f": {reason}" if reason else "")
    new.delivery = None
    event = WorkEvent("cancelled", {"reason": reason, "by": by})
    if record.delivery is not None and item.assigned_to:
        return Change(
            new, (event,), ack=Ack.STOP, ack_subject=record.delivery.ack_subject, notify=item.assigned_to
        )
    return Change(new, (event,), drop_queue_seq=record.queue_seq)


def expire(record: WorkRecord, now: datetime) -> Change:
    """A waiting item past its deadline expires; anything else is left alone."""
    moved = _move(record, WorkMove.EXPIRE, now) if is_due(record.item, now) else None
    if moved is None:
        return Change()
    new, item = moved
    item.finished_at = now
    return Change(new, (WorkEvent("expired"),), drop_queue_seq=record.queue_seq)


def reset(
    record: WorkRecord, now: datetime, dependencies: Mapping[str, WorkItem | None] | None = None
) -> Change:
    """An operator's retry: back to the queue with fresh attempts, out of the DLQ.

    An item that failed because of a dependency goes back to waiting for it instead
    (``revive``), provided that dependency (read into ``dependencies``) may still complete."""
    failed_dependency = record.item.failed_dependency
    if failed_dependency is not None and move_allowed(WorkMove.REVIVE, record.item.status):
        why = dead_end((dependencies or {}).get(failed_dependency))
        if why is not None:
            raise WorkConflict(
                f"work_id: {record.item.id} failed because its dependency {failed_dependency} {why}; "
                "retry that one first",
                field="work_id",
            )
        revived = revive(record, failed_dependency, now)
        assert revived.record is not None
        new, item = revived.record, revived.record.item
        item.attempts = 0
        item.review_round = 0
        new.notes = [*record.notes, f"retried at {now.isoformat()}"]
        return Change(new, (WorkEvent("retried"), WorkEvent("blocked")), drop_dlq_seq=record.dlq_seq)
    moved = _move(record, WorkMove.RETRY, now)
    if moved is None:
        raise WorkConflict(
            f"work_id: {record.item.id} is {record.item.status.value}; only failed or dead-lettered work "
            "can be retried",
            field="work_id",
        )
    new, item = moved
    item.attempts = 0
    item.review_round = 0
    item.assigned_to = None
    item.finished_at = None
    item.progress = None
    new.dlq_seq = None
    new.dlq_at = None
    new.delivery = None
    new.queue_seq = None  # the next queue message is this item's, whichever seq it gets
    new.notes = [*record.notes, f"retried at {now.isoformat()}"]
    events = (WorkEvent("retried"), WorkEvent("queued", {"retry": True}))
    return Change(new, events, then=Then.ENQUEUE, drop_dlq_seq=record.dlq_seq)


def discard(record: WorkRecord, dlq_seq: int, now: datetime) -> Change:
    """The dead letter at ``dlq_seq`` removed; the record stays, dead-lettered, with a note."""
    if record.dlq_seq != dlq_seq:
        raise WorkConflict(f"work_id: {record.item.id} changed while being discarded", field="work_id")
    new, _ = _fork(record, now)
    new.dlq_seq = None
    new.notes = [*record.notes, f"discarded from the dead-letter queue at {now.isoformat()}"]
    return Change(new, (WorkEvent("discarded"),), drop_dlq_seq=dlq_seq)


def note_waiting(record: WorkRecord, reason: str | None, now: datetime) -> Change:
    """Why a waiting item still waits (None: it no longer does, an agent can take it).

    Only while the item waits for an agent (a worker or a reviewer), and only a new reason:
    every sweep that finds the item still waiting asks again, and a changed reason is a
    ``work.waiting`` event."""
    if record.item.status not in WAITING or record.item.waiting_reason == reason:
        return Change()
    new, item = _fork(record, now)
    item.waiting_reason = reason
    events = () if reason is None else (WorkEvent("waiting", {"reason": reason}),)
    return Change(new, events)


# -- dependencies --------------------------------------------------------------------
#
# A blocked item waits for every item it ``depends_on``; ``blocked_on`` lists those that
# have not completed yet, ``dependents`` (on the dependency) the items waiting for it.
# Whoever completes, cancels, expires or dead-letters an item tells its dependents (rules
# ``satisfy`` and ``abandon``); whoever creates or revives a blocked item checks its
# dependencies as they are now (rule ``reconcile``), so an item linked while its dependency
# was finishing is settled either way. Every rule here is idempotent: two processes telling
# the same dependent the same thing make one change.


def link(record: WorkRecord, dependent_ids: Iterable[str]) -> Change:
    """Remember that ``dependent_ids`` wait for this item, whatever its status: the caller
    settles each dependent against the status this link was stored with.

    Bookkeeping, not a change of the work: ``updated_at`` stays (it is the holder's activity)."""
    known = record.item.dependents
    added = [d for d in dict.fromkeys(dependent_ids) if d not in known]
    if not added:
        return Change()
    item = record.item.model_copy(update={"dependents": [*known, *added]})
    return Change(record.model_copy(update={"item": item}))


def _unblock(record: WorkRecord, done: Iterable[str], now: datetime) -> Change:
    """``done`` dependencies completed: drop them from ``blocked_on``; queued once none is left."""
    item = record.item
    finished = set(done) & set(item.blocked_on)
    if item.status is not WorkStatus.BLOCKED or not finished:
        return Change()
    rest = [d for d in item.blocked_on if d not in finished]
    if rest:
        new, changed = _fork(record, now)
        changed.blocked_on = rest
        return Change(new)
    moved = _move(record, WorkMove.UNBLOCK, now)
    assert moved is not None  # blocked, checked above
    new, changed = moved
    changed.blocked_on = []
    new.queue_seq = None  # no queue message yet; the next one is this item's
    last = next(d for d in reversed(item.blocked_on) if d in finished)
    events = (WorkEvent("unblocked", {"dependency": last}), WorkEvent("queued"))
    return Change(new, events, then=Then.ENQUEUE)


def satisfy(record: WorkRecord, dependency_id: str, now: datetime) -> Change:
    """``dependency_id`` completed: one less to wait for (queued when it was the last)."""
    return _unblock(record, (dependency_id,), now)


def abandon(record: WorkRecord, dependency_id: str, why: str, now: datetime) -> Change:
    """A dependency that can no longer complete: the blocked item fails for good (into the
    DLQ) with an error naming it; anything else is left alone."""
    item = record.item
    moved = _move(record, WorkMove.ABANDON, now) if dependency_id in item.depends_on else None
    if moved is None:
        return Change()
    new, changed = moved
    error = f"dependency {dependency_id} {why}"
    changed.error = error
    changed.errors = [*item.errors, AttemptError(attempt=item.attempts, agent_id=None, error=error, at=now)]
    changed.failed_dependency = dependency_id
    changed.blocked_on = []
    event = WorkEvent("failed", {"dependency": dependency_id, "error": error})
    return Change(new, (event,), then=Then.DEAD_LETTER)


def reconcile(record: WorkRecord, dependencies: Mapping[str, WorkItem | None], now: datetime) -> Change:
    """A blocked item against its dependencies as they are now (``dependencies``: the ones
    read, None for one that does not exist): it fails for good if one of them can no longer
    complete; otherwise the completed ones are dropped, and it is queued when none is left."""
    item = record.item
    if item.status is not WorkStatus.BLOCKED:
        return Change()
    for dependency_id in item.blocked_on:
        if dependency_id in dependencies:
            why = dead_end(dependencies[dependency_id])
            if why is not None:
                return abandon(record, dependency_id, why, now)
    done = [
        d
        for d in item.blocked_on
        if (found := dependencies.get(d)) is not None and found.status is WorkStatus.COMPLETED
    ]
    return _unblock(record, done, now)


def revive(record: WorkRecord, dependency_id: str, now: datetime) -> Change:
    """``dependency_id`` was retried: an item that failed because of it is blocked again
    (out of the DLQ), waiting for all it depends on; anything else is left alone."""
    item = record.item
    moved = _move(record, WorkMove.REVIVE, now) if item.failed_dependency == dependency_id else None
    if moved is None:
        return Change()
    new, changed = moved
    changed.blocked_on = list(item.depends_on)
    changed.failed_dependency = None
    changed.finished_at = None
    changed.assigned_to = None
    new.dlq_seq = None
    new.dlq_at = None
    new.delivery = None
    new.queue_seq = None
    new.notes = [*record.notes, f"revived at {now.isoformat()}: dependency {dependency_id} was retried"]
    events = (WorkEvent("revived", {"dependency": dependency_id}), WorkEvent("blocked"))
    return Change(new, events, drop_dlq_seq=record.dlq_seq)


def needs_message(record: WorkRecord) -> bool:
    """Waiting in a queue (for a worker or a reviewer), but its queue message was never
    stored (the process that queued it stopped between the two steps): a sweep publishes it."""
    return record.item.status in (WorkStatus.QUEUED, WorkStatus.IN_REVIEW) and record.queue_seq is None


Op = Callable[Concatenate["WorkQueue", str, P], Coroutine[Any, Any, R]]


def _traced(name: str) -> Callable[[Op[P, R]], Op[P, R]]:
    """Time an operation on one item as a span of the item's trace (``shared.trace.tracing.timed``)."""

    def wrap(op: Op[P, R]) -> Op[P, R]:
        @functools.wraps(op)
        async def run(self: WorkQueue, work_id: str, /, *args: P.args, **kwargs: P.kwargs) -> R:
            with timed(self.traces, name, work_id=work_id) as outcome:
                result = await op(self, work_id, *args, **kwargs)
                outcome.about(result)
            return result

        return run

    return wrap


class WorkQueue:
    """All work operations for one project."""

    def __init__(
        self,
        nc: NatsClient,
        names: ProjectNames,
        *,
        js: JetStreamContext | None = None,
        ack_wait_s: float | None = None,
        record_context: bool = True,
    ) -> None:
        self._nc = nc
        self._js = js or nc.jetstream()
        self.names = names
        self.contexts = ContextStore(nc, names, js=self._js) if record_context else None
        """Each item's context tree (docs/context.md); every transition appends to it."""
        self.ledger = UsageLedger(self._js, names)
        """The day's usage counters and the budgets (docs/operations.md)."""
        self.traces = TraceLog(nc, names)
        """The spans of the project's items this process makes (docs/operations.md, Traces)."""
        self.ack_wait_s = ack_wait_s if ack_wait_s is not None else default_ack_wait()
        self._kv: KeyValue | None = None
        self._config_kv: KeyValue | None = None
        self._consumers: set[str] = set()
        self._ensured = False
        self._policy: BoundaryPolicy | None = None
        self._policy_read_at = 0.0
        self._ensure_lock = asyncio.Lock()
        self._events_in_flight: set[asyncio.Task[None]] = set()

    # -- set-up --------------------------------------------------------------
    async def ensure(self) -> None:
        if self._ensured:
            return
        async with self._ensure_lock:
            if self._ensured:
                return
            await ensure_stream(
                self._js,
                StreamConfig(
                    name=self.names.work_stream,
                    subjects=[self.names.work_subjects],
                    retention=RetentionPolicy.WORK_QUEUE,
                    storage=StorageType.FILE,
                    duplicate_window=120,
                ),
            )
            await ensure_stream(
                self._js,
                StreamConfig(
                    name=self.names.dlq_stream,
                    subjects=[self.names.dlq_subjects],
                    retention=RetentionPolicy.LIMITS,
                    storage=StorageType.FILE,
                    max_age=DLQ_MAX_AGE_S,
                    duplicate_window=120,
                ),
            )
            await ensure_events_stream(self._js, self.names)
            await ensure_traces_stream(self._js, self.names)
            self._kv = await ensure_kv(self._js, self.names.work_records_bucket, description="Loom work")
            self._config_kv = await config_bucket(self._js, self.names)
            if self.contexts is not None:
                await self.contexts.ensure()
            self._ensured = True

    async def records_bucket(self) -> KeyValue:
        await self.ensure()
        assert self._kv is not None
        return self._kv

    async def policy(self) -> BoundaryPolicy:
        """The project's boundary policy, cached for a couple of seconds."""
        await self.ensure()
        now = time.monotonic()
        if self._policy is None or now - self._policy_read_at > POLICY_CACHE_S:
            assert self._config_kv is not None
            self._policy = await read_policy(self._config_kv)
            self._policy_read_at = now
        return self._policy

    def forget_policy_cache(self) -> None:
        self._policy = None

    # -- records ---------------------------------------------------------------
    async def _load(self, work_id: str) -> tuple[WorkRecord, int]:
        raw, revision = await self._load_raw(work_id)
        return WorkRecord.model_validate_json(raw), revision

    async def _load_raw(self, work_id: str) -> tuple[bytes, int]:
        entry = await get_or_none(await self.records_bucket(), work_id)
        if entry is None or entry.value is None:
            raise WorkNotFound(work_id)
        return entry.value, int(entry.revision or 0)

    async def _mutate(self, work_id: str, rule: Callable[[WorkRecord], Change]) -> tuple[WorkRecord, Change]:
        """Compare-and-set what ``rule`` decides; returns the record it decided on and its
        Change (whose record is the one now stored).

        ``rule`` raises to refuse; a Change without a record leaves the stored one alone.
        Only I/O here: load, decide, write, and again from the top when another writer won.
        """
        record, change, _ = await self._mutate_at(work_id, rule)
        return record, change

    async def _mutate_at(
        self, work_id: str, rule: Callable[[WorkRecord], Change]
    ) -> tuple[WorkRecord, Change, int]:
        """:meth:`_mutate`, plus the revision the record now has (the one it was read at
        when the rule changed nothing), for a next write that need not read it again."""
        kv = await self.records_bucket()
        for attempt in range(CAS_RETRIES):
            raw, revision = await self._load_raw(work_id)
            record = WorkRecord.model_validate_json(raw)
            change = rule(record)
            if change.record is None:
                return record, change, revision
            try:
                revision = await kv.update(work_id, change.record.to_json_bytes(), last=revision)
            except KeyWrongLastSequenceError:
                await cas_backoff(attempt)
                continue
            return record, change, revision
        raise WorkConflict(f"work_id: {work_id} is being changed concurrently; try again", field="work_id")

    async def get(self, work_id: str) -> WorkItem:
        record, _ = await self._load(work_id)
        return record.item

    async def get_record(self, work_id: str) -> WorkRecord:
        record, _ = await self._load(work_id)
        return record

    async def all_records(self) -> list[WorkRecord]:
        """Every record in one pass over the bucket (no per-key get)."""
        values = await snapshot(await self.records_bucket())
        return [WorkRecord.model_validate_json(raw) for raw in values.values()]

    async def list_items(
        self, filters: WorkFilter | None = None, *, limit: int = 50, cursor: str | None = None
    ) -> Page[WorkItem]:
        """Newest first, paged with an opaque cursor."""
        if not 1 <= limit <= 1000:
            raise WorkError("limit: must be between 1 and 1000", field="limit")
        wanted = filters or WorkFilter()
        after = decode_cursor(cursor)
        items = [r.item for r in await self.all_records() if wanted.matches(r.item)]
        return page_items(items, limit=limit, after=after)

    # -- events ------------------------------------------------------------------
    async def _event(self, action: str, item: WorkItem, **extra: Any) -> None:
        """Announce a transition that is already on record, after any still in flight."""
        await self.settle()
        await self._publish_event(action, item, **extra)

    def _event_soon(self, action: str, item: WorkItem, **extra: Any) -> None:
        """Announce a transition without making the caller wait for the server's ack.

        Events leave in order: publishes go out in the order their tasks start, and
        :meth:`_event` waits for these first.
        """
        task = asyncio.create_task(self._publish_event(action, item, **extra), name=f"work-event-{action}")
        self._events_in_flight.add(task)
        task.add_done_callback(self._events_in_flight.discard)

    async def _announce(self, events: Iterable[WorkEvent], item: WorkItem) -> None:
        """Publish a rule's events, in order, for the item as it now stands."""
        for event in events:
            await self._event(event.action, item, **event.data)

    async def settle(self) -> None:
        """Wait until every event published in the background is acknowledged (or logged)."""
        while self._events_in_flight:
            await asyncio.wait(list(self._events_in_flight))

    async def _publish_event(self, action: str, item: WorkItem, **extra: Any) -> None:
        """The record is the truth and has changed by now, so an event that cannot be
        published is logged, never reported as a failed operation: the caller would
        retry something that happened (claim it twice, resubmit it)."""
        data: dict[str, Any] = {"item": item.model_dump(mode="json")}
        data.update(extra)
        # The transition's context nodes go out with its event (one round trip).
        nodes = work_nodes(action, item, extra) if self.contexts is not None else []
        published, *recorded = await asyncio.gather(
            publish_event(self._js, self.names, "work", action, item.id, data, traceparent=item.traceparent),
            *(self.contexts.publish(node) for node in nodes if self.contexts is not None),
            return_exceptions=True,
        )
        if isinstance(published, Exception):
            log.warning("work %s: %s, but its event was not published: %s", item.id, action, published)
        if any(isinstance(outcome, Exception) for outcome in recorded):
            log.warning("work %s: %s, but its context was not recorded", item.id, action)

    # -- submit -----------------------------------------------------------------
    async def submit(
        self, submission: WorkSubmission, *, submitted_by: str | None = None, work_id: str | None = None
    ) -> WorkItem:
        """One item: queued, or blocked until what it ``depends_on`` has completed.
        ``work_id``: its id, chosen by the caller (to listen for its events first)."""
        if submission.depends_on:
            (item,) = await self.submit_plan(
                [PlanStep(submission)], submitted_by=submitted_by, prefix=None, work_ids=[work_id]
            )
            return item
        await self.ensure()
        record = admit(
            submission,
            project_id=self.names.project_id,
            submitted_by=submitted_by,
            now=utcnow(),
            work_id=work_id,
        )
        return (await self._create(record)).item

    async def submit_plan(
        self,
        steps: Sequence[PlanStep],
        *,
        submitted_by: str | None = None,
        prefix: str | None = "items",
        work_ids: Sequence[str | None] | None = None,
    ) -> list[WorkItem]:
        """Several items that may wait for each other (``PlanStep.after``) and for existing
        items (``depends_on``); the items as they stand once submitted, in the steps' order.

        The whole plan is checked before anything is created (``shared.work.graph``: no
        cycle, every dependency exists in this project and may still complete). Ids are
        chosen first, so each item is created knowing which items of the plan wait for it;
        items are created in dependency order, and a blocked item is settled against its
        dependencies only once it exists (see "dependencies" above the rules)."""
        await self.ensure()
        order = plan_order(steps) if prefix is not None else [0]
        external = list(dict.fromkeys(d for step in steps for d in step.submission.depends_on))
        found = await self._items(external)
        check_dependencies(steps, found, prefix)
        now = utcnow()
        ids = [wanted or new_id() for wanted in (work_ids or [None] * len(steps))]
        dependents: list[list[str]] = [[] for _ in steps]
        for index, step in enumerate(steps):
            for before in step.after:
                dependents[before].append(ids[index])
        records = []
        for index, step in enumerate(steps):
            submission = step.submission
            if step.after:
                within = [ids[b] for b in step.after]
                submission = submission.model_copy(update={"depends_on": [*submission.depends_on, *within]})
            records.append(
                admit(
                    submission,
                    project_id=self.names.project_id,
                    submitted_by=submitted_by,
                    now=now,
                    work_id=ids[index],
                    dependents=dependents[index],
                )
            )
        stored = await self._each([records[i] for i in order], self._create)
        items = {r.item.id: r.item for r in stored}
        blocked = [r.item for r in stored if r.item.status is WorkStatus.BLOCKED]
        if blocked:
            items.update(await self._settle_new(blocked, set(external)))
        return [items[i] for i in ids]

    async def _settle_new(self, blocked: list[WorkItem], external: set[str]) -> dict[str, WorkItem]:
        """Link new blocked items to the existing items they depend on, then settle each
        against its dependencies as they are now: a dependency that finished before the
        link (or before a dependent of the same plan was created) told nobody."""
        waiting: dict[str, list[str]] = {}
        for item in blocked:
            for dependency_id in item.depends_on:
                if dependency_id in external:
                    waiting.setdefault(dependency_id, []).append(item.id)

        async def link_all(dependency_id: str) -> tuple[str, WorkItem | None]:
            try:
                before, change = await self._mutate(dependency_id, lambda r: link(r, waiting[dependency_id]))
            except WorkNotFound:
                return dependency_id, None
            return dependency_id, (change.record or before).item

        linked = dict(await self._each(list(waiting), link_all))
        internal = {d for item in blocked for d in item.depends_on if d not in external}
        now_found = {**linked, **await self._items(internal)}
        settled: dict[str, WorkItem] = {}

        async def settle(item: WorkItem) -> None:
            record = WorkRecord(item=item)
            if reconcile(record, now_found, utcnow()).record is None:
                return  # nothing finished yet: whatever finishes will find this item among its dependents
            after = await self._apply(item.id, lambda r: reconcile(r, now_found, utcnow()))
            if after is not None:
                settled[item.id] = after

        await self._each(blocked, settle)
        return settled

    async def _create(self, record: WorkRecord) -> WorkRecord:
        """Store a new record and announce it; a queued one gets its queue message too. The
        record as stored: with the trace context its submission started (``traceparent``)."""
        attributes: dict[str, str | int | float | bool] = {
            "loom.work.capability": record.item.capability,
            "loom.work.priority": record.item.priority,
        }
        with self.traces.span(
            "work.submit", work_id=record.item.id, kind=SpanKind.PRODUCER, attributes=attributes
        ):
            if record.item.traceparent is None:
                record = WorkRecord(item=record.item.model_copy(update={"traceparent": traceparent_of()}))
            await self._store_new(record)
        return record

    async def _store_new(self, record: WorkRecord) -> None:
        item = record.item
        kv = await self.records_bucket()
        if item.status is WorkStatus.BLOCKED:
            await kv.create(item.id, record.to_json_bytes())
            await asyncio.gather(self._publish_event("submitted", item), self._publish_event("blocked", item))
            return
        subject = self._subject_of(item)
        await self._ensure_consumer(subject)
        revision = await kv.create(item.id, record.to_json_bytes())
        # The two events, then the queue message, pipelined on one connection: one round
        # trip, and the server receives them in that order, so a claim (and its event) can
        # only come after them. The queue message decides the outcome.
        _, _, published = await asyncio.gather(  # a new item: no earlier event to wait for
            self._publish_event("submitted", item),
            self._publish_event("queued", item),
            self._js.publish(
                subject,
                json.dumps({"work_id": item.id, "epoch": 1}).encode(),
                headers=with_trace_headers({"Nats-Msg-Id": f"{item.id}.1"}, item.traceparent),
            ),
            return_exceptions=True,
        )
        if isinstance(published, BaseException):
            # Not queued: take the record back (unless something changed it), so the error
            # the caller sees means "nothing was submitted" and no record waits forever.
            with contextlib.suppress(Exception):
                await kv.delete(item.id, last=revision)
            raise published
        seq, now = int(published.seq), utcnow()
        queued = store_seq(record, seq, 1, now).record
        assert queued is not None
        try:
            await kv.update(item.id, queued.to_json_bytes(), last=revision)
        except KeyWrongLastSequenceError:  # claimed (or cancelled) already: record the seq onto that
            await self._mutate(item.id, lambda r: store_seq(r, seq, 1, now))

    # -- dependencies ------------------------------------------------------------
    async def _items(self, work_ids: Iterable[str]) -> dict[str, WorkItem | None]:
        """The current item of each id (None where there is none), read concurrently."""
        wanted = list(dict.fromkeys(work_ids))

        async def one(work_id: str) -> tuple[str, WorkItem | None]:
            entry = await get_or_none(await self.records_bucket(), work_id)
            if entry is None or entry.value is None:
                return work_id, None
            return work_id, WorkRecord.model_validate_json(entry.value).item

        return dict(await self._each(wanted, one))

    @staticmethod
    async def _each(values: Sequence[T], op: Callable[[T], Awaitable[R]]) -> list[R]:
        """``op`` over ``values``, at most :data:`DEPENDENTS_AT_ONCE` at a time, results in order."""
        results: list[R] = []
        for start in range(0, len(values), DEPENDENTS_AT_ONCE):
            chunk = values[start : start + DEPENDENTS_AT_ONCE]
            results.extend(await asyncio.gather(*(op(v) for v in chunk)))
        return results

    async def _apply(self, work_id: str, rule: Callable[[WorkRecord], Change]) -> WorkItem | None:
        """Run a dependency rule on one item and carry out what it decided: its events, a
        queue message when it was unblocked, the DLQ when it failed for good (and then its
        own dependents). The item as it now stands, or None when it is gone or unchanged."""
        try:
            _, change, revision = await self._mutate_at(work_id, rule)
        except WorkNotFound:
            return None  # not created yet (its own settling will see this change) or deleted
        if change.record is None:
            return None
        return await self._carry_out(work_id, change, revision, guarded=False)

    async def _carry_out(
        self, work_id: str, change: Change, revision: int, *, guarded: bool = True
    ) -> WorkItem:
        """What a stored change (at ``revision``) asks for next: its ack, its dead letter
        dropped, then a queue message with its events, or its events, the DLQ and the
        dependents told. ``guarded``: the operation is on record, so telling the dependents
        may fail without failing it (see :meth:`_tell_dependents`)."""
        assert change.record is not None
        item = change.record.item
        await self._ack(change.ack_subject, change.ack)
        if change.drop_dlq_seq is not None:
            await self._delete_dead_letter(change.drop_dlq_seq)
        if change.then is Then.ENQUEUE:
            await self._queue_now(change.record, revision, change.events)
            return item
        await self._announce(change.events, item)
        if change.then is Then.DEAD_LETTER:
            item = await self._dead_letter(work_id)
        await (self._tell_dependents(item) if guarded else self._cascade(item))
        return item

    async def _queue_now(self, record: WorkRecord, revision: int, events: Iterable[WorkEvent]) -> None:
        """An item just became queued (stored at ``revision``): its events and its queue
        message pipelined in one round trip, as on submit, then the message's seq on the
        record, without reading it again unless someone changed it meanwhile (the claim)."""
        item = record.item
        subject = self._subject_of(item)
        await self._ensure_consumer(subject)
        await self.settle()
        epoch = record.enqueues + 1
        announced = asyncio.gather(*(self._publish_event(e.action, item, **e.data) for e in events))
        published = self._js.publish(
            subject,
            json.dumps({"work_id": item.id, "epoch": epoch}).encode(),
            headers=with_trace_headers({"Nats-Msg-Id": f"{item.id}.{epoch}"}, item.traceparent),
        )
        _, ack = await asyncio.gather(announced, published)
        seq, now = int(ack.seq), utcnow()
        stamped = store_seq(record, seq, epoch, now).record
        assert stamped is not None
        kv = await self.records_bucket()
        try:
            await kv.update(item.id, stamped.to_json_bytes(), last=revision)
        except KeyWrongLastSequenceError:
            await self._mutate(item.id, lambda r: store_seq(r, seq, epoch, now))

    async def _tell_dependents(self, item: WorkItem) -> None:
        """:meth:`_cascade` after an operation that is already on record: a failure here is
        logged, never reported as the operation's (the caller would complete or cancel
        again what it did); a sweep repairs the dependents (``weft/project/repair.py``)."""
        if not item.dependents:
            return
        try:
            await self._cascade(item)
        except Exception as exc:
            log.warning("work %s is %s, but its dependents were not all told: %s", item.id, item.status, exc)

    async def _cascade(self, item: WorkItem) -> None:
        """Tell the dependents of an item that completed (one less to wait for) or can no
        longer complete (they fail for good, naming it, and so on down the chain). A loop
        over a work list rather than recursion: a chain may be a thousand items long."""
        pending = deque([item])
        while pending:
            source = pending.popleft()
            if not source.dependents:
                continue
            if source.status is WorkStatus.COMPLETED:
                await self._each(source.dependents, functools.partial(self._satisfy, source.id))
                continue
            why = dead_end(source)
            if why is not None:
                dead = await self._each(source.dependents, functools.partial(self._abandon, source.id, why))
                pending.extend(d for d in dead if d is not None)

    async def _satisfy(self, done: str, work_id: str) -> WorkItem | None:
        return await self._apply(work_id, lambda r: satisfy(r, done, utcnow()))

    async def _abandon(self, failed: str, why: str, work_id: str) -> WorkItem | None:
        """``abandon`` one dependent; the dead letter it became (its own dependents are the
        caller's next step), or None."""
        try:
            _, change = await self._mutate(work_id, lambda r: abandon(r, failed, why, utcnow()))
        except WorkNotFound:
            return None
        if change.record is None:
            return None
        await self._announce(change.events, change.record.item)
        if change.then is not Then.DEAD_LETTER:
            return None
        dead = await self._dead_letter(work_id)
        return dead if dead.status is WorkStatus.DEAD_LETTERED else None

    async def _revive(self, retried: str, work_id: str) -> WorkItem | None:
        return await self._apply(work_id, lambda r: revive(r, retried, utcnow()))

    async def _revive_chain(self, item: WorkItem) -> None:
        """``item`` was retried: items that failed because of it wait for it again, and so
        on down the chain; each is then settled against its dependencies."""
        pending = deque([item])
        while pending:
            source = pending.popleft()
            revived = await self._each(source.dependents, functools.partial(self._revive, source.id))
            for back in revived:
                if back is None:
                    continue
                now = await self.settle_blocked(back.id) or back
                if now.status not in DEAD_ENDS:  # failed again: another dependency is gone
                    pending.append(now)

    async def settle_blocked(self, work_id: str) -> WorkItem | None:
        """Settle a blocked item against its dependencies as they are now (after a revival,
        and a sweep's repair when a process stopped before telling it); None: no change."""
        record = await self._record_or_none(work_id)
        if record is None or record.item.status is not WorkStatus.BLOCKED:
            return None
        found = await self._items(record.item.blocked_on)
        return await self._apply(work_id, lambda r: reconcile(r, found, utcnow()))

    async def revive_from(self, work_id: str, dependency_id: str) -> WorkItem | None:
        """A sweep's repair: ``work_id`` failed because of ``dependency_id``, which was retried
        since; revive it (and its chain) as the retry would have."""
        back = await self._apply(work_id, lambda r: revive(r, dependency_id, utcnow()))
        if back is None:
            return None
        await self.settle_blocked(work_id)
        await self._revive_chain(back)
        return back

    async def ensure_enqueued(self, work_id: str) -> bool:
        """A sweep's repair: publish the queue message of an item queued without one
        (see :func:`needs_message`). True when it did."""
        record = await self._record_or_none(work_id)
        if record is None or not needs_message(record):
            return False
        await self._enqueue(work_id)
        return True

    async def _record_or_none(self, work_id: str) -> WorkRecord | None:
        entry = await get_or_none(await self.records_bucket(), work_id)
        if entry is None or entry.value is None:
            return None
        return WorkRecord.model_validate_json(entry.value)

    async def _enqueue(self, work_id: str) -> int:
        """Publish the queue message for the record's current state; store its seq."""
        record, _ = await self._load(work_id)
        item = record.item
        subject = self._subject_of(item)
        await self._ensure_consumer(subject)
        epoch = record.enqueues + 1
        ack = await self._js.publish(
            subject,
            json.dumps({"work_id": item.id, "epoch": epoch}).encode(),
            headers=with_trace_headers({"Nats-Msg-Id": f"{item.id}.{epoch}"}, item.traceparent),
        )
        seq, now = int(ack.seq), utcnow()
        await self._mutate(work_id, lambda r: store_seq(r, seq, epoch, now))
        return seq

    def _subject_of(self, item: WorkItem) -> str:
        """The queue subject of the item's next message: its workers' queue, or for an item
        handed in for review the reviewers' queue, which leaves out the agent that did it."""
        if item.status in REVIEWABLE and item.review is not None and item.author is not None:
            review = item.review
            return self.names.work_subject(
                review.capability, item.boundary, None, item.priority, not_for=item.author
            )
        return self.names.work_subject(
            item.capability, item.boundary, item.required_agent_type, item.priority
        )

    async def _ensure_consumer(self, subject: str) -> str:
        name = self.names.work_consumer(subject)
        if name in self._consumers:
            return name
        await self.ensure()
        config = ConsumerConfig(
            name=name,  # created through the API subject that names the filter (see agent_access)
            durable_name=name,
            filter_subject=subject,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=self.ack_wait_s,
            max_deliver=-1,
            max_ack_pending=10_000,
        )
        await self._js.add_consumer(self.names.work_stream, config)
        self._consumers.add(name)
        return name

    # -- claim -----------------------------------------------------------------
    async def eligible_subjects(self, claimant: Claimant) -> list[str]:
        """Queue subjects holding messages this claimant may take, highest priority first."""
        await self.ensure()
        policy = await self.policy()
        info = await self._js.stream_info(self.names.work_stream, subjects_filter=self.names.work_subjects)
        subjects = info.state.subjects or {}
        eligible: list[tuple[int, str]] = []
        for subject, count in subjects.items():
            parts = self.names.parse_work_subject(subject)
            if parts is None or count <= 0:
                continue
            if parts.capability not in claimant.capabilities:
                continue
            if parts.boundary not in claimant.boundaries:
                continue
            if parts.agent_type is not None and parts.agent_type != claimant.agent_type:
                continue
            if parts.not_for == claimant.agent_id:
                continue  # a review of this agent's own work
            if not policy.allows_agent(parts.boundary, claimant.agent_type):
                continue
            eligible.append((parts.priority, subject))
        eligible.sort(key=lambda pair: (-pair[0], pair[1]))
        return [subject for _, subject in eligible]

    async def queue_depths(self) -> dict[str, int]:
        """Messages waiting or in flight, per capability."""
        await self.ensure()
        info = await self._js.stream_info(self.names.work_stream, subjects_filter=self.names.work_subjects)
        depths: dict[str, int] = {}
        for subject, count in (info.state.subjects or {}).items():
            parts = self.names.parse_work_subject(subject)
            if parts is not None:
                depths[parts.capability] = depths.get(parts.capability, 0) + count
        return depths

    async def _next(self, subject: str, *, linger_s: float = 0.0) -> Msg | None:
        """Pull one message; without ``linger_s`` it does not wait at all."""
        consumer = await self._ensure_consumer(subject)
        try:
            msgs = await consumer_next(
                self._nc,
                self.names.work_stream,
                consumer,
                batch=1,
                timeout=2.0 + linger_s,
                expires_s=linger_s or None,
            )
        except (JetStreamReplyError, NatsTimeoutError, TimeoutError):
            self._consumers.discard(consumer)  # gone or unreachable: re-create on the next claim
            return None
        return msgs[0] if msgs else None

    async def _undelivered(self, subject: str) -> bool:
        """Whether the subject's consumer still has messages nobody was handed yet."""
        info = await self._js.consumer_info(self.names.work_stream, self.names.work_consumer(subject))
        return bool(info.num_pending)

    async def claim(self, claimant: Claimant) -> WorkItem | None:
        """Take the highest-priority eligible item, or None when there is none.

        Refused (:class:`BudgetReached`) while the project's daily budget, or that of the
        claimant's target, is reached: the one place claims are admitted."""
        hold = await self.ledger.hold(utcnow(), target_id=claimant.target_id)
        if hold is not None:
            raise BudgetReached(hold)
        for subject in await self.eligible_subjects(claimant):
            lingered = False
            while True:
                msg = await self._next(subject)
                if msg is None and not lingered and await self._undelivered(subject):
                    # A message stored a moment ago may not have reached the
                    # consumer yet; a no-wait pull then answers "none". Wait
                    # briefly for it rather than report an empty queue.
                    lingered = True
                    msg = await self._next(subject, linger_s=CLAIM_LINGER_S)
                if msg is None:
                    break
                item = await self._take(msg, claimant)
                if item is not None:
                    return item
        return None

    async def _take(self, msg: Msg, claimant: Claimant) -> WorkItem | None:
        """Turn a delivered message into a claim, or dispose of it; None if not taken."""
        try:
            work_id = str(json.loads(msg.data)["work_id"])
        except (ValueError, KeyError, TypeError):
            log.warning("dropping malformed queue message on %s", msg.subject)
            await self._ack(msg.reply, Ack.STOP)
            return None
        meta = msg.metadata
        delivery = Delivery(
            ack_subject=msg.reply, stream_seq=int(meta.sequence.stream), delivered=int(meta.num_delivered)
        )
        now = utcnow()
        with timed(self.traces, "work.claim", work_id=work_id, kind=SpanKind.CONSUMER) as outcome:
            try:
                before, change = await self._mutate(
                    work_id, lambda r: take(r, claimant.agent_id, delivery, now)
                )
            except WorkNotFound:
                await self._ack(msg.reply, Ack.STOP)
                return None
            await self._ack(change.ack_subject, change.ack)
            if change.record is None:
                return None
            item = change.record.item
            outcome.about(item)
        if item.status in (WorkStatus.CLAIMED, WorkStatus.REVIEWING):
            self._trace_wait(before.item, item)
            *earlier, claimed = change.events
            await self._announce(earlier, item)
            self._event_soon(claimed.action, item, **claimed.data)  # the claim need not wait
            return item
        await self._announce(change.events, item)
        if change.then is Then.DEAD_LETTER:
            item = await self._dead_letter(work_id)
        await self._tell_dependents(item)  # expired or dead-lettered: its dependents will not run
        return None

    def _trace_wait(self, queued: WorkItem, claimed: WorkItem) -> None:
        """The time the item waited in its queue, as a span of its trace (from its last
        change before the claim: its queueing)."""
        since = int(queued.updated_at.timestamp() * 1e9)
        with self.traces.span(
            "work.queued", work_id=claimed.id, traceparent=claimed.traceparent, start_ns=since
        ) as span:
            span.set_attribute("loom.work.subject", self._subject_of(queued))

    async def _ack(self, ack_subject: str | None, verb: Ack | None) -> None:
        if ack_subject and verb is not None:
            await self._nc.publish(ack_subject, verb.encode())

    # -- holder operations ------------------------------------------------------
    @_traced("work.progress")
    async def progress(
        self,
        work_id: str,
        agent_id: str,
        percent: int,
        note: str = "",
        *,
        usage: Usage | None = None,
        target_id: str | None = None,
    ) -> WorkItem:
        """Progress, with the ``usage`` since the last report added (see rule ``charge``:
        over its budget, the item is stopped and this returns it dead-lettered)."""
        check_percent(percent)  # before any I/O, whatever the item
        now = utcnow()
        _, change, revision = await self._mutate_at(
            work_id,
            lambda r: charge(
                r, agent_id, usage, target_id, now, lambda x: report(x, agent_id, percent, note, now)
            ),
        )
        assert change.record is not None
        await self._count(usage, target_id, now)
        if change.then is not None:
            return await self._carry_out(work_id, change, revision)
        await self._ack(change.ack_subject, change.ack)
        await self._announce(change.events, change.record.item)
        return change.record.item

    @_traced("work.complete")
    async def complete(
        self,
        work_id: str,
        agent_id: str,
        result: Any = None,
        *,
        usage: Usage | None = None,
        target_id: str | None = None,
    ) -> WorkItem:
        """Completed; or, for work that asks for review, handed in (its review task queued);
        or, when ``usage`` takes it over its budget, stopped (rule ``charge``)."""
        now = utcnow()
        _, change, revision = await self._mutate_at(
            work_id,
            lambda r: charge(r, agent_id, usage, target_id, now, lambda x: finish(x, agent_id, result, now)),
        )
        await self._count(usage, target_id, now)
        return await self._carry_out(work_id, change, revision)

    async def _count(self, usage: Usage | None, target_id: str | None, now: datetime) -> None:
        """Add a recorded report to the day's counters. The item's record already holds it,
        so a counter that cannot be written is logged, not reported as a failed operation."""
        if usage is None or usage.empty:
            return
        try:
            await self.ledger.add(usage, target_id=target_id, now=now)
        except Exception as exc:
            log.warning("usage recorded on the item but not counted for the day: %s", type(exc).__name__)

    @_traced("work.budget")
    async def set_budget(self, work_id: str, budget: Budget | None) -> WorkItem:
        """An operator's new budget for an unfinished item (rule ``rebudget``)."""
        now = utcnow()
        _, change = await self._mutate(work_id, lambda r: rebudget(r, budget, now))
        assert change.record is not None
        await self._announce(change.events, change.record.item)
        return change.record.item

    @_traced("work.review")
    async def review(
        self, work_id: str, agent_id: str, verdict: str, feedback: str = "", score: float | None = None
    ) -> WorkItem:
        """The verdict of the reviewer holding the item (see rule ``judge``)."""
        check_verdict(verdict, feedback, score)  # before any I/O, whatever the item
        now = utcnow()
        _, change, revision = await self._mutate_at(
            work_id, lambda r: judge(r, agent_id, verdict, feedback, score, now)
        )
        return await self._carry_out(work_id, change, revision)

    @_traced("work.wait_on_operator")
    async def wait_on_operator(
        self, work_id: str, agent_id: str, question_id: str, *, question: str = ""
    ) -> WorkItem:
        """The holder waits on the operator's answer to ``question_id`` (rule ``wait_on``)."""
        now = utcnow()
        _, change, revision = await self._mutate_at(
            work_id, lambda r: wait_on(r, agent_id, question_id, now, question)
        )
        return await self._carry_out(work_id, change, revision)

    @_traced("work.resume")
    async def resume(
        self, work_id: str, question_id: str, *, answered: bool, answer: str = ""
    ) -> WorkItem | None:
        """The question was answered or expired: the item waiting on it is in progress again;
        None when it no longer waited on it (finished, cancelled, or never moved)."""
        now = utcnow()
        try:
            _, change, revision = await self._mutate_at(
                work_id, lambda r: resume(r, question_id, answered, now, answer)
            )
        except WorkNotFound:
            return None
        if change.record is None:
            return None
        return await self._carry_out(work_id, change, revision)

    async def keep_alive(self, work_id: str, agent_id: str) -> bool:
        """``+WPI`` on the claim of an item ``agent_id`` holds waiting on the operator, so it
        does not lapse; False when it is not waiting (nothing sent)."""
        record = await self._record_or_none(work_id)
        subject = keep_alive_subject(record, agent_id) if record is not None else None
        await self._ack(subject, Ack.WORKING)
        return subject is not None

    @_traced("work.fail")
    async def fail(self, work_id: str, agent_id: str, error: str, *, retryable: bool = True) -> WorkItem:
        """Record a failed attempt: back to the queue, or to the DLQ when attempts are used up."""
        check_error(error)  # before any I/O, whatever the item
        now = utcnow()
        _, change = await self._mutate(work_id, lambda r: record_failure(r, agent_id, error, retryable, now))
        assert change.record is not None
        await self._announce(change.events, change.record.item)
        if change.then is Then.DEAD_LETTER:
            await self._ack(change.ack_subject, change.ack)
            dead = await self._dead_letter(work_id)
            await self._tell_dependents(dead)
            return dead
        current, queued = await self._mutate(work_id, lambda r: requeue(r, utcnow()))
        await self._ack(change.ack_subject, change.ack)
        item = (queued.record or current).item
        await self._announce(queued.events, item)
        return item

    async def _dead_letter(self, work_id: str) -> WorkItem:
        """Publish the failed item to the DLQ, then bury its record (see rule ``bury``)."""
        record, _ = await self._load(work_id)
        item = record.item.model_copy(update={"status": WorkStatus.DEAD_LETTERED})
        ack = await self._js.publish(
            self.names.dlq_subject(item.capability),
            item.to_json_bytes(),
            headers={"Nats-Msg-Id": f"dlq.{item.id}.{record.enqueues}"},
        )
        now = utcnow()
        current, change = await self._mutate(work_id, lambda r: bury(r, int(ack.seq), now))
        if change.drop_dlq_seq is not None:
            await self._delete_dead_letter(change.drop_dlq_seq)
        after = (change.record or current).item
        await self._announce(change.events, after)
        return after

    # -- operator operations ------------------------------------------------------
    @_traced("work.cancel")
    async def cancel(self, work_id: str, *, reason: str = "", by: str = "operator") -> WorkItem:
        now = utcnow()
        _, change = await self._mutate(work_id, lambda r: stop(r, reason, by, now))
        assert change.record is not None
        await self._ack(change.ack_subject, change.ack)
        if change.notify:
            request = ControlRequest(action="cancel-work", work_id=work_id, reason=reason, requested_by=by)
            await self._nc.publish(self.names.control_subject(change.notify), request.to_json_bytes())
        if change.drop_queue_seq is not None:
            await self._delete_queued(change.drop_queue_seq)
        await self._announce(change.events, change.record.item)
        await self._tell_dependents(change.record.item)
        return change.record.item

    async def _delete_queued(self, seq: int) -> None:
        try:
            await self._js.delete_msg(self.names.work_stream, seq)
        except NotFoundError:
            pass  # already delivered; the claim will see the final state and drop it
        except Exception as exc:  # a message already removed answers with a 400-style error
            log.debug("queue message %s not deleted: %s", seq, exc)

    async def _delete_dead_letter(self, seq: int) -> None:
        try:
            await self._js.delete_msg(self.names.dlq_stream, seq)
        except Exception as exc:
            log.debug("DLQ message %s not deleted: %s", seq, exc)

    async def expire_due(self, now: datetime | None = None) -> list[WorkItem]:
        """Move waiting items whose deadline has passed to ``expired``."""
        moment = now or utcnow()
        expired: list[WorkItem] = []
        for record in await self.all_records():
            if not (move_allowed(WorkMove.EXPIRE, record.item.status) and is_due(record.item, moment)):
                continue
            _, change = await self._mutate(record.item.id, lambda r: expire(r, moment))
            if change.record is None:
                continue
            if change.drop_queue_seq is not None:
                await self._delete_queued(change.drop_queue_seq)
            await self._announce(change.events, change.record.item)
            await self._tell_dependents(change.record.item)
            expired.append(change.record.item)
        return expired

    async def set_waiting_reason(self, work_id: str, reason: str | None) -> WorkItem | None:
        """Record why an item is still waiting (see :func:`note_waiting`); the updated item,
        or None when nothing changed (same reason, claimed meanwhile, or gone)."""
        now = utcnow()
        try:
            _, change = await self._mutate(work_id, lambda r: note_waiting(r, reason, now))
        except WorkNotFound:
            return None
        if change.record is None:
            return None
        await self._announce(change.events, change.record.item)
        return change.record.item

    @_traced("work.retry")
    async def retry(self, work_id: str) -> WorkItem:
        """Back to the queue with attempts reset, from ``failed`` or ``dead-lettered``; an
        item that failed because of a dependency waits for it again (``blocked``). Items
        that failed because of this one are revived with it."""
        record = await self.get_record(work_id)
        cause = record.item.failed_dependency
        found = await self._items([cause]) if cause is not None else {}
        now = utcnow()
        _, change = await self._mutate(work_id, lambda r: reset(r, now, found))
        if change.then is Then.ENQUEUE:
            await self._enqueue(work_id)
        if change.drop_dlq_seq is not None:
            await self._delete_dead_letter(change.drop_dlq_seq)
        item = await self.get(work_id)
        await self._announce(change.events, item)
        if item.status is WorkStatus.BLOCKED:
            item = await self.settle_blocked(work_id) or item
        if item.status not in DEAD_ENDS and item.dependents:
            try:
                await self._revive_chain(item)
            except Exception as exc:  # the retry is on record; a sweep revives the rest
                log.warning("work %s was retried, but its dependents were not all revived: %s", item.id, exc)
        return item

    # -- retention ---------------------------------------------------------------
    async def forget(self, work_id: str, *, revision: int) -> bool:
        """Delete a finished record, unless it changed since ``revision`` (a retry, say);
        its context tree goes with it."""
        deleted = await delete_unchanged(await self.records_bucket(), work_id, revision)
        if deleted and self.contexts is not None:
            try:
                await self.contexts.purge(work_id)
            except Exception as exc:
                log.warning("work %s: record deleted, but its context tree was not: %s", work_id, exc)
        return deleted

    # -- dead-letter queue --------------------------------------------------------
    async def dlq_list(
        self, *, capability: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> Page[DeadLetter]:
        if not 1 <= limit <= 1000:
            raise WorkError("limit: must be between 1 and 1000", field="limit")
        await self.ensure()
        subject = (
            self.names.dlq_subject(validate_capability(capability)) if capability else self.names.dlq_subjects
        )
        state = decode_cursor(cursor)
        seq = int(state.get("seq", 0)) + 1 if state else 1
        letters: list[DeadLetter] = []
        more = False
        while True:
            try:
                raw = await self._js.get_msg(self.names.dlq_stream, seq=seq, subject=subject, next=True)
            except NotFoundError:
                break
            if len(letters) == limit:
                more = True
                break
            assert raw.seq is not None and raw.data is not None
            item = WorkItem.model_validate_json(raw.data)
            at = raw.time if isinstance(raw.time, datetime) else utcnow()
            letters.append(DeadLetter(item=item, dlq_seq=raw.seq, dead_lettered_at=at))
            seq = raw.seq + 1
        next_cursor = encode_cursor({"seq": letters[-1].dlq_seq}) if more and letters else None
        return Page(items=letters, next_cursor=next_cursor)

    async def dlq_get(self, work_id: str) -> DeadLetter:
        record, _ = await self._load(work_id)
        if record.item.status != WorkStatus.DEAD_LETTERED or record.dlq_seq is None:
            raise WorkNotFound(work_id)
        return DeadLetter(
            item=record.item, dlq_seq=record.dlq_seq, dead_lettered_at=record.dlq_at or utcnow()
        )

    async def dlq_retry(self, work_id: str) -> WorkItem:
        await self.dlq_get(work_id)
        return await self.retry(work_id)

    async def dlq_discard(self, work_id: str) -> WorkItem:
        letter = await self.dlq_get(work_id)
        now = utcnow()
        _, change = await self._mutate(work_id, lambda r: discard(r, letter.dlq_seq, now))
        assert change.record is not None
        if change.drop_dlq_seq is not None:
            await self._delete_dead_letter(change.drop_dlq_seq)
        await self._announce(change.events, change.record.item)
        return change.record.item


def page_items(items: Iterable[WorkItem], *, limit: int, after: dict[str, Any] | None) -> Page[WorkItem]:
    """Newest first; the cursor remembers the last (created_at, id) returned."""
    ordered = sorted(items, key=lambda i: (i.created_at, i.id), reverse=True)
    total = len(ordered)
    if after is not None:
        try:
            last = (datetime.fromisoformat(str(after["created_at"])), str(after["id"]))
        except (KeyError, ValueError):
            from shared.paging import CursorError

            raise CursorError() from None
        ordered = [i for i in ordered if (i.created_at, i.id) < last]
    page = ordered[:limit]
    more = len(ordered) > limit
    cursor = (
        encode_cursor({"created_at": page[-1].created_at.isoformat(), "id": page[-1].id}) if more else None
    )
    return Page(items=page, next_cursor=cursor, total=total)
