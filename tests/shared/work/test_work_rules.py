"""The work rules of shared/work/rules.py, without NATS: every move, every refusal.

Each rule is called through ``run``, which also checks that the record it was given
is exactly as it was afterwards (the rules copy, they never change their input).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from shared.models import AttemptError, Progress, WorkItem, WorkStatus, WorkSubmission
from shared.names import InvalidNameError
from shared.work.lifecycle import WORK_LIFECYCLE, WORK_TRANSITIONS, WorkMove, can_transition
from shared.work.rules import (
    CLAIM_LAPSED,
    CLAIMABLE,
    HELD,
    REVIEWABLE,
    WAITING,
    Ack,
    Change,
    Delivery,
    NotClaimant,
    Then,
    WorkConflict,
    WorkError,
    WorkEvent,
    WorkRecord,
    admit,
    bury,
    discard,
    expire,
    finish,
    hand_back,
    lapse_lost,
    note_waiting,
    prioritize,
    record_failure,
    report,
    requeue,
    reset,
    stop,
    store_seq,
    take,
)

S = WorkStatus
A = "a" * 32
B = "b" * 32
WORK_ID = "c" * 32
THEN = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
NOW = THEN + timedelta(minutes=5)
OLD_ACK = "$JS.ACK.old"
NEW_ACK = "$JS.ACK.new"


def record(status: WorkStatus = S.QUEUED, **fields: Any) -> WorkRecord:
    """A record in ``status``; a held one is claimed by A on its first delivery."""
    record_fields = {
        k: fields.pop(k)
        for k in ("queue_seq", "enqueues", "delivery", "dlq_seq", "dlq_at", "notes")
        if k in fields
    }
    if status in HELD:
        fields.setdefault("assigned_to", A)
        fields.setdefault("attempts", 1)
        fields.setdefault("claimed_at", THEN)
        record_fields.setdefault("delivery", Delivery(ack_subject=OLD_ACK, stream_seq=7, delivered=1))
    record_fields.setdefault("queue_seq", 7)
    record_fields.setdefault("enqueues", 1)
    item = WorkItem(
        id=WORK_ID,
        task_id="t1",
        description="do it",
        capability="code",
        project_id="demo",
        status=status,
        created_at=THEN,
        updated_at=THEN,
        **fields,
    )
    return WorkRecord(item=item, **record_fields)


def run(rule: Callable[..., Change], given: WorkRecord, *args: Any) -> Change:
    """Apply ``rule``; whatever it decides, ``given`` must be unchanged."""
    before = given.model_dump(mode="json")
    try:
        return rule(given, *args)
    finally:
        assert given.model_dump(mode="json") == before, "the rule changed its input record"


def refused(rule: Callable[..., Change], given: WorkRecord, *args: Any) -> WorkError:
    with pytest.raises(WorkError) as info:
        run(rule, given, *args)
    return info.value


def stored(change: Change) -> WorkRecord:
    assert change.record is not None, "the rule left the record alone"
    assert change.record.item.updated_at == NOW
    return change.record


def delivered(times: int = 1, seq: int = 7) -> Delivery:
    return Delivery(ack_subject=NEW_ACK, stream_seq=seq, delivered=times)


def statuses_except(*kept: WorkStatus) -> list[WorkStatus]:
    return [s for s in WorkStatus if s not in kept]


# -- the table ---------------------------------------------------------------------


def test_every_status_has_a_row_and_the_constants_come_from_the_table() -> None:
    assert set(WORK_TRANSITIONS) == set(WorkStatus)
    assert set(WORK_LIFECYCLE) == set(WorkMove)
    assert CLAIMABLE == {S.SUBMITTED, S.QUEUED, S.FAILED} == WORK_LIFECYCLE[WorkMove.CLAIM].sources
    assert {S.CLAIMED, S.IN_PROGRESS} == HELD
    for transition in WORK_LIFECYCLE.values():
        for source in transition.sources - {transition.target}:
            assert can_transition(source, transition.target)


# Each rule against every status: it moves exactly from its row's sources, to its
# row's target, and refuses (or leaves the record alone) from every other status.
def _holder(status: WorkStatus) -> WorkRecord:
    return record(status, assigned_to=A, delivery=Delivery(ack_subject=OLD_ACK, stream_seq=7, delivered=1))


def _report(r: WorkRecord) -> Change:
    return report(r, A, 10, "", NOW)


RULES: list[tuple[WorkMove, Callable[[WorkRecord], Change], Callable[[WorkStatus], WorkRecord], bool]] = [
    (WorkMove.PROGRESS, _report, _holder, True),
    (WorkMove.REVIEW_PROGRESS, _report, _holder, True),
    (WorkMove.COMPLETE, lambda r: finish(r, A, None, NOW), _holder, True),
    (WorkMove.FAIL, lambda r: record_failure(r, A, "boom", True, NOW), _holder, True),
    (WorkMove.CANCEL, lambda r: stop(r, "", "operator", NOW), record, True),
    (WorkMove.RETRY, lambda r: reset(r, NOW), record, True),
    (WorkMove.REQUEUE, lambda r: requeue(r, NOW), record, False),
    (WorkMove.DEAD_LETTER, lambda r: bury(r, 3, NOW), record, False),
    (WorkMove.EXPIRE, lambda r: expire(r, NOW), lambda s: record(s, deadline=THEN), False),
]


@pytest.mark.parametrize("status", list(WorkStatus))
@pytest.mark.parametrize(("move", "rule", "make", "refuses"), RULES, ids=[m for m, *_ in RULES])
def test_each_rule_moves_exactly_as_its_table_row_says(
    move: WorkMove,
    rule: Callable[[WorkRecord], Change],
    make: Callable[[WorkStatus], WorkRecord],
    refuses: bool,
    status: WorkStatus,
) -> None:
    row = WORK_LIFECYCLE[move]
    given = make(status)
    shared_rule = {m for m, r, *_ in RULES if r is rule} - {move}  # one rule, several rows
    if any(status in WORK_LIFECYCLE[other].sources for other in shared_rule):
        return  # that row's case
    if status in row.sources:
        assert stored(run(rule, given)).item.status is row.target
    elif refuses:
        assert isinstance(refused(rule, given), WorkConflict)
    else:
        assert run(rule, given).record is None


# reviews, landing and waiting on the operator: their own tests
@pytest.mark.parametrize(
    "status", statuses_except(*REVIEWABLE, S.REVIEWING, S.LANDING, S.MERGING, S.WAITING_ON_OPERATOR)
)
def test_take_claims_exactly_from_the_claim_row(status: WorkStatus) -> None:
    given = record(status)
    if status in HELD:  # a redelivery of a held claim: it lapses first, then is claimed
        change = run(take, given, B, delivered(2), NOW)
    else:
        change = run(take, given, B, delivered(), NOW)
    if status in WORK_LIFECYCLE[WorkMove.CLAIM].sources | WORK_LIFECYCLE[WorkMove.LAPSE].sources:
        assert stored(change).item.status is S.CLAIMED
    else:
        assert change == Change(ack=Ack.STOP, ack_subject=NEW_ACK)


# -- admit and store_seq -------------------------------------------------------------


def test_admit_creates_a_queued_record() -> None:
    submission = WorkSubmission(task_id="t1", description="do it", capability="code", deadline=NOW)
    created = admit(submission, project_id="demo", submitted_by="tester", now=THEN)
    assert created.item.status is S.QUEUED
    assert (created.item.project_id, created.item.submitted_by, created.item.deadline) == (
        "demo",
        "tester",
        NOW,
    )
    assert created.item.created_at == created.item.updated_at == THEN
    assert (created.queue_seq, created.enqueues, created.delivery) == (None, 0, None)


def test_admit_takes_an_id_chosen_beforehand_and_refuses_one_of_the_wrong_shape() -> None:
    submission = WorkSubmission(task_id="t1", description="do it", capability="code")
    chosen = "ab" * 16
    assert admit(submission, project_id="demo", submitted_by=None, now=NOW, work_id=chosen).item.id == chosen
    with pytest.raises(InvalidNameError) as info:
        admit(submission, project_id="demo", submitted_by=None, now=NOW, work_id="Not-An-Id")
    assert info.value.message == "work_id: must be exactly 32 lowercase hex characters (a work item id)"


@pytest.mark.parametrize("deadline", [NOW, NOW - timedelta(seconds=1)])
def test_admit_refuses_a_deadline_that_is_not_in_the_future(deadline: datetime) -> None:
    submission = WorkSubmission(task_id="t1", description="do it", capability="code", deadline=deadline)
    with pytest.raises(WorkError) as info:
        admit(submission, project_id="demo", submitted_by=None, now=NOW)
    assert (info.value.field, info.value.message) == ("deadline", "deadline: must be in the future")


@pytest.mark.parametrize(("enqueues", "epoch"), [(0, 1), (1, 2), (2, 2)])
def test_store_seq_keeps_the_newest_epoch_whatever_the_status(enqueues: int, epoch: int) -> None:
    given = record(S.CLAIMED, queue_seq=4, enqueues=enqueues)
    change = run(store_seq, given, 9, epoch, NOW)
    new = stored(change)
    assert (new.queue_seq, new.enqueues, new.item.status) == (9, epoch, S.CLAIMED)
    assert (change.events, change.ack, change.then) == ((), None, None)


def test_store_seq_leaves_a_later_enqueues_message_in_place() -> None:
    """A publish stored late (its enqueue number already passed) must not point the record
    back at a superseded message."""
    given = record(S.QUEUED, queue_seq=4, enqueues=3)
    assert run(store_seq, given, 9, 2, NOW) == Change()


# -- take ----------------------------------------------------------------------------


@pytest.mark.parametrize("status", sorted(CLAIMABLE))
def test_take_claims_a_waiting_item(status: WorkStatus) -> None:
    given = record(status, attempts=1, progress=Progress(percent=30, at=THEN), waiting_reason="no agent")
    delivery = delivered()
    change = run(take, given, B, delivery, NOW)
    new = stored(change)
    item = new.item
    assert (item.status, item.attempts, item.assigned_to, item.claimed_at) == (S.CLAIMED, 2, B, NOW)
    assert (item.progress, item.waiting_reason) == (None, None)
    assert new.delivery == delivery
    assert change.events == (WorkEvent("claimed", {"agent_id": B}),)
    assert (change.ack, change.ack_subject, change.then) == (None, None, None)


def test_take_accepts_a_record_without_a_queue_seq_yet() -> None:
    change = run(take, record(queue_seq=None), B, delivered(seq=12), NOW)
    assert stored(change).item.status is S.CLAIMED


def test_take_terminates_a_stale_message() -> None:
    change = run(take, record(queue_seq=8), B, delivered(seq=7), NOW)
    assert change == Change(ack=Ack.STOP, ack_subject=NEW_ACK)


@pytest.mark.parametrize("status", sorted(HELD))
@pytest.mark.parametrize("times", [1, 0])
def test_take_leaves_a_held_claim_to_its_holder(status: WorkStatus, times: int) -> None:
    assert run(take, record(status), B, delivered(times), NOW) == Change()


def test_take_leaves_a_held_claim_without_delivery_alone() -> None:
    assert run(take, record(S.CLAIMED, delivery=None), B, delivered(5), NOW) == Change()


@pytest.mark.parametrize("status", sorted(HELD))
def test_take_a_lapsed_claim_counts_a_failed_attempt_and_claims_again(status: WorkStatus) -> None:
    given = record(status, attempts=1, max_attempts=3)
    delivery = delivered(2)
    change = run(take, given, B, delivery, NOW)
    item = stored(change).item
    assert (item.status, item.attempts, item.assigned_to, item.error) == (S.CLAIMED, 2, B, CLAIM_LAPSED)
    assert item.errors == [AttemptError(attempt=1, agent_id=A, error=CLAIM_LAPSED, at=NOW)]
    assert stored(change).delivery == delivery
    assert change.events == (
        WorkEvent("redelivered", {"previous_agent": A, "attempt": 1}),
        WorkEvent("claimed", {"agent_id": B}),
    )
    assert (change.ack, change.then) == (None, None)


def test_take_a_lapsed_claim_with_no_attempts_left_goes_to_the_dlq() -> None:
    earlier = AttemptError(attempt=1, agent_id=B, error="flaky", at=THEN)
    given = record(S.IN_PROGRESS, attempts=2, max_attempts=2, errors=[earlier])
    change = run(take, given, B, delivered(2), NOW)
    new = stored(change)
    assert (new.item.status, new.item.assigned_to, new.delivery, new.item.attempts) == (
        S.FAILED,
        None,
        None,
        2,
    )
    assert new.item.errors == [earlier, AttemptError(attempt=2, agent_id=A, error=CLAIM_LAPSED, at=NOW)]
    assert change.events == (WorkEvent("redelivered", {"previous_agent": A, "attempt": 2}),)
    assert (change.ack, change.ack_subject, change.then) == (Ack.STOP, NEW_ACK, Then.DEAD_LETTER)


@pytest.mark.parametrize("status", sorted(HELD))
def test_a_held_claim_whose_message_was_lost_lapses_and_is_queued_again(status: WorkStatus) -> None:
    """As a redelivery would lapse it (a failed attempt), then queued for a new message:
    none until it is stored, so a sweep sees an item queued without one."""
    change = run(lapse_lost, record(status, attempts=1, max_attempts=3), 7, NOW)
    new = stored(change)
    assert (new.item.status, new.item.attempts, new.item.assigned_to, new.item.error) == (
        S.QUEUED,
        1,
        None,
        CLAIM_LAPSED,
    )
    assert new.item.errors == [AttemptError(attempt=1, agent_id=A, error=CLAIM_LAPSED, at=NOW)]
    assert (new.delivery, new.queue_seq, new.enqueues) == (None, None, 1)
    assert change.events == (WorkEvent("redelivered", {"previous_agent": A, "attempt": 1}),)
    assert (change.ack, change.ack_subject, change.then) == (None, None, Then.ENQUEUE)


def test_a_lost_claim_on_its_last_attempt_goes_to_the_dlq() -> None:
    change = run(lapse_lost, record(S.CLAIMED, attempts=2, max_attempts=2), 7, NOW)
    new = stored(change)
    assert (new.item.status, new.item.assigned_to, new.delivery) == (S.FAILED, None, None)
    assert (change.ack, change.then) == (None, Then.DEAD_LETTER)


@pytest.mark.parametrize(
    "given",
    [
        record(S.CLAIMED, queue_seq=8),  # queued again since (a later message)
        record(S.CLAIMED, delivery=None),  # not claimed through a message
        record(S.QUEUED),  # lapsed by another repairer
        record(
            S.WAITING_ON_OPERATOR,
            assigned_to=A,
            delivery=Delivery(ack_subject=OLD_ACK, stream_seq=7, delivered=1),
        ),
        record(S.COMPLETED),
    ],
    ids=["later-message", "no-delivery", "queued", "waiting-on-operator", "completed"],
)
def test_a_lost_message_changes_nothing_once_the_record_moved_on(given: WorkRecord) -> None:
    assert run(lapse_lost, given, 7, NOW) == Change()


def test_take_a_lapsed_claim_past_its_deadline_expires() -> None:
    change = run(take, record(S.CLAIMED, deadline=THEN), B, delivered(2), NOW)
    new = stored(change)
    assert (new.item.status, new.item.finished_at, new.item.assigned_to) == (S.EXPIRED, NOW, None)
    assert [e.action for e in change.events] == ["redelivered", "expired"]
    assert (change.ack, change.ack_subject, change.drop_queue_seq) == (Ack.STOP, NEW_ACK, None)


@pytest.mark.parametrize("status", sorted(CLAIMABLE))
def test_take_expires_a_waiting_item_past_its_deadline(status: WorkStatus) -> None:
    change = run(take, record(status, deadline=NOW), B, delivered(), NOW)
    new = stored(change)
    assert (new.item.status, new.item.finished_at, new.item.attempts) == (S.EXPIRED, NOW, 0)
    assert change.events == (WorkEvent("expired"),)
    assert (change.ack, change.ack_subject) == (Ack.STOP, NEW_ACK)


def test_take_claims_before_the_deadline() -> None:
    change = run(take, record(deadline=NOW + timedelta(seconds=1)), B, delivered(), NOW)
    assert stored(change).item.status is S.CLAIMED


# -- the holder's operations ---------------------------------------------------------

HOLDER_RULES: list[tuple[str, Callable[[WorkRecord, str], Change]]] = [
    ("report progress on", lambda r, agent: report(r, agent, 50, "", NOW)),
    ("complete", lambda r, agent: finish(r, agent, None, NOW)),
    ("fail", lambda r, agent: record_failure(r, agent, "boom", True, NOW)),
]


@pytest.mark.parametrize(("operation", "rule"), HOLDER_RULES, ids=[o for o, _ in HOLDER_RULES])
def test_holder_rules_refuse_a_cancelled_item(
    operation: str, rule: Callable[[WorkRecord, str], Change]
) -> None:
    error = refused(rule, record(S.CANCELLED, assigned_to=A), A)
    assert isinstance(error, WorkConflict)
    assert (error.field, error.message) == (
        "work_id",
        f"work_id: {WORK_ID} was cancelled; stop working on it",
    )


@pytest.mark.parametrize("status", statuses_except(S.CLAIMED, S.IN_PROGRESS, S.CANCELLED))
@pytest.mark.parametrize(("operation", "rule"), HOLDER_RULES, ids=[o for o, _ in HOLDER_RULES])
def test_holder_rules_refuse_an_item_that_is_not_claimed(
    operation: str, rule: Callable[[WorkRecord, str], Change], status: WorkStatus
) -> None:
    if status is S.REVIEWING and operation == "report progress on":
        return  # a reviewer reports progress on its review too
    if status is S.WAITING_ON_OPERATOR and operation != "report progress on":
        return  # its holder may complete or fail it while it waits (test_questions.py)
    error = refused(rule, record(status), A)
    assert isinstance(error, WorkConflict)
    assert error.message == f"work_id: cannot {operation} {WORK_ID}: it is {status.value}, not claimed"


@pytest.mark.parametrize(("operation", "rule"), HOLDER_RULES, ids=[o for o, _ in HOLDER_RULES])
def test_holder_rules_refuse_another_agent(operation: str, rule: Callable[[WorkRecord, str], Change]) -> None:
    error = refused(rule, record(S.IN_PROGRESS), B)
    assert isinstance(error, NotClaimant)
    assert error.field == "work_id"
    assert B not in error.message and "claimed by another agent" in error.message


@pytest.mark.parametrize("status", sorted(HELD))
def test_report_puts_the_item_in_progress_and_extends_the_claim(status: WorkStatus) -> None:
    given = record(status)
    change = run(report, given, A, 40, "halfway", NOW)
    new = stored(change)
    assert new.item.status is S.IN_PROGRESS
    assert new.item.progress == Progress(percent=40, note="halfway", at=NOW)
    assert new.delivery == given.delivery and new.item.assigned_to == A
    assert change.events == (WorkEvent("progress", {"agent_id": A, "percent": 40, "note": "halfway"}),)
    assert (change.ack, change.ack_subject, change.then) == (Ack.WORKING, OLD_ACK, None)


@pytest.mark.parametrize("percent", [-1, 101, 250])
def test_report_refuses_a_percent_out_of_range(percent: int) -> None:
    error = refused(report, record(S.CLAIMED), A, percent, "", NOW)
    assert (type(error), error.field) == (WorkError, "percent")
    assert error.message == "percent: must be between 0 and 100"


@pytest.mark.parametrize("progress", [None, Progress(percent=60, note="nearly", at=THEN)])
def test_finish_completes_and_acknowledges(progress: Progress | None) -> None:
    given = record(S.IN_PROGRESS, progress=progress, error="an earlier attempt failed")
    change = run(finish, given, A, {"ok": True}, NOW)
    new = stored(change)
    item = new.item
    assert (item.status, item.result, item.error, item.finished_at) == (S.COMPLETED, {"ok": True}, None, NOW)
    assert item.progress == (None if progress is None else Progress(percent=100, note="nearly", at=NOW))
    assert (new.delivery, item.assigned_to) == (None, A)
    assert change.events == (WorkEvent("completed", {"agent_id": A}),)
    assert (change.ack, change.ack_subject, change.then) == (Ack.DONE, OLD_ACK, None)


@pytest.mark.parametrize(
    ("attempts", "retryable", "ack", "then"),
    [
        (1, True, Ack.AGAIN, Then.REQUEUE),
        (2, True, Ack.AGAIN, Then.REQUEUE),
        (3, True, Ack.STOP, Then.DEAD_LETTER),  # attempts used up
        (1, False, Ack.STOP, Then.DEAD_LETTER),  # not worth another attempt
    ],
)
def test_record_failure_decides_requeue_or_dead_letter(
    attempts: int, retryable: bool, ack: Ack, then: Then
) -> None:
    given = record(S.CLAIMED, attempts=attempts, max_attempts=3)
    change = run(record_failure, given, A, "it broke", retryable, NOW)
    new = stored(change)
    item = new.item
    assert (item.status, item.error, item.assigned_to, new.delivery) == (S.FAILED, "it broke", None, None)
    assert item.errors == [AttemptError(attempt=attempts, agent_id=A, error="it broke", at=NOW)]
    assert change.events == (WorkEvent("failed", {"agent_id": A, "error": "it broke"}),)
    assert (change.ack, change.ack_subject, change.then) == (ack, OLD_ACK, then)


@pytest.mark.parametrize("error", ["", "   ", "\n\t"])
def test_record_failure_refuses_an_empty_error(error: str) -> None:
    refusal = refused(record_failure, record(S.CLAIMED), A, error, True, NOW)
    assert (type(refusal), refusal.field) == (WorkError, "error")
    assert refusal.message == "error: must describe what went wrong"


# -- requeue, bury -------------------------------------------------------------------


def test_requeue_puts_a_failed_item_back() -> None:
    given = record(S.FAILED, attempts=1, error="boom")
    change = run(requeue, given, NOW)
    item = stored(change).item
    assert (item.status, item.attempts, item.error) == (S.QUEUED, 1, "boom")
    assert change.events == (WorkEvent("queued", {"retry": True}),)
    assert (change.ack, change.then) == (None, None)


@pytest.mark.parametrize("status", statuses_except(S.FAILED))
def test_requeue_leaves_an_item_that_moved_on_alone(status: WorkStatus) -> None:
    assert run(requeue, record(status), NOW) == Change()


def test_bury_dead_letters_a_failed_item() -> None:
    given = record(S.FAILED, attempts=3, errors=[AttemptError(attempt=3, error="x", at=THEN)])
    change = run(bury, given, 42, NOW)
    new = stored(change)
    assert (new.item.status, new.item.finished_at, new.item.assigned_to) == (S.DEAD_LETTERED, NOW, None)
    assert (new.dlq_seq, new.dlq_at, new.delivery) == (42, NOW, None)
    assert change.events == (WorkEvent("dead-lettered", {"errors": 1}),)
    assert change.drop_dlq_seq is None


@pytest.mark.parametrize("status", statuses_except(S.FAILED))
def test_bury_drops_its_dead_letter_when_the_item_moved_on(status: WorkStatus) -> None:
    assert run(bury, record(status), 42, NOW) == Change(drop_dlq_seq=42)


# -- cancel --------------------------------------------------------------------------


@pytest.mark.parametrize("status", sorted(HELD))
def test_stop_terminates_a_held_claim_and_tells_its_agent(status: WorkStatus) -> None:
    change = run(stop, record(status), "not needed", "weft", NOW)
    new = stored(change)
    assert (new.item.status, new.item.finished_at, new.delivery) == (S.CANCELLED, NOW, None)
    assert new.item.error == "cancelled by weft: not needed"
    assert change.events == (WorkEvent("cancelled", {"reason": "not needed", "by": "weft"}),)
    assert (change.ack, change.ack_subject, change.notify, change.drop_queue_seq) == (
        Ack.STOP,
        OLD_ACK,
        A,
        None,
    )


@pytest.mark.parametrize(("status", "queue_seq"), [(S.QUEUED, 7), (S.SUBMITTED, None)])
def test_stop_drops_a_waiting_item_from_the_queue(status: WorkStatus, queue_seq: int | None) -> None:
    change = run(stop, record(status, queue_seq=queue_seq), "", "operator", NOW)
    assert stored(change).item.error == "cancelled by operator"
    assert (change.ack, change.notify, change.drop_queue_seq) == (None, None, queue_seq)


@pytest.mark.parametrize("status", statuses_except(*WORK_LIFECYCLE[WorkMove.CANCEL].sources))
def test_stop_refuses_an_item_past_cancelling(status: WorkStatus) -> None:
    error = refused(stop, record(status), "", "operator", NOW)
    assert isinstance(error, WorkConflict)
    assert error.message == f"work_id: {WORK_ID} is {status.value} and can no longer be cancelled"


# -- expire --------------------------------------------------------------------------


@pytest.mark.parametrize("status", sorted(CLAIMABLE))
def test_expire_a_waiting_item_past_its_deadline(status: WorkStatus) -> None:
    change = run(expire, record(status, deadline=NOW), NOW)
    new = stored(change)
    assert (new.item.status, new.item.finished_at) == (S.EXPIRED, NOW)
    assert change.events == (WorkEvent("expired"),)
    assert (change.drop_queue_seq, change.ack) == (7, None)


@pytest.mark.parametrize("deadline", [None, NOW + timedelta(microseconds=1)])
def test_expire_leaves_an_item_that_is_not_due_alone(deadline: datetime | None) -> None:
    assert run(expire, record(deadline=deadline), NOW) == Change()


# -- waiting reason ------------------------------------------------------------------


@pytest.mark.parametrize("status", sorted(CLAIMABLE))
def test_note_waiting_records_a_new_reason_and_announces_it(status: WorkStatus) -> None:
    change = run(note_waiting, record(status), "waiting for an agent", NOW)
    assert stored(change).item.waiting_reason == "waiting for an agent"
    assert change.events == (WorkEvent("waiting", {"reason": "waiting for an agent"}),)
    assert (change.ack, change.then, change.drop_queue_seq) == (None, None, None)


def test_note_waiting_clears_a_reason_without_an_event() -> None:
    change = run(note_waiting, record(waiting_reason="waiting for an agent"), None, NOW)
    assert stored(change).item.waiting_reason is None and change.events == ()


def test_note_waiting_leaves_the_same_reason_alone() -> None:
    assert run(note_waiting, record(waiting_reason="r"), "r", NOW) == Change()


@pytest.mark.parametrize("status", statuses_except(*WAITING))
def test_note_waiting_leaves_an_item_that_no_longer_waits_alone(status: WorkStatus) -> None:
    assert run(note_waiting, record(status), "waiting for an agent", NOW) == Change()


# -- retry and the DLQ ---------------------------------------------------------------


@pytest.mark.parametrize(("status", "dlq_seq"), [(S.FAILED, None), (S.DEAD_LETTERED, 42)])
def test_reset_queues_again_with_fresh_attempts(status: WorkStatus, dlq_seq: int | None) -> None:
    errors = [AttemptError(attempt=3, error="x", at=THEN)]
    given = record(
        status,
        attempts=3,
        error="x",
        errors=errors,
        finished_at=THEN,
        progress=Progress(percent=10, at=THEN),
        dlq_seq=dlq_seq,
        dlq_at=THEN if dlq_seq else None,
        notes=["earlier"],
    )
    change = run(reset, given, NOW)
    new = stored(change)
    item = new.item
    assert (item.status, item.attempts, item.assigned_to, item.finished_at, item.progress) == (
        S.QUEUED,
        0,
        None,
        None,
        None,
    )
    assert (item.error, item.errors) == ("x", errors)  # the history stays
    assert (new.dlq_seq, new.dlq_at, new.delivery) == (None, None, None)
    assert new.notes == ["earlier", f"retried at {NOW.isoformat()}"]
    assert change.events == (WorkEvent("retried"), WorkEvent("queued", {"retry": True}))
    assert (change.then, change.drop_dlq_seq) == (Then.ENQUEUE, dlq_seq)


@pytest.mark.parametrize("status", statuses_except(S.FAILED, S.DEAD_LETTERED))
def test_reset_refuses_work_that_did_not_fail(status: WorkStatus) -> None:
    error = refused(reset, record(status), NOW)
    assert isinstance(error, WorkConflict)
    assert error.message == (
        f"work_id: {WORK_ID} is {status.value}; only failed or dead-lettered work can be retried"
    )
    sources = WORK_LIFECYCLE[WorkMove.RETRY].sources  # the message names exactly the table's row
    assert all(s.value in error.message.split("only ")[1] for s in sources)


def test_discard_removes_the_dead_letter_and_keeps_the_record() -> None:
    given = record(S.DEAD_LETTERED, dlq_seq=42, dlq_at=THEN, notes=["earlier"])
    change = run(discard, given, 42, NOW)
    new = stored(change)
    assert (new.item.status, new.dlq_seq, new.dlq_at) == (S.DEAD_LETTERED, None, THEN)
    assert new.notes == ["earlier", f"discarded from the dead-letter queue at {NOW.isoformat()}"]
    assert change.events == (WorkEvent("discarded"),)
    assert change.drop_dlq_seq == 42


@pytest.mark.parametrize("current", [None, 43])
def test_discard_refuses_when_the_dead_letter_changed(current: int | None) -> None:
    error = refused(discard, record(S.DEAD_LETTERED, dlq_seq=current), 42, NOW)
    assert isinstance(error, WorkConflict)
    assert (error.field, error.message) == ("work_id", f"work_id: {WORK_ID} changed while being discarded")


@pytest.mark.parametrize("raw", ["s3cr3t-token-pasted-here", "0.1", "99999999"])
def test_a_bad_ack_wait_names_the_variable_and_the_rule_without_the_value(
    raw: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from shared.settings import load_loom_settings

    monkeypatch.setenv("LOOM_WORK_ACK_WAIT_S", raw)
    with pytest.raises(ValueError) as refused:
        load_loom_settings()
    assert str(refused.value) == "LOOM_WORK_ACK_WAIT_S: must be a number of seconds from 0.5 to 86400"
    assert raw not in str(refused.value)


def test_the_ack_wait_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # read at start-up into the shared settings, then passed to the work queue
    from shared.settings import DEFAULT_ACK_WAIT_S, load_loom_settings

    monkeypatch.delenv("LOOM_WORK_ACK_WAIT_S", raising=False)
    assert load_loom_settings().work_ack_wait_s == DEFAULT_ACK_WAIT_S
    monkeypatch.setenv("LOOM_WORK_ACK_WAIT_S", "2.5")
    assert load_loom_settings().work_ack_wait_s == 2.5


# -- prioritize (a bottleneck raised) ----------------------------------------------


def test_prioritize_moves_a_queued_item_to_its_new_priority_subject() -> None:
    change = run(prioritize, record(S.QUEUED, priority=5), 10, "bottleneck", NOW)
    new = stored(change)
    assert (new.item.priority, new.queue_seq) == (10, None)
    assert (change.then, change.drop_queue_seq) == (Then.ENQUEUE, 7)  # the old message superseded
    assert change.events == (WorkEvent("prioritized", {"from": 5, "to": 10, "why": "bottleneck"}),)


def test_prioritize_raises_a_blocked_item_in_place() -> None:
    change = run(prioritize, record(S.BLOCKED, priority=5), 10, "bottleneck", NOW)
    assert stored(change).item.priority == 10
    assert (change.then, change.drop_queue_seq) == (None, None)


@pytest.mark.parametrize("status", statuses_except(S.QUEUED, S.BLOCKED))
def test_prioritize_leaves_items_not_waiting_alone(status: WorkStatus) -> None:
    assert run(prioritize, record(status, priority=5), 10, "bottleneck", NOW) == Change()


def test_prioritize_never_lowers_an_item() -> None:
    assert run(prioritize, record(S.QUEUED, priority=10), 10, "bottleneck", NOW) == Change()
    assert run(prioritize, record(S.QUEUED, priority=9), 3, "bottleneck", NOW) == Change()


# -- hand back (a pause that stops running work) -------------------------------------


@pytest.mark.parametrize("status", [S.CLAIMED, S.IN_PROGRESS])
def test_hand_back_queues_the_item_again_without_counting_the_attempt(status: WorkStatus) -> None:
    given = record(status, attempts=2, progress=Progress(percent=40, at=THEN))
    change = run(hand_back, given, A, "project paused by ana", NOW)
    new = stored(change)
    assert (new.item.status, new.item.attempts, new.item.assigned_to, new.item.progress) == (
        S.QUEUED,
        1,
        None,
        None,
    )
    assert (new.delivery, new.queue_seq) == (None, 7)  # the same message, handed back
    assert (change.ack, change.ack_subject) == (Ack.AGAIN, OLD_ACK)
    assert change.events == (WorkEvent("handed-back", {"agent_id": A, "why": "project paused by ana"}),)


def test_only_the_holder_hands_back_and_only_what_it_holds() -> None:
    assert isinstance(refused(hand_back, record(S.IN_PROGRESS), B, "x", NOW), NotClaimant)
    assert isinstance(refused(hand_back, record(S.QUEUED), A, "x", NOW), WorkConflict)
