"""The workstream rules of shared/work/rules.py without NATS or git: only the worker holding
an item records its workstream, the branch is the item's for good, the checkpoints kept
are bounded, an operator chooses a checkpoint of the item's own."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from shared.models import MAX_CHECKPOINTS_KEPT, Checkpoint, WorkItem, WorkStatus, Workstream
from shared.work.rules import (
    CheckpointNotFound,
    NotClaimant,
    WorkConflict,
    WorkRecord,
    choose_checkpoint,
    note_workstream,
)

WORKER = "a" * 32
OTHER = "b" * 32
NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
WS = Workstream(branch="loom/t-cccccccc", base_ref="main", base_sha="1" * 40)


def record(status: WorkStatus = WorkStatus.IN_PROGRESS, **fields: Any) -> WorkRecord:
    item = WorkItem(
        id="c" * 32,
        project_id="p",
        task_id="t",
        description="d",
        capability="code",
        status=status,
        assigned_to=WORKER if status not in (WorkStatus.QUEUED, WorkStatus.COMPLETED) else None,
        attempts=1,
        **fields,
    )
    return WorkRecord(item=item)


def point(n: int) -> Checkpoint:
    return Checkpoint(sha=f"{n:040x}", attempt=1, agent_id=WORKER)


@pytest.mark.parametrize(
    "status", [WorkStatus.CLAIMED, WorkStatus.IN_PROGRESS, WorkStatus.WAITING_ON_OPERATOR]
)
def test_the_holder_records_its_workstream_with_an_event(status: WorkStatus) -> None:
    change = note_workstream(record(status), WORKER, WS, "opened", NOW)
    assert change.record is not None and change.record.item.workstream == WS
    (event,) = change.events
    assert (event.action, event.data["step"], event.data["base"]) == (
        "workstream",
        "opened",
        f"main@{'1' * 40}",
    )
    assert change.ack is None  # a record of the code does not touch the claim


def test_only_the_holder_and_only_while_it_works() -> None:
    with pytest.raises(NotClaimant):
        note_workstream(record(), OTHER, WS, "opened", NOW)
    for status in (WorkStatus.QUEUED, WorkStatus.COMPLETED, WorkStatus.REVIEWING, WorkStatus.IN_REVIEW):
        with pytest.raises((WorkConflict, NotClaimant)):
            note_workstream(record(status), WORKER, WS, "checkpoint", NOW)
    with pytest.raises(WorkConflict) as step:
        note_workstream(record(), WORKER, WS, "rebased", NOW)
    assert step.value.field == "step"


def test_the_branch_is_the_items_for_good() -> None:
    held = record(workstream=WS)
    with pytest.raises(WorkConflict) as moved:
        note_workstream(held, WORKER, WS.model_copy(update={"branch": "elsewhere"}), "checkpoint", NOW)
    assert moved.value.field == "branch" and WS.branch in moved.value.message


def test_an_unchanged_record_is_not_written_but_still_told() -> None:
    change = note_workstream(record(workstream=WS), WORKER, WS, "resumed", NOW)
    assert change.record is None and change.events[0].data["step"] == "resumed"


def test_checkpoints_kept_are_bounded_newest_first() -> None:
    many = [point(n) for n in range(MAX_CHECKPOINTS_KEPT + 5, 0, -1)]
    ws = WS.model_copy(update={"checkpoints": many, "resume_from": many[0].sha})
    change = note_workstream(record(), WORKER, ws, "checkpoint", NOW)
    assert change.record is not None
    kept = change.record.item.workstream
    assert kept is not None and kept.checkpoints == many[:MAX_CHECKPOINTS_KEPT]
    assert change.events[0].data["checkpoint"] == many[0].sha


def test_an_operator_chooses_one_of_the_items_checkpoints() -> None:
    ws = WS.model_copy(update={"checkpoints": [point(2), point(1)], "resume_from": point(2).sha})
    change = choose_checkpoint(record(WorkStatus.QUEUED, workstream=ws), point(1).sha, NOW)
    assert change.record is not None and change.record.item.workstream is not None
    assert change.record.item.workstream.resume_from == point(1).sha
    assert change.events[0].data == {
        "step": "restore",
        "branch": WS.branch,
        "checkpoint": point(1).sha,
        "by": "operator",
    }
    assert choose_checkpoint(record(workstream=ws), point(2).sha, NOW).record is None  # already so
    with pytest.raises(CheckpointNotFound):
        choose_checkpoint(record(workstream=ws), point(9).sha, NOW)
    with pytest.raises(WorkConflict):
        choose_checkpoint(record(), point(1).sha, NOW)  # no workstream
    with pytest.raises(WorkConflict):
        choose_checkpoint(record(WorkStatus.COMPLETED, workstream=ws), point(1).sha, NOW)
