"""Finished work records are deleted once WEFT_WORK_RETENTION_S has passed, entries of agents
offline for WEFT_AGENT_RETENTION_S too; nothing else is."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from nats.aio.client import Client as NatsClient

from shared.agents.registry import AgentNotFound, Registry
from shared.models import AgentStatus, Scope, WorkStatus, WorkSubmission, utcnow
from shared.names import ProjectNames, kv_stream, kv_subject
from shared.work.queue import WorkQueue
from shared.work.rules import DLQ_MAX_AGE_S, WorkNotFound
from tests.weft.conftest import WeftFactory
from tests.weft.weft_helpers import claimant, eventually, register
from testsupport.work import submit_due_soon, work_queue
from weft.project.agents import AgentDirectory
from weft.project.retention import Retention
from weft.project.work import WorkIndex


def _submission(task: str, **changes: object) -> WorkSubmission:
    return WorkSubmission.model_validate(
        {"task_id": task, "description": task, "capability": "code", **changes}
    )


@pytest.fixture
async def queue(nc: NatsClient, project_id: str) -> WorkQueue:
    return work_queue(nc, ProjectNames(project_id))


@pytest.fixture
async def index(nc: NatsClient, queue: WorkQueue) -> AsyncIterator[WorkIndex]:
    view = WorkIndex(nc, nc.jetstream(), queue)
    await view.start()
    try:
        yield view
    finally:
        await view.stop()


@pytest.fixture
async def directory(nc: NatsClient, project_id: str) -> AsyncIterator[AgentDirectory]:
    agents = AgentDirectory(nc, nc.jetstream(), ProjectNames(project_id))
    await agents.start(stale_check_interval_s=3600)
    try:
        yield agents
    finally:
        await agents.stop()


@pytest.fixture
def retention(
    nc: NatsClient, queue: WorkQueue, index: WorkIndex, directory: AgentDirectory, project_id: str
) -> Retention:
    registry = Registry(nc.jetstream(), ProjectNames(project_id))
    return Retention(nc.jetstream(), queue, index, registry, directory)


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
    queue: WorkQueue, index: WorkIndex, retention: Retention, nc: NatsClient, project_id: str
) -> None:
    done = await _finish(queue, nc, project_id, "done")
    buried = await _dead_letter(queue, nc, project_id, "buried")
    waiting = (await queue.submit(_submission("waiting"))).id
    cancelled = (await queue.submit(_submission("cancelled"))).id
    await queue.cancel(cancelled, reason="not needed")
    await index.mirror.sync()
    day = 24 * 3600.0

    assert retention.work_due(day) == []  # nothing is a day old yet
    later = utcnow() + timedelta(days=2)
    assert {w for w, _ in retention.work_due(day, later)} == {done, cancelled}
    # dead-lettered records stay as long as the dead-letter queue keeps them
    after_dlq = utcnow() + timedelta(seconds=DLQ_MAX_AGE_S + day)
    assert {w for w, _ in retention.work_due(day, after_dlq)} == {done, cancelled, buried}
    assert waiting not in {w for w, _ in retention.work_due(day, after_dlq)}


async def test_sweep_deletes_due_records_and_later_their_delete_markers(
    queue: WorkQueue, index: WorkIndex, retention: Retention, nc: NatsClient, project_id: str
) -> None:
    done = await _finish(queue, nc, project_id, "done")
    waiting = (await queue.submit(_submission("waiting"))).id
    await index.mirror.sync()
    retention.marker_keep_s = 3600
    bucket = queue.names.work_records_bucket

    async def stored_under(work_id: str) -> int:
        info = await nc.jetstream().stream_info(
            kv_stream(bucket), subjects_filter=kv_subject(bucket, work_id)
        )
        return sum((info.state.subjects or {}).values())

    later = utcnow() + timedelta(minutes=2)
    assert await retention.sweep(0, 0, later) == {"work": 0, "agents": 0}  # retention off
    assert await retention.sweep(60, 0) == {"work": 0, "agents": 0}  # not old enough
    assert await retention.sweep(60, 0, later) == {"work": 1, "agents": 0}
    with pytest.raises(WorkNotFound):
        await queue.get(done)
    assert (await queue.get(waiting)).status is WorkStatus.QUEUED

    async def dropped_from_mirror() -> bool:
        return index.mirror.get(done) is None

    await eventually(dropped_from_mirror, what="the mirror to see the delete")
    assert await stored_under(done) == 1  # the delete marker, kept for other mirrors
    assert retention.pending_markers == 1

    retention.marker_keep_s = 0
    assert await retention.sweep(60, 0, later) == {"work": 0, "agents": 0}  # already gone
    assert await stored_under(done) == 0 and retention.pending_markers == 0
    assert await stored_under(waiting) == 1


async def test_a_record_changed_since_it_was_seen_is_kept(
    queue: WorkQueue, index: WorkIndex, retention: Retention, nc: NatsClient, project_id: str
) -> None:
    buried = await _dead_letter(queue, nc, project_id, "buried")
    await index.mirror.sync()
    later = utcnow() + timedelta(seconds=DLQ_MAX_AGE_S + 60)
    [(work_id, revision)] = retention.work_due(60, later)
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
    other = work_queue(nc, ProjectNames(project_id))
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
        counted = f'weft_records_deleted_total{{kind="work",project="{project_id}"}} 1.0'

        async def metric_counts_it() -> bool:  # counted once the whole sweep is done
            return counted in (await api.get("/metrics")).text

        await eventually(metric_counts_it, what="the deletion to be counted")


async def test_retention_zero_keeps_everything(
    weft_factory: WeftFactory, nc: NatsClient, project_id: str, queue: WorkQueue
) -> None:
    async with weft_factory(project_id=project_id, sweep_interval_s=0.05, work_retention_s=0) as weft:
        done = await _finish(queue, nc, project_id, "done")
        short_lived = (
            await submit_due_soon(lambda soon: queue.submit(_submission("short-lived", deadline=soon)))
        ).id
        async with weft.client() as api:

            async def expired() -> bool:
                return (await api.get(f"/api/work/{short_lived}")).json()["status"] == "expired"

            await eventually(expired, what="the sweeper to run after the deadline")  # so it has swept
            response = await api.get(f"/api/work/{done}")
            assert response.status_code == 200 and response.json()["status"] == "completed"
            assert (await api.get(f"/api/work/{short_lived}")).status_code == 200


async def test_entries_of_agents_offline_past_retention_are_deleted(
    retention: Retention, directory: AgentDirectory, nc: NatsClient, project_id: str
) -> None:
    registry = Registry(nc.jetstream(), ProjectNames(project_id))
    online = await register(nc, project_id)
    left = await register(nc, project_id, status=AgentStatus.OFFLINE)
    crashed = await register(nc, project_id, stale=True)  # stopped beating without a word
    public = await register(nc, project_id, status=AgentStatus.OFFLINE, scope=Scope.PUBLIC)
    back = await register(nc, project_id, status=AgentStatus.OFFLINE)
    await directory.mirror.sync()
    hour = 3600.0

    assert retention.agents_due(hour) == []  # nobody has been gone an hour
    later = utcnow() + timedelta(hours=2)
    due = dict(retention.agents_due(hour, later))
    # at "later" the online agent's heartbeats have stopped too, as far as the clock says
    assert set(due) == {online.agent_id, left.agent_id, crashed.agent_id, public.agent_id, back.agent_id}
    assert {a for a, _ in retention.agents_due(hour, utcnow() + timedelta(minutes=30))} == set()

    await registry.heartbeat(back.agent_id)  # it came back between the look and the delete
    forgotten = [
        a
        for a in (left, crashed, public, back)
        if await registry.forget(a.agent_id, revision=due[a.agent_id])
    ]
    assert forgotten == [left, crashed, public]
    assert (await registry.get(back.agent_id)).status is AgentStatus.ONLINE
    for gone in forgotten:
        with pytest.raises(AgentNotFound):
            await registry.get(gone.agent_id)
    assert public.agent_id not in {e.agent_id for e in await registry.list_global()}
    assert (await registry.get(online.agent_id)).agent_id == online.agent_id


async def test_weft_deletes_agents_offline_past_their_retention(
    weft_factory: WeftFactory, nc: NatsClient, project_id: str
) -> None:
    settings = {"project_id": project_id, "sweep_interval_s": 0.1, "agent_retention_s": 1.0}
    async with weft_factory(**settings) as weft, weft.client() as api:
        online = await register(nc, project_id, heartbeat_interval_s=60)
        left = await register(nc, project_id, status=AgentStatus.OFFLINE)

        async def gone() -> bool:
            return (await api.get(f"/api/agents/{left.agent_id}")).status_code == 404

        await eventually(gone, what="Weft to delete the offline agent's entry")
        assert (await api.get(f"/api/agents/{online.agent_id}")).status_code == 200
        counted = f'weft_records_deleted_total{{kind="agents",project="{project_id}"}} 1.0'

        async def metric_counts_it() -> bool:  # counted once the whole sweep is done
            return counted in (await api.get("/metrics")).text

        await eventually(metric_counts_it, what="the deletion to be counted")
