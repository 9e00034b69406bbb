"""The vocabulary and the machinery of the work rules (shared/work/rules.py and
shared/work/landing.py): their errors, the stored record, what a rule decides
(:class:`Change`), and how a rule moves a record (:func:`move`, the one place the
lifecycle table is consulted; :func:`holder_move` for moves only the holder may make).
:mod:`shared.work.rules` re-exports the vocabulary."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import Field

from shared.base import LoomModel
from shared.errors import Conflict, Forbidden, LoomError, NotFound
from shared.models import WorkItem, WorkStatus
from shared.names import validate_agent_id
from shared.usage.rules import Hold, stopped_by_budget
from shared.work.lifecycle import WORK_LIFECYCLE, WorkMove, move_allowed

# -- errors ----------------------------------------------------------------------


class WorkError(LoomError):
    """A refused work operation; ``code`` maps to an HTTP status / tool error."""


class WorkNotFound(WorkError, NotFound):
    def __init__(self, work_id: str) -> None:
        # The id is not repeated: the caller sent it, and it may not be an id at all.
        super().__init__("no work item with this id in this project", field="work_id")
        self.work_id = work_id


class CheckpointNotFound(WorkError, NotFound):
    def __init__(self) -> None:
        super().__init__("not one of this item's checkpoints", field="checkpoint")


class WorkConflict(WorkError, Conflict):
    """The item is not in a state that allows the operation."""


class NotClaimant(WorkError, Forbidden):
    pass


class BudgetReached(WorkError, Conflict):
    """No new claims now: a daily budget is reached (until the next UTC day or a higher
    budget), or an operator paused the project (until it is resumed); the ``hold`` says which."""

    def __init__(self, hold: Hold) -> None:
        if hold.kind == "pause":
            super().__init__(hold.message, field="project", rule="project paused")
        else:
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

    def may_match(self, raw: bytes) -> bool:
        """Whether a stored record's JSON can match at all, read from its bytes: an agent's
        own items among a project's thousands are found without parsing the others. Only a
        necessary condition (:meth:`matches` decides): an agent id is hex, so it is stored
        as it is written, between quotes."""
        return self.assigned_to is None or b'"%s"' % self.assigned_to.encode() in raw


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
# ``fork`` hands them shallow copies stamped ``updated_at=now``, and fields are
# replaced, never changed in place (lists are rebuilt). Every status move goes through
# ``move``, which checks it against ``shared.models.WORK_LIFECYCLE``. WorkQueue stores
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


def disposes_unconfirmed(change: Change) -> bool:
    """Whether ``change`` removes a queue message for good (``+ACK``, ``+TERM``) on the
    strength of a record it did not write. A write is a compare-and-set, so a decision
    that writes was taken on the current record; one that writes nothing may have been
    taken on a copy behind it (a direct get any replica answers), and a message removed
    then is work lost: a claim reading the record of an item just queued again, before
    that replica had its new queue sequence, removed the new message as superseded."""
    return change.record is None and change.ack in (Ack.DONE, Ack.STOP)


def check_error(error: str) -> None:
    if not error.strip():
        raise WorkError("error: must describe what went wrong", field="error")


def fork(record: WorkRecord, now: datetime) -> tuple[WorkRecord, WorkItem]:
    """Shallow copies of the record and its item, changed at ``now``, for a rule to change.

    Cheaper than parsing the stored bytes again, let alone a deep copy; safe because
    rules replace fields and never change a list or model they did not create."""
    item = record.item.model_copy(update={"updated_at": now})
    return record.model_copy(update={"item": item}), item


def move(record: WorkRecord, step: WorkMove, now: datetime) -> tuple[WorkRecord, WorkItem] | None:
    """Copies with the move's target status, or None when the lifecycle table does not
    allow ``step`` from the record's status (the one place rules consult it)."""
    if not move_allowed(step, record.item.status):
        return None
    new, item = fork(record, now)
    item.status = WORK_LIFECYCLE[step].target
    return new, item


def lapse(record: WorkRecord, step: WorkMove, now: datetime) -> tuple[WorkRecord, WorkItem] | None:
    """A holder's claim lapses by ``step`` (a worker's, a reviewer's or a lander's): copies
    with nobody holding the item and no delivery on record; None when ``step`` does not
    apply (nobody holds it that way)."""
    moved = move(record, step, now)
    if moved is None:
        return None
    new, item = moved
    item.assigned_to = None
    new.delivery = None
    return new, item


def holder_move(
    record: WorkRecord, agent_id: str, move_: WorkMove, operation: str, now: datetime
) -> tuple[WorkRecord, WorkItem]:
    """A move only the agent holding the claim may make."""
    moved = move(record, move_, now)
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


def ack_subject_of(record: WorkRecord) -> str | None:
    return record.delivery.ack_subject if record.delivery is not None else None
