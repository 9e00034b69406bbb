"""Weft as an A2A agent (docs/a2a.md): a real ``weft serve`` process, driven by the a2a-sdk's client.

* A2A send -> agent claimed: ``SendMessage`` (``return_immediately``, as a polling client
  sends it), then an agent (the shared WorkQueue, as Warp claims) takes it; vs REST submit ->
  claimed, measured in the same run, same process, same agent (target: p95 within 2x); the
  same over the HTTP+JSON and gRPC bindings (target: p95 within 1.2x of JSON-RPC);
* A2A streamed send -> ``completed`` event: ``SendStreamingMessage`` while an agent claims
  and completes at once, until the stream ends; the events come through the relay Weft
  already runs for the project (one events consumer, not one per stream): measured with no
  other stream open, then with 200 other tasks' streams open;
* GetTask and the Agent Card (1,000 agents online);
* push notifications: an agent completes a task whose message named a webhook -> the
  completed task arrives at the webhook (a real HTTP server in this process), against the
  raw path it rides on: the same completion -> its ``work.completed`` event read by a
  nats-py subscriber (same run).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

import grpc
import httpx
from a2a.client import Client, ClientConfig, create_client
from a2a.types import GetTaskRequest, Message, Part, Role, SendMessageRequest, SubscribeToTaskRequest
from bench_weft import AGENT, start_weft, stop_weft
from benchlib import BenchContext, BenchResult, summarize, time_async

from shared.agents.registry import Registry
from shared.models import AgentEntry, WorkSubmission
from shared.names import ProjectNames
from shared.nats.client import connect
from shared.nats.server import free_port
from shared.work.queue import WorkQueue
from shared.work.rules import Claimant
from testsupport.work import work_queue

CAPABILITY = "a2a-bench"
OTHER_STREAMS = 200


def _request(capability: str = CAPABILITY) -> SendMessageRequest:
    message = Message(
        role=Role.ROLE_USER,
        message_id=uuid.uuid4().hex,
        parts=[Part(text="measure")],
        metadata={"capability": capability},
    )
    return SendMessageRequest(message=message)


async def _client(
    http: httpx.AsyncClient, base: str, project: str, *, streaming: bool, binding: str = "JSONRPC"
) -> Client:
    # polling=True: SendMessage returns the submitted task at once (return_immediately)
    config = ClientConfig(
        httpx_client=http,
        streaming=streaming,
        polling=not streaming,
        supported_protocol_bindings=[binding],
        grpc_channel_factory=grpc.aio.insecure_channel,
    )
    return await create_client(f"{base}/a2a/{project}", config)


async def run(ctx: BenchContext) -> list[BenchResult]:
    project = f"bench-a2a-{uuid.uuid4().hex[:8]}"
    names = ProjectNames(project)
    nc = await connect(url=ctx.nats_url, name="bench-a2a")
    grpc_port = free_port()
    proc, base = await start_weft(
        ctx, project, {"WEFT_A2A_PUSH_PRIVATE_URLS": "true", "WEFT_A2A_GRPC_PORT": str(grpc_port)}
    )
    try:
        registry = Registry(nc.jetstream(), names)
        await registry.put(_agent(AGENT, project, [CAPABILITY, "rest-bench", "idle"]))
        queue = work_queue(nc, names)
        agent = Claimant(agent_id=AGENT, agent_type="bench", capabilities=(CAPABILITY, "rest-bench"))
        async with httpx.AsyncClient(
            timeout=60, limits=httpx.Limits(max_connections=OTHER_STREAMS + 20)
        ) as http:
            polling = await _client(http, base, project, streaming=False)
            rest_binding = await _client(http, base, project, streaming=False, binding="HTTP+JSON")
            grpc_binding = await _client(http, base, project, streaming=False, binding="GRPC")
            streaming = await _client(http, base, project, streaming=True)
            results = await _claimed(
                ctx, http, base, project, polling, [rest_binding, grpc_binding], queue, agent
            )
            results += await _streamed(ctx, streaming, queue, agent)
            results += await _reads(ctx, http, base, project, polling, registry)
            results += await _pushed(ctx, polling, queue, agent, nc, names)
            await polling.close()
            await rest_binding.close()
            await grpc_binding.close()
            await streaming.close()
        return results
    finally:
        stop_weft(proc)
        await nc.close()


def _agent(agent_id: str, project: str, capabilities: list[str]) -> AgentEntry:
    return AgentEntry(
        agent_id=agent_id,
        handle=f"bench-{agent_id[:6]}",
        agent_type="bench",
        project_id=project,
        user_id="0123456789abcdef",
        capabilities=capabilities,
        heartbeat_interval_s=3600,
    )


async def _claim(queue: WorkQueue, agent: Claimant, work_id: str) -> None:
    item = None
    while item is None:
        item = await queue.claim(agent)
    assert item.id == work_id, "the bench's queue had an item left over"
    await queue.complete(item.id, AGENT)  # not timed: keeps the queue empty between samples


async def _claimed(
    ctx: BenchContext,
    http: httpx.AsyncClient,
    base: str,
    project: str,
    client: Client,
    bindings: list[Client],
    queue: WorkQueue,
    agent: Claimant,
) -> list[BenchResult]:
    body = WorkSubmission(task_id="lat", description="measure", capability="rest-bench").model_dump(
        mode="json"
    )
    headers = {"X-Loom-Project": project}

    async def rest_once() -> float:
        started = time.perf_counter()
        response = await http.post(f"{base}/api/work", json=body, headers=headers)
        assert response.status_code == 201, response.text
        await _claim(queue, agent, response.json()["id"])
        return (time.perf_counter() - started) * 1000

    async def a2a_once(over: Client = client) -> float:
        started = time.perf_counter()
        task_id = ""
        async for event in over.send_message(_request()):
            task_id = event.task.id
        await _claim(queue, agent, task_id)
        return (time.perf_counter() - started) * 1000

    for _ in range(5):
        await rest_once()
        await a2a_once()
        for other in bindings:
            await a2a_once(other)
    rest: list[float] = []
    a2a: list[float] = []
    others: list[list[float]] = [[] for _ in bindings]
    for _ in range(ctx.iterations(300)):  # interleaved: all see the same machine load
        rest.append(await rest_once())
        a2a.append(await a2a_once())
        for samples, other in zip(others, bindings, strict=True):
            samples.append(await a2a_once(other))
    return [
        summarize("a2a: REST submit -> agent claimed (same run)", rest),
        summarize(
            "a2a: A2A SendMessage -> agent claimed",
            a2a,
            baseline="a2a: REST submit -> agent claimed (same run)",
            target="p95 <= 2x REST submit -> claimed",
        ),
        *(
            summarize(
                f"a2a: {name} SendMessage -> agent claimed",
                samples,
                baseline="a2a: A2A SendMessage -> agent claimed",
                target="p95 <= 1.2x JSON-RPC SendMessage -> claimed",
            )
            for name, samples in zip(("HTTP+JSON", "gRPC"), others, strict=True)
        ),
    ]


async def _streamed(
    ctx: BenchContext, client: Client, queue: WorkQueue, agent: Claimant
) -> list[BenchResult]:
    async def once() -> float:
        started = time.perf_counter()
        stream = client.send_message(_request())
        first = await anext(stream)
        await _claim(queue, agent, first.task.id)  # the agent claims and completes at once
        async for _ in stream:
            pass  # until the completed status ends the stream
        return (time.perf_counter() - started) * 1000

    async def sampled() -> list[float]:
        for _ in range(5):
            await once()
        return [await once() for _ in range(ctx.iterations(200))]

    alone = await sampled()
    # Other tasks' streams open at once: tasks nobody claims ("idle" capability), each followed.
    others = []
    for _ in range(OTHER_STREAMS):
        async for event in client.send_message(_request("idle")):
            others.append(event.task.id)
            break
    followers = [asyncio.create_task(_follow(client, task_id)) for task_id in others]
    await asyncio.sleep(1)  # let every subscription reach the relay
    crowded = await sampled()
    for follower in followers:
        follower.cancel()
    await asyncio.gather(*followers, return_exceptions=True)
    return [
        summarize("a2a: streamed send -> completed event", alone),
        summarize(
            f"a2a: streamed send -> completed, {OTHER_STREAMS} other streams open",
            crowded,
            baseline="a2a: streamed send -> completed event",
        ),
    ]


async def _follow(client: Client, task_id: str) -> None:
    async for _ in client.subscribe(SubscribeToTaskRequest(id=task_id)):
        pass


async def _reads(
    ctx: BenchContext, http: httpx.AsyncClient, base: str, project: str, client: Client, registry: Registry
) -> list[BenchResult]:
    task_id = ""
    async for event in client.send_message(_request("idle")):
        task_id = event.task.id
    get = await time_async(lambda: client.get_task(GetTaskRequest(id=task_id)), ctx.iterations(300))
    await asyncio.gather(
        *(registry.put(_agent(uuid.uuid4().hex, project, [f"cap-{i % 20}"])) for i in range(1000))
    )
    card_url = f"{base}/a2a/{project}/.well-known/agent-card.json"

    async def card() -> Any:
        response = await http.get(card_url)
        assert response.status_code == 200
        return response

    cards = await time_async(card, ctx.iterations(100))
    return [
        summarize("a2a: GetTask", get),
        summarize("a2a: Agent Card, 1,000 agents online", cards),
    ]


async def _pushed(
    ctx: BenchContext, client: Client, queue: WorkQueue, agent: Claimant, nc: Any, names: ProjectNames
) -> list[BenchResult]:
    import contextlib

    import uvicorn
    from a2a.types import SendMessageConfiguration, TaskPushNotificationConfig
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from shared.nats.server import free_port

    arrived: dict[str, asyncio.Event] = {}

    async def hook(request: Request) -> Response:
        task = (await request.json())["task"]
        if task["status"]["state"] == "TASK_STATE_COMPLETED" and task["id"] in arrived:
            arrived[task["id"]].set()
        return Response(status_code=204)

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            Starlette(routes=[Route("/hook", hook, methods=["POST"])]),
            host="127.0.0.1",
            port=port,
            log_level="warning",
        )
    )
    server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign,assignment]
    serving = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110 - uvicorn offers a flag, not an event
        await asyncio.sleep(0.01)
    webhook = TaskPushNotificationConfig(url=f"http://127.0.0.1:{port}/hook", token="bench")
    completed: dict[str, asyncio.Event] = {}

    async def on_event(msg: Any) -> None:
        subject_id = json.loads(msg.data).get("subject_id")
        if subject_id in completed:
            completed[subject_id].set()

    sub = await nc.subscribe(names.event_subject("work", "completed"), cb=on_event)

    async def submit() -> str:
        request = _request()
        request.configuration.CopyFrom(
            SendMessageConfiguration(return_immediately=True, task_push_notification_config=webhook)
        )
        async for event in client.send_message(request):
            return str(event.task.id)
        raise RuntimeError("no task")

    async def finish(task_id: str) -> None:
        item = None
        while item is None:
            item = await queue.claim(agent)
        await queue.complete(item.id, AGENT)

    async def once(waits: dict[str, asyncio.Event]) -> float:
        task_id = await submit()
        waits[task_id] = asyncio.Event()
        await asyncio.sleep(0.05)  # the submission's own notifications go first
        started = time.perf_counter()
        await finish(task_id)
        await asyncio.wait_for(waits[task_id].wait(), 30)
        elapsed = (time.perf_counter() - started) * 1000
        del waits[task_id]
        return elapsed

    try:
        for _ in range(5):
            await once(arrived)
        pushed: list[float] = []
        raw: list[float] = []
        for _ in range(ctx.iterations(100)):  # interleaved, same load
            pushed.append(await once(arrived))
            raw.append(await once(completed))
    finally:
        await sub.unsubscribe()
        server.should_exit = True
        await asyncio.wait_for(serving, 10)
    return [
        summarize("a2a push: raw nats-py, complete -> work.completed event received", raw),
        summarize(
            "a2a push: complete -> completed task at the webhook",
            pushed,
            baseline="a2a push: raw nats-py, complete -> work.completed event received",
        ),
    ]
