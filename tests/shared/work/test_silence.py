"""Silence by role (shared/work/silence.py), without NATS: when each role's silence begins,
which items are silent for longer than their role allows, and that a role can be left
unwatched."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from shared.models import Progress, WorkItem, WorkStatus
from shared.work.silence import quiet_since, silent

THEN = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
S = WorkStatus


def item(status: WorkStatus, **fields: object) -> WorkItem:
    return WorkItem(
        task_id="t",
        description="d",
        capability="code",
        project_id="demo",
        status=status,
        assigned_to="a" * 32,
        claimed_at=THEN,
        updated_at=THEN + timedelta(minutes=1),
        **fields,  # type: ignore[arg-type]
    )


def test_silence_begins_at_the_last_word_of_the_holder() -> None:
    assert quiet_since(item(S.CLAIMED)) == THEN
    said = Progress(percent=10, note="n", at=THEN + timedelta(minutes=5))
    assert quiet_since(item(S.IN_PROGRESS, progress=said)) == said.at
    assert quiet_since(item(S.REVIEWING)) == THEN + timedelta(minutes=1)  # when the review was taken
    assert quiet_since(item(S.REVIEWING, progress=said)) == said.at
    for status in (S.QUEUED, S.WAITING_ON_OPERATOR, S.COMPLETED, S.IN_REVIEW):
        assert quiet_since(item(status)) is None  # nobody holds it as worker or reviewer


def test_items_silent_longer_than_their_role_allows_the_longest_first() -> None:
    worker = item(S.CLAIMED)
    recent = item(S.IN_PROGRESS, progress=Progress(percent=1, at=THEN + timedelta(minutes=29)))
    reviewer = item(S.REVIEWING)
    now = THEN + timedelta(minutes=30)
    found = silent([recent, reviewer, worker], now, work_after_s=1800, review_after_s=600)
    assert [(i.id, since) for i, since in found] == [
        (worker.id, THEN),
        (reviewer.id, THEN + timedelta(minutes=1)),
    ]
    assert silent([worker], now - timedelta(seconds=1), 1800, 600) == []  # not yet
    assert [i.id for i, _ in silent([worker, reviewer], now, None, 600)] == [reviewer.id]  # workers unwatched
    assert silent([worker, reviewer], now, None, None) == []
