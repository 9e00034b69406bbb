"""Finished work records are deleted once WEFT_WORK_RETENTION_S has passed; nothing else is."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from nats.aio.client import Client as NatsClient

from shared.models import WorkStatus, WorkSubmission, utcnow
from shared.names import ProjectNames, kv_stream, kv_subject
from shared.work import DLQ_MAX_AGE_S, WorkNotFound, WorkQueue
from tests.weft.conftest import WeftFactory
from tests.weft.weft_helpers import claimant, eventually, register
from weft.retention import WorkRetention
from weft.workview import WorkIndex


def _submission(task: str, **changes: object) -> WorkSubmission:
    return WorkSubmission.model_validate(
        {"task_id": task, "description": task, "capability": "code", **changes}
    )


@pytest.fixture
async def queue(nc: NatsClient, project_id: str) -> WorkQueue:
    return WorkQueue(nc, ProjectNames(project_id))


@pytest.fixture
async def index(nc: NatsClient, queue: WorkQueue) -> AsyncIterator[WorkIndex]:
    view = WorkIndex(nc.jetstream(), queue)
    await view.start()
    try:
        yield view
    finally:
        await view.stop()


async def _finish(queue: WorkQueue, nc: NatsClient, project_id: str, task: str) -> str:
    """Submit, claim and complete one item; its id."""
    agent = await register(nc, project_id)
    item = await queue.submit(_submission(task))
    claimed = await queue.claim(claimant(agent))
    assert claimed is not None and claimed.id == item.id
    await queue.complete(item.id, agent.agent_id, {"ok": True})
    return item.id


async def _dead_letter(queue: WorkQueue, nc: NatsClient, project_id: str, task: str) -> str:
    agent = await register(nc, project_id)
    item = await queue.submit(_submission(task, max_attempts=1))
    assert await queue.claim(claimant(agent)) is not None
    await queue.fail(item.id, agent.agent_id, "broken")
    assert (await queue.get(item.id)).status is WorkStatus.DEAD_LETTERED
    return item.id


async def test_only_finished_records_past_retention_are_due(
    queue: WorkQueue, index: WorkIndex, nc: NatsClient, project_id: str
) -> None:
    done = await _finish(queue, nc, project_id, "done")
    buried = await _dead_letter(queue, nc, project_id, "buried")
    waiting = (await queue.submit(_submission("waiting"))).id
    cancelled = (await queue.submit(_submission("cancelled"))).id
    await queue.cancel(cancelled, reason="not needed")
    await index.mirror.sync()
    retention = WorkRetention(queue, index)
    day = 24 * 3600.0

    assert retention.due(day) == []  # nothing is a day old yet
    later = utcnow() + timedelta(days=2)
    assert {w for w, _ in retention.due(day, later)} == {done, cancelled}
    # dead-lettered records stay as long as the dead-letter queue keeps them
    after_dlq = utcnow() + timedelta(seconds=DLQ_MAX_AGE_S + day)
    assert {w for w, _ in retention.due(day, after_dlq)} == {done, cancelled, buried}
    assert waiting not in {w for w, _ in retention.due(day, after_dlq)}


async def test_sweep_deletes_due_records_and_later_their_delete_markers(
    queue: WorkQueue, index: WorkIndex, nc: NatsClient, project_id: str
) -> None:
    done = await _finish(queue, nc, project_id, "done")
    waiting = (await queue.submit(_submission("waiting"))).id
    await index.mirror.sync()
    retention = WorkRetention(queue, index, marker_keep_s=3600)
    bucket = queue.names.work_records_bucket

    async def stored_under(work_id: str) -> int:
        info = await nc.jetstream().stream_info(
            kv_stream(bucket), subjects_filter=kv_subject(bucket, work_id)
        )
        return sum((info.state.subjects or {}).values())

    assert await retention.sweep(0) == 0  # retention off
    assert await retention.sweep(60) == 0  # not old enough
    assert await retention.sweep(60, utcnow() + timedelta(minutes=2)) == 1
    with pytest.raises(WorkNotFound):
        await queue.get(done)
    assert (await queue.get(waiting)).status is WorkStatus.QUEUED

    async def dropped_from_mirror() -> bool:
        return index.mirror.get(done) is None

    await eventually(dropped_from_mirror, what="the mirror to see the delete")
    assert await stored_under(done) == 1  # the delete marker, kept for other mirrors
    assert retention.pending_markers == 1

    retention.marker_keep_s = 0
    assert await retention.sweep(60, utcnow() + timedelta(minutes=2)) == 0  # already gone
    assert await stored_under(done) == 0 and retention.pending_markers == 0
    assert await stored_under(waiting) == 1


async def test_a_record_changed_since_it_was_seen_is_kept(
    queue: WorkQueue, index: WorkIndex, nc: NatsClient, project_id: str
) -> None:
    buried = await _dead_letter(queue, nc, project_id, "buried")
    await index.mirror.sync()
    later = utcnow() + timedelta(seconds=DLQ_MAX_AGE_S + 60)
    [(work_id, revision)] = WorkRetention(queue, index).due(60, later)
    assert work_id == buried
    await queue.retry(buried)  # an operator retries it between the look and the delete
    assert await queue.forget(buried, revision=revision) is False
    assert (await queue.get(buried)).status is WorkStatus.QUEUED


async def test_two_replicas_delete_a_record_once(
    queue: WorkQueue, index: WorkIndex, nc: NatsClient, project_id: str
) -> None:
    done = await _finish(queue, nc, project_id, "done")
    await index.mirror.sync()
    revision = index.mirror.revision_of(done)
    assert revision is not None
    other = WorkQueue(nc, ProjectNames(project_id))
    outcomes = await asyncio.gather(
        queue.forget(done, revision=revision), other.forget(done, revision=revision)
    )
    assert sorted(outcomes) == [False, True]


async def test_weft_deletes_finished_work_after_its_retention(
    weft_factory: WeftFactory, nc: NatsClient, project_id: str, queue: WorkQueue
) -> None:
    settings = {"project_id": project_id, "sweep_interval_s": 0.1, "work_retention_s": 0.5}
    async with weft_factory(**settings) as weft, weft.client() as api:
        done = await _finish(queue, nc, project_id, "done")
        waiting = (await queue.submit(_submission("waiting"))).id

        async def gone() -> bool:
            return (await api.get(f"/api/work/{done}")).status_code == 404

        await eventually(gone, what="Weft to delete the completed record")
        response = await api.get(f"/api/work/{waiting}")
        assert response.status_code == 200 and response.json()["status"] == "queued"
        listed = [i["id"] for i in (await api.get("/api/work", params={"limit": 100})).json()["items"]]
        assert done not in listed and waiting in listed
        metrics = (await api.get("/metrics")).text
        assert f'weft_work_records_deleted_total{{project="{project_id}"}} 1.0' in metrics


async def test_retention_zero_keeps_everything(
    weft_factory: WeftFactory, nc: NatsClient, project_id: str, queue: WorkQueue
) -> None:
    async with weft_factory(project_id=project_id, sweep_interval_s=0.05, work_retention_s=0) as weft:
        done = await _finish(queue, nc, project_id, "done")
        soon = utcnow() + timedelta(milliseconds=300)
        short_lived = (await queue.submit(_submission("short-lived", deadline=soon))).id
        async with weft.client() as api:

            async def expired() -> bool:
                return (await api.get(f"/api/work/{short_lived}")).json()["status"] == "expired"

            await eventually(expired, what="the sweeper to run after the deadline")  # so it has swept
            response = await api.get(f"/api/work/{done}")
            assert response.status_code == 200 and response.json()["status"] == "completed"
            assert (await api.get(f"/api/work/{short_lived}")).status_code == 200
