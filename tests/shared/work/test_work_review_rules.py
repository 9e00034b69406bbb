"""The review rules of shared/work/rules.py without NATS: hand-in, a reviewer's claim (never the
author's), a reviewer gone silent, the verdicts, and the checks of a verdict."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from shared.errors import validation_problems
from shared.models import ReviewRound, ReviewSpec, WorkItem, WorkStatus, WorkSubmission
from shared.work.rules import (
    HOLDING,
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
    finish,
    hand_in,
    judge,
    lapse_lost,
    report,
    reset,
    stop,
    take,
)

S = WorkStatus
WORKER = "a" * 32
REVIEWER = "b" * 32
OTHER = "d" * 32
WORK_ID = "c" * 32
THEN = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
NOW = THEN + timedelta(minutes=5)
OLD = Delivery(ack_subject="$JS.ACK.old", stream_seq=7, delivered=1)


def record(status: WorkStatus, *, rounds: int = 2, round_: int = 1, **fields: Any) -> WorkRecord:
    reviews = [
        ReviewRound(round=n, author=WORKER, result={"try": n}, handed_in_at=THEN)
        for n in range(1, round_ + 1)
    ]
    if status in (S.CLAIMED, S.IN_PROGRESS):
        fields.setdefault("assigned_to", WORKER)
        reviews = reviews[:-1]
        round_ -= 1
    if reviews:
        fields.setdefault("result", reviews[-1].result)
    if status is S.REVIEWING:
        fields.setdefault("assigned_to", REVIEWER)
        reviews[-1] = reviews[-1].model_copy(update={"reviewer": REVIEWER})
    item = WorkItem(
        id=WORK_ID,
        task_id="t1",
        description="do it",
        capability="code",
        project_id="demo",
        status=status,
        created_at=THEN,
        updated_at=THEN,
        attempts=max(1, round_),
        review=ReviewSpec(capability="review", rounds=rounds),
        reviews=reviews,
        review_round=round_,
        **fields,
    )
    held = status in (S.CLAIMED, S.IN_PROGRESS, S.REVIEWING)
    return WorkRecord(item=item, queue_seq=7, enqueues=1, delivery=OLD if held else None)


def run(rule: Callable[..., Change], given: WorkRecord, *args: Any) -> Change:
    before = given.model_dump(mode="json")
    try:
        return rule(given, *args)
    finally:
        assert given.model_dump(mode="json") == before, "the rule changed its input record"


def stored(change: Change) -> WorkRecord:
    assert change.record is not None, "the rule left the record alone"
    assert change.record.item.updated_at == NOW
    return change.record


def delivered(times: int = 1, seq: int = 7) -> Delivery:
    return Delivery(ack_subject="$JS.ACK.new", stream_seq=seq, delivered=times)


# -- the submission ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("review", "extra", "field", "message"),
    [
        ({"capability": "Review"}, {}, "review.capability", "must be lowercase letters"),
        ({"capability": "review", "rounds": 0}, {}, "review.rounds", "greater than or equal to 1"),
        ({"capability": "review", "rounds": 11}, {}, "review.rounds", "less than or equal to 10"),
        (
            {"capability": "review", "rounds": 4},
            {"max_attempts": 3},
            "review",
            "rounds must not exceed max_attempts",
        ),
        ({"capability": "review", "colour": 1}, {}, "review.colour", "unknown field"),
    ],
)
def test_review_is_validated_naming_the_field(
    review: dict[str, Any], extra: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(ValidationError) as info:
        WorkSubmission.model_validate(
            {"task_id": "t", "description": "d", "capability": "code", "review": review, **extra}
        )
    problems = validation_problems(info.value.errors())
    assert problems[0].field == field and message in problems[0].message
    assert "Review" not in problems[0].message


def test_the_new_status_groups() -> None:
    assert S.IN_REVIEW in WAITING and S.REVIEWING not in WAITING
    assert {S.CLAIMED, S.IN_PROGRESS, S.REVIEWING, S.WAITING_ON_OPERATOR, S.MERGING} == HOLDING


# -- hand-in ------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [S.CLAIMED, S.IN_PROGRESS])
def test_finishing_work_that_asks_for_review_hands_it_in(status: WorkStatus) -> None:
    given = record(status, round_=1)
    change = run(finish, given, WORKER, {"pr": 1}, NOW)
    new = stored(change)
    item = new.item
    assert (item.status, item.assigned_to, item.result, item.review_round) == (
        S.IN_REVIEW,
        None,
        {"pr": 1},
        1,
    )
    assert item.reviews == [ReviewRound(round=1, author=WORKER, result={"pr": 1}, handed_in_at=NOW)]
    assert (new.delivery, new.queue_seq, item.finished_at) == (None, None, None)
    assert change.events == (WorkEvent("in-review", {"agent_id": WORKER, "round": 1}),)
    assert (change.ack, change.ack_subject, change.then) == (Ack.DONE, OLD.ack_subject, Then.ENQUEUE)
    assert item.author == WORKER


def test_hand_in_keeps_earlier_rounds_and_refuses_another_agent() -> None:
    given = record(S.IN_PROGRESS, round_=2)
    assert len(given.item.reviews) == 1
    new = stored(run(hand_in, given, WORKER, "second try", NOW))
    assert [r.round for r in new.item.reviews] == [1, 2] and new.item.review_round == 2
    with pytest.raises(NotClaimant):
        run(hand_in, given, OTHER, None, NOW)


# -- a reviewer's claim -------------------------------------------------------------------


def test_a_reviewer_claims_a_review_task() -> None:
    change = run(take, record(S.IN_REVIEW), REVIEWER, delivered(), NOW)
    new = stored(change)
    assert (new.item.status, new.item.assigned_to, new.delivery) == (S.REVIEWING, REVIEWER, delivered())
    assert new.item.reviews[-1].reviewer == REVIEWER
    assert new.item.attempts == 1  # a review is not a worker's attempt
    assert change.events == (WorkEvent("review-claimed", {"agent_id": REVIEWER, "round": 1}),)


def test_the_author_never_gets_its_own_review_the_message_goes_back() -> None:
    assert run(take, record(S.IN_REVIEW), WORKER, delivered(), NOW) == Change(
        ack=Ack.AGAIN, ack_subject="$JS.ACK.new"
    )


@pytest.mark.parametrize("times", [0, 1])
def test_the_reviewers_own_delivery_leaves_the_review_alone(times: int) -> None:
    assert run(take, record(S.REVIEWING), OTHER, delivered(times), NOW) == Change()


def test_a_silent_reviewer_lapses_and_the_next_one_takes_over() -> None:
    change = run(take, record(S.REVIEWING), OTHER, delivered(2), NOW)
    new = stored(change)
    assert (new.item.status, new.item.assigned_to, new.item.reviews[-1].reviewer) == (
        S.REVIEWING,
        OTHER,
        OTHER,
    )
    assert [e.action for e in change.events] == ["redelivered", "review-claimed"]
    assert change.events[0].data == {"previous_agent": REVIEWER, "review_round": 1}
    assert new.item.errors == []  # nothing counted against the work


def test_a_review_whose_message_was_lost_goes_back_in_review_for_a_new_message() -> None:
    change = run(lapse_lost, record(S.REVIEWING), 7, NOW)
    new = stored(change)
    assert (new.item.status, new.item.assigned_to, new.delivery, new.queue_seq) == (
        S.IN_REVIEW,
        None,
        None,
        None,
    )
    assert new.item.review_round == 1 and new.item.result == {"try": 1}  # nothing else lost
    assert [e.action for e in change.events] == ["redelivered"] and change.then is Then.ENQUEUE


def test_a_lapsed_review_redelivered_to_the_author_goes_back_in_review() -> None:
    change = run(take, record(S.REVIEWING), WORKER, delivered(2), NOW)
    new = stored(change)
    assert (new.item.status, new.item.assigned_to, new.delivery) == (S.IN_REVIEW, None, None)
    assert (change.ack, change.ack_subject) == (Ack.AGAIN, "$JS.ACK.new")


def test_a_reviewer_reports_progress_and_keeps_its_review() -> None:
    change = run(report, record(S.REVIEWING), REVIEWER, 30, "reading", NOW)
    assert stored(change).item.status is S.REVIEWING
    assert (change.ack, change.ack_subject) == (Ack.WORKING, OLD.ack_subject)


# -- verdicts -----------------------------------------------------------------------------


def test_approve_completes_with_the_verdict_on_record() -> None:
    change = run(judge, record(S.REVIEWING), REVIEWER, "approve", "fine", 9.5, NOW)
    new = stored(change)
    item = new.item
    assert (item.status, item.assigned_to, item.finished_at, item.result) == (
        S.COMPLETED,
        WORKER,
        NOW,
        {"try": 1},
    )
    last = item.reviews[-1]
    assert (last.reviewer, last.verdict, last.feedback, last.score, last.reviewed_at) == (
        REVIEWER,
        "approve",
        "fine",
        9.5,
        NOW,
    )
    assert [e.action for e in change.events] == ["approved", "completed"]
    assert (change.ack, change.ack_subject, change.then) == (Ack.DONE, OLD.ack_subject, None)


def test_reject_with_rounds_left_goes_back_to_the_workers_with_the_feedback() -> None:
    change = run(judge, record(S.REVIEWING, rounds=2, round_=1), REVIEWER, "reject", "add tests", None, NOW)
    new = stored(change)
    item = new.item
    assert (item.status, item.assigned_to, new.queue_seq, new.delivery) == (S.QUEUED, None, None, None)
    assert (item.reviews[-1].verdict, item.reviews[-1].feedback) == ("reject", "add tests")
    assert change.events == (
        WorkEvent(
            "rejected",
            {"agent_id": REVIEWER, "round": 1, "score": None, "feedback": "add tests", "final": False},
        ),
        WorkEvent("queued", {"retry": True}),
    )
    assert (change.ack, change.then) == (Ack.DONE, Then.ENQUEUE)


def test_reject_in_the_last_round_fails_for_good_with_the_feedback() -> None:
    change = run(judge, record(S.REVIEWING, rounds=2, round_=2), REVIEWER, "reject", "still wrong", 2, NOW)
    item = stored(change).item
    assert item.status is S.FAILED
    assert item.error == "rejected in review round 2 of 2: still wrong"
    assert [e.error for e in item.errors] == [item.error] and item.errors[0].agent_id == WORKER
    assert change.then is Then.DEAD_LETTER and change.events[0].data["final"] is True


@pytest.mark.parametrize(
    ("verdict", "feedback", "score", "field", "message"),
    [
        ("maybe", "", None, "verdict", "verdict: must be approve, conditional or reject"),
        ("reject", "  ", None, "feedback", "feedback: must say what to change when rejecting"),
        ("approve", "x" * 8001, None, "feedback", "feedback: must be at most 8000 characters"),
        ("approve", "", 101, "score", "score: must be between 0 and 100"),
        ("approve", "", -1, "score", "score: must be between 0 and 100"),
    ],
)
def test_a_verdict_is_checked(
    verdict: str, feedback: str, score: float | None, field: str, message: str
) -> None:
    with pytest.raises(WorkError) as info:
        run(judge, record(S.REVIEWING), REVIEWER, verdict, feedback, score, NOW)
    assert (info.value.field, info.value.message) == (field, message)


def test_only_the_reviewer_holding_it_gives_a_verdict() -> None:
    with pytest.raises(NotClaimant):
        run(judge, record(S.REVIEWING), WORKER, "approve", "", None, NOW)
    with pytest.raises(WorkConflict) as waiting:
        run(judge, record(S.IN_REVIEW), REVIEWER, "approve", "", None, NOW)
    assert waiting.value.message == f"work_id: cannot review {WORK_ID}: it is in-review, not claimed"


def test_cancel_of_a_review_terminates_the_reviewers_claim_or_drops_the_task() -> None:
    held = run(stop, record(S.REVIEWING), "", "operator", NOW)
    assert (held.ack, held.notify) == (Ack.STOP, REVIEWER)
    waiting = run(stop, record(S.IN_REVIEW), "", "operator", NOW)
    assert (waiting.notify, waiting.drop_queue_seq) == (None, 7)


def test_a_retry_starts_the_review_rounds_over() -> None:
    given = record(S.FAILED, rounds=2, round_=2)
    new = stored(run(reset, given, NOW))
    assert (new.item.review_round, len(new.item.reviews)) == (0, 2)  # the history stays


# -- a conditional pass -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("verdict", "follow_ups", "field", "says"),
    [
        ("conditional", [], "follow_ups", "at least one follow-up"),
        ("approve", ["add docs"], "follow_ups", "only a conditional pass"),
        ("conditional", ["ok", "  "], "follow_ups[1]", "1 to 32000 characters"),
        ("conditional", ["x" * 32_001], "follow_ups[0]", "1 to 32000 characters"),
        ("conditional", [f"f{n}" for n in range(11)], "follow_ups", "at most 10"),
        ("maybe", [], "verdict", "approve, conditional or reject"),
    ],
)
def test_a_conditional_pass_is_checked_naming_the_field(
    verdict: str, follow_ups: list[str], field: str, says: str
) -> None:
    from shared.work.rules import WorkError, check_verdict

    with pytest.raises(WorkError) as info:
        check_verdict(verdict, "", None, follow_ups)
    assert info.value.field == field and says in info.value.message
    assert "x" * 50 not in info.value.message  # never the rejected text


def test_a_follow_up_is_work_of_the_same_kind_linked_to_its_item() -> None:
    from shared.work.rules import follow_up

    item = WorkItem.model_validate(
        {
            "id": "1" * 32,
            "project_id": "p",
            "task_id": "t" * 200,
            "description": "d",
            "capability": "code",
            "boundary": "corporate",
            "priority": 8,
            "max_attempts": 6,
            "review": {"capability": "review", "rounds": 5},
            "isolated": False,
        }
    )
    made = follow_up(item, "  add the missing docs ", 2, "fine, but undocumented")
    assert made.task_id.endswith("-follow-up-2") and len(made.task_id) <= 200
    assert (made.description, made.capability, made.boundary, made.priority) == (
        "add the missing docs",
        "code",
        "corporate",
        8,
    )
    assert made.review == item.review and made.max_attempts == 6 and made.isolated is False
    assert made.context == {"follow_up_of": item.id, "review_feedback": "fine, but undocumented"}
