"""Questions over REST and the WebSocket: list, show, answer (with choices), 409 once
answered, the sweeper resolving a question past its deadline, and project isolation."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
from nats.aio.client import Client as NatsClient
from weft_helpers import WsClient, eventually, ws_connect

from shared.models import WorkSubmission, utcnow
from shared.names import ProjectNames
from shared.work.questions import QuestionBook
from shared.work.queue import WorkQueue
from shared.work.rules import Claimant
from testsupport.work import work_queue

A = "a" * 32


async def held_work(nc: NatsClient, project_id: str) -> tuple[WorkQueue, QuestionBook, str]:
    queue = work_queue(nc, ProjectNames(project_id))
    item = await queue.submit(WorkSubmission(task_id="t", description="d", capability="code"))
    assert await queue.claim(Claimant(agent_id=A, agent_type="generic", capabilities=("code",))) is not None
    return queue, QuestionBook(nc, ProjectNames(project_id), queue), item.id


async def test_operators_see_and_answer_questions_and_the_work_goes_on(
    weft: Any, api: httpx.AsyncClient, nc: NatsClient, project_id: str
) -> None:
    _, book, work_id = await held_work(nc, project_id)
    async with ws_connect(f"{weft.ws_url}/api/ws?topics=questions,work&work_id={work_id}") as conn:
        ws = WsClient(conn)
        await ws.next_of("welcome")
        asked = await book.ask(
            A, "postgres or sqlite?", choices=["postgres", "sqlite"], work_id=work_id, handle="bot"
        )
        listed = (await api.get("/api/questions")).json()
        assert [q["id"] for q in listed["items"]] == [asked.id] and listed["total"] == 1
        assert listed["items"][0]["status"] == "open" and listed["items"][0]["asked_by_handle"] == "bot"
        assert (await api.get("/api/questions", params={"status": "answered"})).json()["items"] == []
        assert (await api.get("/api/questions", params={"work_id": work_id})).json()["total"] == 1
        assert (await api.get(f"/api/work/{work_id}")).json()["status"] == "waiting-on-operator"

        refused = await api.post(f"/api/questions/{asked.id}/answer", json={"answer": "oracle"})
        assert refused.status_code == 400
        assert refused.json()["message"] == "answer: must be one of the question's choices (postgres, sqlite)"
        assert "oracle" not in refused.text
        answered = await api.post(
            f"/api/questions/{asked.id}/answer", json={"answer": "sqlite", "by": "alice"}
        )
        assert answered.status_code == 200, answered.text
        assert (answered.json()["status"], answered.json()["answer"]) == ("answered", "sqlite")
        again = await api.post(f"/api/questions/{asked.id}/answer", json={"answer": "postgres"})
        assert again.status_code == 409 and again.json()["details"]["field"] == "question_id"
        assert (await api.get(f"/api/work/{work_id}")).json()["status"] == "in-progress"

        def seen(events: list[dict[str, Any]]) -> list[str]:
            return [f"{e['kind']}.{e['action']}" for e in events]

        events = await ws.events_until(
            lambda evs: "work.resumed" in seen(evs) and "question.answered" in seen(evs)
        )
    kinds = seen(events)
    assert kinds.index("question.asked") < kinds.index("question.answered")
    assert "work.waiting-on-operator" in kinds and kinds.index("work.waiting-on-operator") < kinds.index(
        "work.resumed"
    )
    answered_event = next(e for e in events if e["kind"] == "question" and e["action"] == "answered")
    assert answered_event["data"]["question"]["answer"] == "sqlite"


async def test_bad_answers_and_ids_are_refused_naming_the_field(api: httpx.AsyncClient) -> None:
    secret = "ghp_Zq9TOKENsEcReT42xYwVb"
    for body, field in (({"answer": ""}, "answer"), ({"answer": "x", "by": secret}, "by"), ({}, "answer")):
        response = await api.post(f"/api/questions/{'0' * 32}/answer", json=body)
        assert response.status_code == 422, response.text
        assert field in {e["field"] for e in response.json()["details"]["errors"]}
        assert secret not in response.text
    missing = await api.post(f"/api/questions/{'0' * 32}/answer", json={"answer": "x"})
    assert (
        missing.status_code == 404
        and missing.json()["message"] == "question_id: no question with this id in this project"
    )
    assert (await api.get("/api/questions/nothex")).status_code == 422
    assert (await api.get("/api/questions", params={"status": "maybe"})).status_code == 422
    bad_work = await api.get("/api/questions", params={"work_id": secret})
    assert bad_work.status_code == 400 and secret not in bad_work.text


async def test_the_sweeper_resolves_a_question_past_its_deadline(
    api: httpx.AsyncClient, nc: NatsClient, project_id: str
) -> None:
    queue, book, work_id = await held_work(nc, project_id)
    asked = await book.ask(A, "ship it?", work_id=work_id, deadline=utcnow() + timedelta(milliseconds=300))

    async def expired() -> bool:
        stored, _ = await book._load(asked.id)  # the record itself, not a read that resolves it
        return stored.status.value == "expired"

    await eventually(expired, what="the sweeper to resolve the question")
    shown = (await api.get(f"/api/questions/{asked.id}")).json()
    assert shown["answer"] is None and shown["resolution"].startswith("no answer before the deadline")
    assert (await queue.get(work_id)).status.value == "in-progress"


async def test_questions_stay_inside_their_project(weft: Any, nc: NatsClient, project_id: str) -> None:
    _, book, _ = await held_work(nc, project_id)
    asked = await book.ask(A, "mine?")
    async with weft.client(project=f"{project_id}-x") as theirs, weft.client(project=project_id) as mine:
        assert (await theirs.get("/api/questions")).json()["items"] == []
        assert (await theirs.get(f"/api/questions/{asked.id}")).status_code == 404
        assert (
            await theirs.post(f"/api/questions/{asked.id}/answer", json={"answer": "no"})
        ).status_code == 404
        assert (await mine.get(f"/api/questions/{asked.id}")).json()["status"] == "open"
