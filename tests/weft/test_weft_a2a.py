"""Weft as an A2A agent, driven by the a2a-sdk's own client (never ours) over real HTTP, against a
real Weft on a real nats-server; the work is claimed and finished through ``shared.work`` the way a
Warp agent does (real Warp processes and a spun-up agent: test-scenarios/23-a2a)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from a2a.client import A2ACardResolver, Client, ClientConfig, create_client
from a2a.types import (
    AuthenticationInfo,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import A2AError, TaskNotFoundError
from nats.aio.client import Client as NatsClient
from weft_helpers import claimant, eventually, message, message_0_3, register, rpc

from shared.names import ProjectNames
from shared.work.questions import QuestionBook
from testsupport.serving import CLIENT_TIMEOUT_S
from testsupport.work import work_queue
from weft.a2a.push import push_of

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "a2a_client.py"
TOKEN = "a2a-test-token-1"


@asynccontextmanager
async def a2a(
    weft: Any, project: str, *, token: str | None = TOKEN, streaming: bool = True
) -> AsyncIterator[Client]:
    """The SDK's client for a project's endpoint, built from the card it fetches."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
        client = await create_client(
            f"{weft.base_url}/a2a/{project}", ClientConfig(httpx_client=http, streaming=streaming)
        )
        try:
            yield client
        finally:
            await client.close()


def state(task: Task) -> str:
    return TaskState.Name(task.status.state)


async def submitted(client: Client, request: SendMessageRequest) -> Task:
    """Send with return_immediately: the task as submitted."""
    request.configuration.CopyFrom(SendMessageConfiguration(return_immediately=True))
    async for response in client.send_message(request):
        assert response.HasField("task")
        return response.task
    raise AssertionError("no response")


async def agent_finishes(
    nc: NatsClient, project: str, *, result: Any = "done: abc123", fail: bool = False, reply: bool = False
) -> str:
    """A registered agent claims the next item, reports progress and completes (or fails) it."""
    entry = await register(nc, project)
    queue = work_queue(nc, ProjectNames(project))

    async def claim() -> Any:
        return await queue.claim(claimant(entry))

    item = await eventually(claim, timeout=20, what="an item to claim")
    await queue.progress(item.id, entry.agent_id, 40, "tests written")
    if fail:
        await queue.fail(item.id, entry.agent_id, "compiler crashed", retryable=False)
    else:
        await queue.complete(item.id, entry.agent_id, result, reply=reply)
    return str(item.id)


@pytest.fixture
async def weft_auth(weft_factory: Any, project_id: str) -> AsyncIterator[Any]:
    async with weft_factory(project_id=project_id, api_tokens=TOKEN) as running:
        yield running


# -- the card -------------------------------------------------------------------------


async def test_the_public_card_names_the_endpoint_and_the_scheme_and_the_extended_one_the_offer(
    weft_auth: Any, nc: NatsClient, project_id: str
) -> None:
    await register(nc, project_id, capabilities=("code", "review"), agent_type="claude-code")
    await register(nc, project_id, capabilities=("docs",), stale=True)  # offline: offers nothing
    async with weft_auth.client(TOKEN) as api:
        created = await api.post(
            "/api/targets",
            json={
                "name": "runner",
                "agent_type": "copilot",
                "capabilities": ["deploy"],
                "mechanism": "local",
                "config": {"command": ["/bin/true"]},
            },
        )
        assert created.status_code == 201, created.text
    async with weft_auth.client() as http:  # no token: discovery is open
        card = await A2ACardResolver(http, f"{weft_auth.base_url}/a2a/{project_id}").get_agent_card()
    endpoint = f"{weft_auth.base_url}/a2a/{project_id}"
    assert [(i.url, i.protocol_binding, i.protocol_version) for i in card.supported_interfaces] == [
        (endpoint, "JSONRPC", "1.0"),
        (endpoint, "HTTP+JSON", "1.0"),
        (endpoint, "JSONRPC", "0.3"),
    ]
    assert card.supported_interfaces[0].tenant == project_id
    assert card.capabilities.streaming and card.capabilities.push_notifications
    assert card.capabilities.extended_agent_card
    assert [s.id for s in card.skills] == ["work"]  # what the fleet offers is not public
    scheme = card.security_schemes["bearer"].http_auth_security_scheme
    assert scheme.scheme.lower() == "bearer"
    assert [dict(r.schemes) for r in card.security_requirements] == [
        {"bearer": card.security_requirements[0].schemes["bearer"]}
    ]

    async with a2a(weft_auth, project_id) as client:
        extended = await client.get_extended_agent_card(GetExtendedAgentCardRequest())
    assert [s.id for s in extended.skills] == ["code", "deploy", "review"]
    assert "1 agent(s) online (claude-code)" in extended.skills[0].description
    assert "1 target(s)" in extended.skills[1].description
    assert extended.supported_interfaces[0].url == endpoint and "bearer" in extended.security_schemes
    async with weft_auth.client(TOKEN) as api:
        legacy = await api.post(f"/a2a/{project_id}", json=rpc("agent/getAuthenticatedExtendedCard", {}))
        without = await api.post(
            f"/a2a/{project_id}",
            json=rpc("GetExtendedAgentCard", {}),
            headers={"Authorization": "Bearer wrong", "A2A-Version": "1.0"},
        )
    assert [s["id"] for s in legacy.json()["result"]["skills"]] == ["code", "deploy", "review"]
    assert without.status_code == 401  # the extended card wants a token


async def test_well_known_card_at_the_root_serves_the_named_or_default_project(
    weft_auth: Any, project_id: str
) -> None:
    async with weft_auth.client(TOKEN) as api:
        default = (await api.get("/.well-known/agent-card.json")).json()
        other = (
            await api.get("/.well-known/agent-card.json", headers={"X-Loom-Project": "other-proj"})
        ).json()
    assert default["supportedInterfaces"][0]["url"] == f"{weft_auth.base_url}/a2a/{project_id}"
    assert other["supportedInterfaces"][0]["url"] == f"{weft_auth.base_url}/a2a/other-proj"
    assert default["url"] == f"{weft_auth.base_url}/a2a/{project_id}"  # the 0.3 layout, for 0.3 clients


async def test_public_url_setting_is_what_the_card_advertises(weft_factory: Any, project_id: str) -> None:
    async with (
        weft_factory(project_id=project_id, public_url="https://weft.example.org/") as weft,
        weft.client() as api,
    ):
        card = (await api.get(f"/a2a/{project_id}/.well-known/agent-card.json")).json()
    assert card["supportedInterfaces"][0]["url"] == f"https://weft.example.org/a2a/{project_id}"


# -- auth and projects ---------------------------------------------------------------------


async def test_without_a_valid_token_the_a2a_endpoint_is_401(weft_auth: Any, project_id: str) -> None:
    async with weft_auth.client() as http:
        for headers in ({}, {"Authorization": "Bearer wrong-token"}):
            for method, path in (("POST", f"/a2a/{project_id}"), ("POST", f"/a2a/{project_id}/")):
                response = await http.request(method, path, headers=headers, json={"jsonrpc": "2.0", "id": 1})
                assert response.status_code == 401, (method, path)
                assert response.headers["www-authenticate"] == "Bearer"
                assert response.json()["error"] == "unauthorized"
    async with a2a(weft_auth, project_id, token="wrong-token") as client:  # the card is open
        with pytest.raises(Exception) as refused:
            await client.get_task(GetTaskRequest(id="f" * 32))
    assert "401" in str(refused.value)


async def test_invalid_project_in_the_path_is_400_naming_the_field(weft_auth: Any) -> None:
    async with weft_auth.client(TOKEN) as api:
        response = await api.post("/a2a/Not_A_Project", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask"})
        mismatch = await api.post("/a2a/proj-a", headers={"X-Loom-Project": "proj-b"}, json={})
    async with weft_auth.client() as anyone:
        card = await anyone.get("/a2a/Not_A_Project/.well-known/agent-card.json")
        root = await anyone.get("/.well-known/agent-card.json", params={"project": "Not_A_Project"})
    for refused in (card, root):
        assert refused.status_code == 400 and refused.json()["details"]["field"] == "project"
        assert "Not_A_Project" not in refused.text
    assert response.status_code == 400 and response.json()["details"]["field"] == "project"
    assert "Not_A_Project" not in response.text
    assert mismatch.status_code == 400 and mismatch.json()["error"] == "invalid_project"


async def test_a_task_of_one_project_is_not_found_through_another(weft_auth: Any, project_id: str) -> None:
    async with a2a(weft_auth, project_id) as client:
        task = await submitted(client, message())
    async with a2a(weft_auth, f"{project_id}-b") as other:
        with pytest.raises(A2AError) as missing:
            await other.get_task(GetTaskRequest(id=task.id))
        with pytest.raises(A2AError):
            await other.cancel_task(CancelTaskRequest(id=task.id))
        listed = await other.list_tasks(ListTasksRequest())
    assert "no work item with this id in this project" in str(missing.value)
    assert list(listed.tasks) == []


# -- send, stream, get, list, cancel ---------------------------------------------------------


async def test_streamed_task_follows_the_work_until_the_agent_completes_it(
    weft_auth: Any, nc: NatsClient, project_id: str
) -> None:
    async with a2a(weft_auth, project_id) as client:
        events: list[StreamResponse] = []

        async def consume() -> None:
            async for response in client.send_message(message(priority=8, boundary="default")):
                events.append(response)

        streaming = asyncio.create_task(consume())
        work_id = await agent_finishes(nc, project_id, result="done: abc123")
        await asyncio.wait_for(streaming, 30)
        task = await client.get_task(GetTaskRequest(id=work_id))

    assert events[0].HasField("task") and events[0].task.id == work_id
    assert state(events[0].task) == "TASK_STATE_SUBMITTED"
    updates = [TaskState.Name(e.status_update.status.state) for e in events if e.HasField("status_update")]
    assert updates == ["TASK_STATE_WORKING", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"]
    notes = [
        " ".join(p.text for p in e.status_update.status.message.parts)
        for e in events
        if e.HasField("status_update")
    ]
    assert notes[1] == "40%: tests written"
    artifacts = [e.artifact_update.artifact for e in events if e.HasField("artifact_update")]
    assert [a.parts[0].text for a in artifacts] == ["done: abc123"]
    assert state(task) == "TASK_STATE_COMPLETED" and task.artifacts[0].parts[0].text == "done: abc123"
    assert task.history[0].parts[0].text == "Fix the flaky parser test"
    loom = task.metadata["loom"]
    assert loom["status"] == "completed" and loom["priority"] == 8 and loom["capability"] == "code"
    assert loom["workId"] == task.id and loom["maxAttempts"] >= 1  # camelCase, as A2A's own keys


async def test_blocking_send_returns_the_finished_task_with_its_result(
    weft_auth: Any, nc: NatsClient, project_id: str
) -> None:
    async with a2a(weft_auth, project_id, streaming=False) as client:

        async def send() -> Task:
            async for response in client.send_message(message()):
                return response.task
            raise AssertionError("no response")

        sending = asyncio.create_task(send())
        await agent_finishes(nc, project_id, result={"commit": "abc123", "files": 3})
        task = await asyncio.wait_for(sending, 30)
    assert state(task) == "TASK_STATE_COMPLETED"
    assert dict(task.artifacts[0].parts[0].data.struct_value) == {"commit": "abc123", "files": 3.0}


async def test_an_agent_s_direct_reply_answers_a_blocking_send_with_a_message(
    weft_auth: Any, nc: NatsClient, project_id: str
) -> None:
    """A2A's answer without a task: the agent completes with ``reply``, and the client that
    waited on its message gets the agent's message; the record stays, named in its metadata."""
    async with a2a(weft_auth, project_id, streaming=False) as client:

        async def send() -> Any:
            async for response in client.send_message(message("What does LOOM_HEARTBEAT_S set?")):
                return response
            raise AssertionError("no response")

        sending = asyncio.create_task(send())
        work_id = await agent_finishes(nc, project_id, result="how often Warp beats, in seconds", reply=True)
        response = await asyncio.wait_for(sending, 30)
        assert response.HasField("message") and not response.HasField("task")
        answer = response.message
        assert answer.role == Role.ROLE_AGENT and answer.parts[0].text == "how often Warp beats, in seconds"
        assert (
            answer.metadata["loom"]["workId"] == work_id and answer.metadata["loom"]["status"] == "completed"
        )

        async def send_without_reply() -> Any:
            async for response in client.send_message(message("Fix it")):
                return response
            raise AssertionError("no response")

        sending = asyncio.create_task(send_without_reply())
        await agent_finishes(nc, project_id, result="fixed")
        assert (await asyncio.wait_for(sending, 30)).HasField("task")  # no reply: the task


async def test_failed_work_is_a_failed_task_with_the_agents_error(
    weft_auth: Any, nc: NatsClient, project_id: str
) -> None:
    async with a2a(weft_auth, project_id) as client:
        task = await submitted(client, message())
        await agent_finishes(nc, project_id, fail=True)
        got = await client.get_task(GetTaskRequest(id=task.id))
    assert state(got) == "TASK_STATE_FAILED"
    assert "compiler crashed" in got.status.message.parts[0].text
    assert got.metadata["loom"]["status"] == "dead-lettered"


async def test_cancel_a_waiting_task_and_refuse_to_cancel_it_twice(weft_auth: Any, project_id: str) -> None:
    async with a2a(weft_auth, project_id) as client:
        task = await submitted(client, message())
        assert state(task) == "TASK_STATE_SUBMITTED"
        cancelled = await client.cancel_task(CancelTaskRequest(id=task.id, metadata={"reason": "not needed"}))
        assert state(cancelled) == "TASK_STATE_CANCELED"
        assert "not needed" in cancelled.status.message.parts[0].text
        with pytest.raises(A2AError) as again:
            await client.cancel_task(CancelTaskRequest(id=task.id))
        got = await client.get_task(GetTaskRequest(id=task.id))
    assert "can no longer be cancelled" in str(again.value)
    assert state(got) == "TASK_STATE_CANCELED"
    async with weft_auth.client(TOKEN, project_id) as api:
        assert (await api.get(f"/api/work/{task.id}")).json()["status"] == "cancelled"


async def test_list_tasks_filters_by_context_and_state(weft_auth: Any, project_id: str) -> None:
    async with a2a(weft_auth, project_id) as client:
        first = message()
        first.message.context_id = "ctx-one"
        one = await submitted(client, first)
        two = await submitted(client, message())
        await client.cancel_task(CancelTaskRequest(id=two.id))
        by_context = await client.list_tasks(ListTasksRequest(context_id="ctx-one"))
        cancelled = await client.list_tasks(ListTasksRequest(status=TaskState.TASK_STATE_CANCELED))
        paged = await client.list_tasks(ListTasksRequest(page_size=1))
        rest = await client.list_tasks(ListTasksRequest(page_size=1, page_token=paged.next_page_token))
    assert [t.id for t in by_context.tasks] == [one.id] and by_context.tasks[0].context_id == "ctx-one"
    assert [t.id for t in cancelled.tasks] == [two.id]
    assert paged.total_size == 2 and {paged.tasks[0].id, rest.tasks[0].id} == {one.id, two.id}


async def test_resubscribe_on_another_replica_follows_the_task_to_its_end(
    weft_factory: Any, nc: NatsClient, project_id: str
) -> None:
    async with (
        weft_factory(project_id=project_id, api_tokens=TOKEN) as first,
        weft_factory(project_id=project_id, api_tokens=TOKEN) as second,
    ):
        async with a2a(first, project_id) as client:
            task = await submitted(client, message())
        async with a2a(second, project_id) as other:
            seen: list[StreamResponse] = []

            async def follow() -> None:
                async for response in other.subscribe(SubscribeToTaskRequest(id=task.id)):
                    seen.append(response)

            following = asyncio.create_task(follow())
            await eventually(lambda: asyncio.sleep(0, result=bool(seen)), what="the snapshot")
            await agent_finishes(nc, project_id)
            await asyncio.wait_for(following, 30)
            with pytest.raises(A2AError) as finished:
                async for _ in other.subscribe(SubscribeToTaskRequest(id=task.id)):
                    pass
    assert seen[0].task.id == task.id and state(seen[0].task) == "TASK_STATE_SUBMITTED"
    assert TaskState.Name(seen[-1].status_update.status.state) == "TASK_STATE_COMPLETED"
    assert "final state" in str(finished.value)


# -- refusals ---------------------------------------------------------------------------------


async def test_bad_metadata_is_invalid_params_naming_the_field_without_the_value(
    weft_auth: Any, project_id: str
) -> None:
    secret = "sk-LIVE-9f8e7d6c5b4a3210"
    async with a2a(weft_auth, project_id) as client:
        for request, field in (
            (message(priority=secret), "metadata.priority"),
            (message(capability=secret), "metadata.capability"),
            (message(deadline="2000-01-01T00:00:00Z"), "deadline"),
            (message(text=" "), "message.parts"),
        ):
            with pytest.raises(A2AError) as refused:
                await submitted(client, request)
            text = str(refused.value)
            assert field in text, text
            assert secret not in text
        no_capability = SendMessageRequest(
            message=Message(role=Role.ROLE_USER, message_id="m-1", parts=[Part(text="do it")])
        )
        with pytest.raises(A2AError) as missing:
            await submitted(client, no_capability)
        assert "metadata.capability: required" in str(missing.value)
        listed = await client.list_tasks(ListTasksRequest())
    assert list(listed.tasks) == []  # nothing was submitted


async def test_default_capability_setting_serves_messages_without_metadata(
    weft_factory: Any, project_id: str
) -> None:
    async with (
        weft_factory(project_id=project_id, a2a_default_capability="review") as weft,
        a2a(weft, project_id) as client,
    ):
        request = SendMessageRequest(
            message=Message(role=Role.ROLE_USER, message_id="m-1", parts=[Part(text="review it")])
        )
        task = await submitted(client, request)
    assert task.metadata["loom"]["capability"] == "review"


async def test_a_tenant_other_than_the_project_of_the_url_is_refused(weft_auth: Any, project_id: str) -> None:
    async with a2a(weft_auth, project_id) as client:
        task = await submitted(client, message())
        assert (await client.get_task(GetTaskRequest(id=task.id, tenant=project_id))).id == task.id
        with pytest.raises(A2AError) as refused:
            await client.get_task(GetTaskRequest(id=task.id, tenant="other-project"))
    assert "tenant: must be the project of this endpoint's URL" in str(refused.value)


async def test_unknown_and_malformed_task_ids(weft_auth: Any, project_id: str) -> None:
    async with a2a(weft_auth, project_id) as client:
        with pytest.raises(A2AError) as unknown:
            await client.get_task(GetTaskRequest(id="0" * 32))
        with pytest.raises(A2AError) as malformed:
            await client.get_task(GetTaskRequest(id="Secret-Token-12345"))
    assert "no work item with this id" in str(unknown.value)
    # an id of another shape names no task either: task-not-found, naming the id's rule
    assert isinstance(malformed.value, TaskNotFoundError)
    assert "id: no task with this id in this project (its task ids are exactly 32 lowercase hex" in str(
        malformed.value
    )
    assert "Secret-Token-12345" not in str(malformed.value)


async def test_a_follow_up_message_is_refused_unless_the_task_waits_for_input(
    weft_auth: Any, project_id: str
) -> None:
    async with a2a(weft_auth, project_id) as client:
        task = await submitted(client, message())
        follow_up = message("here is more detail")
        follow_up.message.task_id = task.id
        with pytest.raises(A2AError) as refused:
            await submitted(client, follow_up)
    assert "message.taskId: this task is not waiting for input" in str(refused.value)


async def test_an_operator_question_is_input_required_and_a_follow_up_message_answers_it(
    weft_auth: Any, nc: NatsClient, project_id: str
) -> None:
    """The agent asks the operator about its work: the task is input-required; a message on
    the task is the answer, the agent reads it and the work goes on."""
    async with a2a(weft_auth, project_id) as client:
        task = await submitted(client, message("Pick the cache"))
        entry = await register(nc, project_id)
        queue = work_queue(nc, ProjectNames(project_id))

        async def claim() -> Any:
            return await queue.claim(claimant(entry))

        await eventually(claim, timeout=20, what="the item to claim")
        book = QuestionBook(nc, ProjectNames(project_id), queue)
        asked = await book.ask(
            entry.agent_id, "postgres or sqlite?", choices=["postgres", "sqlite"], work_id=task.id
        )

        async def waiting() -> Task | None:
            got = await client.get_task(GetTaskRequest(id=task.id))
            return got if state(got) == "TASK_STATE_INPUT_REQUIRED" else None

        held = await eventually(waiting, timeout=20, what="the task to need input")
        assert "asked a question" in held.status.message.parts[0].text
        answer = message("sqlite")
        answer.message.task_id = task.id
        answered = await submitted(client, answer)
        assert state(answered) == "TASK_STATE_WORKING"
        question = await book.get(asked.id)
        assert (question.answer, question.answered_by) == ("sqlite", "a2a-client")
        wrong = message("oracle")
        wrong.message.task_id = task.id
        with pytest.raises(A2AError) as refused:  # no longer waiting
            await submitted(client, wrong)
    assert "message.taskId: this task is not waiting for input" in str(refused.value)


async def test_a_read_token_may_follow_tasks_but_not_send_or_cancel(
    weft_factory: Any, nc: NatsClient, project_id: str
) -> None:
    async with weft_factory(project_id=project_id, api_tokens=f"operate:{TOKEN},read:reader-token-2") as weft:
        async with a2a(weft, project_id) as client:
            task = await submitted(client, message())
        async with a2a(weft, project_id, token="reader-token-2") as reader:
            assert (await reader.get_task(GetTaskRequest(id=task.id))).id == task.id
            with pytest.raises(A2AError) as refused:
                await submitted(reader, message())
            assert "this token may not operate in this project" in str(refused.value)
            with pytest.raises(A2AError):
                await reader.cancel_task(CancelTaskRequest(id=task.id))


async def test_sdk_parse_errors_do_not_echo_the_input(weft_auth: Any, project_id: str) -> None:
    secret = "sk-LIVE-9f8e7d6c5b4a3210"
    async with weft_auth.client(TOKEN) as api:
        bad_v1 = await api.post(
            f"/a2a/{project_id}",
            headers={"A2A-Version": "1.0"},
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "GetTask",
                "params": {"id": "x", "historyLength": secret},
            },
        )
        bad_v03 = await api.post(
            f"/a2a/{project_id}",
            json={
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tasks/get",
                "params": {"id": 5, "historyLength": secret},
            },
        )
        version = await api.post(
            f"/a2a/{project_id}",
            headers={"A2A-Version": secret},
            json={"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {"id": "0" * 32}},
        )
    for response in (bad_v1, bad_v03, version):
        assert response.status_code == 200
        assert "error" in response.json(), response.text
        assert secret not in response.text


async def first_sse_event(api: httpx.AsyncClient, url: str, body: dict[str, Any]) -> dict[str, Any]:
    """The first server-sent event of a streaming call, as JSON (the stream is then closed)."""
    async with api.stream("POST", url, json=body) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                return dict(json.loads(line[5:]))
    raise AssertionError("the stream ended without an event")


async def test_the_0_3_method_names_are_served(weft_auth: Any, project_id: str) -> None:
    """Every 0.3 name (no A2A-Version header): message/send, tasks/get, tasks/cancel,
    message/stream and tasks/resubscribe, with 0.3's shapes (``kind``, lower-case states)."""
    url = f"/a2a/{project_id}"
    async with weft_auth.client(TOKEN) as api:
        sent = (
            await api.post(
                url,
                json=rpc("message/send", {"message": message_0_3(), "configuration": {"blocking": False}}),
            )
        ).json()["result"]
        assert sent["kind"] == "task" and sent["status"]["state"] == "submitted"
        got = (await api.post(url, json=rpc("tasks/get", {"id": sent["id"]}))).json()["result"]
        assert got["id"] == sent["id"] and got["status"]["state"] == "submitted"
        cancelled = (await api.post(url, json=rpc("tasks/cancel", {"id": sent["id"]}))).json()["result"]
        assert cancelled["id"] == sent["id"] and cancelled["status"]["state"] == "canceled"
        again = (await api.post(url, json=rpc("tasks/cancel", {"id": sent["id"]}))).json()
        assert again["error"]["code"] == -32002  # TaskNotCancelableError
        streamed = await first_sse_event(
            api, url, rpc("message/stream", {"message": message_0_3("stream it")})
        )
        task = streamed["result"]
        assert task["kind"] == "task" and task["status"]["state"] == "submitted"
        followed = await first_sse_event(api, url, rpc("tasks/resubscribe", {"id": task["id"]}))
        assert followed["result"]["id"] == task["id"]


# -- the documented example -----------------------------------------------------------------


async def test_the_docs_example_runs_against_weft(weft_auth: Any, nc: NatsClient, project_id: str) -> None:
    env = {**os.environ, "WEFT_URL": weft_auth.base_url, "WEFT_TOKEN": TOKEN, "LOOM_PROJECT_ID": project_id}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLE),
        "Fix the flaky parser test",
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    await agent_finishes(nc, project_id, result="fixed in abc123")
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    lines = out.decode().splitlines()
    assert lines[0].startswith("task ") and lines[0].endswith("TASK_STATE_SUBMITTED")
    assert "result fixed in abc123" in lines
    assert lines[-1] == "final TASK_STATE_COMPLETED"


def test_the_doc_shows_the_example_file_verbatim() -> None:
    doc = (ROOT / "docs" / "a2a.md").read_text()
    assert f"```python\n{EXAMPLE.read_text()}```" in doc


async def test_streams_and_waiting_sends_let_go_of_their_relay_listener(
    weft_auth: Any, project_id: str
) -> None:
    """What a stream keeps in memory dies with its request: a client that stops reading a stream,
    and one that gives up on a blocking SendMessage, leave no listener behind."""
    state = weft_auth.server.config.app.state.weft
    project = await state.hub.get(project_id)
    async with a2a(weft_auth, project_id) as client:
        await submitted(client, message())  # reads the first event of the stream, then leaves
    await eventually(
        lambda: asyncio.sleep(0, result=project.relay.listening == 0), what="the stream's listener to go"
    )
    async with httpx.AsyncClient(
        headers={"Authorization": f"Bearer {TOKEN}", "A2A-Version": "1.0"}, timeout=CLIENT_TIMEOUT_S
    ) as http:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {
                "message": {
                    "messageId": "m-1",
                    "role": "ROLE_USER",
                    "parts": [{"text": "wait for me"}],
                    "metadata": {"capability": "nobody-has-it"},
                }
            },
        }
        with pytest.raises(httpx.ReadTimeout):
            await http.post(f"{weft_auth.base_url}/a2a/{project_id}", json=body, timeout=1)
    await eventually(
        lambda: asyncio.sleep(0, result=project.relay.listening == 0),
        timeout=30,
        what="the waiting send to let go",
    )


# -- push notifications ------------------------------------------------------------------------


@dataclass
class Webhook:
    """A client's webhook: a real HTTP server on loopback that keeps what Weft posts to it."""

    url: str
    received: list[tuple[dict[str, str], dict[str, Any]]] = field(default_factory=list)

    def states(self) -> list[str]:
        return [body["task"]["status"]["state"] for _, body in self.received]


@asynccontextmanager
async def webhook() -> AsyncIterator[Webhook]:
    from shared.nats.server import free_port

    port = free_port()
    hook = Webhook(f"http://127.0.0.1:{port}/a2a-events")

    async def receive(request: Any) -> Any:
        from starlette.responses import Response

        hook.received.append((dict(request.headers), await request.json()))
        return Response(status_code=204)

    from starlette.applications import Starlette
    from starlette.routing import Route

    app = Starlette(routes=[Route("/a2a-events", receive, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign,assignment]
    task = asyncio.create_task(server.serve())
    try:
        await eventually(lambda: asyncio.sleep(0, result=server.started), what="the webhook server")
        yield hook
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)


def push_started(weft: Any, project: str) -> bool:
    """Whether this Weft runs the project's push dispatcher."""
    state = weft.server.config.app.state.weft
    served = {c.project_id: c for c in state.hub.served()}
    return project in served and push_of(served[project]).service is not None


def work_event_count(nc: NatsClient, project: str, work_id: str) -> Any:
    """How many ``work.*`` events the project's stream holds for one item."""

    async def count() -> int:
        js = nc.jetstream()
        names = ProjectNames(project)
        sub = await js.subscribe(names.event_filter("work"), ordered_consumer=True)
        seen = 0
        try:
            while True:
                try:
                    msg = await sub.next_msg(timeout=0.5)
                except Exception:
                    return seen
                if json.loads(msg.data).get("subject_id") == work_id:
                    seen += 1
        finally:
            await sub.unsubscribe()

    return count()


async def test_push_notifications_reach_the_clients_webhook_until_the_task_completes(
    weft_factory: Any, nc: NatsClient, project_id: str
) -> None:
    async with (
        weft_factory(project_id=project_id, api_tokens=TOKEN, a2a_push_private_urls=True) as weft,
        webhook() as hook,
        a2a(weft, project_id) as client,
    ):
        card = await A2ACardResolver(weft.client(), weft.base_url).get_agent_card(
            relative_card_path=f"/a2a/{project_id}/.well-known/agent-card.json",
            http_kwargs={"headers": {"Authorization": f"Bearer {TOKEN}"}},
        )
        assert card.capabilities.push_notifications
        task = await submitted(client, message())
        config = TaskPushNotificationConfig(
            task_id=task.id,
            id="ci-hook",
            url=hook.url,
            token="push-check-7f3a",
            authentication=AuthenticationInfo(scheme="Bearer", credentials="hook-secret-91c2"),
        )
        stored = await client.create_task_push_notification_config(config)
        assert (stored.id, stored.task_id, stored.url) == ("ci-hook", task.id, hook.url)
        assert stored.token == "" and stored.authentication.credentials == ""  # never shown back
        await agent_finishes(nc, project_id)
        await eventually(
            lambda: asyncio.sleep(0, result="TASK_STATE_COMPLETED" in hook.states()),
            timeout=20,
            what="the completed task at the webhook",
        )
        got = await client.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task.id, id="ci-hook")
        )
        assert got.url == hook.url and got.token == ""
        listed = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id)
        )
        assert [c.id for c in listed.configs] == ["ci-hook"]
        await client.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="ci-hook")
        )
        listed = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id)
        )
        assert list(listed.configs) == []
        with pytest.raises(A2AError) as gone:
            await client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task.id, id="ci-hook")
            )
        assert "id" in str(gone.value)
    states = hook.states()
    assert states[-1] == "TASK_STATE_COMPLETED" and "TASK_STATE_WORKING" in states
    assert all(body["task"]["id"] == task.id for _, body in hook.received)
    for headers, _ in hook.received:
        assert headers["x-a2a-notification-token"] == "push-check-7f3a"
        assert headers["authorization"] == "Bearer hook-secret-91c2"


async def test_a_webhook_given_with_the_message_hears_every_event_once_across_replicas(
    weft_factory: Any, nc: NatsClient, project_id: str
) -> None:
    async with (
        weft_factory(project_id=project_id, api_tokens=TOKEN, a2a_push_private_urls=True) as first,
        weft_factory(project_id=project_id, api_tokens=TOKEN, a2a_push_private_urls=True) as second,
        webhook() as hook,
    ):
        async with a2a(second, project_id):  # the other replica serves the project (no webhooks yet)
            pass
        assert not push_started(second, project_id)
        async with a2a(first, project_id) as client:  # a webhook registered through one replica
            earlier = await submitted(client, message())
            await client.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=earlier.id, id="h", url=hook.url)
            )
        # ... and the other one takes its share of the sending (its sweeper notices)
        await eventually(
            lambda: asyncio.sleep(0, result=push_started(second, project_id)), what="the second dispatcher"
        )
        async with a2a(first, project_id) as client:
            request = message()
            request.configuration.CopyFrom(
                SendMessageConfiguration(
                    return_immediately=True,
                    task_push_notification_config=TaskPushNotificationConfig(url=hook.url, token="t-1"),
                )
            )
            task = None
            async for response in client.send_message(request):
                task = response.task
                break  # the task as submitted
            assert task is not None
        await agent_finishes(nc, project_id)
        await eventually(
            lambda: asyncio.sleep(0, result="TASK_STATE_COMPLETED" in hook.states()),
            timeout=20,
            what="the completed task at the webhook",
        )
        events = await work_event_count(nc, project_id, task.id)
        await asyncio.sleep(1)  # anything sent twice would have arrived by now
    mine = [body for _, body in hook.received if body["task"]["id"] == task.id]
    assert mine[0]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"  # registered before the work
    assert len(mine) == events, [(b["task"]["status"]["state"]) for b in mine]  # one per event


async def test_webhooks_on_internal_addresses_and_other_schemes_are_refused(
    weft_auth: Any, project_id: str
) -> None:
    async with a2a(weft_auth, project_id) as client:
        task = await submitted(client, message())
        for url in ("http://127.0.0.1:9/hook", "http://169.254.169.254/latest", "ftp://example.org/x", ""):
            with pytest.raises(A2AError) as refused:
                await client.create_task_push_notification_config(
                    TaskPushNotificationConfig(task_id=task.id, id="h", url=url)
                )
            text = f"{refused.value} {getattr(refused.value, 'data', '')}"
            assert "url" in text and (not url or url not in text), text
        request = message()
        request.configuration.CopyFrom(
            SendMessageConfiguration(
                task_push_notification_config=TaskPushNotificationConfig(url="http://10.0.0.8/hook")
            )
        )
        with pytest.raises(A2AError) as refused:
            async for _ in client.send_message(request):
                pass
        assert "configuration.taskPushNotificationConfig.url:" in str(refused.value)
        assert "10.0.0.8" not in str(refused.value)
        listed = await client.list_tasks(ListTasksRequest())
        assert [t.id for t in listed.tasks] == [task.id]  # the refused message submitted nothing
        with pytest.raises(A2AError) as unknown:
            await client.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id="f" * 32, id="h", url="https://example.org/hook")
            )
        assert isinstance(unknown.value, TaskNotFoundError) and str(unknown.value).startswith("taskId:")


async def test_a_read_token_may_list_webhooks_but_not_register_them(
    weft_factory: Any, project_id: str
) -> None:
    async with weft_factory(
        project_id=project_id, api_tokens=f"operate:{TOKEN},read:reader-token-2", a2a_push_private_urls=True
    ) as weft:
        async with a2a(weft, project_id) as client:
            task = await submitted(client, message())
        async with a2a(weft, project_id, token="reader-token-2") as reader:
            listed = await reader.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task.id)
            )
            assert list(listed.configs) == []
            with pytest.raises(A2AError) as refused:
                await reader.create_task_push_notification_config(
                    TaskPushNotificationConfig(task_id=task.id, id="h", url="http://127.0.0.1:9/x")
                )
            assert "may not operate" in str(refused.value)


async def test_a_failing_webhook_is_logged_without_its_url_or_token(
    weft_factory: Any, nc: NatsClient, project_id: str, caplog: pytest.LogCaptureFixture
) -> None:
    from shared.nats.server import free_port

    secret_url = f"http://127.0.0.1:{free_port()}/hook?sig=q8Zr-5ecret-sig"  # nothing listens there
    async with (
        weft_factory(project_id=project_id, api_tokens=TOKEN, a2a_push_private_urls=True) as weft,
        a2a(weft, project_id) as client,
    ):
        task = await submitted(client, message())
        await client.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=task.id, id="h", url=secret_url, token="tok-5ecret-77")
        )
        with caplog.at_level(logging.INFO):
            await agent_finishes(nc, project_id)
            await eventually(
                lambda: asyncio.sleep(
                    0,
                    result=any(
                        "push-notification" in r.getMessage() and task.id in r.getMessage()
                        for r in caplog.records
                    ),
                ),
                what="the failed webhook in the log",
            )
    logged = "\n".join(r.getMessage() + str(r.exc_info or "") for r in caplog.records)
    assert "5ecret" not in logged and "<webhook url>" in logged


async def test_webhooks_of_one_project_are_not_seen_through_another(
    weft_factory: Any, nc: NatsClient, project_id: str
) -> None:
    other = f"{project_id}-b"
    async with weft_factory(project_id=project_id, api_tokens=TOKEN, a2a_push_private_urls=True) as weft:
        async with a2a(weft, project_id) as client:
            task = await submitted(client, message())
            await client.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=task.id, id="h", url="http://127.0.0.1:9/hook")
            )
        async with a2a(weft, other) as stranger:
            with pytest.raises(TaskNotFoundError):
                await stranger.list_task_push_notification_configs(
                    ListTaskPushNotificationConfigsRequest(task_id=task.id)
                )
            with pytest.raises(TaskNotFoundError):
                await stranger.delete_task_push_notification_config(
                    DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="h")
                )
            with pytest.raises(TaskNotFoundError):
                await stranger.create_task_push_notification_config(
                    TaskPushNotificationConfig(task_id=task.id, id="h2", url="http://127.0.0.1:9/x")
                )
        async with a2a(weft, project_id) as client:  # still there, untouched
            listed = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task.id)
            )
            assert [c.id for c in listed.configs] == ["h"]
    from shared.nats.jetstream import bucket_exists

    assert not await bucket_exists(nc.jetstream(), ProjectNames(other).a2a_push_bucket)
