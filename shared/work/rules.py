"""The work lifecycle's rules (docs/architecture.md, Work): pure functions from a record to
the next record plus what to acknowledge and announce, each checking its move against
``shared.models.WORK_LIFECYCLE``. No I/O here: :mod:`shared.work.queue` carries out a rule's
:class:`Change` (compare-and-set of its record, then the acks, events and clean-up it names).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from shared.artifacts import WorkArtifact
from shared.limits import DESCRIPTION_MAX_LENGTH, MAX_FOLLOW_UPS, TASK_ID_MAX_LENGTH
from shared.models import (
    FINAL_WORK_STATES,
    MAX_CHECKPOINTS_KEPT,
    AttemptError,
    Progress,
    ReviewRound,
    WorkItem,
    WorkStatus,
    Workstream,
    WorkSubmission,
)
from shared.names import validate_work_id
from shared.paging import Page, encode_cursor
from shared.usage.rules import (
    Budget,
    Usage,
    add_usage,
    budget_error,
    exceeded,
    totals_of,
)
from shared.work.graph import dead_end
from shared.work.landing import (
    LANDABLE,
    awaiting_approval,
    decide,
    into_landing,
    landable,
    lapse_landing,
    parked,
    take_landing,
)
from shared.work.lifecycle import WORK_LIFECYCLE, WorkMove, move_allowed

# The rules' vocabulary (errors, the stored record, Change) is shared/work/moves.py, re-exported here.
from shared.work.moves import CLAIM_LAPSED as CLAIM_LAPSED
from shared.work.moves import Ack as Ack
from shared.work.moves import BudgetReached as BudgetReached
from shared.work.moves import Change as Change
from shared.work.moves import CheckpointNotFound as CheckpointNotFound
from shared.work.moves import Claimant as Claimant
from shared.work.moves import DeadLetter as DeadLetter
from shared.work.moves import Delivery as Delivery
from shared.work.moves import NotClaimant as NotClaimant
from shared.work.moves import Then as Then
from shared.work.moves import WorkConflict as WorkConflict
from shared.work.moves import WorkError as WorkError
from shared.work.moves import WorkEvent as WorkEvent
from shared.work.moves import WorkFilter as WorkFilter
from shared.work.moves import WorkNotFound as WorkNotFound
from shared.work.moves import WorkRecord as WorkRecord
from shared.work.moves import ack_subject_of as _ack_subject
from shared.work.moves import check_error as check_error
from shared.work.moves import fork as _fork
from shared.work.moves import holder_move as _holder_move
from shared.work.moves import lapse as _lapse
from shared.work.moves import move as _move

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
WAITING = CLAIMABLE | REVIEWABLE | LANDABLE
"""Waiting for an agent (a worker, a reviewer or a lander): what routing looks after."""
HOLDING = (
    HELD
    | WORK_LIFECYCLE[WorkMove.REVIEW_LAPSE].sources
    | WORK_LIFECYCLE[WorkMove.RESUME].sources
    | WORK_LIFECYCLE[WorkMove.LANDING_LAPSE].sources
)
"""Held by an agent (working, reviewing, or waiting on the operator): what counts among its tasks."""
MAX_FEEDBACK = 8000
DEPENDENTS_AT_ONCE = 32
"""How many dependents of one item are told about it concurrently."""


def check_percent(percent: int) -> None:
    if not 0 <= percent <= 100:
        raise WorkError("percent: must be between 0 and 100", field="percent")


def is_due(item: WorkItem, now: datetime) -> bool:
    """Whether the item's deadline has passed."""
    return item.deadline is not None and item.deadline <= now


def admit(
    submission: WorkSubmission,
    *,
    project_id: str,
    submitted_by: str | None,
    now: datetime,
    work_id: str | None = None,
    dependents: Iterable[str] = (),
    follow_up_of: str | None = None,
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
        follow_up_of=follow_up_of,
    )
    return WorkRecord(item=item)


def store_seq(record: WorkRecord, seq: int, epoch: int, now: datetime) -> Change:
    """Remember the queue message of enqueue number ``epoch`` (whatever the status by now),
    unless a later enqueue's is already stored: that one is the message a claim must match."""
    if epoch < record.enqueues:
        return Change()
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
    if record.item.status in LANDABLE | {WorkStatus.MERGING}:
        return take_landing(record, agent_id, delivery, now)
    if record.item.status is WorkStatus.WAITING_ON_OPERATOR:
        return _keep_waiting(record, delivery)
    events: tuple[WorkEvent, ...] = ()
    lapsed = _lapse_claim(record, now)
    if lapsed is not None:
        if record.delivery is None or delivery.delivered <= record.delivery.delivered:
            return Change()  # the holder's own delivery: the message stays with the claim
        new, redelivered, spent = lapsed
        events = (redelivered,)
        if spent:
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
    item.simplify = 1 < item.max_attempts <= item.attempts  # the last attempt: essentials only
    item.assigned_to = agent_id
    item.reserved_for = None
    item.claimed_at = now
    item.progress = None
    item.waiting_reason = None
    new.delivery = delivery
    return Change(new, (*events, WorkEvent("claimed", {"agent_id": agent_id})))


def _lapse_claim(record: WorkRecord, now: datetime) -> tuple[WorkRecord, WorkEvent, bool] | None:
    """A worker's claim gone silent lapses: a failed attempt, the item free for the next
    claim; also whether that spent its last attempt (it is dead-lettered then). None when
    no worker holds it."""
    lapsed = _lapse(record, WorkMove.LAPSE, now)
    if lapsed is None:
        return None
    new, item = lapsed
    previous = record.item
    item.errors = [
        *previous.errors,
        AttemptError(attempt=previous.attempts, agent_id=previous.assigned_to, error=CLAIM_LAPSED, at=now),
    ]
    item.error = CLAIM_LAPSED
    told = {"previous_agent": previous.assigned_to, "attempt": previous.attempts}
    return new, WorkEvent("redelivered", told), item.attempts >= item.max_attempts


def _lapse_review(record: WorkRecord, now: datetime) -> tuple[WorkRecord, WorkEvent] | None:
    """A reviewer gone silent: the review goes back to ``in-review``, nothing else lost.
    None when no reviewer holds it."""
    lapsed = _lapse(record, WorkMove.REVIEW_LAPSE, now)
    if lapsed is None:
        return None
    new, item = lapsed
    told = {"previous_agent": record.item.assigned_to, "review_round": item.review_round}
    return new, WorkEvent("redelivered", told)


def lapse_lost(record: WorkRecord, lost_seq: int, now: datetime) -> Change:
    """A held item (claimed, reviewed or merged) whose queue message ``lost_seq`` the stream
    no longer holds: a cluster's fault lost it, and a claim that was never acknowledged to
    its agent may be all that is left. Nothing can keep that claim alive or deliver the
    item again, so its claim lapses as a redelivery's would and the item is queued again
    (or dead-lettered when that was its last attempt). No change when the record moved on
    since ``lost_seq`` was judged lost (finished, lapsed or queued again by another)."""
    if record.queue_seq != lost_seq or record.delivery is None:
        return Change()
    claim = _lapse_claim(record, now)
    if claim is not None:
        new, redelivered, spent = claim
        if spent:
            return Change(new, (redelivered,), then=Then.DEAD_LETTER)
        requeued = _move(new, WorkMove.REQUEUE, now)
        assert requeued is not None  # a lapse leaves it failed
        new = requeued[0]
    else:
        other = _lapse_review(record, now) or lapse_landing(record, now)
        if other is None:
            return Change()
        new, redelivered = other
    new.queue_seq = None  # until its new message is stored: a sweep's needs_message then sees it
    return Change(new, (redelivered,), then=Then.ENQUEUE)


def _take_review(record: WorkRecord, agent_id: str, delivery: Delivery, now: datetime) -> Change:
    """A review task's message meets the record: a reviewer's claim. A redelivery while a
    reviewer holds it means that reviewer went silent: the review lapses (back to
    ``in-review``, nothing else lost) and the new claimant gets it. The agent that did the
    work never does: its claim gives the message back for someone else."""
    events: tuple[WorkEvent, ...] = ()
    lapsed = _lapse_review(record, now)
    if lapsed is not None:
        if record.delivery is None or delivery.delivered <= record.delivery.delivered:
            return Change()  # the reviewer's own delivery
        record, redelivered = lapsed
        events = (redelivered,)
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
    this item, or lands it (a gate may run for many minutes); None when it does not."""
    item = record.item
    kept = (WorkStatus.WAITING_ON_OPERATOR, WorkStatus.MERGING)
    if item.status not in kept or item.assigned_to != agent_id:
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


def resume(
    record: WorkRecord,
    question_id: str,
    answered: bool,
    now: datetime,
    answer: str = "",
    by: str | None = None,
) -> Change:
    """The question the item waited on was answered (or its deadline passed): back in
    progress, the claim's ack deadline restarted. Anything else is left alone. ``answer``
    (the answer, or why there is none) goes out with the event. A lander's "land this?"
    is decided instead (:func:`shared.work.landing.decide`; ``by``: who answered)."""
    if record.item.question_id != question_id:
        return Change()
    if awaiting_approval(record.item):
        return decide(record, question_id, answer if answered else None, by, now)
    moved = _move(record, WorkMove.RESUME, now)
    if moved is None:
        return Change()
    new, item = moved
    item.question_id = None
    told = {"question_id": question_id, "answered": answered, "answer": answer, "by": by or ""}
    event = WorkEvent("resumed", told)
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


def finish(
    record: WorkRecord,
    agent_id: str,
    result: Any,
    now: datetime,
    artifacts: Sequence[WorkArtifact] = (),
    *,
    reply: bool = False,
) -> Change:
    """Completion by the holder: the message is acknowledged for good. Work that asks for
    review is handed in instead (:func:`hand_in`). ``artifacts`` are kept with the result;
    ``reply``: the result is a direct answer to whoever asked."""
    if record.item.review is not None:
        return hand_in(record, agent_id, result, now, artifacts, reply=reply)
    if landable(record.item):
        new, item = _holder_move(record, agent_id, WorkMove.QUEUE_LANDING, "complete", now)
        _handed_back(item, result, artifacts, reply, now)
        return into_landing(record, new, item, agent_id, now, ())
    new, item = _holder_move(record, agent_id, WorkMove.COMPLETE, "complete", now)
    _handed_back(item, result, artifacts, reply, now)
    item.finished_at = now
    new.delivery = None
    event = WorkEvent("completed", {"agent_id": agent_id})
    return Change(new, (event,), ack=Ack.DONE, ack_subject=_ack_subject(record))


def _handed_back(
    item: WorkItem, result: Any, artifacts: Sequence[WorkArtifact], reply: bool, now: datetime
) -> None:
    """What the worker hands back, on the item whichever way it goes on (done, review, landing)."""
    item.result = result
    item.artifacts = list(artifacts)
    item.direct_reply = reply
    item.error = None
    if item.progress is not None:
        item.progress = Progress(percent=100, note=item.progress.note, at=now)


def hand_in(
    record: WorkRecord,
    agent_id: str,
    result: Any,
    now: datetime,
    artifacts: Sequence[WorkArtifact] = (),
    *,
    reply: bool = False,
) -> Change:
    """The worker is done with work that asks for review: a new round with its result, and
    a review task (a message on the reviewers' queue subject, which leaves this agent out)."""
    new, item = _holder_move(record, agent_id, WorkMove.HAND_IN, "complete", now)
    _handed_back(item, result, artifacts, reply, now)
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


def check_verdict(verdict: str, feedback: str, score: float | None, follow_ups: Sequence[str] = ()) -> None:
    if verdict not in ("approve", "conditional", "reject"):
        raise WorkError("verdict: must be approve, conditional or reject", field="verdict")
    if verdict == "reject" and not feedback.strip():
        raise WorkError("feedback: must say what to change when rejecting", field="feedback")
    if len(feedback) > MAX_FEEDBACK:
        raise WorkError(f"feedback: must be at most {MAX_FEEDBACK} characters", field="feedback")
    if score is not None and not 0 <= score <= 100:
        raise WorkError("score: must be between 0 and 100", field="score")
    if verdict == "conditional" and not follow_ups:
        raise WorkError(
            "follow_ups: a conditional pass names at least one follow-up (what is left to do)",
            field="follow_ups",
        )
    if verdict != "conditional" and follow_ups:
        raise WorkError("follow_ups: only a conditional pass records follow-ups", field="follow_ups")
    if len(follow_ups) > MAX_FOLLOW_UPS:
        raise WorkError(f"follow_ups: at most {MAX_FOLLOW_UPS} per review", field="follow_ups")
    for n, text in enumerate(follow_ups):
        if not text.strip() or len(text) > DESCRIPTION_MAX_LENGTH:
            raise WorkError(
                f"follow_ups[{n}]: must be a description of 1 to {DESCRIPTION_MAX_LENGTH} characters",
                field=f"follow_ups[{n}]",
            )


def follow_up(item: WorkItem, description: str, n: int, feedback: str) -> WorkSubmission:
    """The n-th follow-up a conditional pass of ``item`` creates: new work of the same kind
    (capability, boundary, priority, agent types, scope, attempts, review, isolation),
    linked both ways."""
    suffix = f"-follow-up-{n}"
    return WorkSubmission(
        task_id=item.task_id[: TASK_ID_MAX_LENGTH - len(suffix)] + suffix,
        description=description.strip(),
        capability=item.capability,
        boundary=item.boundary,
        priority=item.priority,
        required_agent_type=item.required_agent_type,
        preferred_agent_type=item.preferred_agent_type,
        scope=item.scope,
        max_attempts=item.max_attempts,
        review=item.review,
        isolated=item.isolated,
        context={"follow_up_of": item.id, "review_feedback": feedback},
    )


def judge(
    record: WorkRecord,
    agent_id: str,
    verdict: str,
    feedback: str,
    score: float | None,
    now: datetime,
    follow_up_ids: Sequence[str] = (),
) -> Change:
    """The reviewer's verdict on the round it holds. Approve: completed, the verdict in the
    record. Reject: back to the queue for workers with the feedback in ``reviews`` (the next
    worker sees every round's result and feedback), or after the last round failed for good,
    into the DLQ with all the feedback. Conditional: approved, with the ids its follow-up
    items get (the queue creates them next) in the round's ``follow_ups``."""
    check_verdict(verdict, feedback, score, follow_up_ids)
    item = record.item
    last = item.review is None or item.review_round >= item.review.rounds
    passed = verdict in ("approve", "conditional")
    move = WorkMove.APPROVE if passed else WorkMove.REJECT_LAST if last else WorkMove.REJECT
    if move is WorkMove.APPROVE and landable(item):
        move = WorkMove.QUEUE_LANDING
    new, changed = _holder_move(record, agent_id, move, "review", now)
    said = {
        "reviewer": agent_id,
        "verdict": verdict,
        "feedback": feedback,
        "score": score,
        "reviewed_at": now,
        "follow_ups": list(follow_up_ids),
    }
    if changed.reviews:
        changed.reviews = [*changed.reviews[:-1], changed.reviews[-1].model_copy(update=said)]
    new.delivery = None
    done = _ack_subject(record)
    told: dict[str, Any] = {"agent_id": agent_id, "round": item.review_round, "score": score}
    if verdict == "conditional":
        told.update(conditional=True, follow_ups=list(follow_up_ids))
    if move is WorkMove.QUEUE_LANDING:
        return into_landing(record, new, changed, item.author, now, (WorkEvent("approved", told),))
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
    if item.status is WorkStatus.DEAD_LETTERED:  # its queue message is gone; its dead letter goes
        new.dlq_seq = None
        return Change(new, (event,), drop_dlq_seq=record.dlq_seq)
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


def unreserve(record: WorkRecord, why: str, now: datetime) -> Change:
    """Work reserved for an agent that is gone (``reserved_for``, see shared/work/landing.py):
    offered to every eligible agent, a new message on the workers' subject superseding the
    reserved one (dropped). Left alone when it no longer waits reserved."""
    item = record.item
    if item.reserved_for is None or item.status not in CLAIMABLE:
        return Change()
    new, changed = _fork(record, now)
    changed.reserved_for = None
    new.queue_seq = None
    event = WorkEvent("unreserved", {"agent_id": item.reserved_for, "why": why})
    return Change(new, (event,), then=Then.ENQUEUE, drop_queue_seq=record.queue_seq)


def hand_back(record: WorkRecord, agent_id: str, why: str, now: datetime) -> Change:
    """The holder gives its item back to the queue untouched (a pause that stops running
    work, docs/operator.md): not a failed attempt, so its attempts are as before the claim;
    the claim's message is handed back for the next claim (``-NAK``)."""
    new, item = _holder_move(record, agent_id, WorkMove.HAND_BACK, "hand back", now)
    item.attempts = max(0, item.attempts - 1)
    item.assigned_to = None
    item.progress = None
    new.delivery = None
    event = WorkEvent("handed-back", {"agent_id": agent_id, "why": why})
    return Change(new, (event,), ack=Ack.AGAIN, ack_subject=_ack_subject(record))


def prioritize(record: WorkRecord, priority: int, why: str, now: datetime) -> Change:
    """An item raised to ``priority`` (a bottleneck, docs/operator.md): a queued one gets a
    new message on its new priority's subject, superseding the old one (dropped), so it is
    the next claim; a blocked one simply waits at it. Left alone when it is not waiting
    for an agent or dependencies, or already at or above it."""
    item = record.item
    if item.priority >= priority or item.status not in (WorkStatus.QUEUED, WorkStatus.BLOCKED):
        return Change()
    new, changed = _fork(record, now)
    changed.priority = priority
    event = WorkEvent("prioritized", {"from": item.priority, "to": priority, "why": why})
    if item.status is WorkStatus.BLOCKED:
        return Change(new, (event,))
    new.queue_seq = None
    return Change(new, (event,), then=Then.ENQUEUE, drop_queue_seq=record.queue_seq)


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


# -- workstreams ---------------------------------------------------------------------
#
# An item's code (docs/workstreams.md): the agent holding it records its branch at the
# claim, each checkpoint and its hand-in; an operator may choose the checkpoint the next
# attempt starts from.

WORKING = HELD | WORK_LIFECYCLE[WorkMove.RESUME].sources
"""Where the worker holds the item (claimed, in progress, waiting on the operator)."""


WORKSTREAM_STEPS = ("opened", "resumed", "checkpoint", "handed-in")
"""What a worker records about its item's code: a ``work.workstream`` event each, and a
node of the item's context tree (shared/work/context.py)."""


def note_workstream(
    record: WorkRecord, agent_id: str, workstream: Workstream, step: str, now: datetime
) -> Change:
    """The worker holding the item records its workstream (``step``: one of
    :data:`WORKSTREAM_STEPS`); the branch, once recorded, is the item's for good (a later
    attempt carries on with it, never another)."""
    if step not in WORKSTREAM_STEPS:
        raise WorkConflict(f"must be one of {', '.join(WORKSTREAM_STEPS)}", field="step")
    item = record.item
    if item.assigned_to != agent_id:
        raise NotClaimant(f"work_id: {item.id} is claimed by another agent", field="work_id")
    if item.status not in WORKING:
        raise WorkConflict(
            f"work_id: cannot record the workstream of {item.id}: it is {item.status.value}", field="work_id"
        )
    if item.workstream is not None and item.workstream.branch != workstream.branch:
        raise WorkConflict(
            f"branch: {item.id} works on {item.workstream.branch}; it cannot move to another branch",
            field="branch",
        )
    data: dict[str, Any] = {"agent_id": agent_id, "step": step, "branch": workstream.branch}
    if step == "handed-in" and workstream.head_sha is not None:
        data["head_sha"] = workstream.head_sha
    elif step in ("resumed", "checkpoint") and workstream.resume_from is not None:
        data["checkpoint"] = workstream.resume_from
    elif step == "opened":
        data["base"] = f"{workstream.base_ref}@{workstream.base_sha}"
    event = WorkEvent("workstream", data)
    if item.workstream == workstream:
        return Change(None, (event,))
    new, changed = _fork(record, now)
    kept = workstream.checkpoints[:MAX_CHECKPOINTS_KEPT]
    changed.workstream = workstream.model_copy(update={"checkpoints": kept})
    return Change(new, (event,))


def choose_checkpoint(record: WorkRecord, sha: str, now: datetime) -> Change:
    """An operator's choice of the checkpoint the item's next attempt starts from."""
    item = record.item
    if item.workstream is None:
        raise WorkConflict(f"work_id: {item.id} has no workstream", field="work_id")
    if item.status in FINAL_WORK_STATES:
        raise WorkConflict(
            f"work_id: {item.id} is {item.status.value}; nothing will start again", field="work_id"
        )
    if not any(c.sha == sha for c in item.workstream.checkpoints):
        raise CheckpointNotFound()
    if item.workstream.resume_from == sha:
        return Change()
    new, changed = _fork(record, now)
    changed.workstream = item.workstream.model_copy(update={"resume_from": sha})
    data = {"step": "restore", "branch": item.workstream.branch, "checkpoint": sha, "by": "operator"}
    return Change(new, (WorkEvent("workstream", data),))


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


WAITING_IN_A_QUEUE = frozenset({WorkStatus.QUEUED, WorkStatus.IN_REVIEW, WorkStatus.LANDING})
"""Waiting for a worker, a reviewer or a lander: each has a queue message to be claimed by."""


def needs_message(record: WorkRecord) -> bool:
    """Waiting in a queue, but its queue message was never stored (the process that queued
    it stopped between the two steps): a sweep publishes it."""
    return record.item.status in WAITING_IN_A_QUEUE and record.queue_seq is None and not parked(record.item)


def message_must_be_held(record: WorkRecord) -> bool:
    """Queued for a worker or a reviewer with its queue message stored: the stream holds
    that message until a claim takes the item (the record then changes), so a sweep that
    finds it gone knows it lost and publishes another. (A lander's item may be waiting on
    the operator's "land this?" with its message settled: not judged this way.)"""
    waiting = (WorkStatus.QUEUED, WorkStatus.IN_REVIEW)
    return record.item.status in waiting and record.queue_seq is not None and not parked(record.item)


CLAIM_HOLDS_MESSAGE = (
    HELD | WORK_LIFECYCLE[WorkMove.REVIEW_LAPSE].sources | WORK_LIFECYCLE[WorkMove.LANDING_LAPSE].sources
)
"""Held by an agent whose claim holds the item's queue message unacknowledged until the
claim ends (a worker's, a reviewer's or a lander's; not one waiting on the operator, whose
keep-alive a redelivery does not lapse): see :func:`lapse_lost`."""


def claim_holds_message(record: WorkRecord) -> bool:
    """Claimed through its stored queue message, which the stream holds until the record
    changes: a sweep that finds it gone lapses the claim (:func:`lapse_lost`)."""
    held = record.item.status in CLAIM_HOLDS_MESSAGE
    return held and record.queue_seq is not None and record.delivery is not None


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
