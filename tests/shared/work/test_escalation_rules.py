"""The escalation rules of shared/work/escalation.py, without NATS: the decisions an answer
may name (and the refusals, which never repeat the answer), which dead letters escalate,
the diagnostic report, and the rules on the record (once per dead letter, decided once)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from test_work_rules import NOW, THEN, WORK_ID, delivered, record, run, stored

from shared.errors import Invalid
from shared.limits import DESCRIPTION_MAX_LENGTH
from shared.models import (
    AttemptError,
    Checkpoint,
    Diagnosis,
    Escalation,
    Priority,
    Question,
    WorkStatus,
    Workstream,
)
from shared.trace.timeline import SpanRecord
from shared.work.autonomy import AutonomySettings
from shared.work.escalation import (
    ASKER,
    CATEGORY,
    INSTRUCTIONS_HEADING,
    REPORT_AFTER,
    Resolution,
    decide,
    diagnose,
    due_for_escalation,
    escalate,
    is_escalation,
    needs_carrying_out,
    needs_escalation,
    parse_decision,
    question_text,
)
from shared.work.moves import Change, WorkEvent
from shared.work.rules import stop, take

S = WorkStatus
Q = "e" * 32


@pytest.mark.parametrize(
    ("answer", "resolution"),
    [
        ("retry", Resolution("retry")),
        ("  Retry ", Resolution("retry")),
        ("skip", Resolution("skip")),
        ("CANCEL", Resolution("cancel")),
        ("retry: use the v2 API, not v1", Resolution("instructions", "use the v2 API, not v1")),
        ("capability: deploy", Resolution("capability", "deploy")),
        ("agent type: claude-code", Resolution("agent-type", "claude-code")),
        ("agent-type: copilot", Resolution("agent-type", "copilot")),
    ],
)
def test_an_answer_names_one_decision(answer: str, resolution: Resolution) -> None:
    assert parse_decision(answer) == resolution


@pytest.mark.parametrize(
    "answer",
    ["retry later", "ok", "retry:", "capability: Not A Token!", "agent type: ../x", "escalate: x", ""],
)
def test_any_other_answer_is_refused_naming_the_field_not_the_answer(answer: str) -> None:
    with pytest.raises(Invalid) as info:
        parse_decision(answer)
    assert info.value.field == "answer"
    rejected = answer.split(":")[-1].strip()
    if rejected:
        assert rejected not in str(info.value)


def test_new_instructions_are_bounded() -> None:
    with pytest.raises(Invalid, match="at most 4000 characters"):
        parse_decision("retry: " + "x" * 4001)


def failed_for_good(**fields: Any) -> Any:
    errors = [
        AttemptError(attempt=1, agent_id="a" * 32, error="tests fail", at=THEN + timedelta(seconds=10)),
        AttemptError(attempt=2, agent_id="b" * 32, error="still failing", at=THEN + timedelta(seconds=30)),
    ]
    fields.setdefault("errors", errors)
    return record(S.DEAD_LETTERED, attempts=2, max_attempts=2, finished_at=NOW, dlq_seq=9, **fields)


def escalation(failed_at: Any = NOW, **fields: Any) -> Escalation:
    return Escalation(
        failed_at=failed_at,
        question_id=Q,
        priority=Priority.P1,
        report=Diagnosis(total_s=1.0, written_at=NOW),
        **fields,
    )


def test_only_a_dead_letter_of_its_own_not_yet_escalated_escalates() -> None:
    assert needs_escalation(failed_for_good().item)
    assert not needs_escalation(failed_for_good(failed_dependency="d" * 32).item)  # its dependency's
    assert not needs_escalation(failed_for_good(escalation=escalation()).item)
    # escalated before, retried, dead-lettered again: a new escalation
    assert needs_escalation(failed_for_good(escalation=escalation(failed_at=THEN)).item)
    for status in (S.FAILED, S.QUEUED, S.CANCELLED, S.COMPLETED):
        assert not needs_escalation(record(status, finished_at=NOW).item)


def test_a_dead_letter_is_reported_on_once_its_last_spans_are_in() -> None:
    item = failed_for_good().item
    assert not due_for_escalation(item, NOW)
    assert not due_for_escalation(item, NOW + REPORT_AFTER - timedelta(milliseconds=1))
    assert due_for_escalation(item, NOW + REPORT_AFTER)


def test_the_report_times_each_attempt_from_its_claim_and_sums_the_trace() -> None:
    def span(name: str, start_s: float, seconds: float, status: str = "ok") -> SpanRecord:
        start = int((THEN + timedelta(seconds=start_s)).timestamp() * 1e9)
        return SpanRecord(
            trace_id="1" * 32,
            span_id=f"{int(start_s * 10):016x}",
            name=name,
            service="warp",
            start_ns=start,
            end_ns=start + int(seconds * 1e9),
            status=status,
        )

    spans = [
        span("work.claim", 2, 0.5),
        span("work.fail", 10, 0.25, "error"),
        span("work.claim", 20, 0.5),
        span("work.fail", 30, 0.25),
    ]
    checkpoint = Checkpoint(sha="f" * 40, attempt=2, agent_id="b" * 32)
    workstream = Workstream(branch="loom/x", base_ref="main", base_sha="0" * 40, checkpoints=[checkpoint])
    item = failed_for_good(workstream=workstream).item
    report = diagnose(item, spans, NOW)
    assert [(a.attempt, a.error, a.seconds) for a in report.attempts] == [
        (1, "tests fail", 8.0),
        (2, "still failing", 10.0),
    ]
    assert report.total_s == (NOW - THEN).total_seconds()
    assert (report.spans, report.failed_spans) == (4, 1)
    assert report.seconds_by_operation == {"work.claim": 1.0, "work.fail": 0.5}
    assert (report.branch, report.checkpoint) == ("loom/x", "f" * 40)
    untraced = diagnose(item, [], NOW)
    assert [a.seconds for a in untraced.attempts] == [None, None] and untraced.spans == 0
    text = question_text(item, report)
    assert "failed all 2 attempts" in text and "still failing" in text and "f" * 40 in text
    assert "retry: <new instructions>" in text


def test_escalate_writes_once_per_dead_letter() -> None:
    given = failed_for_good()
    change = run(escalate, given, escalation(), NOW)
    assert stored(change).item.escalation == escalation()
    assert change.events == (WorkEvent("escalated", {"question_id": Q, "priority": "P1"}),)
    assert run(escalate, stored(change), escalation(), NOW) == Change()  # another replica was first
    assert run(escalate, given, escalation(failed_at=THEN), NOW) == Change()  # an older dead letter
    assert run(escalate, record(S.QUEUED), escalation(), NOW) == Change()


@pytest.mark.parametrize(
    ("resolution", "changed"),
    [
        (Resolution("retry"), {}),
        (Resolution("capability", "deploy"), {"capability": "deploy"}),
        (Resolution("agent-type", "copilot"), {"required_agent_type": "copilot"}),
        (Resolution("skip"), {}),
        (Resolution("cancel"), {}),
    ],
)
def test_a_decision_is_recorded_once_with_what_it_changes(
    resolution: Resolution, changed: dict[str, str]
) -> None:
    given = failed_for_good(escalation=escalation())
    change = run(decide, given, Q, resolution, "alice", NOW)
    item = stored(change).item
    assert item.escalation is not None
    assert (item.escalation.decision, item.escalation.decided_by) == (resolution.action, "alice")
    for name, value in changed.items():
        assert getattr(item, name) == value
    assert change.events[0].action == "escalation-decided"
    assert run(decide, stored(change), Q, Resolution("cancel"), "bob", NOW) == Change()  # decided


def test_new_instructions_follow_the_description_which_is_cut_to_fit() -> None:
    given = failed_for_good(escalation=escalation())
    item = stored(run(decide, given, Q, Resolution("instructions", "use v2"), "alice", NOW)).item
    assert item.description == "do it" + INSTRUCTIONS_HEADING + "use v2"
    long = failed_for_good(escalation=escalation())
    long.item.description = "d" * DESCRIPTION_MAX_LENGTH
    cut = stored(run(decide, long, Q, Resolution("instructions", "use v2"), "alice", NOW)).item
    assert len(cut.description) == DESCRIPTION_MAX_LENGTH and cut.description.endswith("use v2")


def test_a_decision_on_another_question_or_a_retried_item_changes_nothing() -> None:
    assert run(decide, failed_for_good(escalation=escalation()), "f" * 32, Resolution("retry"), "a", NOW) == (
        Change()
    )
    assert run(decide, failed_for_good(), Q, Resolution("retry"), "a", NOW) == Change()
    retried = record(S.QUEUED, escalation=escalation())
    assert run(decide, retried, Q, Resolution("retry"), "a", NOW) == Change()


def test_a_decided_retry_or_cancel_still_dead_lettered_needs_carrying_out() -> None:
    decided = {"decision": "retry", "decided_by": "a", "decided_at": NOW}
    assert needs_carrying_out(failed_for_good(escalation=escalation(**decided)).item)
    cancel = {**decided, "decision": "cancel"}
    assert needs_carrying_out(failed_for_good(escalation=escalation(**cancel)).item)
    skip = {**decided, "decision": "skip"}
    assert not needs_carrying_out(failed_for_good(escalation=escalation(**skip)).item)
    assert not needs_carrying_out(failed_for_good(escalation=escalation()).item)
    assert not needs_carrying_out(record(S.QUEUED, escalation=escalation(**decided)).item)


def test_a_dead_letter_can_be_cancelled_and_its_letter_goes() -> None:
    change = run(stop, failed_for_good(), "escalation answered: cancel", "alice", NOW)
    new = stored(change)
    assert (new.item.status, new.dlq_seq) == (S.CANCELLED, None)
    assert (change.drop_dlq_seq, change.drop_queue_seq) == (9, None)


def test_only_the_last_attempt_is_claimed_simplified() -> None:
    first = stored(run(take, record(S.QUEUED, max_attempts=3), A_CLAIMANT, delivered(), NOW)).item
    assert (first.attempts, first.simplify) == (1, False)
    last = stored(run(take, record(S.FAILED, attempts=2, max_attempts=3), A_CLAIMANT, delivered(), NOW)).item
    assert (last.attempts, last.simplify) == (3, True)
    only = stored(run(take, record(S.QUEUED, max_attempts=1), A_CLAIMANT, delivered(), NOW)).item
    assert only.simplify is False  # a single attempt is not cut short


def test_escalation_questions_are_the_fabrics_not_an_agents() -> None:
    asked = Question(project_id="p", asked_by=ASKER, question="?", category=CATEGORY, work_id=WORK_ID)
    assert is_escalation(asked)
    assert not is_escalation(asked.model_copy(update={"asked_by": "a" * 32}))  # an agent's own category
    assert not is_escalation(asked.model_copy(update={"category": "security"}))


A_CLAIMANT = "a" * 32


def test_escalations_are_asked_at_p0_or_p1_or_not_at_all() -> None:
    assert AutonomySettings().escalation is Priority.P1
    assert AutonomySettings(escalation=None).escalation is None
    with pytest.raises(ValueError, match="escalation") as info:
        AutonomySettings(escalation=Priority.P2)
    assert "must be P0 or P1" in str(info.value)
