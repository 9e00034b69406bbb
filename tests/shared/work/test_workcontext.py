"""Every work item's context tree (shared.work.context), recorded by the lifecycle itself."""

from __future__ import annotations

import asyncio

from nats.aio.client import Client as NatsClient

from shared.context.reads import structure
from shared.context.trees import ContextNode, NodeInput, work_attempt_id, work_root_id
from shared.models import WorkItem, WorkStatus, WorkSubmission, utcnow
from shared.names import ProjectNames
from shared.trace.tracing import TraceLog
from shared.usage.ledger import UsageLedger
from shared.work.context import work_hand_off, work_nodes
from shared.work.queue import WorkQueue
from shared.work.rules import CLAIM_LAPSED, Claimant
from testsupport.work import work_queue

A = "a" * 32
B = "b" * 32


def claimant(agent: str) -> Claimant:
    return Claimant(agent_id=agent, agent_type="generic", capabilities=("code",))


async def claim_soon(queue: WorkQueue, who: Claimant, *, tries: int = 50) -> WorkItem | None:
    """The next item ``who`` may take, polling while the queue catches up (None if none came)."""
    for _ in range(tries):
        taken = await queue.claim(who)
        if taken is not None:
            return taken
        await asyncio.sleep(0.05)
    return None


def sub(**kw: object) -> WorkSubmission:
    return WorkSubmission.model_validate(
        {"task_id": "T-1", "description": "fix it", "capability": "code", **kw}
    )


async def test_attempts_are_branches_and_a_claim_sees_earlier_ones(nc: NatsClient, project_id: str) -> None:
    names = ProjectNames(project_id)
    queue = work_queue(nc, names)
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
    queue = work_queue(nc, ProjectNames(project_id), ack_wait_s=0.5)
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
    queue = work_queue(nc, ProjectNames(project_id))
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
    queue = WorkQueue(
        nc, names, contexts=None, traces=TraceLog(nc, names), ledger=UsageLedger(nc.jetstream(), names)
    )
    item = await queue.submit(sub(), submitted_by="tester")
    recording = work_queue(nc, names)
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
    asked = work_nodes(
        "waiting-on-operator", item, {"agent_id": A, "question_id": "q", "question": "which db?"}
    )
    assert [(n.kind, n.parent_id, n.text, n.meta) for n in asked] == [
        ("question", second, "which db?", {"question_id": "q"})
    ]
    told = {"question_id": "q", "answered": True, "answer": "sqlite", "by": "dana"}
    answered = work_nodes("resumed", item, told)
    assert [(n.kind, n.parent_id, n.author, n.text, n.meta["answered"]) for n in answered] == [
        ("answer", second, "dana", "sqlite", "true")
    ]  # the history names who answered, as the agent was told it
    expired = work_nodes("resumed", item, {"question_id": "q", "answered": False, "answer": "", "by": ""})
    assert expired[0].author == "loom"
    verdict = {"agent_id": B, "round": 1, "score": 40.0, "feedback": "no tests", "final": False}
    rejected = work_nodes("rejected", item, verdict)[0]
    assert (rejected.kind, rejected.parent_id, rejected.author, rejected.text) == (
        "review",
        second,
        B,
        "no tests",
    )
    assert rejected.meta == {"verdict": "reject", "review_round": "1", "score": "40.0"}
    handed = work_nodes("in-review", item.model_copy(update={"result": {"pr": 1}}), {"agent_id": A})[0]
    assert (handed.kind, handed.parent_id, handed.text) == ("handed_in", second, '{"pr": 1}')
    # a blocked item failed by its dependency never had an attempt: its failure is the root's
    blocked = item.model_copy(update={"attempts": 0, "assigned_to": None, "status": WorkStatus.FAILED})
    failed = work_nodes("failed", blocked, {"dependency": B, "error": "dependency x was cancelled"})[0]
    assert failed.parent_id == root
    # the same transition twice is the same node (a repeated publish stores one copy)
    assert (
        work_nodes("failed", item, {"error": "x"})[0].id == work_nodes("failed", item, {"error": "x"})[0].id
    )


async def test_a_dependents_claim_carries_its_dependencies_results(nc: NatsClient, project_id: str) -> None:
    queue = work_queue(nc, ProjectNames(project_id))
    assert queue.contexts is not None
    first = await queue.submit(sub(task_id="schema"), submitted_by="tester")
    second = await queue.submit(sub(task_id="api", depends_on=[first.id]), submitted_by="tester")
    assert second.status is WorkStatus.BLOCKED
    assert await queue.claim(claimant(A)) is not None
    await queue.complete(first.id, A, {"tables": ["users"]})
    taken = await claim_soon(queue, claimant(B))
    assert taken is not None and taken.id == second.id
    await queue.settle()
    handed = await work_hand_off(queue.contexts, taken)
    assert [(n.tree_id, n.kind, n.text) for n in handed.dependencies] == [
        (first.id, "result", '{"tables": ["users"]}')
    ]


async def test_reviews_and_answers_are_in_the_tree_the_next_worker_sees(
    nc: NatsClient, project_id: str
) -> None:
    from shared.work.questions import QuestionBook

    names = ProjectNames(project_id)
    queue = work_queue(nc, names)
    questions = QuestionBook(nc, names, queue)
    assert queue.contexts is not None
    item = await queue.submit(sub(review={"capability": "review", "rounds": 2}), submitted_by="tester")
    assert await queue.claim(claimant(A)) is not None
    asked = await questions.ask(A, "which database?", work_id=item.id)
    await questions.answer(asked.id, "sqlite")
    await queue.complete(item.id, A, {"pr": 1})
    reviewer = Claimant(agent_id=B, agent_type="generic", capabilities=("review",))
    review = await claim_soon(queue, reviewer)
    assert review is not None
    await queue.review(item.id, B, "reject", "no tests for the parser", 30)
    again = await claim_soon(queue, claimant("c" * 32))
    assert again is not None and again.id == item.id
    await queue.settle()
    handed = await work_hand_off(queue.contexts, again)
    said = [(n.kind, n.text) for n in handed.nodes]
    assert ("question", "which database?") in said and ("answer", "sqlite") in said
    assert ("handed_in", '{"pr": 1}') in said and ("review", "no tests for the parser") in said
    state = await queue.contexts.tree(item.id)
    first_attempt = work_attempt_id(item.id, 1)
    under = [state.latest(c).kind for c in state.children[first_attempt]]
    assert under == ["question", "answer", "handed_in", "review"]


async def test_a_dependency_failure_is_visible_under_the_root(nc: NatsClient, project_id: str) -> None:
    queue = work_queue(nc, ProjectNames(project_id))
    assert queue.contexts is not None
    first = await queue.submit(sub(task_id="schema"), submitted_by="tester")
    second = await queue.submit(sub(task_id="api", depends_on=[first.id]), submitted_by="tester")
    await queue.cancel(first.id, reason="not needed")
    await queue.settle()
    state = await queue.contexts.tree(second.id)
    shown = [state.latest(f) for f in state.newest_first()]
    failures = [n for n in shown if n.kind == "failure"]
    assert len(failures) == 1 and first.id in (failures[0].text or "")
    assert failures[0].parent_id == work_root_id(second.id)
    assert all(n.parent_id is None or n.parent_id in state.nodes for n in shown)  # nothing orphaned


async def test_an_item_behind_a_dependency_records_when_it_was_unblocked(
    nc: NatsClient, project_id: str
) -> None:
    """Its submission says it started blocked and an ``unblocked`` node marks when its last
    dependency completed: the trace's phases start with "blocked" (shared.trace.timeline)."""
    from shared.trace.timeline import phase_kind, phases

    queue = work_queue(nc, ProjectNames(project_id))
    assert queue.contexts is not None
    first = await queue.submit(sub(task_id="first"), submitted_by="tester")
    second = await queue.submit(sub(task_id="second", depends_on=[first.id]), submitted_by="tester")
    assert second.status is WorkStatus.BLOCKED
    taken = await claim_soon(queue, claimant(A))
    assert taken is not None and taken.id == first.id
    await queue.settle()
    await queue.complete(first.id, A, "done")
    await queue.settle()

    contexts = queue.contexts
    nodes: list[ContextNode] = []
    for _ in range(100):  # the unblocking is recorded by the completion's follow-up
        tree = await contexts.tree(second.id)
        nodes = sorted(tree.nodes.values(), key=lambda n: n.at)
        if any(n.kind == "unblocked" for n in nodes):
            break
        await asyncio.sleep(0.05)
    stretches = phases([(n.at, phase_kind(n.kind, n.meta)) for n in nodes], until=utcnow())
    assert [p.name for p in stretches] == ["blocked", "queued"]
    unblock = next(n for n in nodes if n.kind == "unblocked")
    assert unblock.meta["dependency"] == first.id
