"""The work lifecycle (shared.work) against a real nats-server."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest
from nats.aio.client import Client as NatsClient
from nats.js.errors import NoStreamResponseError, NotFoundError

from shared.models import WorkStatus, WorkSubmission, utcnow
from shared.names import ProjectNames
from shared.paging import CursorError
from shared.work.policy import BoundaryPolicy, BoundaryRule, config_bucket, publish_policy
from shared.work.rules import Claimant, NotClaimant, WorkConflict, WorkError, WorkFilter, WorkNotFound
from testsupport.work import submit_due_soon, work_queue

A = "a" * 32
B = "b" * 32


def coder(agent_id: str = A, agent_type: str = "claude-code", caps: tuple[str, ...] = ("code",)) -> Claimant:
    return Claimant(
        agent_id=agent_id, agent_type=agent_type, capabilities=caps, boundaries=("default", "corporate")
    )


def sub(task: str = "t1", **kw: object) -> WorkSubmission:
    data: dict[str, object] = {"task_id": task, "description": "do it", "capability": "code"}
    data.update(kw)
    return WorkSubmission.model_validate(data)


async def events(nc: NatsClient, names: ProjectNames) -> list[dict[str, object]]:
    js = nc.jetstream()
    psub = await js.pull_subscribe(names.events_subjects, stream=names.events_stream)
    out: list[dict[str, object]] = []
    try:
        while True:
            msgs = await psub.fetch(100, timeout=0.5)
            out.extend(json.loads(m.data) for m in msgs)
    except Exception:
        pass
    await psub.unsubscribe()
    return out


async def test_submit_claim_progress_complete_with_events(nc: NatsClient, project_id: str) -> None:
    names = ProjectNames(project_id)
    q = work_queue(nc, names)
    item = await q.submit(sub(), submitted_by="tester")
    assert item.status is WorkStatus.QUEUED
    claimed = await q.claim(coder())
    assert claimed is not None and claimed.id == item.id
    assert claimed.status is WorkStatus.CLAIMED and claimed.assigned_to == A and claimed.attempts == 1
    assert await q.claim(coder(B)) is None  # held, not redelivered
    progressed = await q.progress(item.id, A, 40, "halfway")
    assert progressed.status is WorkStatus.IN_PROGRESS and progressed.progress is not None
    assert progressed.progress.percent == 40
    done = await q.complete(item.id, A, {"ok": True})
    assert done.status is WorkStatus.COMPLETED and done.result == {"ok": True}
    assert (await q.get(item.id)).status is WorkStatus.COMPLETED
    assert await q.queue_depths() == {}
    seen = [f"{e['kind']}.{e['action']}" for e in await events(nc, names)]
    assert seen == ["work.submitted", "work.queued", "work.claimed", "work.progress", "work.completed"]


async def test_priority_highest_first_and_capability_respected(nc: NatsClient, project_id: str) -> None:
    q = work_queue(nc, ProjectNames(project_id))
    low = await q.submit(sub("low", priority=2))
    high = await q.submit(sub("high", priority=9))
    mid = await q.submit(sub("mid", priority=5))
    other = await q.submit(sub("review", capability="review", priority=10))
    order = []
    for _ in range(3):
        got = await q.claim(coder())
        assert got is not None
        order.append(got.id)
    assert order == [high.id, mid.id, low.id]
    assert await q.claim(coder()) is None
    reviewed = await q.claim(coder(B, caps=("review",)))
    assert reviewed is not None and reviewed.id == other.id


async def test_required_agent_type_and_boundary_policy(nc: NatsClient, project_id: str) -> None:
    names = ProjectNames(project_id)
    q = work_queue(nc, names)
    await q.ensure()
    policy = BoundaryPolicy(boundaries={"corporate": BoundaryRule(allowed_agent_types=["copilot"])})
    await publish_policy(await config_bucket(nc.jetstream(), names), policy)
    q.forget_policy_cache()
    corp = await q.submit(sub("corp", boundary="corporate"))
    typed = await q.submit(sub("typed", required_agent_type="copilot"))
    assert await q.claim(coder(agent_type="claude-code")) is None
    first = await q.claim(coder(B, agent_type="copilot"))
    second = await q.claim(coder(B, agent_type="copilot"))
    assert {first.id if first else None, second.id if second else None} == {corp.id, typed.id}


async def test_fail_until_dead_letter_then_retry(nc: NatsClient, project_id: str) -> None:
    q = work_queue(nc, ProjectNames(project_id))
    item = await q.submit(sub(max_attempts=3))
    for attempt in range(1, 4):
        got = await q.claim(coder())
        assert got is not None and got.id == item.id and got.attempts == attempt
        after = await q.fail(item.id, A, f"boom {attempt}")
    assert after.status is WorkStatus.DEAD_LETTERED
    assert [e.error for e in after.errors] == ["boom 1", "boom 2", "boom 3"]
    assert await q.claim(coder()) is None
    page = await q.dlq_list()
    assert [d.item.id for d in page.items] == [item.id]
    assert len(page.items[0].item.errors) == 3
    retried = await q.dlq_retry(item.id)
    assert retried.status is WorkStatus.QUEUED and retried.attempts == 0
    assert (await q.dlq_list()).items == []
    again = await q.claim(coder())
    assert again is not None and again.id == item.id and again.attempts == 1
    assert (await q.complete(item.id, A)).status is WorkStatus.COMPLETED


async def test_silent_claim_is_redelivered_and_counted(nc: NatsClient, project_id: str) -> None:
    q = work_queue(nc, ProjectNames(project_id), ack_wait_s=0.6)
    item = await q.submit(sub(max_attempts=2))
    assert (await q.claim(coder(A))) is not None
    got = None
    for _ in range(60):
        got = await q.claim(coder(B))
        if got is not None:
            break
        await asyncio.sleep(0.1)
    assert got is not None and got.id == item.id and got.assigned_to == B and got.attempts == 2
    assert "claim expired" in got.errors[0].error and got.errors[0].agent_id == A
    with pytest.raises(NotClaimant):
        await q.complete(item.id, A)
    # B goes silent too: attempts are used up, so the next claim dead-letters it.
    dead = None
    for _ in range(60):
        assert await q.claim(coder(A)) is None
        dead = await q.get(item.id)
        if dead.status is WorkStatus.DEAD_LETTERED:
            break
        await asyncio.sleep(0.1)
    assert dead is not None and dead.status is WorkStatus.DEAD_LETTERED and len(dead.errors) == 2


async def test_cancel_queued_and_claimed(nc: NatsClient, project_id: str) -> None:
    names = ProjectNames(project_id)
    q = work_queue(nc, names)
    queued = await q.submit(sub("q"))
    cancelled = await q.cancel(queued.id, reason="not needed")
    assert cancelled.status is WorkStatus.CANCELLED
    assert await q.claim(coder()) is None
    held = await q.submit(sub("h"))
    control = await nc.subscribe(names.control_subject(A))
    assert (await q.claim(coder())) is not None
    await q.cancel(held.id)
    notice = json.loads((await control.next_msg(timeout=2)).data)
    assert notice["action"] == "cancel-work" and notice["work_id"] == held.id
    with pytest.raises(WorkConflict, match="cancelled"):
        await q.complete(held.id, A)
    with pytest.raises(WorkConflict, match="can no longer be cancelled"):
        await q.cancel(held.id)


async def test_deadline_expiry(nc: NatsClient, project_id: str) -> None:
    q = work_queue(nc, ProjectNames(project_id))
    with pytest.raises(WorkError, match="deadline"):
        await q.submit(sub(deadline=utcnow() - timedelta(seconds=1)))
    soon = await submit_due_soon(lambda deadline: q.submit(sub(deadline=deadline)), ahead_s=1)
    assert soon.deadline is not None
    await asyncio.sleep(max(0.0, (soon.deadline - utcnow()).total_seconds()) + 0.1)
    expired = await q.expire_due()
    assert [i.id for i in expired] == [soon.id]
    assert (await q.get(soon.id)).status is WorkStatus.EXPIRED
    assert await q.claim(coder()) is None


async def test_errors_for_unknown_and_wrong_holder(nc: NatsClient, project_id: str) -> None:
    q = work_queue(nc, ProjectNames(project_id))
    with pytest.raises(WorkNotFound, match="work_id"):
        await q.get("0" * 32)
    item = await q.submit(sub())
    with pytest.raises(WorkConflict, match="not claimed"):
        await q.complete(item.id, A)
    await q.claim(coder(A))
    with pytest.raises(NotClaimant):
        await q.progress(item.id, B, 10)
    with pytest.raises(WorkError, match="percent"):
        await q.progress(item.id, A, 101)
    with pytest.raises(WorkError, match="error"):
        await q.fail(item.id, A, "  ")
    with pytest.raises(WorkConflict, match="only failed or dead-lettered"):
        await q.retry(item.id)


async def test_list_filters_and_paging(nc: NatsClient, project_id: str) -> None:
    q = work_queue(nc, ProjectNames(project_id))
    ids = [(await q.submit(sub(f"t{i}", capability="code" if i % 2 else "docs"))).id for i in range(5)]
    page1 = await q.list_items(limit=2)
    page2 = await q.list_items(limit=2, cursor=page1.next_cursor)
    page3 = await q.list_items(limit=2, cursor=page2.next_cursor)
    listed = [i.id for i in page1.items + page2.items + page3.items]
    assert sorted(listed) == sorted(ids) and page3.next_cursor is None
    docs = await q.list_items(WorkFilter(capability="docs"))
    assert {i.capability for i in docs.items} == {"docs"} and len(docs.items) == 3
    with pytest.raises(CursorError, match="cursor"):
        await q.list_items(cursor="garbage!")


async def test_list_by_assignee_reads_only_that_agents_records(nc: NatsClient, project_id: str) -> None:
    """The assignee filter skips other records by their bytes (``WorkFilter.may_match``) and
    still finds every item of the agent's, whatever its status, and no one else's."""
    q = work_queue(nc, ProjectNames(project_id))
    for i in range(4):
        await q.submit(sub(f"t{i}"))
    first = await q.claim(coder(A))
    second = await q.claim(coder(A))
    other = await q.claim(coder(B))
    assert first is not None and second is not None and other is not None
    await q.complete(second.id, A, {"ok": True})
    mine = await q.list_items(WorkFilter(assigned_to=A))
    assert sorted(i.id for i in mine.items) == sorted([first.id, second.id])
    assert [i.id for i in (await q.list_items(WorkFilter(assigned_to=B))).items] == [other.id]
    assert (await q.list_items(WorkFilter(assigned_to="c" * 32))).items == []
    records = await q.all_records()
    assert len(records) == 4
    for record in records:  # the byte test is necessary: it never drops a record that matches
        raw = record.to_json_bytes()
        for agent in (A, B, "c" * 32):
            wanted = WorkFilter(assigned_to=agent)
            assert wanted.may_match(raw) or not wanted.matches(record.item)
    assert all(WorkFilter().may_match(r.to_json_bytes()) for r in records)


async def test_projects_are_isolated(nc: NatsClient, project_id: str) -> None:
    q1 = work_queue(nc, ProjectNames(project_id))
    q2 = work_queue(nc, ProjectNames(project_id + "-other"))
    item = await q1.submit(sub())
    assert await q2.claim(coder()) is None
    with pytest.raises(WorkNotFound):
        await q2.get(item.id)
    assert (await q2.list_items()).items == []


async def test_lingering_pull_gets_a_message_published_while_waiting(nc: NatsClient, project_id: str) -> None:
    names = ProjectNames(project_id)
    q = work_queue(nc, names)
    first = await q.submit(sub("first"))
    subject = names.work_subject("code", "default", None, 5)
    assert await q.claim(coder()) is not None  # the only message is now in flight
    assert not await q._undelivered(subject)
    assert await q.claim(coder(B)) is None  # nothing undelivered, so no linger either

    async def publish_later() -> None:
        await asyncio.sleep(0.2)
        await q.submit(sub("second"))

    publisher = asyncio.create_task(publish_later())
    msg = await q._next(subject, linger_s=2.0)
    await publisher
    assert msg is not None and json.loads(msg.data)["work_id"] != first.id


async def test_submit_that_cannot_queue_leaves_no_record(nc: NatsClient, project_id: str) -> None:
    names = ProjectNames(project_id)
    q = work_queue(nc, names)
    kept = await q.submit(sub("kept"))  # the queue's consumer is known from here on
    await nc.jetstream().delete_stream(names.work_stream)  # the queue is gone; records and events stay
    with pytest.raises(NoStreamResponseError):  # the record was written, the queue message was not
        await q.submit(sub("lost"))
    # An error means nothing was submitted: no record is left waiting for a message that never came.
    assert [i.id for i in (await q.list_items()).items] == [kept.id]


async def test_transitions_on_record_stand_when_events_are_unavailable(
    nc: NatsClient, project_id: str, caplog: pytest.LogCaptureFixture
) -> None:
    names = ProjectNames(project_id)
    q = work_queue(nc, names)
    await q.ensure()
    await nc.jetstream().delete_stream(names.events_stream)
    with caplog.at_level("WARNING", logger="loom.work"):
        item = await q.submit(sub("kept"))
        claimed = await q.claim(coder())
        await q.settle()  # the claimed event is published in the background
    # The work is neither lost nor reported as failed (a caller would resubmit or re-claim it).
    assert claimed is not None and claimed.id == item.id and claimed.assigned_to == A
    assert (await q.get(item.id)).status is WorkStatus.CLAIMED
    assert "queued, but its event was not published" in caplog.text
    assert "claimed, but its event was not published" in caplog.text


async def test_claim_event_sent_in_background_keeps_order(nc: NatsClient, project_id: str) -> None:
    names = ProjectNames(project_id)
    q = work_queue(nc, names)
    item = await q.submit(sub())
    claimed = await q.claim(coder())
    assert claimed is not None
    await q.settle()
    assert not q._events_in_flight
    await q.complete(item.id, A)  # waits for any earlier event, so the order holds
    seen = [f"{e['kind']}.{e['action']}" for e in await events(nc, names)]
    assert seen == ["work.submitted", "work.queued", "work.claimed", "work.completed"]


async def test_a_message_is_removed_as_superseded_only_on_the_leaders_copy_of_the_record(
    nc: NatsClient, project_id: str
) -> None:
    """Records are read by direct get, which any replica answers, possibly one behind. A
    claim that would remove a message without writing the record (here a stray second
    message for an item already claimed) reads the record again from the stream's leader
    first; the claim that writes decides on its compare-and-set and needs no such read."""
    from shared.work.moves import Ack, Change, disposes_unconfirmed

    names = ProjectNames(project_id)
    q = work_queue(nc, names)
    item = await q.submit(sub())
    leader_reads: list[str] = []

    async def seen(msg: object) -> None:
        leader_reads.append(getattr(msg, "subject", ""))

    watch = await nc.subscribe(f"$JS.API.STREAM.MSG.GET.KV_{names.work_records_bucket}", cb=seen)
    stray = await nc.jetstream().publish(
        names.work_subject("code", "default", None, item.priority),
        json.dumps({"work_id": item.id, "epoch": 1}).encode(),
    )
    claimed = await q.claim(coder(A))
    assert claimed is not None and claimed.assigned_to == A
    await nc.flush()
    assert leader_reads == []  # the claim wrote: its compare-and-set was its confirmation

    assert await q.claim(coder(B)) is None  # meets the stray message, which is superseded
    await nc.flush()
    assert len(leader_reads) == 1
    info = await nc.jetstream().stream_info(names.work_stream)
    assert info.state.messages == 1  # the stray one is gone, the claimed one stays with A
    with pytest.raises(NotFoundError):
        await nc.jetstream().get_msg(names.work_stream, stray.seq)
    await watch.unsubscribe()

    assert disposes_unconfirmed(Change(ack=Ack.STOP)) and disposes_unconfirmed(Change(ack=Ack.DONE))
    assert not disposes_unconfirmed(Change(ack=Ack.AGAIN)) and not disposes_unconfirmed(Change())
