"""The work lifecycle: which operation moves a work item from which statuses to which one.

One table (:data:`WORK_LIFECYCLE`) that the rules in ``shared/work/rules.py`` enforce, each
checking its move here; the statuses themselves are :class:`shared.models.WorkStatus`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from shared.models import WorkStatus


class WorkMove(StrEnum):
    """The operations that change a work item's status; each is one rule in shared/work/rules.py."""

    CLAIM = "claim"
    PROGRESS = "progress"
    COMPLETE = "complete"
    FAIL = "fail"
    LAPSE = "lapse"
    REQUEUE = "requeue"
    DEAD_LETTER = "dead-letter"
    CANCEL = "cancel"
    EXPIRE = "expire"
    RETRY = "retry"
    UNBLOCK = "unblock"
    ABANDON = "abandon"
    REVIVE = "revive"
    HAND_IN = "hand-in"
    CLAIM_REVIEW = "claim-review"
    REVIEW_PROGRESS = "review-progress"
    REVIEW_LAPSE = "review-lapse"
    APPROVE = "approve"
    REJECT = "reject"
    REJECT_LAST = "reject-last"
    ASK = "ask"
    RESUME = "resume"
    HAND_BACK = "hand-back"
    QUEUE_LANDING = "queue-landing"
    CLAIM_LANDING = "claim-landing"
    LANDING_LAPSE = "landing-lapse"
    RELEASE_LANDING = "release-landing"
    LAND = "land"
    BOUNCE = "bounce"
    BOUNCE_LAST = "bounce-last"
    AWAIT_FORGE = "await-forge"
    FORGE_MERGED = "forge-merged"
    FORGE_CLOSED = "forge-closed"
    FORGE_CLOSED_LAST = "forge-closed-last"
    AWAIT_APPROVAL = "await-approval"
    VETO = "veto"


@dataclass(frozen=True)
class Transition:
    """Where a move may start (``sources``) and where it leads (``target``)."""

    sources: frozenset[WorkStatus]
    target: WorkStatus


def _from(*statuses: WorkStatus) -> frozenset[WorkStatus]:
    return frozenset(statuses)


_S = WorkStatus
WORK_LIFECYCLE: dict[WorkMove, Transition] = {
    WorkMove.CLAIM: Transition(_from(_S.SUBMITTED, _S.QUEUED, _S.FAILED), _S.CLAIMED),
    WorkMove.PROGRESS: Transition(_from(_S.CLAIMED, _S.IN_PROGRESS), _S.IN_PROGRESS),
    WorkMove.COMPLETE: Transition(_from(_S.CLAIMED, _S.IN_PROGRESS, _S.WAITING_ON_OPERATOR), _S.COMPLETED),
    WorkMove.FAIL: Transition(_from(_S.CLAIMED, _S.IN_PROGRESS, _S.WAITING_ON_OPERATOR), _S.FAILED),
    WorkMove.LAPSE: Transition(_from(_S.CLAIMED, _S.IN_PROGRESS), _S.FAILED),
    WorkMove.REQUEUE: Transition(_from(_S.FAILED), _S.QUEUED),
    WorkMove.DEAD_LETTER: Transition(_from(_S.FAILED), _S.DEAD_LETTERED),
    WorkMove.CANCEL: Transition(
        _from(
            _S.SUBMITTED,
            _S.BLOCKED,
            _S.QUEUED,
            _S.CLAIMED,
            _S.IN_PROGRESS,
            _S.WAITING_ON_OPERATOR,
            _S.IN_REVIEW,
            _S.REVIEWING,
            _S.LANDING,
            _S.DEAD_LETTERED,
        ),
        _S.CANCELLED,
    ),
    WorkMove.EXPIRE: Transition(_from(_S.SUBMITTED, _S.BLOCKED, _S.QUEUED, _S.FAILED), _S.EXPIRED),
    WorkMove.RETRY: Transition(_from(_S.FAILED, _S.DEAD_LETTERED), _S.QUEUED),
    WorkMove.UNBLOCK: Transition(_from(_S.BLOCKED), _S.QUEUED),
    WorkMove.ABANDON: Transition(_from(_S.BLOCKED), _S.FAILED),
    WorkMove.REVIVE: Transition(_from(_S.FAILED, _S.DEAD_LETTERED), _S.BLOCKED),
    WorkMove.HAND_IN: Transition(_from(_S.CLAIMED, _S.IN_PROGRESS, _S.WAITING_ON_OPERATOR), _S.IN_REVIEW),
    WorkMove.CLAIM_REVIEW: Transition(_from(_S.IN_REVIEW), _S.REVIEWING),
    WorkMove.REVIEW_PROGRESS: Transition(_from(_S.REVIEWING), _S.REVIEWING),
    WorkMove.REVIEW_LAPSE: Transition(_from(_S.REVIEWING), _S.IN_REVIEW),
    WorkMove.APPROVE: Transition(_from(_S.REVIEWING), _S.COMPLETED),
    WorkMove.REJECT: Transition(_from(_S.REVIEWING), _S.QUEUED),
    WorkMove.REJECT_LAST: Transition(_from(_S.REVIEWING), _S.FAILED),
    WorkMove.ASK: Transition(_from(_S.CLAIMED, _S.IN_PROGRESS), _S.WAITING_ON_OPERATOR),
    WorkMove.RESUME: Transition(_from(_S.WAITING_ON_OPERATOR), _S.IN_PROGRESS),
    WorkMove.HAND_BACK: Transition(_from(_S.CLAIMED, _S.IN_PROGRESS), _S.QUEUED),
    WorkMove.QUEUE_LANDING: Transition(
        _from(_S.CLAIMED, _S.IN_PROGRESS, _S.WAITING_ON_OPERATOR, _S.REVIEWING), _S.LANDING
    ),
    WorkMove.CLAIM_LANDING: Transition(_from(_S.LANDING), _S.MERGING),
    WorkMove.LANDING_LAPSE: Transition(_from(_S.MERGING), _S.LANDING),
    WorkMove.RELEASE_LANDING: Transition(_from(_S.MERGING), _S.LANDING),
    WorkMove.LAND: Transition(_from(_S.MERGING), _S.COMPLETED),
    WorkMove.BOUNCE: Transition(_from(_S.MERGING), _S.QUEUED),
    WorkMove.BOUNCE_LAST: Transition(_from(_S.MERGING), _S.FAILED),
    WorkMove.AWAIT_FORGE: Transition(_from(_S.MERGING), _S.LANDING),
    WorkMove.FORGE_MERGED: Transition(_from(_S.LANDING), _S.COMPLETED),
    WorkMove.FORGE_CLOSED: Transition(_from(_S.LANDING), _S.QUEUED),
    WorkMove.FORGE_CLOSED_LAST: Transition(_from(_S.LANDING), _S.FAILED),
    WorkMove.AWAIT_APPROVAL: Transition(_from(_S.MERGING), _S.LANDING),
    WorkMove.VETO: Transition(_from(_S.LANDING), _S.QUEUED),
}
"""The work lifecycle, one row per operation: the truth the rules in shared/work/rules.py
enforce (each checks its move here) and ``WORK_TRANSITIONS`` is derived from.

Items are created ``queued``, or ``blocked`` when they name dependencies
(``depends_on``): a blocked item is in no queue until ``unblock`` (its last dependency
completed) or ``abandon`` (a dependency can no longer complete: it then fails for good,
into the DLQ, naming that dependency); ``revive`` takes such an item (and the chain
behind it) back to ``blocked`` when the dependency is retried. Nothing stores
``submitted`` today, but an item in it would be claimed, cancelled or expired like a
queued one. Work that asks for ``review`` is handed in (``in-review``, a review task in
the reviewers' queue) instead of completed; a reviewer claims it (``reviewing``) and
approves it (``completed``) or rejects it: back to the queue for workers, or after the
last round ``failed`` and on into the DLQ. A reviewer gone silent lapses like a worker
(``review-lapse``: back to ``in-review``, redelivered). A worker that asks the operator a
question about its item (``ask``) holds it ``waiting-on-operator``, where its claim does
not lapse, until the answer (or the question's deadline) resumes it (``resume``); it may
still complete or fail it meanwhile. Work whose workstream handed in commits is not
completed by its worker or its reviewer but queued for landing (``queue-landing``:
``landing``, a task in the landers' queue); a lander claims it (``merging``) and either
lands it on the target branch (``land``: only now ``completed``, and only now do its
dependents unblock), sends it back to the workers with the conflict or the gate's output
(``bounce``; after the project's last allowed failure ``bounce-last``: failed, into the
DLQ for the operator), or gives it back untouched when the repository cannot be reached
(``release-landing``); a lander gone silent lapses like a reviewer (``landing-lapse``).
In forge mode the lander opens a pull request instead and leaves the item ``landing``
without a queue message (``await-forge``) until Weft sees GitHub merge it
(``forge-merged``: completed) or close it (``forge-closed``, ``forge-closed-last``: as a
bounce). Where the coordinator's veto is on, a lander first asks the operator "land
this?" and leaves the item ``landing`` without a queue message (``await-approval``)
until the answer: back in the landers' queue, approved, or back to its author
(``veto``).
A ``merging`` item cannot be cancelled: its push may be under way (docs/landing.md). ``failed`` records an
attempt that went wrong: reported by its agent (``fail``) or a claim that went
silent past the ack deadline (``lapse``, seen when JetStream redelivers it). From
there the item is requeued, claimed again, expired or dead-lettered. ``progress``
keeps an in-progress item in progress. A new status or operation is one more row
here and one more rule there."""

WORK_TRANSITIONS: dict[WorkStatus, frozenset[WorkStatus]] = {
    status: frozenset(t.target for t in WORK_LIFECYCLE.values() if status in t.sources and t.target != status)
    for status in WorkStatus
}
"""The other statuses an item may move to from each status (derived from ``WORK_LIFECYCLE``)."""


def can_transition(current: WorkStatus, new: WorkStatus) -> bool:
    return new in WORK_TRANSITIONS[current]


def move_allowed(move: WorkMove, current: WorkStatus) -> bool:
    """Whether ``move`` may start from ``current``."""
    return current in WORK_LIFECYCLE[move].sources
