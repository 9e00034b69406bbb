"""What notifies whom (weft/notify/rules.py), without NATS: the notice each event makes,
the floors and kinds a sink takes, and the signed webhook's payload."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from shared.models import Event, Landing, Priority, Question, QuestionMode, WorkItem
from shared.work.escalation import ASKER as ESCALATION_ASKER
from shared.work.escalation import CATEGORY as ESCALATION
from weft.notify.rules import RATE_WINDOW_S, Sink, SinkSettings, admit, notice_of, wants
from weft.spinup.breaker import recent_failures, tripped_reason, trips

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
A = "a" * 32
PUBLIC = "https://loom.example.com/"


def event(kind: str, action: str, subject_id: str, **data: Any) -> dict[str, Any]:
    return Event(
        kind=kind, action=action, project_id="demo", subject_id=subject_id, at=NOW, data=data
    ).model_dump(  # type: ignore[arg-type]
        mode="json"
    )


def asked(**fields: Any) -> dict[str, Any]:
    q = Question(project_id="demo", asked_by=A, asked_by_handle="bot", question="which db?", **fields)
    return event("question", "asked", q.id, question=q.model_dump(mode="json"))


def item(**fields: Any) -> WorkItem:
    return WorkItem(task_id="t1", description="migrate", capability="code", project_id="demo", **fields)


def test_questions_notify_by_mode_and_reminders_are_their_own_kind() -> None:
    sync = notice_of(asked(priority=Priority.P0, category="security", choices=["pg", "lite"]), PUBLIC)
    assert sync is not None and (sync.kind, sync.priority, sync.title) == (
        "question",
        Priority.P0,
        "[P0] bot asks (security)",
    )
    assert "Choices: pg | lite" in sync.body and "its work waits" in sync.body
    assert sync.link == "https://loom.example.com/#questions"
    assert notice_of(asked(priority=Priority.P3, mode=QuestionMode.LOG), PUBLIC) is None  # only recorded
    bypass = notice_of(asked(priority=Priority.P2, mode=QuestionMode.BYPASS, default_answer="lite"), None)
    assert bypass is not None and bypass.link is None and "Agent's default: lite" in bypass.body
    q = Question(project_id="demo", asked_by=A, question="still there?", reminded_at=NOW)
    reminder = notice_of(event("question", "reminded", q.id, question=q.model_dump(mode="json")), PUBLIC)
    assert reminder is not None and reminder.kind == "reminder" and reminder.title.startswith("Reminder: ")
    assert reminder.key != notice_of(asked(), PUBLIC).key  # type: ignore[union-attr]


def test_an_escalation_says_what_failed_and_that_a_person_decides() -> None:
    q = Question(
        project_id="demo",
        asked_by=ESCALATION_ASKER,
        asked_by_handle="escalation",
        question="Work ... failed all 3 attempts",
        category=ESCALATION,
        work_id="c" * 32,
        priority=Priority.P1,
        mode=QuestionMode.ASYNC,
    )
    notice = notice_of(event("question", "asked", q.id, question=q.model_dump(mode="json")), PUBLIC)
    assert notice is not None and notice.kind == "question"
    assert notice.title == "[P1] Escalation: work cccccccc failed every attempt; decide"
    assert "failed all 3 attempts" in notice.body


def test_a_silent_holder_is_a_p2_notice_keyed_by_its_stretch_of_silence() -> None:
    held = item(status="in-progress", assigned_to=A)
    since = "2030-01-01T11:00:00+00:00"
    data = {"item": held.model_dump(mode="json"), "since": since, "role": "work"}
    notice = notice_of(event("work", "silent", held.id, **data), PUBLIC)
    assert notice is not None and (notice.kind, notice.priority) == ("silence", Priority.P2)
    assert notice.title == "[P2] t1: its worker has been silent since 2030-01-01T11:00:00"
    assert notice.key == f"silence.{held.id}.{since}" and notice.link == f"{PUBLIC}#work/{held.id}"
    review = notice_of(event("work", "silent", held.id, **{**data, "role": "review"}), None)
    assert review is not None and "its reviewer" in review.title


def test_a_budget_reached_is_a_p1_notice_once_a_day_per_scope() -> None:
    until = "2030-01-02T00:00:00+00:00"
    target = {
        "scope": "target",
        "target_id": "t" * 32,
        "target_name": "laptop",
        "reason": "cost 5 of 5",
        "until": until,
    }
    notice = notice_of(event("project", "budget-held", "t" * 32, **target), PUBLIC)
    assert notice is not None and (notice.kind, notice.priority) == ("budget", Priority.P1)
    assert notice.title == "[P1] spin-up target laptop's daily budget is reached"
    assert f"on its agents wait until {until}" in notice.body and notice.subject_id == "t" * 32
    project = {"scope": "project", "target_id": None, "reason": "cost 5 of 5", "until": until}
    whole = notice_of(event("project", "budget-held", "demo", **project), None)
    assert whole is not None and whole.title == "[P1] the project's daily budget is reached"
    assert whole.key != notice.key and whole.subject_id == "demo"


def test_work_and_target_events_make_their_notices_and_others_none() -> None:
    dead = item(attempts=3, error="boom")
    notice = notice_of(event("work", "dead-lettered", dead.id, item=dead.model_dump(mode="json")), PUBLIC)
    assert notice is not None and (notice.kind, notice.priority) == ("dead-letter", Priority.P1)
    assert "Last error: boom" in notice.body and notice.link == f"https://loom.example.com/#work/{dead.id}"
    bounced = item(
        error="landing failed (1 of 3): conflicts with main",
        landing=Landing(target="main", author=A, failures=1),
    )
    again = notice_of(event("work", "landing-failed", bounced.id, item=bounced.model_dump(mode="json")), None)
    final = notice_of(
        event("work", "landing-failed", bounced.id, item=bounced.model_dump(mode="json"), final=True), None
    )
    assert again is not None and again.priority is Priority.P2 and "Its author tries again" in again.body
    assert final is not None and final.priority is Priority.P1 and "dead-letter queue" in final.body
    target = {"name": "laptop", "tripped_reason": "3 starts failed", "tripped_at": NOW.isoformat()}
    tripped = notice_of(event("target", "tripped", "t" * 32, target=target), PUBLIC)
    assert tripped is not None and tripped.title == "[P1] spin-up target laptop was disabled"
    assert "shuttle targets enable laptop" in tripped.body
    assert notice_of(event("work", "completed", dead.id, item=dead.model_dump(mode="json")), PUBLIC) is None
    assert notice_of(event("question", "asked", "x", question={"nonsense": 1}), PUBLIC) is None
    assert notice_of({"kind": "work"}, PUBLIC) is None


def test_a_sink_takes_its_kinds_at_or_above_its_floor() -> None:
    p1 = notice_of(asked(priority=Priority.P1, mode=QuestionMode.ASYNC), None)
    assert p1 is not None
    sink = Sink(name="ops", url="json://h/x")  # type: ignore[arg-type]
    assert wants(sink, p1)
    assert not wants(sink.model_copy(update={"min_priority": Priority.P0}), p1)
    assert not wants(sink.model_copy(update={"events": ["dead-letter"]}), p1)
    assert not wants(sink.model_copy(update={"enabled": False}), p1)
    assert wants(sink.model_copy(update={"min_priority": Priority.P3}), p1)
    payload = p1.payload(NOW)
    assert set(payload) == {"kind", "priority", "title", "body", "link", "project_id", "subject_id", "at"}


def test_sink_settings_name_the_field_and_keep_no_secret_in_the_message() -> None:
    with pytest.raises(ValidationError) as bad:
        SinkSettings(url="json://h/x", events=["question", "question"])  # type: ignore[arg-type]
    assert "must not repeat a kind" in str(bad.value)
    with pytest.raises(ValidationError) as short:
        SinkSettings(kind="webhook", url="https://h/hook", secret="tooshort-s3cret")  # type: ignore[arg-type]
    assert "16 characters" in str(short.value) and "tooshort-s3cret" not in str(short.value)


def test_the_breaker_counts_recent_failures_of_its_target() -> None:
    from shared.models import SpinupOperation, SpinupState
    from weft.spinup.store import SpinupRecord

    def record(target: str, state: SpinupState, minutes_ago: float) -> SpinupRecord:
        op = SpinupOperation(project_id="demo", target_id=target, target_name=target, agent_id=A, state=state)
        op.updated_at = datetime.fromtimestamp(NOW.timestamp() - minutes_ago * 60, UTC)
        return SpinupRecord(op=op)

    records = [
        record("t", SpinupState.FAILED, 1),
        record("t", SpinupState.TIMED_OUT, 5),
        record("t", SpinupState.FAILED, 11),  # outside the window
        record("t", SpinupState.STOPPED, 2),  # not a failure
        record("other", SpinupState.FAILED, 1),
    ]
    assert recent_failures(records, "t", NOW, 600) == 2
    assert not trips(2, 3) and trips(3, 3) and not trips(10, 0)
    assert (
        tripped_reason(3, 600)
        == "3 starts failed or timed out within 10 minutes; disabled so routing stops trying it"
    )
    assert tripped_reason(2, 30).startswith("2 starts failed or timed out within 30 s")


def test_a_bottleneck_is_a_p2_notice_naming_what_waits() -> None:
    held = item(status="in-progress", assigned_to=A)  # type: ignore[arg-type]
    notice = notice_of(
        event("work", "bottleneck", held.id, item=held.model_dump(mode="json"), held_up=4), PUBLIC
    )
    assert notice is not None and (notice.kind, notice.priority) == ("bottleneck", Priority.P2)
    assert notice.title == "[P2] t1 holds up 4 items" and "4 open items wait on it" in notice.body
    assert notice_of(event("work", "bottleneck", held.id, item=held.model_dump(mode="json")), PUBLIC) is None


def test_the_rate_limit_is_a_sliding_minute_not_the_clocks() -> None:
    turn = int(datetime(2030, 1, 1, 12, 1, tzinfo=UTC).timestamp())  # a minute's turn
    sends: dict[int, int] = {}
    taken = 0
    for now_s in (turn - 1, turn - 1, turn, turn):  # a burst across the turn
        after = admit(sends, now_s, per_minute=2)
        if after is not None:
            sends, taken = after, taken + 1
    assert taken == 2 and sends == {turn - 1: 2}
    assert admit(sends, turn - 1 + RATE_WINDOW_S - 1, per_minute=2) is None  # still within the minute
    later = admit(sends, turn - 1 + RATE_WINDOW_S, per_minute=2)
    assert later == {turn - 1 + RATE_WINDOW_S: 1}  # the burst left the window and was dropped


def test_the_rate_limit_counts_every_second_of_the_window() -> None:
    start = 1_000_000
    sends: dict[int, int] = {}
    for offset in range(0, 60, 20):
        step = admit(sends, start + offset, per_minute=3)
        assert step is not None
        sends = step
    assert admit(sends, start + 59, per_minute=3) is None
    assert admit(sends, start + 60, per_minute=3) == {start + 20: 1, start + 40: 1, start + 60: 1}
