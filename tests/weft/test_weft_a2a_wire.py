"""A2A on the wire, as the specifications state it (A2A 1.0 and its 0.3 line, JSON-RPC 2.0),
posted as raw JSON-RPC over real HTTP to a real Weft: the answers a conformance kit checks
that the SDK's own client (tests/weft/test_weft_a2a.py) never sends (issue 34).

The error codes are A2A's table: -32001 task not found, -32005 content type not supported,
-32600 invalid request, -32602 invalid params."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from a2a.types import AgentCard
from google.protobuf import json_format
from nats.aio.client import Client as NatsClient
from weft_helpers import claimant, eventually, message_0_3, message_json, register, rpc

from shared.names import ProjectNames
from shared.work.questions import QuestionBook
from testsupport.work import work_queue

pytestmark = pytest.mark.timeout(120)

TOKEN = "a2a-wire-token-1"
V1 = {"A2A-Version": "1.0"}
TASK_NOT_FOUND = -32001
CONTENT_TYPE_NOT_SUPPORTED = -32005
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602


def queued_send() -> dict[str, Any]:
    """SendMessage params that answer with the task as queued."""
    return {"message": message_json(), "configuration": {"returnImmediately": True}}


@pytest.fixture
async def weft(weft_factory: Any, project_id: str) -> Any:
    async with weft_factory(project_id=project_id, api_tokens=TOKEN, a2a_push_private_urls=True) as running:
        yield running


async def test_the_cards_url_with_a_trailing_slash_is_the_endpoint_not_a_redirect(
    weft: Any, project_id: str
) -> None:
    async with weft.client(TOKEN) as api:
        sent = await api.post(
            f"/a2a/{project_id}/",
            headers=V1,
            json=rpc("SendMessage", queued_send()),
        )
        assert sent.status_code == 200, sent.text  # not 307: JSON-RPC clients do not follow one
        task = sent.json()["result"]["task"]
        got = await api.post(f"/a2a/{project_id}/", json=rpc("tasks/get", {"id": task["id"]}))
        assert got.json()["result"]["id"] == task["id"]
    async with weft.client(None) as anonymous:  # the same door, the same lock
        refused = await anonymous.post(f"/a2a/{project_id}/", json=rpc("tasks/get", {"id": task["id"]}))
    assert refused.status_code == 401


async def test_error_codes_follow_the_a2a_table(weft: Any, project_id: str) -> None:
    url = f"/a2a/{project_id}"
    async with weft.client(TOKEN) as api:
        # a task id of another shape than Loom's names no task: not found, for 1.0 and 0.3
        foreign = "tck-nonexistent-task-0001"
        for answer in (
            await api.post(url, headers=V1, json=rpc("GetTask", {"id": foreign})),
            await api.post(url, json=rpc("tasks/get", {"id": foreign})),
            await api.post(url, headers=V1, json=rpc("CancelTask", {"id": foreign})),
        ):
            error = answer.json()["error"]
            assert error["code"] == TASK_NOT_FOUND, error
            assert "no task with this id" in error["message"] and foreign not in answer.text

        # a file part (a media type Loom's work does not carry): content type not supported
        file_part = {"raw": "aGVsbG8=", "filename": "notes.bin", "mediaType": "application/x-secret-kind"}
        sent = await api.post(url, headers=V1, json=rpc("SendMessage", {"message": message_json(file_part)}))
        error = sent.json()["error"]
        assert error["code"] == CONTENT_TYPE_NOT_SUPPORTED, error
        assert "message.parts.0" in error["message"] and "x-secret-kind" not in sent.text

        # 0.3 params that do not parse: invalid params (the envelope was fine), without the value
        bad_03 = await api.post(url, json=rpc("tasks/get", {"id": {"nested": "sk-LIVE-77aa"}}))
        error = bad_03.json()["error"]
        assert error["code"] == INVALID_PARAMS and "sk-LIVE-77aa" not in bad_03.text, error

        # an envelope that is not a JSON-RPC request: invalid request
        no_envelope = await api.post(url, json={"jsonrpc": "2.0", "id": 3, "method": 42})
        assert no_envelope.json()["error"]["code"] == INVALID_REQUEST


async def test_push_configuration_get_without_its_id_and_delete_answers_null(
    weft: Any, project_id: str
) -> None:
    url = f"/a2a/{project_id}"
    hook = "http://127.0.0.1:9/a2a-events"  # registered, never called: the task stays queued
    async with weft.client(TOKEN) as api:
        sent = await api.post(
            url, json=rpc("message/send", {"message": message_0_3(), "configuration": {"blocking": False}})
        )
        task_id = sent.json()["result"]["id"]
        nothing = await api.post(url, json=rpc("tasks/pushNotificationConfig/get", {"id": task_id}))
        assert nothing.json()["error"]["code"] == TASK_NOT_FOUND  # none registered yet

        created = await api.post(
            url,
            json=rpc(
                "tasks/pushNotificationConfig/set",
                {"taskId": task_id, "pushNotificationConfig": {"url": hook}},
            ),
        )
        assert "result" in created.json(), created.text
        # 0.3: pushNotificationConfigId is optional; without it, the task's configuration
        got = await api.post(url, json=rpc("tasks/pushNotificationConfig/get", {"id": task_id}))
        result = got.json()["result"]
        assert result["taskId"] == task_id and result["pushNotificationConfig"]["url"] == hook

        deleted = await api.post(
            url,
            json=rpc(
                "tasks/pushNotificationConfig/delete", {"id": task_id, "pushNotificationConfigId": task_id}
            ),
        )
        assert deleted.json() == {"jsonrpc": "2.0", "id": 7, "result": None}
        again = await api.post(url, json=rpc("tasks/pushNotificationConfig/get", {"id": task_id}))
        assert again.json()["error"]["code"] == TASK_NOT_FOUND

        # the same through the 1.0 names
        await api.post(
            url, headers=V1, json=rpc("CreateTaskPushNotificationConfig", {"taskId": task_id, "url": hook})
        )
        deleted_1 = await api.post(
            url, headers=V1, json=rpc("DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": task_id})
        )
        assert deleted_1.json() == {"jsonrpc": "2.0", "id": 7, "result": None}


def state_in(result: dict[str, Any]) -> str | None:
    """The task state a 1.0 stream response carries (a task, or a status update)."""
    for key in ("task", "statusUpdate"):
        if key in result:
            return str(result[key]["status"]["state"])
    return None


async def streamed_states(api: httpx.AsyncClient, url: str, body: dict[str, Any]) -> list[str]:
    """Every state a server-sent stream carries, until the server closes it."""
    states = []
    async with api.stream("POST", url, headers=V1, json=body) as response:
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                found = state_in(json.loads(line[5:])["result"])
                if found:
                    states.append(found)
    return states


async def test_input_required_keeps_a_subscription_open_and_a_blocking_answer_waits(
    weft: Any, nc: NatsClient, project_id: str
) -> None:
    """A subscription ends at a final state, not at input-required; an answer sent blocking
    returns once the task has ended (or asks again), as a blocking send of a new task does."""
    url = f"/a2a/{project_id}"
    async with weft.client(TOKEN) as api, weft.client(TOKEN) as listener:
        sent = await api.post(
            url,
            headers=V1,
            json=rpc("SendMessage", queued_send()),
        )
        task_id = sent.json()["result"]["task"]["id"]
        entry = await register(nc, project_id)
        queue = work_queue(nc, ProjectNames(project_id))
        await eventually(lambda: queue.claim(claimant(entry)), timeout=20, what="the item claimed")
        book = QuestionBook(nc, ProjectNames(project_id), queue)
        asked = await book.ask(entry.agent_id, "postgres or sqlite?", work_id=task_id)

        async def input_required() -> bool | None:
            got = (await api.post(url, headers=V1, json=rpc("GetTask", {"id": task_id}))).json()["result"]
            return got["status"]["state"] == "TASK_STATE_INPUT_REQUIRED" or None

        await eventually(input_required, timeout=20, what="the task to need input")
        subscription = asyncio.create_task(
            streamed_states(listener, url, rpc("SubscribeToTask", {"id": task_id}))
        )
        answer = message_json({"text": "sqlite"}) | {"taskId": task_id}
        blocking = asyncio.create_task(
            api.post(
                url,
                headers=V1,
                json=rpc("SendMessage", {"message": answer, "configuration": {"historyLength": 0}}),
            )
        )

        async def answered() -> bool | None:
            return (await book.get(asked.id)).answer == "sqlite" or None

        await eventually(answered, timeout=20, what="the answer recorded")
        # the agent has not finished: neither the blocking answer nor the subscription is over
        done, _ = await asyncio.wait({blocking, subscription}, timeout=2)
        assert done == set(), [t.result() for t in done]
        await queue.complete((await queue.get(task_id)).id, entry.agent_id, "done: sqlite it is")
        finished = (await asyncio.wait_for(blocking, 60)).json()["result"]["task"]
        states = await asyncio.wait_for(subscription, 60)
    assert finished["status"]["state"] == "TASK_STATE_COMPLETED"
    assert not finished.get("history")  # historyLength 0 holds for a follow-up too
    assert states[0] == "TASK_STATE_INPUT_REQUIRED" and states[-1] == "TASK_STATE_COMPLETED", states


async def test_the_card_is_the_1_0_document_for_a_1_0_client_and_revalidates(
    weft: Any, project_id: str
) -> None:
    path = f"/a2a/{project_id}/.well-known/agent-card.json"
    async with weft.client(TOKEN) as api:
        strict = await api.get(path, headers=V1)
        legacy = await api.get(path)
        again = await api.get(path, headers={**V1, "If-None-Match": strict.headers["etag"]})
    card = strict.json()
    allowed = {field.json_name for field in AgentCard.DESCRIPTOR.fields}
    assert set(card) <= allowed, set(card) - allowed  # the 1.0 schema's fields only
    json_format.ParseDict(card, AgentCard())  # strict parse: no unknown field anywhere
    assert card["supportedInterfaces"][0]["protocolVersion"] == "1.0"
    # without the version header, the document also carries what 0.3 clients read
    assert legacy.json()["url"] == card["supportedInterfaces"][0]["url"]
    assert {"preferredTransport", "protocolVersion"} <= set(legacy.json())
    assert strict.headers["etag"] != legacy.headers["etag"]
    assert strict.headers["cache-control"] == "public, max-age=30"  # the same for every caller
    assert again.status_code == 304 and again.content == b""


async def test_list_tasks_refuses_a_status_naming_no_state_and_keeps_an_equal_timestamp(
    weft: Any, project_id: str
) -> None:
    """A ``status`` filter that names no task state is -32602 (the SDK's parser would drop
    the name and list every task); ``statusTimestampAfter`` is "at or after" (A2A 1.0's
    ListTasksRequest): a task updated at exactly that instant is listed."""
    url = f"/a2a/{project_id}"
    async with weft.client(TOKEN) as api:
        sent = await api.post(
            url,
            headers=V1,
            json=rpc("SendMessage", queued_send()),
        )
        task = sent.json()["result"]["task"]
        for status in ("TASK_STATE_S3CR3T", 42, True, {"name": "s3cr3t"}):
            answer = await api.post(url, headers=V1, json=rpc("ListTasks", {"status": status}, ident=11))
            body = answer.json()
            assert body["id"] == 11 and body["error"]["code"] == INVALID_PARAMS, body
            assert body["error"]["message"].startswith("status: must be one of the A2A task states")
            assert "S3CR3T" not in answer.text.upper() and "42" not in body["error"]["message"]

        listed = await api.post(url, headers=V1, json=rpc("ListTasks", {"status": "TASK_STATE_SUBMITTED"}))
        assert [t["id"] for t in listed.json()["result"]["tasks"]] == [task["id"]]
        stamp = task["status"]["timestamp"]
        at = await api.post(url, headers=V1, json=rpc("ListTasks", {"statusTimestampAfter": stamp}))
        assert [t["id"] for t in at.json()["result"]["tasks"]] == [task["id"]]
