"""Dependencies between work items (shared.work + shared.work.graph) against a real nats-server:
blocked until the last dependency completes, failure down the chain, revival from the DLQ,
plans, refusals, and several processes telling the same dependent at once."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from nats.aio.client import Client as NatsClient

from shared.models import WorkItem, WorkStatus, WorkSubmission, utcnow
from shared.names import ProjectNames
from shared.work.graph import DependencyFinished, DependencyRefused, PlanError, PlanStep
from shared.work.queue import WorkQueue
from shared.work.rules import Claimant, WorkConflict, WorkRecord
from testsupport.events import work_actions
from testsupport.work import work_queue

A = "a" * 32
B = "b" * 32
S = WorkStatus


def coder(agent_id: str = A) -> Claimant:
    return Claimant(agent_id=agent_id, agent_type="generic", capabilities=("code", "docs"))


def sub(task: str, *after: str, **kw: object) -> WorkSubmission:
    data: dict[str, object] = {"task_id": task, "description": f"do {task}", "capability": "code"}
    data["depends_on"] = list(after)
    data.update(kw)
    return WorkSubmission.model_validate(data)


async def run_one(q: WorkQueue, agent: str = A) -> WorkItem | None:
    """Claim whatever is claimable and complete it; the completed item, or None."""
    item = await q.claim(coder(agent))
    if item is None:
        return None
    return await q.complete(item.id, agent, {"by": agent})


async def fail_for_good(q: WorkQueue, work_id: str) -> WorkItem:
    claimed = await q.claim(coder())
    assert claimed is not None and claimed.id == work_id
    return await q.fail(work_id, A, "broken beyond repair", retryable=False)


async def test_a_dependent_waits_blocked_outside_the_queue_until_its_last_dependency_completes(
    nc: NatsClient, project_id: str
) -> None:
    names = ProjectNames(project_id)
    q = work_queue(nc, names)
    first = await q.submit(sub("first"))
    second = await q.submit(sub("second"))
    after = await q.submit(sub("after", first.id, second.id))
    assert (after.status, after.blocked_on) == (S.BLOCKED, [first.id, second.id])
    assert (await q.get(first.id)).dependents == [after.id]
    assert await q.queue_depths() == {"code": 2}  # the blocked item has no queue message

    done = {(await run_one(q)).id, (await run_one(q)).id}  # type: ignore[union-attr]
    assert done == {first.id, second.id}
    ready = await q.get(after.id)
    assert (ready.status, ready.blocked_on) == (S.QUEUED, [])
    last = await run_one(q)
    assert last is not None and last.id == after.id
    assert await work_actions(nc, names, after.id) == [
        "submitted",
        "blocked",
        "unblocked",
        "queued",
        "claimed",
        "completed",
    ]


async def test_a_blocked_item_is_never_claimed_and_half_done_stays_blocked(
    nc: NatsClient, project_id: str
) -> None:
    q = work_queue(nc, ProjectNames(project_id))
    first = await q.submit(sub("first"))
    second = await q.submit(sub("second", capability="docs"))
    after = await q.submit(sub("after", first.id, second.id))
    claimed = await q.claim(Claimant(agent_id=A, agent_type="generic", capabilities=("code",)))
    assert claimed is not None and claimed.id == first.id
    await q.complete(first.id, A)
    assert (await q.get(after.id)).blocked_on == [second.id]
    assert await q.claim(Claimant(agent_id=B, agent_type="generic", capabilities=("code",))) is None


async def test_depending_on_completed_work_queues_at_once(nc: NatsClient, project_id: str) -> None:
    q = work_queue(nc, ProjectNames(project_id))
    first = await q.submit(sub("first"))
    await run_one(q)
    after = await q.submit(sub("after", first.id))
    assert after.status is S.QUEUED
    got = await run_one(q)
    assert got is not None and got.id == after.id


async def test_refused_dependencies_name_the_field_and_create_nothing(
    nc: NatsClient, project_id: str
) -> None:
    q = work_queue(nc, ProjectNames(project_id))
    other = work_queue(nc, ProjectNames(f"{project_id}-other"))
    elsewhere = await other.submit(sub("elsewhere"))
    mine = await q.submit(sub("mine"))
    for deps, field in (([mine.id, "f" * 32], "depends_on.1"), ([elsewhere.id], "depends_on.0")):
        with pytest.raises(DependencyRefused) as refused:
            await q.submit(sub("bad", *deps))
        assert refused.value.field == field
        assert refused.value.message == f"{field}: no work item with this id in this project"
        assert "f" * 32 not in refused.value.message and elsewhere.id not in refused.value.message
    await q.cancel(mine.id)
    with pytest.raises(DependencyFinished) as finished:
        await q.submit(sub("late", mine.id))
    assert finished.value.field == "depends_on.0" and "was cancelled" in finished.value.message
    assert [r.item.task_id for r in await q.all_records()] == ["mine"]  # nothing else was created
    assert (await q.get(mine.id)).dependents == []


async def test_a_dead_dependency_fails_the_chain_naming_it_and_a_dlq_retry_revives_it(
    nc: NatsClient, project_id: str
) -> None:
    names = ProjectNames(project_id)
    q = work_queue(nc, names)
    root = await q.submit(sub("root"))
    middle = await q.submit(sub("middle", root.id))
    leaf = await q.submit(sub("leaf", middle.id))

    await fail_for_good(q, root.id)
    dead_middle, dead_leaf = await q.get(middle.id), await q.get(leaf.id)
    assert (dead_middle.status, dead_middle.failed_dependency) == (S.DEAD_LETTERED, root.id)
    assert dead_middle.error == f"dependency {root.id} was dead-lettered"
    assert (dead_leaf.status, dead_leaf.failed_dependency) == (S.DEAD_LETTERED, middle.id)
    assert dead_leaf.error == f"dependency {middle.id} was dead-lettered (its dependency {root.id} failed)"
    letters = {d.item.id for d in (await q.dlq_list()).items}
    assert letters == {root.id, middle.id, leaf.id}

    retried = await q.dlq_retry(root.id)
    assert retried.status is S.QUEUED
    back_middle, back_leaf = await q.get(middle.id), await q.get(leaf.id)
    assert (back_middle.status, back_middle.blocked_on, back_middle.failed_dependency) == (
        S.BLOCKED,
        [root.id],
        None,
    )
    assert (back_leaf.status, back_leaf.blocked_on) == (S.BLOCKED, [middle.id])
    assert (await q.dlq_list()).items == []  # the revived items left the DLQ too

    order = [(await run_one(q)), (await run_one(q)), (await run_one(q))]
    assert [i.id for i in order if i is not None] == [root.id, middle.id, leaf.id]
    assert (await work_actions(nc, names, middle.id))[:6] == [
        "submitted",
        "blocked",
        "failed",
        "dead-lettered",
        "revived",
        "blocked",
    ]


async def test_cancel_and_expiry_fail_dependents_and_retrying_a_dependent_alone_is_refused(
    nc: NatsClient, project_id: str
) -> None:
    q = work_queue(nc, ProjectNames(project_id))
    doomed = await q.submit(sub("doomed"))
    waits = await q.submit(sub("waits", doomed.id))
    await q.cancel(doomed.id, reason="not needed")
    failed = await q.get(waits.id)
    assert failed.status is S.DEAD_LETTERED and failed.error == f"dependency {doomed.id} was cancelled"
    with pytest.raises(Exception) as refused:
        await q.retry(waits.id)
    assert "retry that one first" in str(refused.value)

    soon = await q.submit(sub("soon", deadline=utcnow() + timedelta(milliseconds=300)))
    blocked_soon = await q.submit(
        sub("blocked-soon", soon.id, deadline=utcnow() + timedelta(milliseconds=300))
    )
    later = await q.submit(sub("later", soon.id))
    await asyncio.sleep(0.4)
    expired = {i.id for i in await q.expire_due()}
    assert expired == {soon.id, blocked_soon.id}  # a blocked item's own deadline counts too
    assert (await q.get(later.id)).error == f"dependency {soon.id} expired"


async def test_retrying_a_dependent_whose_dependency_came_back_waits_for_it_again(
    nc: NatsClient, project_id: str
) -> None:
    q = work_queue(nc, ProjectNames(project_id))
    root = await q.submit(sub("root"))
    child = await q.submit(sub("child", root.id))
    await fail_for_good(q, root.id)
    # The root is retried but its chain was not revived (as if the process had stopped
    # first): the operator retries the child, which then waits for the root again.
    await forget_dependents(q, root.id)
    await q.dlq_retry(root.id)
    assert (await q.get(child.id)).status is S.DEAD_LETTERED
    again = await q.retry(child.id)
    assert (again.status, again.blocked_on, again.attempts) == (S.BLOCKED, [root.id], 0)
    assert (await q.dlq_list()).items == []


async def forget_dependents(q: WorkQueue, work_id: str) -> None:
    kv = await q.records_bucket()
    entry = await kv.get(work_id)
    record = WorkRecord.model_validate_json(entry.value or b"")
    record.item.dependents = []
    await kv.update(work_id, record.to_json_bytes(), last=entry.revision)


async def test_a_plan_is_checked_whole_and_created_in_dependency_order(
    nc: NatsClient, project_id: str
) -> None:
    q = work_queue(nc, ProjectNames(project_id))
    existing = await q.submit(sub("existing"))
    steps = [
        PlanStep(sub("docs"), after=(1,)),
        PlanStep(sub("api"), after=(2,)),
        PlanStep(sub("migration", existing.id)),
    ]
    items = await q.submit_plan(steps, submitted_by="planner")
    docs, api, migration = items
    assert [i.status for i in items] == [S.BLOCKED, S.BLOCKED, S.BLOCKED]
    assert (docs.depends_on, api.depends_on, migration.depends_on) == (
        [api.id],
        [migration.id],
        [existing.id],
    )
    assert (migration.dependents, api.dependents) == ([api.id], [docs.id])
    assert (await q.get(existing.id)).dependents == [migration.id]
    done = [await run_one(q) for _ in range(5)]
    assert [i.task_id for i in done if i is not None] == ["existing", "migration", "api", "docs"]

    with pytest.raises(PlanError) as cycle:
        await q.submit_plan([PlanStep(sub("x"), after=(1,)), PlanStep(sub("y"), after=(0,))])
    assert cycle.value.field == "items.0.after"
    assert cycle.value.message == "items.0.after: the plan has a cycle (items.0 -> items.1 -> items.0)"
    with pytest.raises(DependencyRefused) as unknown:
        await q.submit_plan([PlanStep(sub("x")), PlanStep(sub("y", "e" * 32))])
    assert unknown.value.field == "items.1.depends_on.0"
    assert len(await q.all_records()) == 4  # neither refused plan created anything


async def test_many_processes_completing_dependencies_at_once_unblock_the_dependent_once(
    nc: NatsClient, project_id: str
) -> None:
    names = ProjectNames(project_id)
    queues = [work_queue(nc, names) for _ in range(4)]
    roots = [await queues[0].submit(sub(f"root-{i}")) for i in range(8)]
    joined = await queues[0].submit(sub("joined", *(r.id for r in roots)))
    claims = [await queues[i % 4].claim(coder(f"{i:032x}")) for i in range(8)]
    assert all(c is not None for c in claims)
    await asyncio.gather(
        *(queues[i % 4].complete(c.id, f"{i:032x}") for i, c in enumerate(claims) if c is not None)
    )
    ready = await queues[1].get(joined.id)
    assert (ready.status, ready.blocked_on) == (S.QUEUED, [])
    # Everyone settling it again changes nothing and publishes no second queue message.
    assert await asyncio.gather(*(q.settle_blocked(joined.id) for q in queues)) == [None] * 4
    assert await queues[2].queue_depths() == {"code": 1}
    assert (await work_actions(nc, names, joined.id)).count("unblocked") == 1


async def test_a_crash_between_steps_is_repaired_by_settling_and_enqueueing(
    nc: NatsClient, project_id: str
) -> None:
    q = work_queue(nc, ProjectNames(project_id))
    root = await q.submit(sub("root"))
    child = await q.submit(sub("child", root.id))
    # The root completes, but its dependents are never told (the process stopped).
    kv = await q.records_bucket()
    entry = await kv.get(root.id)
    record = WorkRecord.model_validate_json(entry.value or b"")
    record.item.status = S.COMPLETED
    await kv.update(root.id, record.to_json_bytes(), last=entry.revision)
    assert (await q.get(child.id)).status is S.BLOCKED
    settled = await q.settle_blocked(child.id)
    assert settled is not None and settled.status is S.QUEUED
    assert await q.ensure_enqueued(child.id) is False  # it got its queue message
    # Queued without a message (stopped between the two steps): the repair publishes it.
    entry = await kv.get(child.id)
    record = WorkRecord.model_validate_json(entry.value or b"")
    stale = record.model_copy(update={"queue_seq": None})
    await kv.update(child.id, stale.to_json_bytes(), last=entry.revision)
    assert await q.ensure_enqueued(child.id) is True
    got = await run_one(q)
    assert got is not None and got.id == child.id


async def test_a_queued_item_whose_message_was_lost_is_queued_again_once(
    nc: NatsClient, project_id: str
) -> None:
    """The stream holds a queued item's message until a claim takes the item; a cluster's
    faults have been seen to lose one anyway (scenario 31). The repair finds it gone and
    publishes another, once however many replicas repair; a claimed item's is left alone."""
    names = ProjectNames(project_id)
    q = work_queue(nc, names)
    item = await q.submit(sub("lost"))
    assert await q.ensure_enqueued(item.id) is False  # its message is there
    record = await q.get_record(item.id)
    assert record.queue_seq is not None
    await nc.jetstream().delete_msg(names.work_stream, record.queue_seq)
    repaired = await asyncio.gather(*(work_queue(nc, names).ensure_enqueued(item.id) for _ in range(3)))
    assert any(repaired)
    again = await q.get_record(item.id)
    assert again.queue_seq not in (None, record.queue_seq) and again.enqueues == record.enqueues + 1
    assert await q.queue_depths() == {"code": 1}  # one message, whoever repaired
    # A repairer that judged the message gone before the first repair was stored, and
    # publishes only now, publishes the same message again, not one more.
    await q._enqueue(item.id, after=record)
    assert (await q.get_record(item.id)).queue_seq == again.queue_seq
    assert await q.queue_depths() == {"code": 1}
    claimed = await q.claim(coder())
    assert claimed is not None and claimed.id == item.id
    assert await q.ensure_enqueued(item.id) is False  # claimed: nothing to repair
    done = await q.complete(item.id, A, {"by": A})
    assert done.status is S.COMPLETED


async def test_a_claimed_item_whose_message_was_lost_lapses_once_and_is_claimed_again(
    nc: NatsClient, project_id: str
) -> None:
    """A claim holds its message unacknowledged; with the message gone (a claim stored
    after its agent gave up on it, scenario 31) nothing could redeliver the item. The
    repair lapses the claim, once however many replicas repair, and queues the item
    again; the former holder is refused, as after any redelivery."""
    names = ProjectNames(project_id)
    q = work_queue(nc, names)
    item = await q.submit(sub("held"))
    claimed = await q.claim(coder(A))
    assert claimed is not None and claimed.id == item.id
    assert await q.ensure_enqueued(item.id) is False  # its claim holds its message
    record = await q.get_record(item.id)
    assert record.queue_seq is not None
    await nc.jetstream().delete_msg(names.work_stream, record.queue_seq)
    repaired = await asyncio.gather(*(work_queue(nc, names).ensure_enqueued(item.id) for _ in range(3)))
    assert repaired.count(True) == 1
    again = await q.get_record(item.id)
    assert (again.item.status, again.item.assigned_to, again.delivery) == (S.QUEUED, None, None)
    assert again.queue_seq not in (None, record.queue_seq) and again.enqueues == record.enqueues + 1
    assert [e.agent_id for e in again.item.errors] == [A]
    assert await q.queue_depths() == {"code": 1}
    with pytest.raises(WorkConflict, match="it is queued, not claimed"):
        await q.complete(item.id, A, {"by": A})
    retaken = await q.claim(coder(B))
    assert retaken is not None and (retaken.id, retaken.attempts) == (item.id, 2)
    done = await q.complete(item.id, B, {"by": B})
    assert done.status is S.COMPLETED and await q.queue_depths() == {}


async def test_a_lost_claim_on_its_last_attempt_is_dead_lettered(nc: NatsClient, project_id: str) -> None:
    names = ProjectNames(project_id)
    q = work_queue(nc, names)
    item = await q.submit(sub("once", max_attempts=1))
    assert await q.claim(coder(A)) is not None
    record = await q.get_record(item.id)
    assert record.queue_seq is not None
    await nc.jetstream().delete_msg(names.work_stream, record.queue_seq)
    assert await q.ensure_enqueued(item.id) is True
    assert (await q.get(item.id)).status is S.DEAD_LETTERED
    assert [d.item.id for d in (await q.dlq_list()).items] == [item.id]
