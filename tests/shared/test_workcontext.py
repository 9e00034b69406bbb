"""Every work item's context tree (shared.workcontext), recorded by the lifecycle itself."""

from __future__ import annotations

import asyncio

from nats.aio.client import Client as NatsClient

from shared.contexts import NodeInput, structure, work_attempt_id, work_root_id
from shared.models import WorkItem, WorkStatus, WorkSubmission, utcnow
from shared.names import ProjectNames
from shared.work import CLAIM_LAPSED, Claimant, WorkQueue
from shared.workcontext import work_hand_off, work_nodes

A = "a" * 32
B = "b" * 32


def claimant(agent: str) -> Claimant:
    return Claimant(agent_id=agent, agent_type="generic", capabilities=("code",))


def sub(**kw: object) -> WorkSubmission:
    return WorkSubmission.model_validate(
        {"task_id": "T-1", "description": "fix it", "capability": "code", **kw}
    )


async def test_attempts_are_branches_and_a_claim_sees_earlier_ones(nc: NatsClient, project_id: str) -> None:
    names = ProjectNames(project_id)
    queue = WorkQueue(nc, names)
    assert queue.contexts is not None
    item = await queue.submit(sub(), submitted_by="tester")
    first = await queue.claim(claimant(A))
    assert first is not None
    await queue.settle()
    await queue.progress(item.id, A, 40, "parser half done")
    note = await queue.contexts.append(
        item.id, NodeInput(parent_id=work_attempt_id(item.id, 1), text="tried the regex route"), author=A
    )
    await queue.fail(item.id, A, "regex blew up on nested input")
    second = await queue.claim(claimant(B))
    assert second is not None and second.attempts == 2
    await queue.settle()  # the claim's own node is published in the background
    handed = await work_hand_off(queue.contexts, second)
    assert handed.attempt_node == work_attempt_id(item.id, 2)
    kinds = [n.kind for n in handed.nodes]
    assert kinds == ["attempt", "failure", "note", "progress", "attempt", "submission"]
    assert handed.total == 6 and handed.next_cursor is None and handed.dependencies == []
    texts = {n.text for n in handed.nodes}
    assert {"regex blew up on nested input", "tried the regex route", "parser half done", "fix it"} <= texts
    await queue.settle()
    await queue.complete(item.id, B, {"pr": 7})
    await queue.settle()
    state = await queue.contexts.tree(item.id)
    root = work_root_id(item.id)
    assert state.root == root and state.meta.kind == "work" and state.meta.ref == {"work_id": item.id}
    attempts = [r for r in structure(state)[0] if r.kind == "attempt"]
    assert [a.author for a in attempts] == [A, B] and all(a.parent_id == root for a in attempts)
    under_first = [state.latest(c).kind for c in state.children[work_attempt_id(item.id, 1)]]
    assert under_first == ["progress", "note", "failure"] and note.id in state.children[attempts[0].id]
    under_second = [state.latest(c) for c in state.children[work_attempt_id(item.id, 2)]]
    assert [n.kind for n in under_second] == ["result"] and under_second[0].text == '{"pr": 7}'


async def test_a_lapsed_claim_is_recorded_as_that_attempts_failure(nc: NatsClient, project_id: str) -> None:
    queue = WorkQueue(nc, ProjectNames(project_id), ack_wait_s=0.5)
    item = await queue.submit(sub(), submitted_by="tester")
    assert await queue.claim(claimant(A)) is not None
    again = None
    for _ in range(60):  # the server redelivers after the ack deadline
        await asyncio.sleep(0.2)
        again = await queue.claim(claimant(B))
        if again is not None:
            break
    assert again is not None and again.attempts == 2
    await queue.settle()
    assert queue.contexts is not None
    state = await queue.contexts.tree(item.id)
    lapsed = [state.latest(c) for c in state.children[work_attempt_id(item.id, 1)]]
    assert [(n.kind, n.text, n.author, n.meta.get("lapsed")) for n in lapsed] == [
        ("failure", CLAIM_LAPSED, A, "true")
    ]


async def test_forgetting_a_record_removes_its_tree(nc: NatsClient, project_id: str) -> None:
    queue = WorkQueue(nc, ProjectNames(project_id))
    item = await queue.submit(sub(), submitted_by="tester")
    await queue.cancel(item.id, reason="not needed")
    assert queue.contexts is not None
    assert (await queue.contexts.tree(item.id)).size == 2  # submission, cancellation
    kv = await queue.records_bucket()
    revision = (await kv.get(item.id)).revision
    assert await queue.forget(item.id, revision=int(revision or 0))
    assert not (await queue.contexts.tree(item.id)).exists


async def test_without_recording_nothing_is_written(nc: NatsClient, project_id: str) -> None:
    names = ProjectNames(project_id)
    queue = WorkQueue(nc, names, record_context=False)
    item = await queue.submit(sub(), submitted_by="tester")
    recording = WorkQueue(nc, names)
    assert recording.contexts is not None
    assert not (await recording.contexts.tree(item.id)).exists


def test_each_transition_maps_to_its_nodes() -> None:
    now = utcnow()
    item = WorkItem(
        task_id="t",
        description="d",
        capability="code",
        project_id="p",
        status=WorkStatus.IN_PROGRESS,
        attempts=2,
        assigned_to=A,
        created_at=now,
        updated_at=now,
        claimed_at=now,
    )
    root, second = work_root_id(item.id), work_attempt_id(item.id, 2)
    assert work_nodes("submitted", item, {})[0].tree is not None
    assert work_nodes("claimed", item, {"agent_id": A})[0].id == second
    assert work_nodes("progress", item, {"agent_id": A, "percent": 5, "note": ""})[0].parent_id == second
    assert work_nodes("failed", item, {"agent_id": A, "error": "boom"})[0].text == "boom"
    assert work_nodes("redelivered", item, {"attempt": 1})[0].parent_id == work_attempt_id(item.id, 1)
    assert work_nodes("cancelled", item, {"by": "op"})[0].parent_id == second
    assert work_nodes("expired", item, {})[0].parent_id == root
    assert work_nodes("queued", item, {}) == [] and work_nodes("waiting", item, {}) == []
    # the same transition twice is the same node (a repeated publish stores one copy)
    assert (
        work_nodes("failed", item, {"error": "x"})[0].id == work_nodes("failed", item, {"error": "x"})[0].id
    )
