"""Work over REST end to end: Weft submits, an agent (the shared WorkQueue, as Warp uses it) claims."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import httpx
from nats.aio.client import Client as NatsClient
from weft_helpers import WsClient, actions, claimant, eventually, register, ws_connect

from shared.models import ControlRequest, utcnow
from shared.names import ProjectNames
from testsupport.work import LATE, submit_due_soon, work_queue

SUBMISSION = {"task_id": "t-1", "description": "write the parser", "capability": "code"}


def submission(**changes: Any) -> dict[str, Any]:
    return {**SUBMISSION, **changes}


async def test_submit_claim_progress_complete_seen_over_rest_and_websocket(
    weft: Any, api: httpx.AsyncClient, nc: NatsClient, project_id: str
) -> None:
    agent = await register(nc, project_id)
    queue = work_queue(nc, ProjectNames(project_id))
    async with ws_connect(f"{weft.ws_url}/api/ws?topics=work") as conn:
        ws = WsClient(conn)
        welcome = await ws.next_of("welcome")
        assert welcome["project_id"] == project_id and welcome["subscriptions"][0]["topic"] == "work"

        created = await api.post("/api/work", json=submission(priority=7, context={"repo": "loom"}))
        assert created.status_code == 201, created.text
        item = created.json()
        work_id = item["id"]
        assert item["status"] == "queued" and item["priority"] == 7 and item["context"] == {"repo": "loom"}
        assert (await api.get(f"/api/work/{work_id}")).json()["status"] == "queued"

        claimed = await queue.claim(claimant(agent))
        assert claimed is not None and claimed.id == work_id
        shown = (await api.get(f"/api/work/{work_id}")).json()
        assert (
            shown["status"] == "claimed" and shown["assigned_to"] == agent.agent_id and shown["attempts"] == 1
        )

        await queue.progress(work_id, agent.agent_id, 50, "half way")
        shown = (await api.get(f"/api/work/{work_id}")).json()
        assert shown["status"] == "in-progress" and shown["progress"]["percent"] == 50
        assert shown["progress"]["note"] == "half way"

        await queue.complete(work_id, agent.agent_id, {"pr": 12})
        shown = (await api.get(f"/api/work/{work_id}")).json()
        assert shown["status"] == "completed" and shown["result"] == {"pr": 12}

        events = await ws.events_until(lambda evs: "work.completed" in actions(evs, work_id))
    assert actions(events, work_id) == [
        "work.submitted",
        "work.queued",
        "work.claimed",
        "work.progress",
        "work.completed",
    ]
    assert [e["data"]["item"]["status"] for e in events if e["subject_id"] == work_id][2:] == [
        "claimed",
        "in-progress",
        "completed",
    ]


async def test_list_filters_and_paging(api: httpx.AsyncClient, nc: NatsClient, project_id: str) -> None:
    agent = await register(nc, project_id, capabilities=("code", "docs"), boundaries=("default", "corporate"))
    ids: dict[str, str] = {}
    for name, extra in {
        "a": {"capability": "code"},
        "b": {"capability": "docs"},
        "c": {"capability": "code", "boundary": "corporate"},
        "d": {"capability": "code"},
    }.items():
        response = await api.post("/api/work", json=submission(task_id=name, **extra))
        ids[name] = response.json()["id"]
    queue = work_queue(nc, ProjectNames(project_id))
    taken = await queue.claim(claimant(agent))
    assert taken is not None

    async def listed(**params: Any) -> set[str]:
        page = (await api.get("/api/work", params=params)).json()
        return {i["task_id"] for i in page["items"]}

    assert await listed() == {"a", "b", "c", "d"}
    assert await listed(capability="docs") == {"b"}
    assert await listed(boundary="corporate") == {"c"}
    assert await listed(status="claimed") == {taken.task_id}
    assert await listed(assigned_to=agent.agent_id) == {taken.task_id}
    assert await listed(status="queued") == {"a", "b", "c", "d"} - {taken.task_id}
    assert await listed(status="completed") == set()

    seen: list[str] = []
    cursor = None
    for _ in range(5):
        params: dict[str, Any] = {"limit": 3}
        if cursor:
            params["cursor"] = cursor
        page = (await api.get("/api/work", params=params)).json()
        assert page["total"] == 4
        seen += [i["task_id"] for i in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == ["d", "c", "b", "a"]  # newest first, each once


async def test_cancel_queued_and_claimed_tells_the_agent(
    api: httpx.AsyncClient, nc: NatsClient, project_id: str
) -> None:
    agent = await register(nc, project_id)
    names = ProjectNames(project_id)
    queue = work_queue(nc, names)
    queued = (await api.post("/api/work", json=submission(task_id="q"))).json()
    cancelled = await api.post(f"/api/work/{queued['id']}/cancel", json={"reason": "not needed"})
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert "not needed" in cancelled.json()["error"]
    assert await queue.claim(claimant(agent)) is None  # gone from the queue

    control = await nc.subscribe(names.control_subject(agent.agent_id))
    held = (await api.post("/api/work", json=submission(task_id="held"))).json()
    assert (await queue.claim(claimant(agent))) is not None
    response = await api.post(f"/api/work/{held['id']}/cancel")  # no body: reason optional
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    message = await control.next_msg(timeout=5)
    request = ControlRequest.model_validate_json(message.data)
    assert request.action == "cancel-work" and request.work_id == held["id"]
    await control.unsubscribe()

    again = await api.post(f"/api/work/{held['id']}/cancel")
    assert again.status_code == 409 and again.json()["error"] == "conflict"
    assert "cancelled" in again.json()["message"]


async def test_cancel_batch_reports_each_item(api: httpx.AsyncClient, project_id: str) -> None:
    one = (await api.post("/api/work", json=submission(task_id="1"))).json()["id"]
    two = (await api.post("/api/work", json=submission(task_id="2"))).json()["id"]
    await api.post(f"/api/work/{two}/cancel")
    missing = "0" * 32
    response = await api.post(
        "/api/work/cancel-batch", json={"work_ids": [one, two, missing], "reason": "sweep"}
    )
    assert response.status_code == 200
    body = response.json()
    by_id = {r["id"]: r for r in body["results"]}
    assert by_id[one]["ok"] and by_id[one]["status"] == "cancelled"
    assert not by_id[two]["ok"] and by_id[two]["error"]["error"] == "conflict"
    assert not by_id[missing]["ok"] and by_id[missing]["error"]["error"] == "not_found"
    assert body["succeeded"] == 1 and body["failed"] == 2
    empty = await api.post("/api/work/cancel-batch", json={"work_ids": []})
    assert empty.status_code == 422 and empty.json()["details"]["errors"][0]["field"] == "work_ids"


async def test_failures_dead_letter_then_retry_and_discard(
    api: httpx.AsyncClient, nc: NatsClient, project_id: str
) -> None:
    agent = await register(nc, project_id)
    queue = work_queue(nc, ProjectNames(project_id))
    first = (await api.post("/api/work", json=submission(task_id="f1", max_attempts=1))).json()["id"]
    second = (await api.post("/api/work", json=submission(task_id="f2", max_attempts=1))).json()["id"]
    for _ in range(2):
        item = await queue.claim(claimant(agent))
        assert item is not None
        await queue.fail(item.id, agent.agent_id, "compiler exploded")
    assert (await api.get(f"/api/work/{first}")).json()["status"] == "dead-lettered"

    letters = (await api.get("/api/dlq")).json()
    assert {d["item"]["id"] for d in letters["items"]} == {first, second}
    assert all(d["item"]["errors"][0]["error"] == "compiler exploded" for d in letters["items"])
    page = (await api.get("/api/dlq", params={"limit": 1})).json()
    assert len(page["items"]) == 1 and page["next_cursor"]
    rest = (await api.get("/api/dlq", params={"limit": 1, "cursor": page["next_cursor"]})).json()
    assert {page["items"][0]["item"]["id"], rest["items"][0]["item"]["id"]} == {first, second}
    assert (await api.get("/api/dlq", params={"capability": "docs"})).json()["items"] == []

    retried = await api.post(f"/api/dlq/{first}/retry")
    assert (
        retried.status_code == 200
        and retried.json()["status"] == "queued"
        and retried.json()["attempts"] == 0
    )
    again = await queue.claim(claimant(agent))
    assert again is not None and again.id == first

    discarded = await api.delete(f"/api/dlq/{second}")
    assert discarded.status_code == 200 and discarded.json()["id"] == second
    assert (await api.get("/api/dlq")).json()["items"] == []
    gone = await api.delete(f"/api/dlq/{second}")
    assert gone.status_code == 404 and gone.json()["error"] == "not_found"

    not_failed = await api.post(f"/api/work/{first}/retry")
    assert not_failed.status_code == 409 and "only failed or dead-lettered" in not_failed.json()["message"]


async def test_retry_failed_work_over_rest(api: httpx.AsyncClient, nc: NatsClient, project_id: str) -> None:
    agent = await register(nc, project_id)
    queue = work_queue(nc, ProjectNames(project_id))
    work_id = (await api.post("/api/work", json=submission(max_attempts=1))).json()["id"]
    item = await queue.claim(claimant(agent))
    assert item is not None
    await queue.fail(work_id, agent.agent_id, "flaky", retryable=False)
    response = await api.post(f"/api/work/{work_id}/retry")
    assert response.status_code == 200 and response.json()["status"] == "queued"
    assert (await queue.claim(claimant(agent))) is not None


async def test_sweeper_expires_queued_work_past_its_deadline(api: httpx.AsyncClient) -> None:
    async def post(deadline: datetime) -> httpx.Response | None:
        response = await api.post("/api/work", json=submission(deadline=deadline.isoformat()))
        late = response.status_code == 400 and response.json()["message"] == LATE
        return None if late else response

    response = await submit_due_soon(post)
    assert response.status_code == 201, response.text
    work_id = response.json()["id"]

    async def expired() -> bool:
        return (await api.get(f"/api/work/{work_id}")).json()["status"] == "expired"

    await eventually(expired, what="the sweeper to expire the item")


async def test_bad_input_is_a_clear_4xx(api: httpx.AsyncClient) -> None:
    past = (utcnow() - timedelta(hours=1)).isoformat()
    cases: list[tuple[dict[str, Any], str]] = [
        ({"description": "x", "capability": "code"}, "task_id"),
        (submission(capability="Not A Token"), "capability"),
        (submission(priority=11), "priority"),
        (submission(deadline="2030-01-01T00:00:00"), "deadline"),
        (submission(unexpected=True), "unexpected"),
        (submission(context=[1, 2]), "context"),
    ]
    for body, field in cases:
        response = await api.post("/api/work", json=body)
        assert response.status_code == 422, (body, response.text)
        error = response.json()
        assert error["error"] == "validation_error" and field in error["message"], error
    # a rule checked when the item is queued, not by the schema: code "invalid" is always a 400
    late = await api.post("/api/work", json=submission(deadline=past))
    assert late.status_code == 400, late.text
    assert late.json() == {
        "error": "invalid",
        "message": "deadline: must be in the future",
        "details": {"field": "deadline"},
    }

    raw = await api.post("/api/work", content=b"{not json", headers={"Content-Type": "application/json"})
    assert raw.status_code == 422 and raw.json()["error"] == "validation_error"
    assert raw.json()["details"]["errors"][0]["field"] == "body" and "not valid JSON" in raw.json()["message"]
    missing = await api.post("/api/work")
    assert missing.status_code == 422 and missing.json()["details"]["errors"][0]["field"] == "body"
    bad_id = await api.get("/api/work/not-an-id")
    assert bad_id.status_code == 422 and bad_id.json()["details"]["errors"][0]["field"] == "work_id"
    unknown = await api.get(f"/api/work/{'f' * 32}")
    assert unknown.status_code == 404 and "no work item" in unknown.json()["message"]
    cursor = await api.get("/api/work", params={"cursor": "garbage!"})
    assert cursor.status_code == 400 and cursor.json()["error"] == "invalid_cursor"
    limit = await api.get("/api/work", params={"limit": 0})
    assert limit.status_code == 422 and limit.json()["details"]["errors"][0]["field"] == "limit"
    status = await api.get("/api/work", params={"status": "sleeping"})
    assert status.status_code == 422 and status.json()["details"]["errors"][0]["field"] == "status"
    capability = await api.get("/api/work", params={"capability": "A B"})
    assert capability.status_code == 400 and capability.json()["details"]["field"] == "capability"
    route = await api.get("/api/nothing-here")
    assert route.status_code == 404 and route.json()["error"] == "not_found"
    method = await api.put("/api/work")
    assert method.status_code == 405 and method.json()["error"] == "method_not_allowed"
