"""A2A 1.0's HTTP+JSON binding (issue 34): the SDK's own REST client, chosen from the card,
against a real Weft and the real work queue as the agent; and raw requests for what a
conformance kit checks (status codes, the error shape, no echo of the input, the token and
the project of the URL)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from a2a.client import Client, ClientConfig, create_client
from a2a.types import (
    CancelTaskRequest,
    GetExtendedAgentCardRequest,
    GetTaskRequest,
    ListTasksRequest,
    SendMessageConfiguration,
    StreamResponse,
    TaskState,
)
from a2a.utils.constants import TransportProtocol
from nats.aio.client import Client as NatsClient
from weft_helpers import claimant, eventually, message, message_json, register

from shared.artifacts import WorkArtifact
from shared.names import ProjectNames
from testsupport.work import work_queue

pytestmark = pytest.mark.timeout(120)

TOKEN = "a2a-rest-token-1"
V1 = {"A2A-Version": "1.0"}


@pytest.fixture
async def weft(weft_factory: Any, project_id: str) -> AsyncIterator[Any]:
    async with weft_factory(project_id=project_id, api_tokens=TOKEN) as running:
        yield running


@asynccontextmanager
async def rest_client(weft: Any, project: str, *, streaming: bool = True) -> AsyncIterator[Client]:
    """The SDK's client restricted to the HTTP+JSON binding, built from the public card."""
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as http:
        config = ClientConfig(
            httpx_client=http,
            streaming=streaming,
            supported_protocol_bindings=[TransportProtocol.HTTP_JSON.value],
        )
        client = await create_client(f"{weft.base_url}/a2a/{project}", config)
        try:
            yield client
        finally:
            await client.close()


async def test_the_card_lists_the_binding_and_the_sdk_client_speaks_it(
    weft: Any, nc: NatsClient, project_id: str
) -> None:
    async with weft.client() as anyone:
        card = (await anyone.get(f"/a2a/{project_id}/.well-known/agent-card.json")).json()
    bindings = [(i["protocolBinding"], i["protocolVersion"]) for i in card["supportedInterfaces"]]
    assert bindings == [("JSONRPC", "1.0"), ("HTTP+JSON", "1.0"), ("JSONRPC", "0.3")]

    queue = work_queue(nc, ProjectNames(project_id))
    entry = await register(nc, project_id)
    async with rest_client(weft, project_id) as client:
        events: list[StreamResponse] = []
        request = message()

        async def agent() -> None:
            async def claim() -> Any:
                return await queue.claim(claimant(entry))

            item = await eventually(claim, timeout=20, what="the item to claim")
            await queue.progress(item.id, entry.agent_id, 50, "half way")
            patch = WorkArtifact.model_validate(
                {
                    "name": "patch",
                    "parts": [
                        {"kind": "file", "name": "fix.diff", "media_type": "text/x-diff", "bytes": "LSsK"}
                    ],
                }
            )
            await queue.complete(item.id, entry.agent_id, "ported: 4f2a", artifacts=[patch])

        working = asyncio.create_task(agent())
        async for event in client.send_message(request):
            events.append(event)
        await working
        task_id = events[0].task.id
        final = [e.status_update.status.state for e in events if e.HasField("status_update")][-1]
        assert final == TaskState.TASK_STATE_COMPLETED

        got = await client.get_task(GetTaskRequest(id=task_id, history_length=0))
        assert got.id == task_id and got.status.state == TaskState.TASK_STATE_COMPLETED
        result, patch = got.artifacts
        assert result.parts[0].text == "ported: 4f2a"
        assert (patch.name, patch.parts[0].raw, patch.parts[0].filename) == ("patch", b"-+\n", "fix.diff")
        streamed = [e.artifact_update.artifact.name for e in events if e.HasField("artifact_update")]
        assert streamed == ["result", "patch"]
        listed = await client.list_tasks(ListTasksRequest())
        assert [t.id for t in listed.tasks] == [task_id]
        extended = await client.get_extended_agent_card(GetExtendedAgentCardRequest())
        assert [s.id for s in extended.skills] == ["code"]

    async with rest_client(weft, project_id, streaming=False) as blocking:
        waiting = message("Wait for me")
        waiting.configuration.CopyFrom(SendMessageConfiguration(return_immediately=True))
        sent = [event async for event in blocking.send_message(waiting)]
        queued = sent[0].task
        assert queued.status.state == TaskState.TASK_STATE_SUBMITTED
        cancelled = await blocking.cancel_task(CancelTaskRequest(id=queued.id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED


async def test_raw_requests_get_the_binding_s_status_codes_without_an_echo(
    weft: Any, project_id: str
) -> None:
    base = f"/a2a/{project_id}"
    auth = {"Authorization": f"Bearer {TOKEN}", **V1}
    async with weft.client() as http:
        anonymous = await http.get(f"{base}/tasks", headers=V1)
        assert anonymous.status_code == 401 and anonymous.json()["error"] == "unauthorized"

        missing = await http.get(f"{base}/tasks/{'f' * 32}", headers=auth)
        assert missing.status_code == 404
        assert missing.json()["error"]["details"][0]["reason"] == "TASK_NOT_FOUND"
        other_shape = await http.get(f"{base}/tasks/tck-nonexistent-s3cr3t", headers=auth)
        assert other_shape.status_code == 404 and "s3cr3t" not in other_shape.text

        broken = await http.post(
            f"{base}/message:send", headers=auth, content=b'{"message": {"role": 7, "x":'
        )
        assert broken.status_code == 400
        assert broken.json()["error"]["message"].startswith("body: must be the JSON form of an A2A 1.0")
        wrong_type = await http.post(
            f"{base}/message:send", headers=auth, json={"message": {"parts": "s3cr3t-not-a-list"}}
        )
        assert wrong_type.status_code == 400 and "s3cr3t" not in wrong_type.text

        old = await http.get(f"{base}/tasks", headers={**auth, "A2A-Version": "0.9-s3cr3t"})
        assert old.status_code == 400 and "s3cr3t" not in old.text
        assert old.json()["error"]["message"].startswith("A2A-Version:")

        bad_query = await http.get(f"{base}/tasks", headers=auth, params={"pageSize": "s3cr3t"})
        assert bad_query.status_code == 422 and "s3cr3t" not in bad_query.text
        unknown = await http.get(f"{base}/tasks", headers=auth, params={"projectId": "x"})
        assert unknown.status_code == 422 and unknown.json()["details"]["errors"][0]["field"] == "projectId"

        mismatch = await http.get(f"{base}/tasks", headers={**auth, "X-Loom-Project": f"{project_id}-b"})
        assert mismatch.status_code == 400 and mismatch.json()["error"] == "invalid_project"


async def test_a_task_of_one_project_is_not_found_through_another_s_url(weft: Any, project_id: str) -> None:
    async with rest_client(weft, project_id, streaming=False) as client:
        request = message()
        request.configuration.CopyFrom(SendMessageConfiguration(return_immediately=True))
        (sent,) = [event async for event in client.send_message(request)]
        task = sent.task
    async with weft.client() as http:
        auth = {"Authorization": f"Bearer {TOKEN}", **V1}
        elsewhere = await http.get(f"/a2a/{project_id}-b/tasks/{task.id}", headers=auth)
        here = await http.get(f"/a2a/{project_id}/tasks/{task.id}", headers=auth)
    assert elsewhere.status_code == 404 and here.status_code == 200


async def test_errors_carry_the_http_status_the_specification_maps_them_to(
    weft: Any, project_id: str
) -> None:
    """A2A 1.0 §5.4: a task that cannot be cancelled is 409, a media type Loom's work does not
    carry 415 (the SDK answers both 400); a ListTasks ``status`` that names no state is 400
    INVALID_PARAMS, naming the field without the value."""
    base = f"/a2a/{project_id}"
    auth = {"Authorization": f"Bearer {TOKEN}", **V1}
    async with weft.client() as http:
        body = {"message": message_json()}
        sent = await http.post(
            f"{base}/message:send", headers=auth, json={**body, "configuration": {"returnImmediately": True}}
        )
        task_id = sent.json()["task"]["id"]
        assert (await http.post(f"{base}/tasks/{task_id}:cancel", headers=auth)).status_code == 200
        again = await http.post(f"{base}/tasks/{task_id}:cancel", headers=auth)
        assert again.status_code == 409 and again.json()["error"]["code"] == 409
        assert again.json()["error"]["details"][0]["reason"] == "TASK_NOT_CANCELABLE"

        secret_kind = {"raw": "aGVsbG8=", "filename": "n.bin", "mediaType": "application/x-s3cr3t-kind"}
        file_body = {"message": message_json(secret_kind)}
        media = await http.post(f"{base}/message:send", headers=auth, json=file_body)
        assert media.status_code == 415 and media.json()["error"]["code"] == 415
        assert media.json()["error"]["details"][0]["reason"] == "CONTENT_TYPE_NOT_SUPPORTED"
        assert "s3cr3t" not in media.text

        bogus = await http.get(f"{base}/tasks", headers=auth, params={"status": "TASK_STATE_S3CR3T"})
        assert bogus.status_code == 400 and "S3CR3T" not in bogus.text.upper()
        error = bogus.json()["error"]
        assert error["message"].startswith("status: must be one of the A2A task states")
        assert error["details"][0]["reason"] == "INVALID_PARAMS"
        fine = await http.get(f"{base}/tasks", headers=auth, params={"status": "TASK_STATE_CANCELED"})
        assert [t["id"] for t in fine.json()["tasks"]] == [task_id]
