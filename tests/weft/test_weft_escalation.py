"""Escalation through a real Weft (weft/project/escalation.py): the sweep writes a diagnostic
report on a dead letter and asks a person; a refused answer over REST names the field and
loses nothing; an answer is carried out; a project whose policy does not escalate keeps
its dead letters quiet; another project never sees the question."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
from nats.aio.client import Client as NatsClient
from weft_helpers import eventually

from shared.models import WorkItem, WorkStatus, WorkSubmission, utcnow
from shared.names import ProjectNames
from shared.work.escalation import CATEGORY, INSTRUCTIONS_HEADING, REPORT_AFTER
from shared.work.questions import QuestionBook
from shared.work.queue import WorkQueue
from shared.work.rules import Claimant
from testsupport.work import work_queue

A = "a" * 32
CODER = Claimant(A, "generic", ("code",), ("default",))


async def failed_every_attempt(queue: WorkQueue) -> WorkItem:
    item = await queue.submit(
        WorkSubmission(task_id="flaky", description="fix it", capability="code", max_attempts=2)
    )
    for _ in (1, 2):
        assert await queue.claim(CODER) is not None
        await queue.fail(item.id, A, "the build broke")
    return await queue.get(item.id)


async def test_a_dead_letter_gets_a_report_and_a_question_whose_answer_is_carried_out(
    weft: Any, api: httpx.AsyncClient, nc: NatsClient, project_id: str
) -> None:
    queue = work_queue(nc, ProjectNames(project_id))
    dead = await failed_every_attempt(queue)

    async def escalated() -> dict[str, Any] | None:
        shown = (await api.get(f"/api/work/{dead.id}")).json()
        return shown if shown.get("escalation") else None

    shown = await eventually(escalated, what="the sweep to escalate the dead letter")
    report = shown["escalation"]["report"]
    assert [a["error"] for a in report["attempts"]] == ["the build broke", "the build broke"]
    assert all(a["seconds"] is not None for a in report["attempts"])  # its trace timed each attempt
    assert report["spans"] > 0 and "work.claim" in report["seconds_by_operation"]
    question_id = shown["escalation"]["question_id"]
    listed = (await api.get("/api/questions", params={"work_id": dead.id})).json()["items"]
    assert [(q["id"], q["category"], q["priority"]) for q in listed] == [(question_id, CATEGORY, "P1")]

    refused = await api.post(f"/api/questions/{question_id}/answer", json={"answer": "do better"})
    assert refused.status_code == 400 and refused.json()["details"]["field"] == "answer"
    assert "do better" not in refused.text
    assert (await api.get(f"/api/questions/{question_id}")).json()["status"] == "open"

    answered = await api.post(
        f"/api/questions/{question_id}/answer",
        json={"answer": "retry: run the build with -j1", "by": "alice"},
    )
    assert answered.status_code == 200, answered.text
    item = (await api.get(f"/api/work/{dead.id}")).json()
    assert item["status"] == "queued" and item["attempts"] == 0
    assert item["description"] == "fix it" + INSTRUCTIONS_HEADING + "run the build with -j1"
    assert item["escalation"]["decision"] == "instructions" and item["escalation"]["decided_by"] == "alice"
    assert await queue.claim(CODER) is not None
    assert (await queue.complete(dead.id, A, "built")).status is WorkStatus.COMPLETED


async def test_a_project_that_does_not_escalate_keeps_its_dead_letters_quiet(
    weft: Any, api: httpx.AsyncClient, nc: NatsClient, project_id: str
) -> None:
    put = await api.put("/api/autonomy", json={"escalation": None}, params={"revision": 0})
    assert put.status_code == 200, put.text
    bad = await api.put("/api/autonomy", json={"escalation": "P3"}, params={"revision": 0})
    assert bad.status_code in (400, 422) and "escalation" in bad.text
    queue = work_queue(nc, ProjectNames(project_id))
    dead = await failed_every_attempt(queue)
    # A question with a short deadline: the sweep that expires it has escalated whatever it
    # would (escalations are swept first), so after that the dead letter is known to be quiet.
    book = QuestionBook(nc, ProjectNames(project_id), queue)
    due = REPORT_AFTER + timedelta(milliseconds=400)  # the dead letter is due for a report by then
    marker = await book.ask(A, "still there?", deadline=utcnow() + due)

    async def expired() -> bool:
        stored, _ = await book._load(marker.id)
        return stored.status.value == "expired"

    await eventually(expired, what="a sweep after the dead letter")
    assert (await queue.get(dead.id)).escalation is None
    assert [q.id for q in await book.all()] == [marker.id]


async def test_an_escalation_stays_inside_its_project(
    weft: Any, api: httpx.AsyncClient, nc: NatsClient, project_id: str
) -> None:
    queue = work_queue(nc, ProjectNames(project_id))
    dead = await failed_every_attempt(queue)

    async def escalated() -> str | None:
        item = await queue.get(dead.id)
        return item.escalation.question_id if item.escalation else None

    question_id = await eventually(escalated, what="the escalation")
    other = f"{project_id}-other"
    async with weft.client(project=other) as elsewhere:
        assert (await elsewhere.get(f"/api/questions/{question_id}")).status_code == 404
        refused = await elsewhere.post(f"/api/questions/{question_id}/answer", json={"answer": "cancel"})
        assert refused.status_code == 404
    assert (await queue.get(dead.id)).status is WorkStatus.DEAD_LETTERED
