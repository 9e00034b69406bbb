"""A Warp agent served as an agent of Synadia's Agent Protocol (warp/protocol.py, docs/interop.md),
prompted by the protocol's own Python caller package over a real nats-server."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from nats.aio.client import Client as NatsClient
from synadia_ai.agents import (
    Agent,
    Agents,
    Attachment,
    DiscoverFilter,
    ProtocolError,
    ResponseChunk,
    StatusChunk,
)
from warp_harness import WarpProc, spawn_warp

from shared.names import ProjectNames
from testsupport.protocol import answers, next_prompt, protocol_agent
from testsupport.work import work_queue

A_ID = "a" * 32
B_ID = "b" * 32
MORE = {"more": "true"}


@pytest.fixture
async def callers(nc: NatsClient) -> AsyncIterator[Agents]:
    """The protocol's own caller package, on the test's connection."""
    agents = Agents(nc=nc)
    try:
        yield agents
    finally:
        await agents.close()


@contextlib.asynccontextmanager
async def registered(env: dict[str, str], tmp_path: Path, name: str) -> AsyncIterator[WarpProc]:
    """A Warp spawned with ``env`` and registered."""
    async with spawn_warp(env, tmp_path, name=name) as agent:
        await agent.ready_ok("warp_registry_register")
        yield agent


def reader(agent: WarpProc) -> Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]:
    async def read(args: dict[str, Any]) -> dict[str, Any]:
        return await agent.ok("warp_messages_read_direct", args)

    return read


async def test_a_prompt_reaches_the_inbox_and_the_answer_streams_back_in_chunks(
    warp_env: dict[str, str], tmp_path: Path, project_id: str, callers: Agents
) -> None:
    env = {**warp_env, "LOOM_HANDLE": "alice", "LOOM_AGENT_ID": A_ID, "LOOM_CAPABILITIES": "code"}
    async with registered(env, tmp_path, "a") as alice:
        agent = await protocol_agent(callers, project_id, A_ID)
        assert (agent.agent, agent.owner) == ("loom", project_id)
        assert agent.metadata["loom_agent_id"] == A_ID
        assert agent.prompt_subject == f"agents.prompt.loom.{project_id}.{A_ID}"

        asking = asyncio.create_task(answers(agent, "What does the parser need?"))
        prompt = await next_prompt(reader(alice))
        assert prompt["body"] == "What does the parser need?"
        assert prompt["sender_handle"] == "agent-protocol"
        assert prompt["metadata"]["protocol"] == "synadia-agents"
        reply = {"recipient_id": prompt["sender_id"], "reply_to": prompt["id"]}

        first = await alice.ok(
            "warp_messages_send_direct", {**reply, "message": "Reading it...", "metadata": MORE}
        )
        assert first["streamed"] is True and first["seq"] == 0
        await alice.ok("warp_messages_send_direct", {**reply, "message": "A tokenizer first."})
        assert await asyncio.wait_for(asking, 30) == ["Reading it...", "A tokenizer first."]

        # The stream has ended: a late reply is refused, naming the field.
        late = await alice.err("warp_messages_send_direct", {**reply, "message": "and tests"})
        assert "reply_to" in late and "has ended" in late

        # An ordinary message is untouched by all this: it goes to an inbox as before.
        plain = await alice.ok("warp_messages_send_direct", {"recipient_id": A_ID, "message": "note"})
        assert plain["streamed"] is False and plain["seq"] > 0


async def test_a_prompt_the_agent_never_answers_ends_in_a_504_and_a_late_answer_is_refused(
    warp_env: dict[str, str], tmp_path: Path, nc: NatsClient, project_id: str, callers: Agents
) -> None:
    env = {**warp_env, "LOOM_AGENT_ID": A_ID, "LOOM_AGENT_PROTOCOL_WAIT_S": "1"}
    async with registered(env, tmp_path, "a") as alice:
        agent = await protocol_agent(callers, project_id, A_ID)
        with pytest.raises(ProtocolError, match="service error 504"):
            await answers(agent, "anyone there?")
        prompt = await next_prompt(reader(alice))  # it did reach the inbox; the caller stopped waiting
        late = await alice.err(
            "warp_messages_send_direct",
            {"recipient_id": prompt["sender_id"], "reply_to": prompt["id"], "message": "here"},
        )
        assert "has ended" in late

        # What a direct message cannot carry is refused before it reaches the inbox.
        with pytest.raises(ProtocolError, match="service error 413: prompt: at most 64000 characters"):
            await answers(agent, "x" * 64_001)
        blank = await raw_prompt_error(nc, agent.prompt_subject, b"   ")
        assert blank == ("400", "prompt: must not be empty")
        assert (await alice.ok("warp_messages_read_direct", {"peek": True}))["messages"] == []


async def raw_prompt_error(nc: NatsClient, subject: str, payload: bytes) -> tuple[str, str]:
    """A prompt sent as plain NATS (the protocol's caller package refuses an empty one before
    sending it): the error frame's code and description, read up to the terminator."""
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    try:
        await nc.publish(subject, payload, reply=inbox)
        error: tuple[str, str] | None = None
        async with asyncio.timeout(10):
            while (msg := await sub.next_msg(timeout=10)).data or msg.headers:
                headers = msg.headers or {}
                if "Nats-Service-Error-Code" in headers:
                    error = (headers["Nats-Service-Error-Code"], headers.get("Nats-Service-Error", ""))
        assert error is not None, "no error frame before the terminator"
        return error
    finally:
        await sub.unsubscribe()


async def test_an_agent_can_leave_the_protocol_off(
    warp_env: dict[str, str], tmp_path: Path, project_id: str, callers: Agents
) -> None:
    env = {**warp_env, "LOOM_AGENT_ID": A_ID, "LOOM_AGENT_PROTOCOL": "off"}
    async with registered(env, tmp_path, "a"):
        hits = await callers.discover(filter=DiscoverFilter(owner=project_id), timeout=1.0)
        assert hits == []


async def collect(agent: Agent, text: str) -> tuple[list[str], list[str]]:
    """The statuses and the answer's chunks of one prompt's stream."""
    statuses: list[str] = []
    chunks: list[str] = []
    async for message in agent.prompt(text, timeout=30):
        if isinstance(message, StatusChunk):
            statuses.append(message.status)
        elif isinstance(message, ResponseChunk):
            chunks.append(message.text)
    return statuses, chunks


async def claimed(bob: WarpProc) -> dict[str, Any]:
    async with asyncio.timeout(30):
        while True:
            got = await bob.ok("warp_work_claim", {"capability": "ask"})
            if got["claimed"]:
                return dict(got["item"])
            await asyncio.sleep(0.05)


async def test_in_work_mode_a_prompt_is_a_work_item_for_the_fleet_and_its_result_the_answer(
    warp_env: dict[str, str], tmp_path: Path, nc: NatsClient, project_id: str, callers: Agents
) -> None:
    env_a = {
        **warp_env,
        "LOOM_AGENT_ID": A_ID,
        "LOOM_CAPABILITIES": "code",
        "LOOM_AGENT_PROTOCOL": "work",
        "LOOM_AGENT_PROTOCOL_CAPABILITY": "ask",
    }
    env_b = {**warp_env, "LOOM_AGENT_ID": B_ID, "LOOM_CAPABILITIES": "ask", "LOOM_AGENT_PROTOCOL": "off"}
    async with registered(env_a, tmp_path, "a"), registered(env_b, tmp_path, "b") as bob:
        agent = await protocol_agent(callers, project_id, A_ID)
        assert agent.prompt_endpoint.attachments_ok is False  # an item carries text alone
        asking = asyncio.create_task(collect(agent, "Summarise the parser"))
        item = await claimed(bob)  # another agent of the project, with the capability, does it
        assert item["description"] == "Summarise the parser" and item["submitted_by"] == A_ID
        assert item["context"]["agent_protocol"]["through"] == A_ID
        await bob.ok("warp_work_complete", {"work_id": item["id"], "result": "It tokenizes, then parses."})
        statuses, chunks = await asyncio.wait_for(asking, 30)
        assert chunks == ["It tokenizes, then parses."]
        assert statuses[0] == "ack" and f"queued {item['id']}" in statuses
        assert statuses[-1] == f"completed {item['id']}"

        # An item that ends otherwise ends the stream with an error naming it.
        asking = asyncio.create_task(collect(agent, "Rewrite it in Rust"))
        doomed = await claimed(bob)
        await work_queue(nc, ProjectNames(project_id)).cancel(doomed["id"], reason="not now")
        with pytest.raises(
            ProtocolError, match=f"service error 502: work item {doomed['id']} ended cancelled"
        ):
            await asyncio.wait_for(asking, 30)


async def test_a_prompts_attachments_are_saved_in_the_project_folder_and_named_in_the_message(
    warp_env: dict[str, str], tmp_path: Path, project_id: str, callers: Agents
) -> None:
    """Attachments (base64 files, §5.2) are written with the protocol package's own
    ``save_attachments`` under ``.loom/attachments/<message id>/`` of the agent's folder: a
    name from another agent cannot climb out of it, and content that is not base64 is
    skipped and said so, not written."""
    env = {**warp_env, "LOOM_AGENT_ID": A_ID, "LOOM_CAPABILITIES": "code"}
    async with registered(env, tmp_path, "a") as alice:
        agent = await protocol_agent(callers, project_id, A_ID)
        assert agent.prompt_endpoint.attachments_ok is True
        files = [
            Attachment.from_bytes("../../escape.txt", b"stay in the folder"),
            Attachment(filename="broken.bin", content="not base64 at all!"),
            Attachment.from_bytes("trace.log", b"\x00\x01 binary \xff"),
        ]

        async def ask() -> list[str]:
            got = agent.prompt("Why does this fail?", attachments=files, timeout=30)
            return [m.text async for m in got if isinstance(m, ResponseChunk)]

        asking = asyncio.create_task(ask())
        prompt = await next_prompt(reader(alice))
        folder = Path(warp_env["LOOM_PROJECT_PATH"]) / ".loom" / "attachments" / prompt["id"]
        paths = [Path(p) for p in json.loads(prompt["metadata"]["attachments"])]
        assert [p.parent for p in paths] == [folder, folder]
        assert [p.name for p in paths] == ["escape.txt", "trace.log"]
        assert [p.read_bytes() for p in paths] == [b"stay in the folder", b"\x00\x01 binary \xff"]
        assert prompt["metadata"]["attachments_skipped"] == "#2 invalid_content"
        reply = {"recipient_id": prompt["sender_id"], "reply_to": prompt["id"], "message": "Read them."}
        await alice.ok("warp_messages_send_direct", reply)
        assert await asyncio.wait_for(asking, 30) == ["Read them."]
