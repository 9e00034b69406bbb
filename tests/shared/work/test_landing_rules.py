"""The landing rules of shared/work/rules.py without NATS or git: work whose workstream
handed in commits is queued for landing instead of completed (by its worker or its
reviewer's approval), a lander claims it, lands it, sends it back or gives it back, and a
silent lander's claim lapses."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from shared.models import Landing, LandingAttempt, ReviewRound, ReviewSpec, WorkItem, WorkStatus, Workstream
from shared.work.landing import (
    approves,
    await_approval,
    await_forge,
    bounce,
    decide,
    forge_settled,
    land,
    landable,
    needs_approval,
    note_pending,
    parked,
    release_landing,
)
from shared.work.rules import (
    Ack,
    Delivery,
    NotClaimant,
    Then,
    WorkConflict,
    WorkError,
    WorkRecord,
    finish,
    judge,
    lapse_lost,
    needs_message,
    resume,
    stop,
    take,
    unreserve,
)

S = WorkStatus
WORKER = "a" * 32
REVIEWER = "b" * 32
LANDER = "d" * 32
OTHER = "e" * 32
NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
HANDED = Workstream(branch="loom/t", base_ref="main", base_sha="1" * 40, head_sha="2" * 40, commits=2)
DELIVERY = Delivery(ack_subject="$JS.ACK.x", stream_seq=7, delivered=1)


def record(status: WorkStatus, *, assigned: str | None = WORKER, **fields: Any) -> WorkRecord:
    item = WorkItem(
        id="c" * 32,
        project_id="p",
        task_id="t",
        description="d",
        capability="code",
        status=status,
        assigned_to=assigned,
        attempts=1,
        **fields,
    )
    return WorkRecord(item=item, delivery=DELIVERY, queue_seq=7)


def merging(**landing: Any) -> WorkRecord:
    return record(
        S.MERGING,
        assigned=LANDER,
        workstream=HANDED,
        landing=Landing(target="main", author=WORKER, **landing),
    )


def attempt(outcome: str, **fields: Any) -> LandingAttempt:
    return LandingAttempt.model_validate({"lander": LANDER, "outcome": outcome, **fields})


def test_only_a_workstream_that_handed_in_commits_is_landed() -> None:
    assert landable(record(S.IN_PROGRESS, workstream=HANDED).item)
    assert not landable(record(S.IN_PROGRESS).item)
    assert not landable(record(S.IN_PROGRESS, workstream=HANDED.model_copy(update={"commits": 0})).item)
    assert not landable(record(S.IN_PROGRESS, workstream=HANDED.model_copy(update={"head_sha": None})).item)


def test_finishing_work_with_code_queues_it_for_landing_not_completed() -> None:
    change = finish(record(S.IN_PROGRESS, workstream=HANDED), WORKER, {"ok": 1}, NOW)
    assert change.record is not None
    item = change.record.item
    assert (item.status, item.assigned_to, item.result, item.finished_at) == (
        S.LANDING,
        None,
        {"ok": 1},
        None,
    )
    assert item.landing is not None and (item.landing.target, item.landing.author) == ("main", WORKER)
    assert (change.ack, change.then, change.record.queue_seq) == (Ack.DONE, Then.ENQUEUE, None)
    assert [e.action for e in change.events] == ["landing"]

    plain = finish(record(S.IN_PROGRESS), WORKER, None, NOW)
    assert plain.record is not None and plain.record.item.status is S.COMPLETED


def test_an_approval_of_work_with_code_queues_it_for_landing_in_the_authors_name() -> None:
    rounds = [ReviewRound(round=1, author=WORKER, reviewer=REVIEWER)]
    reviewing = record(
        S.REVIEWING,
        assigned=REVIEWER,
        workstream=HANDED,
        review=ReviewSpec(capability="review"),
        reviews=rounds,
        review_round=1,
    )
    change = judge(reviewing, REVIEWER, "approve", "good", None, NOW)
    assert change.record is not None and change.record.item.status is S.LANDING
    assert change.record.item.landing is not None and change.record.item.landing.author == WORKER
    assert [e.action for e in change.events] == ["approved", "landing"]


def test_a_lander_claims_it_and_a_silent_landers_claim_lapses_to_the_next() -> None:
    queued = record(
        S.LANDING, assigned=None, workstream=HANDED, landing=Landing(target="main", author=WORKER)
    )
    queued = queued.model_copy(update={"delivery": None})
    claimed = take(queued, LANDER, DELIVERY, NOW)
    assert claimed.record is not None
    assert (claimed.record.item.status, claimed.record.item.assigned_to) == (S.MERGING, LANDER)
    assert [e.action for e in claimed.events] == ["landing-claimed"]

    assert take(claimed.record, LANDER, DELIVERY, NOW).record is None  # its own delivery
    again = take(claimed.record, OTHER, DELIVERY.model_copy(update={"delivered": 2}), NOW)
    assert again.record is not None and again.record.item.assigned_to == OTHER
    assert [e.action for e in again.events] == ["redelivered", "landing-claimed"]


def test_a_landing_whose_message_was_lost_goes_back_to_the_landers_queue() -> None:
    change = lapse_lost(merging(pending_sha="9" * 40), 7, NOW)
    assert change.record is not None and change.then is Then.ENQUEUE
    item = change.record.item
    assert (item.status, item.assigned_to, change.record.queue_seq) == (S.LANDING, None, None)
    assert item.landing is not None and item.landing.pending_sha == "9" * 40  # found again by the next
    assert needs_message(change.record)  # a sweep publishes it should the queueing stop half-way
    assert [e.action for e in change.events] == ["redelivered"]


def test_landing_completes_it_for_its_author_and_records_the_commit() -> None:
    change = land(merging(pending_sha="9" * 40), LANDER, attempt("landed", sha="9" * 40), NOW)
    assert change.record is not None
    item = change.record.item
    assert (item.status, item.assigned_to, item.finished_at) == (S.COMPLETED, WORKER, NOW)
    assert item.landing is not None and (item.landing.landed_sha, item.landing.pending_sha) == (
        "9" * 40,
        None,
    )
    assert [e.action for e in change.events] == ["landed", "completed"] and change.ack is Ack.DONE
    with pytest.raises(WorkError, match="outcome"):
        land(merging(), LANDER, attempt("conflict"), NOW)
    with pytest.raises(NotClaimant):
        land(merging(), OTHER, attempt("landed", sha="9" * 40), NOW)


def test_a_conflict_goes_back_to_the_workers_and_the_last_allowed_to_the_dlq() -> None:
    back = bounce(merging(), LANDER, attempt("conflict", files=["a.py"]), 3, NOW)
    assert back.record is not None
    item = back.record.item
    assert (item.status, item.assigned_to, back.then) == (S.QUEUED, None, Then.ENQUEUE)
    assert item.landing is not None and item.landing.failures == 1
    assert item.error == "landing failed (1 of 3): conflicts with main in a.py"
    assert item.errors[-1].agent_id == WORKER
    assert [e.action for e in back.events] == ["landing-failed", "queued"]
    assert item.reserved_for == WORKER  # its author first

    last = bounce(merging(failures=2), LANDER, attempt("gate-failed", detail="boom"), 3, NOW)
    assert last.record is not None and last.record.item.status is S.FAILED and last.then is Then.DEAD_LETTER
    assert last.record.item.error == "landing failed (3 of 3): fails the gate on main"
    with pytest.raises(WorkError, match="outcome"):
        bounce(merging(), LANDER, attempt("landed", sha="1" * 40), 3, NOW)


def test_a_lander_gives_an_item_back_untouched_without_counting_a_failure() -> None:
    change = release_landing(merging(failures=1), LANDER, "the repository cannot be reached", NOW)
    assert change.record is not None
    item = change.record.item
    assert (item.status, item.assigned_to, change.ack) == (S.LANDING, None, Ack.AGAIN)
    assert item.landing is not None and item.landing.failures == 1
    assert item.landing.attempts[-1].outcome == "error"
    with pytest.raises(WorkError, match="error"):
        release_landing(merging(), LANDER, " ", NOW)
    later = release_landing(merging(), LANDER, "conflicts with one ahead of it", NOW, deferred=True)
    assert later.record is not None and later.record.item.landing is not None
    assert (later.record.item.landing.attempts[-1].outcome, later.record.item.landing.failures) == (
        "deferred",
        0,
    )


def test_only_the_holding_lander_notes_the_commit_it_pushes() -> None:
    change = note_pending(merging(), LANDER, "8" * 40, NOW)
    assert change.record is not None and change.record.item.landing is not None
    assert change.record.item.landing.pending_sha == "8" * 40
    with pytest.raises(NotClaimant):
        note_pending(merging(), OTHER, "8" * 40, NOW)


def test_waiting_for_landing_can_be_cancelled_but_a_landing_under_way_cannot() -> None:
    queued = record(S.LANDING, assigned=None, workstream=HANDED, landing=Landing(target="main"))
    assert stop(queued, "no", "operator", NOW).record is not None
    with pytest.raises(WorkConflict, match="can no longer be cancelled"):
        stop(merging(), "no", "operator", NOW)


def test_work_sent_back_goes_to_its_author_and_to_anyone_once_the_author_is_gone() -> None:
    reserved = record(S.QUEUED, assigned=None, reserved_for=WORKER)
    claimed = take(reserved, WORKER, DELIVERY, NOW)
    assert claimed.record is not None
    assert (claimed.record.item.assigned_to, claimed.record.item.reserved_for) == (WORKER, None)

    freed = unreserve(reserved, "its author is offline", NOW)
    assert freed.record is not None and freed.record.item.reserved_for is None
    assert (freed.then, freed.drop_queue_seq, freed.record.queue_seq) == (Then.ENQUEUE, 7, None)
    assert [(e.action, e.data["agent_id"]) for e in freed.events] == [("unreserved", WORKER)]
    assert unreserve(record(S.QUEUED, assigned=None), "x", NOW).record is None  # not reserved
    assert unreserve(record(S.IN_PROGRESS, reserved_for=WORKER), "x", NOW).record is None  # claimed


def test_forge_mode_parks_the_item_on_its_pull_request_until_github_settles_it() -> None:
    waiting = await_forge(merging(), LANDER, 7, "https://github.example/acme/app/pull/7", NOW)
    assert waiting.record is not None
    item = waiting.record.item
    assert (item.status, item.assigned_to, waiting.ack, waiting.record.queue_seq) == (
        S.LANDING,
        None,
        Ack.DONE,
        None,
    )
    assert item.landing is not None and item.landing.pull_request == 7 and parked(item)
    assert not needs_message(waiting.record)  # no sweep puts it back on the landers' queue
    assert [e.action for e in waiting.events] == ["pull-request"]

    merged = forge_settled(waiting.record, 7, "f" * 40, 3, NOW)
    assert merged.record is not None and merged.record.item.status is S.COMPLETED
    assert merged.record.item.landing is not None and merged.record.item.landing.landed_sha == "f" * 40
    assert merged.record.item.assigned_to == WORKER and [e.action for e in merged.events] == [
        "landed",
        "completed",
    ]
    assert forge_settled(waiting.record, 8, "f" * 40, 3, NOW).record is None  # another pull request

    closed = forge_settled(waiting.record, 7, None, 3, NOW)
    assert closed.record is not None and closed.then is Then.ENQUEUE
    back = closed.record.item
    assert (back.status, back.reserved_for) == (S.QUEUED, WORKER)
    assert back.landing is not None and (back.landing.failures, back.landing.pull_request) == (1, None)
    assert back.error == "landing failed (1 of 3): pull request #7 was closed without merging"
    again = await_forge(merging(failures=2), LANDER, 7, "u", NOW).record
    assert again is not None
    last = forge_settled(again, 7, None, 3, NOW)
    assert last.record is not None and last.record.item.status is S.FAILED and last.then is Then.DEAD_LETTER


def test_the_veto_is_the_items_own_or_else_the_projects_until_an_operator_approves() -> None:
    item = merging().item
    assert needs_approval(item, True) and not needs_approval(item, False)
    assert needs_approval(item.model_copy(update={"veto": True}), False)
    assert not needs_approval(item.model_copy(update={"veto": False}), True)
    assert item.landing is not None
    approved = item.landing.model_copy(update={"approved_by": "alice"})
    assert not needs_approval(item.model_copy(update={"landing": approved}), True)
    assert [approves(a) for a in ("land", " Yes ", "APPROVE", "approved", "no", "lnad", "land it")] == [
        True,
        True,
        True,
        True,
        False,
        False,
        False,
    ]


def test_an_item_asked_about_waits_off_the_queue_and_the_answer_decides_it() -> None:
    asked = await_approval(merging(), LANDER, "q" * 32, NOW)
    assert asked.record is not None and (asked.ack, asked.then) == (Ack.DONE, None)
    waiting = asked.record
    item = waiting.item
    assert (item.status, item.assigned_to, item.question_id, waiting.queue_seq) == (
        S.LANDING,
        None,
        "q" * 32,
        None,
    )
    assert parked(item) and not needs_message(waiting)  # no sweep re-queues it meanwhile
    with pytest.raises(NotClaimant):
        await_approval(merging(), OTHER, "q" * 32, NOW)  # only the holding lander asks

    assert resume(waiting, "x" * 32, True, NOW, "land", "alice").record is None  # another question
    yes = resume(waiting, "q" * 32, True, NOW, "land", "alice")
    assert yes.record is not None and yes.then is Then.ENQUEUE
    landing = yes.record.item.landing
    assert (yes.record.item.status, yes.record.item.question_id) == (S.LANDING, None)
    assert landing is not None and (landing.approved_by, landing.approved_at) == ("alice", NOW)
    assert [e.action for e in yes.events] == ["landing-approved"]
    assert yes.record.queue_seq is None and not parked(yes.record.item)

    no = resume(waiting, "q" * 32, True, NOW, "not this week", "bob")
    assert no.record is not None and no.then is Then.ENQUEUE
    back = no.record.item
    assert (back.status, back.reserved_for, back.question_id) == (S.QUEUED, WORKER, None)
    assert back.landing is not None and back.landing.failures == 0 and back.landing.approved_by is None
    assert (back.landing.attempts[-1].outcome, back.landing.attempts[-1].detail) == (
        "vetoed",
        "not this week",
    )
    assert back.error == "landing vetoed by bob: not this week"
    assert [e.action for e in no.events] == ["landing-vetoed", "queued"]

    unanswered = resume(waiting, "q" * 32, False, NOW, "the question is gone")
    assert unanswered.record is not None and unanswered.then is Then.ENQUEUE  # asked again
    assert unanswered.record.item.status is S.LANDING and unanswered.record.item.question_id is None
    assert unanswered.record.item.landing is not None
    assert unanswered.record.item.landing.approved_by is None

    gone = stop(waiting, "", "operator", NOW)  # cancelled while asked: the answer then does nothing
    assert gone.record is not None
    assert decide(gone.record, "q" * 32, "land", "alice", NOW).record is None
