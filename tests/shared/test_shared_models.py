"""Basic validation of the shared records (shared/models.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from pydantic import ValidationError

from shared.models import (
    FINAL_WORK_STATES,
    HEARTBEATS_BEFORE_STALE,
    AgentEntry,
    AgentStatus,
    WorkStatus,
    WorkSubmission,
)
from shared.names import TOKEN_RULE
from shared.work.lifecycle import WORK_TRANSITIONS, can_transition

AGENT = "0123456789abcdef0123456789abcdef"


def _submission(**overrides: Any) -> WorkSubmission:
    fields: dict[str, Any] = {"task_id": "t-1", "description": "do it", "capability": "python"}
    fields.update(overrides)
    return WorkSubmission(**fields)


def _only_error(exc: ValidationError) -> tuple[tuple[str | int, ...], str]:
    errors = exc.errors()
    assert len(errors) == 1, errors
    return tuple(errors[0]["loc"]), errors[0]["msg"]


def test_valid_submission() -> None:
    deadline = datetime(2030, 1, 1, 12, tzinfo=UTC)
    work = _submission(priority=10, boundary="prod", deadline=deadline, required_agent_type="reviewer")
    assert (work.priority, work.boundary, work.deadline) == (10, "prod", deadline)


@pytest.mark.parametrize("capability", ["", "Python", "a.b", "a b", "*", ">", "-x", "x" * 65])
def test_bad_capability_rejected_naming_the_field(capability: str) -> None:
    with pytest.raises(ValidationError) as info:
        _submission(capability=capability)
    loc, msg = _only_error(info.value)
    assert loc == ("capability",)
    assert "capability" in msg and TOKEN_RULE in msg
    assert "capability" in str(info.value)


@pytest.mark.parametrize("priority", [0, 11, -3, "high", 2.5])
def test_bad_priority_rejected_naming_the_field(priority: object) -> None:
    with pytest.raises(ValidationError) as info:
        _submission(priority=priority)
    loc, _ = _only_error(info.value)
    assert loc == ("priority",)
    assert "priority" in str(info.value)


def test_priority_bounds_accepted() -> None:
    assert _submission(priority=1).priority == 1
    assert _submission(priority=10).priority == 10


def test_naive_deadline_rejected_naming_the_field() -> None:
    with pytest.raises(ValidationError) as info:
        _submission(deadline=datetime(2030, 1, 1, 12))
    loc, msg = _only_error(info.value)
    assert loc == ("deadline",)
    assert "deadline must include a timezone" in msg


def test_aware_deadline_in_any_zone_accepted() -> None:
    plus_two = timezone(timedelta(hours=2))
    assert _submission(deadline=datetime(2030, 1, 1, 12, tzinfo=plus_two)).deadline is not None
    parsed = WorkSubmission.model_validate_json(
        '{"task_id": "t", "description": "d", "capability": "python", "deadline": "2030-01-01T12:00:00Z"}'
    )
    assert parsed.deadline == datetime(2030, 1, 1, 12, tzinfo=UTC)


@pytest.mark.parametrize(
    ("field", "value"),
    [("boundary", "Prod!"), ("required_agent_type", "a.b"), ("preferred_agent_type", "")],
)
def test_other_token_fields_rejected_naming_the_field(field: str, value: str) -> None:
    with pytest.raises(ValidationError) as info:
        _submission(**{field: value})
    loc, _ = _only_error(info.value)
    assert loc == (field,)


def test_unknown_fields_and_assignment_validated() -> None:
    with pytest.raises(ValidationError, match="extra"):
        _submission(colour="blue")
    work = _submission()
    with pytest.raises(ValidationError, match="capability"):
        work.capability = "not valid"


# -- liveness ----------------------------------------------------------------------


def _agent(**overrides: Any) -> AgentEntry:
    fields: dict[str, Any] = {
        "agent_id": AGENT,
        "handle": "bot",
        "project_id": "alpha",
        "user_id": "0123456789abcdef",
        "heartbeat_interval_s": 10.0,
        "last_heartbeat": datetime(2030, 1, 1, 12, tzinfo=UTC),
    }
    fields.update(overrides)
    return AgentEntry(**fields)


@pytest.mark.parametrize("status", [AgentStatus.ONLINE, AgentStatus.BUSY])
def test_agent_goes_offline_after_three_heartbeat_intervals(status: AgentStatus) -> None:
    entry = _agent(status=status)
    beat = entry.last_heartbeat
    horizon = timedelta(seconds=entry.heartbeat_interval_s * HEARTBEATS_BEFORE_STALE)
    assert HEARTBEATS_BEFORE_STALE == 3
    assert entry.effective_status(beat) is status
    assert entry.effective_status(beat + horizon - timedelta(milliseconds=1)) is status
    assert entry.effective_status(beat + horizon) is status  # exactly three intervals: still within
    assert entry.effective_status(beat + horizon + timedelta(milliseconds=1)) is AgentStatus.OFFLINE
    assert entry.effective_status(beat + timedelta(hours=5)) is AgentStatus.OFFLINE
    assert entry.is_stale(beat + horizon + timedelta(seconds=1))


def test_staleness_follows_the_agents_own_interval() -> None:
    entry = _agent(heartbeat_interval_s=2.0)
    beat = entry.last_heartbeat
    assert entry.effective_status(beat + timedelta(seconds=5)) is AgentStatus.ONLINE
    assert entry.effective_status(beat + timedelta(seconds=7)) is AgentStatus.OFFLINE


def test_fresh_entry_is_online_now() -> None:
    entry = AgentEntry(agent_id=AGENT, handle="bot", project_id="alpha", user_id="0123456789abcdef")
    assert entry.effective_status() is AgentStatus.ONLINE


def test_offline_entry_stays_offline() -> None:
    entry = _agent(status=AgentStatus.OFFLINE)
    assert entry.effective_status(entry.last_heartbeat) is AgentStatus.OFFLINE


@pytest.mark.parametrize(
    ("field", "value"),
    [("agent_id", "xyz"), ("handle", "Bad Handle"), ("project_id", "Bad_Id"), ("heartbeat_interval_s", 0)],
)
def test_agent_entry_rejects_bad_fields(field: str, value: object) -> None:
    with pytest.raises(ValidationError) as info:
        _agent(**{field: value})
    loc, _ = _only_error(info.value)
    assert loc == (field,)


# -- work lifecycle ----------------------------------------------------------------

S = WorkStatus
# Every change of status shared/work/rules.py makes (WORK_LIFECYCLE; docs/architecture.md, "Work: one
# lifecycle"). Items are created queued; a lapsed claim is a failed attempt, claimed again,
# expired or dead-lettered from there.
EXPECTED_MOVES = {
    (S.SUBMITTED, S.CLAIMED),
    (S.SUBMITTED, S.CANCELLED),
    (S.SUBMITTED, S.EXPIRED),
    (S.QUEUED, S.CLAIMED),
    (S.QUEUED, S.CANCELLED),
    (S.QUEUED, S.EXPIRED),
    (S.CLAIMED, S.IN_PROGRESS),
    (S.CLAIMED, S.COMPLETED),
    (S.CLAIMED, S.FAILED),  # reported, or the claim went silent
    (S.CLAIMED, S.CANCELLED),
    (S.IN_PROGRESS, S.COMPLETED),
    (S.IN_PROGRESS, S.FAILED),
    (S.IN_PROGRESS, S.CANCELLED),
    (S.CLAIMED, S.QUEUED),  # handed back by its holder (a pause that stops running work)
    (S.IN_PROGRESS, S.QUEUED),
    (S.FAILED, S.QUEUED),  # retry while attempts < max, or by an operator
    (S.FAILED, S.CLAIMED),  # the redelivery of a silent claim
    (S.FAILED, S.EXPIRED),
    (S.FAILED, S.DEAD_LETTERED),
    (S.DEAD_LETTERED, S.QUEUED),  # retry from the DLQ
    (S.DEAD_LETTERED, S.CANCELLED),  # an escalation answered "cancel", or cancelled by hand
    (S.BLOCKED, S.QUEUED),  # its last dependency completed
    (S.BLOCKED, S.FAILED),  # a dependency will not complete: on to the DLQ
    (S.BLOCKED, S.CANCELLED),
    (S.BLOCKED, S.EXPIRED),
    (S.FAILED, S.BLOCKED),  # its dependency was retried (a crash left it failed)
    (S.DEAD_LETTERED, S.BLOCKED),  # its dependency was retried
    (S.CLAIMED, S.IN_REVIEW),  # handed in for review
    (S.IN_PROGRESS, S.IN_REVIEW),
    (S.IN_REVIEW, S.REVIEWING),  # a reviewer claimed it
    (S.IN_REVIEW, S.CANCELLED),
    (S.REVIEWING, S.COMPLETED),  # approved
    (S.REVIEWING, S.QUEUED),  # rejected, rounds left
    (S.REVIEWING, S.FAILED),  # rejected in the last round: on to the DLQ
    (S.REVIEWING, S.IN_REVIEW),  # the reviewer went silent: redelivered
    (S.REVIEWING, S.CANCELLED),
    (S.CLAIMED, S.WAITING_ON_OPERATOR),  # its agent asked the operator a question about it
    (S.IN_PROGRESS, S.WAITING_ON_OPERATOR),
    (S.WAITING_ON_OPERATOR, S.IN_PROGRESS),  # answered, or the question's deadline passed
    (S.WAITING_ON_OPERATOR, S.COMPLETED),  # its agent went on without the answer
    (S.WAITING_ON_OPERATOR, S.FAILED),
    (S.WAITING_ON_OPERATOR, S.IN_REVIEW),
    (S.WAITING_ON_OPERATOR, S.CANCELLED),
    (S.CLAIMED, S.LANDING),  # completed with code handed in: queued for landing
    (S.IN_PROGRESS, S.LANDING),
    (S.WAITING_ON_OPERATOR, S.LANDING),
    (S.REVIEWING, S.LANDING),  # approved, with code
    (S.LANDING, S.MERGING),  # a lander claimed it
    (S.LANDING, S.CANCELLED),
    (S.MERGING, S.LANDING),  # the lander went silent, gave it back, or asked the operator first
    (S.MERGING, S.COMPLETED),  # landed
    (S.MERGING, S.QUEUED),  # a conflict or a failed gate: back to the workers
    (S.MERGING, S.FAILED),  # the last allowed landing failure: on to the DLQ
    (S.LANDING, S.COMPLETED),  # forge mode: GitHub merged its pull request
    (S.LANDING, S.QUEUED),  # forge mode: its pull request was closed without merging; or vetoed
    (S.LANDING, S.FAILED),  # ... for the last allowed time: on to the DLQ
}


def test_transition_table_covers_every_status() -> None:
    assert set(WORK_TRANSITIONS) == set(WorkStatus)


@pytest.mark.parametrize(("current", "new"), [(a, b) for a in WorkStatus for b in WorkStatus])
def test_can_transition_matches_the_lifecycle(current: WorkStatus, new: WorkStatus) -> None:
    assert can_transition(current, new) is ((current, new) in EXPECTED_MOVES)


def test_final_states_have_no_way_out_except_from_the_dlq() -> None:
    for state in FINAL_WORK_STATES:
        allowed = WORK_TRANSITIONS[state]
        dlq = frozenset({S.QUEUED, S.BLOCKED, S.CANCELLED})
        expected = dlq if state is S.DEAD_LETTERED else frozenset()
        assert allowed == expected, state
    assert not any(can_transition(s, s) for s in WorkStatus)
    assert not can_transition(S.COMPLETED, S.QUEUED)
    assert not can_transition(S.QUEUED, S.COMPLETED)  # must be claimed first
    assert not can_transition(S.CLAIMED, S.EXPIRED)  # only waiting work expires
