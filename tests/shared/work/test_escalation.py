"""Escalation against a real nats-server (shared/work/escalation.py through the work queue
and the question book): the last attempt is handed over simplified, a dead letter is put
to a person once, a refused answer loses nothing, each decision is carried out, a second
dead letter escalates again, and a half-done escalation is repaired."""

from __future__ import annotations

import asyncio

import pytest
from nats.aio.client import Client as NatsClient

from shared.context.store import ContextStore
from shared.errors import Invalid
from shared.models import (
    Diagnosis,
    Escalation,
    Priority,
    QuestionMode,
    QuestionStatus,
    WorkItem,
    WorkStatus,
    WorkSubmission,
)
from shared.names import ProjectNames
from shared.work.context import SIMPLIFIED_NODES, work_hand_off
from shared.work.escalation import ASKER, CATEGORY, INSTRUCTIONS_HEADING
from shared.work.questions import QuestionBook
from shared.work.queue import WorkQueue
from shared.work.rules import Claimant
from testsupport.work import work_queue

A = "a" * 32
CODER = Claimant(A, "generic", ("code",), ("default",))


async def dead_letter(queue: WorkQueue) -> WorkItem:
    """An item that failed both its attempts; the second was claimed simplified."""
    item = await queue.submit(
        WorkSubmission(task_id="t", description="make the tests pass", capability="code", max_attempts=2)
    )
    for attempt in (1, 2):
        claimed = await queue.claim(CODER)
        assert claimed is not None and claimed.attempts == attempt
        assert claimed.simplify is (attempt == 2)
        await queue.fail(item.id, A, f"attempt {attempt}: tests fail")
    dead = await queue.get(item.id)
    assert dead.status is WorkStatus.DEAD_LETTERED
    return dead


async def dead_letter_in(nc: NatsClient, project_id: str) -> tuple[WorkQueue, QuestionBook, WorkItem]:
    names = ProjectNames(project_id)
    queue = work_queue(nc, names)
    return queue, QuestionBook(nc, names, queue), await dead_letter(queue)


async def test_a_dead_letter_is_put_to_a_person_once_and_a_retry_with_instructions_completes(
    nc: NatsClient, project_id: str
) -> None:
    queue, book, dead = await dead_letter_in(nc, project_id)
    report = Diagnosis(total_s=1.0)
    first, second = await asyncio.gather(
        book.escalate(dead, report, Priority.P1), book.escalate(dead, report, Priority.P1)
    )
    asked = first or second
    assert asked is not None and (first is None or second is None)  # two replicas: one question
    assert (asked.asked_by, asked.category, asked.work_id) == (ASKER, CATEGORY, dead.id)
    assert (asked.priority, asked.mode) == (Priority.P1, QuestionMode.ASYNC)  # the default policy's P1
    assert "failed all 2 attempts" in asked.question and "attempt 2: tests fail" in asked.question
    assert [q.id for q in await book.all()] == [asked.id]
    escalated = await queue.get(dead.id)
    assert escalated.escalation is not None and escalated.escalation.question_id == asked.id

    with pytest.raises(Invalid) as refused:
        await book.answer(asked.id, "try harder", by="alice")
    assert refused.value.field == "answer" and "try harder" not in str(refused.value)
    assert (await book.get(asked.id)).status is QuestionStatus.OPEN  # nothing lost
    assert (await queue.get(dead.id)).status is WorkStatus.DEAD_LETTERED

    await book.answer(asked.id, "retry: pin the fixture's clock", by="alice")
    retried = await queue.get(dead.id)
    assert retried.status is WorkStatus.QUEUED and retried.attempts == 0
    assert retried.description == "make the tests pass" + INSTRUCTIONS_HEADING + "pin the fixture's clock"
    assert retried.escalation is not None
    assert (retried.escalation.decision, retried.escalation.decided_by) == ("instructions", "alice")
    assert (await queue.dlq_list()).items == []
    claimed = await queue.claim(CODER)
    assert claimed is not None and claimed.id == dead.id and claimed.simplify is False
    done = await queue.complete(dead.id, A, "green")
    assert done.status is WorkStatus.COMPLETED


@pytest.mark.parametrize(
    ("answer", "status"),
    [
        ("capability: review", WorkStatus.QUEUED),
        ("skip", WorkStatus.DEAD_LETTERED),
        ("cancel", WorkStatus.CANCELLED),
    ],
)
async def test_each_decision_is_carried_out(
    nc: NatsClient, project_id: str, answer: str, status: WorkStatus
) -> None:
    queue, book, dead = await dead_letter_in(nc, project_id)
    asked = await book.escalate(dead, Diagnosis(total_s=0.5), Priority.P0)
    assert asked is not None and asked.mode is QuestionMode.SYNC  # the default policy's P0
    await book.answer(asked.id, answer, by="bob")
    after = await queue.get(dead.id)
    assert after.status is status
    assert (await queue.dlq_list()).items == []  # retried, discarded or cancelled: no letter left
    if answer.startswith("capability"):
        assert after.capability == "review"
        reviewer = Claimant(A, "generic", ("review",), ("default",))
        assert (await queue.claim(CODER)) is None and (await queue.claim(reviewer)) is not None


async def test_a_second_dead_letter_escalates_again_and_a_stopped_process_is_repaired(
    nc: NatsClient, project_id: str
) -> None:
    queue, book, dead = await dead_letter_in(nc, project_id)
    first = await book.escalate(dead, Diagnosis(total_s=1.0), Priority.P1)
    assert first is not None
    await book.answer(first.id, "retry", by="alice")
    for _ in (1, 2):
        assert await queue.claim(CODER) is not None
        await queue.fail(dead.id, A, "again")
    again = await queue.get(dead.id)
    assert again.status is WorkStatus.DEAD_LETTERED
    # A process that wrote the escalation on the item and stopped before storing the question:
    assert again.finished_at is not None
    lost = Escalation(
        failed_at=again.finished_at, question_id="f" * 32, priority=Priority.P0, report=Diagnosis(total_s=2.0)
    )
    assert await queue.escalate(dead.id, lost) is not None
    assert await book.repair_escalations([await queue.get(dead.id)], await book.all()) == 1
    stored = await book.get("f" * 32)
    assert (stored.category, stored.status, stored.mode) == (CATEGORY, QuestionStatus.OPEN, QuestionMode.SYNC)
    # ... and one that recorded the answer and stopped before carrying it out:
    await (await book.bucket()).put(
        stored.id,
        stored.model_copy(
            update={"status": QuestionStatus.ANSWERED, "answer": "cancel", "answered_by": "carol"}
        ).to_json_bytes(),
    )
    assert await book.repair_escalations([await queue.get(dead.id)], await book.all()) == 1
    cancelled = await queue.get(dead.id)
    assert cancelled.status is WorkStatus.CANCELLED and cancelled.escalation is not None
    assert cancelled.escalation.decided_by == "carol"
    assert await book.repair_escalations([cancelled], await book.all()) == 0  # nothing left to do


async def test_the_last_attempt_is_handed_only_the_essentials(nc: NatsClient, project_id: str) -> None:
    names = ProjectNames(project_id)
    contexts = ContextStore(nc, names)
    queue = work_queue(nc, names, contexts=contexts)
    item = await queue.submit(WorkSubmission(task_id="t", description="d", capability="code", max_attempts=2))
    claimed = await queue.claim(CODER)
    assert claimed is not None
    for n in range(12):
        await queue.progress(item.id, A, n, "progress " * 100)
    await queue.fail(item.id, A, "no")
    last = await queue.claim(CODER)
    assert last is not None and last.simplify
    simple = await work_hand_off(contexts, last, simplified=True)
    full = await work_hand_off(contexts, last)
    assert simple.simplified and not full.simplified
    assert len(simple.nodes) <= SIMPLIFIED_NODES < len(full.nodes)
    assert simple.next_cursor is not None  # the rest is still there to read


async def test_an_escalation_overtaken_by_a_retry_by_hand_is_withdrawn(
    nc: NatsClient, project_id: str
) -> None:
    queue, book, dead = await dead_letter_in(nc, project_id)
    asked = await book.escalate(dead, Diagnosis(total_s=1.0), Priority.P1)
    assert asked is not None
    assert (await queue.dlq_retry(dead.id)).status is WorkStatus.QUEUED  # from the DLQ, by hand
    assert await book.repair_escalations([await queue.get(dead.id)], await book.all()) == 1
    closed = await book.get(asked.id)
    assert (
        closed.status is QuestionStatus.EXPIRED and closed.resolution == "withdrawn: the item is queued now"
    )
    assert await book.repair_escalations([await queue.get(dead.id)], await book.all()) == 0
