"""Scenario 23: an A2A client (the a2a-sdk's own) hands work to a Loom fleet and follows it.

The client knows only the project's URL and a token. It reads the Agent Card, sends a
message and streams the task while a Warp agent works it; reads it back; cancels another;
answers the question a Warp agent asked about a third (input-required); and sends work for
a capability nobody online has, which Weft spins an agent up for.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from a2a.client import Client, ClientConfig, create_client
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)
from a2a.utils.errors import A2AError
from scenario_harness import Fabric, eventually

TOKEN = "s23-token-5b1d"


@asynccontextmanager
async def a2a_client(fabric: Fabric) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(headers=headers, timeout=120) as http:
        client = await create_client(
            f"{fabric.weft.url}/a2a/{fabric.project_id}", ClientConfig(httpx_client=http)
        )
        try:
            yield client
        finally:
            await client.close()


def work(text: str, capability: str, **config: Any) -> SendMessageRequest:
    message = Message(
        role=Role.ROLE_USER,
        message_id=uuid.uuid4().hex,
        parts=[Part(text=text)],
        metadata={"capability": capability, "priority": 7},
    )
    return SendMessageRequest(message=message, configuration=SendMessageConfiguration(**config))


def states(events: list[StreamResponse]) -> list[str]:
    out = [TaskState.Name(events[0].task.status.state)]
    out += [TaskState.Name(e.status_update.status.state) for e in events if e.HasField("status_update")]
    return out


async def skills(fabric: Fabric) -> list[str]:
    """The skills of the extended card: what the fleet offers now, for a token holder."""
    headers = {"Authorization": f"Bearer {TOKEN}", "A2A-Version": "1.0"}
    request = {"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard", "params": {}}
    async with httpx.AsyncClient(headers=headers) as http:
        card = (await http.post(f"{fabric.weft.url}/a2a/{fabric.project_id}", json=request)).json()
    return [s["id"] for s in card["result"]["skills"]]


async def test_an_a2a_client_hands_work_to_the_fleet_and_follows_it(
    fabric: Fabric, weft_factory: Any
) -> None:
    with weft_factory(api_tokens=[TOKEN]) as weft:
        fabric = fabric.served_by(weft)

        # No token: the public card says how to authenticate and offers nothing live; the
        # endpoint is closed, as the REST API is.
        async with httpx.AsyncClient(timeout=120) as anonymous:  # a loaded machine answers slowly
            for path in (
                f"/.well-known/agent-card.json?project={fabric.project_id}",
                f"/a2a/{fabric.project_id}/.well-known/agent-card.json",
            ):
                card = (await anonymous.get(weft.url + path)).json()
                assert "bearer" in card["securitySchemes"] and card["capabilities"]["extendedAgentCard"]
            assert (await anonymous.post(f"{weft.url}/a2a/{fabric.project_id}", json={})).status_code == 401

        assert await skills(fabric) == ["work"]  # nothing on offer yet
        async with fabric.agent("coder", capabilities=["code"]) as coder, a2a_client(fabric) as client:
            assert await skills(fabric) == ["code"]

            # Send and stream while the Warp agent claims, reports progress and completes.
            events: list[StreamResponse] = []

            async def stream() -> None:
                async for event in client.send_message(work("Fix the flaky parser test", "code")):
                    events.append(event)

            streaming = asyncio.create_task(stream())
            item = await eventually(coder.claim, what="the coder to claim the A2A task")
            await coder.call("warp_work_progress", work_id=item["id"], percent=50, note="reproduced")
            await coder.call("warp_work_complete", work_id=item["id"], result="fixed in 4f2a9c1")
            await asyncio.wait_for(streaming, 60)
            assert events[0].task.id == item["id"]
            assert states(events) == [
                "TASK_STATE_SUBMITTED",
                "TASK_STATE_WORKING",
                "TASK_STATE_WORKING",
                "TASK_STATE_COMPLETED",
            ]
            [artifact] = [e.artifact_update.artifact for e in events if e.HasField("artifact_update")]
            assert artifact.parts[0].text == "fixed in 4f2a9c1"

            task = await client.get_task(GetTaskRequest(id=item["id"]))
            assert TaskState.Name(task.status.state) == "TASK_STATE_COMPLETED"
            assert task.metadata["loom"]["assignedTo"] == coder.agent_id

            # Cancel another before anyone takes it; Weft's REST API says the same.
            waiting: Task | None = None
            async for event in client.send_message(work("Rename the module", "docs")):
                waiting = event.task
                break  # a streaming client's first event is the task as submitted
            assert waiting is not None and TaskState.Name(waiting.status.state) == "TASK_STATE_SUBMITTED"
            cancelled = await client.cancel_task(CancelTaskRequest(id=waiting.id))
            assert TaskState.Name(cancelled.status.state) == "TASK_STATE_CANCELED"
            async with fabric.api() as api:
                assert (await api.get(f"/api/work/{waiting.id}")).json()["status"] == "cancelled"

            # A follow-up message on a task: refused, naming the field.
            follow_up = work("one more thing", "code")
            follow_up.message.task_id = item["id"]
            try:
                async for _ in client.send_message(follow_up):
                    pass
                raise AssertionError("a follow-up message was accepted")
            except A2AError as refused:
                assert "message.taskId" in str(refused)

            # The agent asks the operator a question: the A2A task is input-required, and a
            # follow-up message on it is the answer the agent reads before it finishes.
            asking: list[StreamResponse] = []

            async def stream_until_input() -> None:
                async for event in client.send_message(work("Pick the cache's database", "code")):
                    asking.append(event)

            waiting_stream = asyncio.create_task(stream_until_input())
            picked = await eventually(coder.claim, what="the coder to claim the second A2A task")
            asked = await coder.call(
                "warp_question_ask",
                question="postgres or sqlite for the cache?",
                choices=["postgres", "sqlite"],
                work_id=picked["id"],
            )
            await asyncio.wait_for(waiting_stream, 60)  # a stream ends when its task waits for input
            assert states(asking)[-1] == "TASK_STATE_INPUT_REQUIRED"
            answer = work("sqlite", "code")
            answer.message.task_id = picked["id"]
            answer.message.context_id = asking[0].task.context_id
            # the answer's stream follows the task on until it ends (or asks again)
            answered: list[StreamResponse] = []

            async def stream_the_answer() -> None:
                async for event in client.send_message(answer):
                    answered.append(event)

            answer_stream = asyncio.create_task(stream_the_answer())
            read = await coder.call("warp_question_get", question_id=asked["question"]["id"], wait_s=5)
            assert read["question"]["status"] == "answered" and read["question"]["answer"] == "sqlite"
            await coder.call(
                "warp_work_complete", work_id=picked["id"], result=f"cache on {read['question']['answer']}"
            )
            await asyncio.wait_for(answer_stream, 60)
            followed = states(answered)
            assert followed[0] == "TASK_STATE_WORKING" and followed[-1] == "TASK_STATE_COMPLETED", followed
            done = await client.get_task(GetTaskRequest(id=picked["id"]))
            assert TaskState.Name(done.status.state) == "TASK_STATE_COMPLETED"
            assert done.artifacts[0].parts[0].text == "cache on sqlite"

            # Work nobody online can take: Weft starts an agent from a local target.
            await fabric.shuttle_json(
                "targets", "add", "summarizers", "-m", "local",
                "--command", f"{sys.executable} -m weft.spinup.demo_agent",
                "-t", "demo", "-c", "summarize", "--max-concurrent", "1",
                "--env", "LOOM_HEARTBEAT_S=1", "--cwd", str(fabric.workdir), "--idle-timeout", "0",
            )  # fmt: skip
            assert await skills(fabric) == ["code", "summarize"]
            spun: list[StreamResponse] = []
            async for event in client.send_message(work("Summarize the incident", "summarize")):
                spun.append(event)
            assert states(spun)[0] == "TASK_STATE_SUBMITTED" and states(spun)[-1] == "TASK_STATE_COMPLETED"
            finished = await client.get_task(GetTaskRequest(id=spun[0].task.id))
            assert finished.metadata["loom"]["assignedTo"] not in (None, coder.agent_id)
