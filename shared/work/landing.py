"""The landing rules (docs/landing.md): work whose workstream handed in commits completes
only once a lander has put them on the target branch. Pure, like every work rule: its
worker (or its reviewer's approval) queues it for landing (:func:`into_landing`, called by
``finish`` and ``judge`` in shared/work/rules.py), a lander claims it (:func:`take_landing`),
and lands it, sends it back, or gives it back; where the coordinator's veto is on, it
first asks the operator (:func:`await_approval`, :func:`decide`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from shared.models import (
    MAX_LANDING_ATTEMPTS_KEPT,
    MAX_LANDING_DETAIL,
    AttemptError,
    Landing,
    LandingAttempt,
    LandingOutcome,
    WorkItem,
    WorkStatus,
)
from shared.work.lifecycle import WORK_LIFECYCLE, WorkMove
from shared.work.moves import (
    Ack,
    Change,
    Delivery,
    NotClaimant,
    Then,
    WorkConflict,
    WorkError,
    WorkEvent,
    WorkRecord,
    ack_subject_of,
    check_error,
    fork,
    holder_move,
    lapse,
    move,
)

LANDABLE = WORK_LIFECYCLE[WorkMove.CLAIM_LANDING].sources
"""Waiting in the landers' queue."""


def landable(item: WorkItem) -> bool:
    """Whether finishing the item means landing it: it has a workstream that handed in
    commits (an item without code, or with none, completes as before)."""
    ws = item.workstream
    return ws is not None and ws.head_sha is not None and ws.commits > 0


def into_landing(
    record: WorkRecord,
    new: WorkRecord,
    item: WorkItem,
    author: str | None,
    now: datetime,
    events: tuple[WorkEvent, ...],
) -> Change:
    """The item (already moved to ``landing`` by its holder) joins the landers' queue; its
    earlier landing attempts stay on it, the failures counted across them."""
    assert item.workstream is not None
    before = record.item.landing
    item.landing = Landing(
        target=item.workstream.base_ref,
        author=author,
        queued_at=now,
        failures=before.failures if before is not None else 0,
        attempts=before.attempts if before is not None else [],
    )
    item.assigned_to = None
    new.delivery = None
    new.queue_seq = None  # the next queue message is the landers'
    queued = WorkEvent(
        "landing", {"agent_id": author, "branch": item.workstream.branch, "target": item.landing.target}
    )
    return Change(new, (*events, queued), ack=Ack.DONE, ack_subject=ack_subject_of(record), then=Then.ENQUEUE)


def lapse_landing(record: WorkRecord, now: datetime) -> tuple[WorkRecord, WorkEvent] | None:
    """A lander gone silent: its claim lapses, back to ``landing`` (whatever it pushed is
    found again through ``pending_sha``). None when no lander holds it."""
    lapsed = lapse(record, WorkMove.LANDING_LAPSE, now)
    if lapsed is None:
        return None
    return lapsed[0], WorkEvent("redelivered", {"previous_agent": record.item.assigned_to, "landing": True})


def take_landing(record: WorkRecord, agent_id: str, delivery: Delivery, now: datetime) -> Change:
    """A landing task's message meets the record: a lander's claim. A redelivery while a
    lander holds it means that lander went silent: its claim lapses (back to ``landing``;
    whatever it pushed is found again through ``pending_sha``) and the new claimant gets it."""
    events: tuple[WorkEvent, ...] = ()
    lapsed = lapse_landing(record, now)
    if lapsed is not None:
        if record.delivery is None or delivery.delivered <= record.delivery.delivered:
            return Change()  # the lander's own delivery
        record, redelivered = lapsed
        events = (redelivered,)
    moved = move(record, WorkMove.CLAIM_LANDING, now)
    if moved is None:
        return Change(ack=Ack.STOP, ack_subject=delivery.ack_subject)  # cancelled meanwhile
    new, item = moved
    item.assigned_to = agent_id
    item.progress = None
    item.waiting_reason = None
    new.delivery = delivery
    return Change(new, (*events, WorkEvent("landing-claimed", {"agent_id": agent_id})))


def _landing_of(item: WorkItem) -> Landing:
    if item.landing is None:  # every item in landing or merging has one (into_landing)
        raise WorkConflict(f"work_id: {item.id} was never queued for landing", field="work_id")
    return item.landing


def _told(agent_id: str, attempt: LandingAttempt) -> dict[str, Any]:
    """What a landing outcome's event says for Weft's metrics: the lander, batch, gate time,
    and the bisection splits before it."""
    return {"agent_id": agent_id, "batch": attempt.batch, "gate_s": attempt.gate_s, "splits": attempt.splits}


def _attempted(landing: Landing, attempt: LandingAttempt, **update: Any) -> Landing:
    kept = [*landing.attempts, attempt][-MAX_LANDING_ATTEMPTS_KEPT:]
    return landing.model_copy(update={"attempts": kept, **update})


def note_pending(record: WorkRecord, agent_id: str, sha: str, now: datetime) -> Change:
    """The lander holding the item is about to push ``sha``, which holds it: recorded
    first, so a lander that takes the item over after a crash sees whether it landed."""
    item = record.item
    if item.status is not WorkStatus.MERGING or item.assigned_to != agent_id:
        raise NotClaimant(f"work_id: {item.id} is not being landed by this agent", field="work_id")
    new, changed = fork(record, now)
    changed.landing = _landing_of(item).model_copy(update={"pending_sha": sha})
    return Change(new)


def land(record: WorkRecord, agent_id: str, attempt: LandingAttempt, now: datetime) -> Change:
    """The item's commits are on the target branch (``attempt.sha`` holds them): completed,
    the lander's message acknowledged; its dependents unblock now (the queue tells them)."""
    if attempt.outcome != "landed" or attempt.sha is None:
        raise WorkError("outcome: a landing is recorded with the commit that holds it", field="outcome")
    new, item = holder_move(record, agent_id, WorkMove.LAND, "land", now)
    landing = _landing_of(record.item)
    item.landing = _attempted(landing, attempt, landed_sha=attempt.sha, landed_at=now, pending_sha=None)
    item.assigned_to = landing.author
    item.finished_at = now
    item.error = None
    new.delivery = None
    events = (
        WorkEvent("landed", {**_told(agent_id, attempt), "sha": attempt.sha, "target": landing.target}),
        WorkEvent("completed", {"agent_id": landing.author}),
    )
    return Change(new, events, ack=Ack.DONE, ack_subject=ack_subject_of(record))


def bounce(
    record: WorkRecord, agent_id: str, attempt: LandingAttempt, max_failures: int, now: datetime
) -> Change:
    """The item conflicts with the target or fails the gate on its own: back to its author
    on its own branch (the conflict or the gate's output on the item; reserved for the
    author, whom the queue offers it to alone until Weft sees it offline), or, after
    ``max_failures`` such attempts, failed for good into the DLQ for the operator (who is
    told instead of the fleet looping)."""
    if attempt.outcome not in ("conflict", "gate-failed"):
        raise WorkError("outcome: an item goes back for a conflict or a failed gate", field="outcome")
    item = record.item
    landing = _landing_of(item)
    failures = landing.failures + 1
    last = failures >= max_failures
    step = WorkMove.BOUNCE_LAST if last else WorkMove.BOUNCE
    new, changed = holder_move(record, agent_id, step, "land", now)
    changed.landing = _attempted(landing, attempt, failures=failures, pending_sha=None)
    what = (
        f"conflicts with {landing.target} in {', '.join(attempt.files) or 'its changes'}"
        if attempt.outcome == "conflict"
        else f"fails the gate on {landing.target}"
    )
    error = f"landing failed ({failures} of {max_failures}): {what}"
    changed.error = error
    changed.errors = [
        *item.errors,
        AttemptError(attempt=item.attempts, agent_id=landing.author, error=error, at=now),
    ]
    changed.assigned_to = None
    new.delivery = None
    said = WorkEvent(
        "landing-failed",
        {**_told(agent_id, attempt), "outcome": attempt.outcome, "files": attempt.files, "final": last},
    )
    if last:
        return Change(new, (said,), ack=Ack.DONE, ack_subject=ack_subject_of(record), then=Then.DEAD_LETTER)
    changed.reserved_for = landing.author  # its author first (anyone once it is offline)
    new.queue_seq = None  # the next queue message is the workers' again
    queued = WorkEvent("queued", {"retry": True})
    return Change(new, (said, queued), ack=Ack.DONE, ack_subject=ack_subject_of(record), then=Then.ENQUEUE)


def release_landing(
    record: WorkRecord, agent_id: str, why: str, now: datetime, *, deferred: bool = False
) -> Change:
    """The lander cannot land the item now for a reason that is not the item's (the
    repository unreachable, the target rewritten under it; ``deferred``: it conflicts only
    with an item ahead of it in the batch): back to ``landing``, its message redelivered,
    no failure counted."""
    check_error(why)
    new, item = holder_move(record, agent_id, WorkMove.RELEASE_LANDING, "release", now)
    outcome: LandingOutcome = "deferred" if deferred else "error"
    attempt = LandingAttempt(lander=agent_id, outcome=outcome, detail=why[-4000:], at=now)
    item.landing = _attempted(_landing_of(record.item), attempt, pending_sha=None)
    item.assigned_to = None
    new.delivery = None
    event = WorkEvent("landing-released", {"agent_id": agent_id, "why": why})
    return Change(new, (event,), ack=Ack.AGAIN, ack_subject=ack_subject_of(record))


# -- forge mode: GitHub merges (docs/landing.md, Forge mode) -------------------------------


def on_pull_request(item: WorkItem) -> bool:
    """Waiting in ``landing`` on its pull request, with no queue message: Weft watches it."""
    return (
        item.status is WorkStatus.LANDING
        and item.landing is not None
        and item.landing.pull_request is not None
    )


def awaiting_approval(item: WorkItem) -> bool:
    """Waiting in ``landing`` on the operator's answer to "land this?", with no queue message."""
    return item.status is WorkStatus.LANDING and item.question_id is not None


def parked(item: WorkItem) -> bool:
    """Waiting in ``landing`` off the landers' queue: on its pull request, or on the operator."""
    return on_pull_request(item) or awaiting_approval(item)


def await_forge(record: WorkRecord, agent_id: str, number: int, url: str, now: datetime) -> Change:
    """The lander opened (or found) the item's pull request: the item waits in ``landing``
    for GitHub to merge or close it, off the landers' queue (its message acknowledged)."""
    new, item = holder_move(record, agent_id, WorkMove.AWAIT_FORGE, "land", now)
    item.landing = _landing_of(record.item).model_copy(
        update={"pull_request": number, "pull_request_url": url, "pending_sha": None}
    )
    item.assigned_to = None
    new.delivery = None
    new.queue_seq = None
    event = WorkEvent("pull-request", {"agent_id": agent_id, "number": number, "url": url})
    return Change(new, (event,), ack=Ack.DONE, ack_subject=ack_subject_of(record))


def forge_settled(
    record: WorkRecord, number: int, merged_sha: str | None, max_failures: int, now: datetime
) -> Change:
    """What GitHub says of the pull request the item waits on: merged (``merged_sha``, the
    commit on the target: completed, its dependents unblock) or closed without merging (as a
    bounce: back to its author, or after ``max_failures`` into the DLQ). Left alone when the
    item no longer waits on that pull request."""
    item = record.item
    landing = item.landing
    if not on_pull_request(item) or landing is None or landing.pull_request != number:
        return Change()
    if merged_sha is not None:
        moved = move(record, WorkMove.FORGE_MERGED, now)
        assert moved is not None  # parked: in landing
        new, changed = moved
        attempt = LandingAttempt(lander="github", outcome="landed", sha=merged_sha, at=now)
        changed.landing = _attempted(landing, attempt, landed_sha=merged_sha, landed_at=now)
        changed.assigned_to = landing.author
        changed.finished_at = now
        changed.error = None
        events = (
            WorkEvent("landed", {"sha": merged_sha, "target": landing.target, "pull_request": number}),
            WorkEvent("completed", {"agent_id": landing.author}),
        )
        return Change(new, events)
    failures = landing.failures + 1
    last = failures >= max_failures
    moved = move(record, WorkMove.FORGE_CLOSED_LAST if last else WorkMove.FORGE_CLOSED, now)
    assert moved is not None
    new, changed = moved
    detail = f"pull request #{number} was closed without merging"
    attempt = LandingAttempt(lander="github", outcome="closed", detail=detail, at=now)
    changed.landing = _attempted(landing, attempt, failures=failures, pull_request=None)
    error = f"landing failed ({failures} of {max_failures}): {detail}"
    changed.error = error
    changed.errors = [
        *item.errors,
        AttemptError(attempt=item.attempts, agent_id=landing.author, error=error, at=now),
    ]
    said = WorkEvent("landing-failed", {"outcome": "closed", "pull_request": number, "final": last})
    if last:
        return Change(new, (said,), then=Then.DEAD_LETTER)
    changed.reserved_for = landing.author
    new.queue_seq = None
    return Change(new, (said, WorkEvent("queued", {"retry": True})), then=Then.ENQUEUE)


# -- the coordinator's veto (docs/landing.md, The coordinator's veto) ------------------------

APPROVALS = frozenset({"land", "yes", "approve", "approved"})
"""Answers to "land this?" that land the item (any case); any other answer is a refusal,
and its text the reason the author reads."""


def needs_approval(item: WorkItem, project_veto: bool) -> bool:
    """Whether a lander must ask the operator before landing the item: its own ``veto``, or
    the project's when it sets none, and no operator approved it yet."""
    veto = item.veto if item.veto is not None else project_veto
    return veto and (item.landing is None or item.landing.approved_by is None)


def approves(answer: str) -> bool:
    return answer.strip().lower() in APPROVALS


def await_approval(record: WorkRecord, agent_id: str, question_id: str, now: datetime) -> Change:
    """The lander holding the item asked the operator "land this?" (``question_id``): the
    item waits in ``landing`` for the answer, off the landers' queue (its message
    acknowledged)."""
    new, item = holder_move(record, agent_id, WorkMove.AWAIT_APPROVAL, "land", now)
    item.landing = _landing_of(record.item).model_copy(update={"pending_sha": None})
    item.question_id = question_id
    item.assigned_to = None
    new.delivery = None
    new.queue_seq = None
    event = WorkEvent("awaiting-approval", {"agent_id": agent_id, "question_id": question_id})
    return Change(new, (event,), ack=Ack.DONE, ack_subject=ack_subject_of(record))


def decide(record: WorkRecord, question_id: str, answer: str | None, by: str | None, now: datetime) -> Change:
    """The operator's answer to "land this?" (``answer``; None: there is none, the question
    gone): approved, back in the landers' queue to land; refused, back to its author with the
    answer as the reason (not counted among its landing failures: the operator can cancel
    it instead); no answer, back in the landers' queue, whose next lander asks again. Left
    alone when the item no longer waits on that question."""
    item = record.item
    if not awaiting_approval(item) or item.question_id != question_id:
        return Change()
    landing = _landing_of(item)
    if answer is None or approves(answer):
        new, changed = fork(record, now)
        changed.question_id = None
        if answer is not None:
            changed.landing = landing.model_copy(update={"approved_by": by or "operator", "approved_at": now})
        new.queue_seq = None  # the next queue message is the landers'
        told = {"question_id": question_id, "approved": answer is not None, "by": by}
        return Change(new, (WorkEvent("landing-approved", told),), then=Then.ENQUEUE)
    moved = move(record, WorkMove.VETO, now)
    assert moved is not None  # awaiting approval: in landing
    new, changed = moved
    reason = answer.strip()
    attempt = LandingAttempt(
        lander=by or "operator", outcome="vetoed", detail=reason[-MAX_LANDING_DETAIL:], at=now
    )
    changed.landing = _attempted(landing, attempt)
    changed.question_id = None
    error = f"landing vetoed by {by or 'the operator'}: {reason}"[:MAX_LANDING_DETAIL]
    changed.error = error
    changed.errors = [
        *item.errors,
        AttemptError(attempt=item.attempts, agent_id=landing.author, error=error, at=now),
    ]
    changed.reserved_for = landing.author
    new.queue_seq = None  # the next queue message is the workers' again
    said = WorkEvent("landing-vetoed", {"question_id": question_id, "by": by, "reason": reason})
    return Change(new, (said, WorkEvent("queued", {"retry": True})), then=Then.ENQUEUE)
