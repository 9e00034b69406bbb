"""Plain helpers for Weft's tests: agents in the registry, a WebSocket event collector, polling."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

from a2a.types import Message, Part, Role, SendMessageRequest
from nats.aio.client import Client as NatsClient
from nats.js.api import RetentionPolicy, StorageType, StreamConfig
from websockets.asyncio.client import ClientConnection

from shared.agents.registry import Registry
from shared.models import AgentEntry, AgentStatus, utcnow
from shared.names import ProjectNames
from shared.nats.jetstream import ensure_stream
from shared.work.rules import Claimant
from testsupport.serving import ws_connect as ws_connect  # the tests import it from here

T = TypeVar("T")


def agent_id() -> str:
    return uuid.uuid4().hex


async def register(
    nc: NatsClient,
    project: str,
    *,
    aid: str | None = None,
    agent_type: str = "claude-code",
    capabilities: tuple[str, ...] = ("code",),
    boundaries: tuple[str, ...] = ("default",),
    status: AgentStatus = AgentStatus.ONLINE,
    handle: str | None = None,
    stale: bool = False,
    **extra: Any,
) -> AgentEntry:
    """Write a registry entry the way Warp does."""
    ident = aid or agent_id()
    beat = utcnow() - (timedelta(minutes=10) if stale else timedelta())
    entry = AgentEntry(
        agent_id=ident,
        handle=handle or f"agent-{ident[:8]}",
        agent_type=agent_type,
        project_id=project,
        user_id="0123456789abcdef",
        hostname="host-1",
        capabilities=list(capabilities),
        boundaries=list(boundaries),
        status=status,
        last_heartbeat=beat,
        **extra,
    )
    await Registry(nc.jetstream(), ProjectNames(project)).put(entry)
    return entry


def claimant(entry: AgentEntry) -> Claimant:
    return Claimant(
        agent_id=entry.agent_id,
        agent_type=entry.agent_type,
        capabilities=tuple(entry.capabilities),
        boundaries=tuple(entry.boundaries),
    )


async def eventually(probe: Callable[[], Awaitable[T | None]], timeout: float = 10.0, what: str = "") -> T:
    """Poll ``probe`` until it returns something truthy (or fail after ``timeout``)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await probe()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what or probe}")
        await asyncio.sleep(0.05)


class WsClient:
    """A real WebSocket client of /api/ws that keeps every frame it receives."""

    def __init__(self, conn: ClientConnection) -> None:
        self.conn = conn
        self.frames: list[dict[str, Any]] = []

    async def send(self, message: dict[str, Any]) -> None:
        await self.conn.send(json.dumps(message))

    async def next(self, timeout: float = 10.0) -> dict[str, Any]:
        frame = json.loads(await asyncio.wait_for(self.conn.recv(), timeout))
        assert isinstance(frame, dict)
        self.frames.append(frame)
        return frame

    async def next_of(self, kind: str, timeout: float = 10.0) -> dict[str, Any]:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                raise AssertionError(f"no {kind!r} frame within {timeout}s; got {self.frames[-5:]}")
            frame = await self.next(remaining)
            if frame.get("type") == kind:
                return frame

    async def events_until(
        self, done: Callable[[list[dict[str, Any]]], bool], timeout: float = 10.0
    ) -> list[dict[str, Any]]:
        """Event frames' events, collected until ``done(events)``."""
        events: list[dict[str, Any]] = []
        deadline = asyncio.get_running_loop().time() + timeout
        while not done(events):
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                raise AssertionError(f"events so far: {[e.get('action') for e in events]}")
            frame = await self.next(remaining)
            if frame.get("type") == "event":
                events.append(frame["event"])
        return events

    async def subscribe(
        self, topic: str, filters: dict[str, Any] | None = None, sub_id: str | None = None
    ) -> None:
        message: dict[str, Any] = {"type": "subscribe", "topic": topic, "filters": filters or {}}
        if sub_id:
            message["id"] = sub_id
        await self.send(message)
        await self.next_of("subscribed")


def actions(events: list[dict[str, Any]], subject_id: str | None = None) -> list[str]:
    return [
        f"{e['kind']}.{e['action']}" for e in events if subject_id is None or e["subject_id"] == subject_id
    ]


async def channel(nc: NatsClient, project: str, name: str) -> str:
    """Create a channel's stream the way Warp does; returns its subject."""
    names = ProjectNames(project)
    await ensure_stream(
        nc.jetstream(),
        StreamConfig(
            name=names.channel_stream(name),
            subjects=[names.channel_subject(name)],
            retention=RetentionPolicy.LIMITS,
            storage=StorageType.FILE,
            allow_direct=True,
        ),
    )
    return names.channel_subject(name)


def rpc(method: str, params: dict[str, Any], ident: int = 7) -> dict[str, Any]:
    """A JSON-RPC 2.0 request, as A2A clients post it."""
    return {"jsonrpc": "2.0", "id": ident, "method": method, "params": params}


def message(text: str = "Fix the flaky parser test", **metadata: Any) -> SendMessageRequest:
    """An A2A 1.0 send of ``text`` as the SDK's clients build it, for the ``code`` capability
    unless ``metadata`` says otherwise."""
    return SendMessageRequest(
        message=Message(
            role=Role.ROLE_USER,
            message_id=uuid.uuid4().hex,
            parts=[Part(text=text)],
            metadata={"capability": "code", **metadata},
        )
    )


def message_json(*parts: dict[str, Any]) -> dict[str, Any]:
    """An A2A 1.0 message in its JSON form (raw requests), for the ``code`` capability."""
    return {
        "role": "ROLE_USER",
        "messageId": uuid.uuid4().hex,
        "parts": list(parts) or [{"text": "Fix the flaky parser test"}],
        "metadata": {"capability": "code"},
    }


def message_0_3(text: str = "Fix the flaky parser test") -> dict[str, Any]:
    """A message in the A2A 0.3 wire format (``kind`` on parts, lower-case roles)."""
    return {
        "role": "user",
        "messageId": uuid.uuid4().hex,
        "parts": [{"kind": "text", "text": text}],
        "metadata": {"capability": "code"},
    }
