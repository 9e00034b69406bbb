"""Weft's WebSocket as a dashboard sees it: subscribe to topics, collect every event.

``async with event_stream(fabric, "work", "targets") as stream:`` connects to
``/api/ws`` for the fabric's project, subscribes (waiting for each ``subscribed``
acknowledgement, so nothing after the block starts is missed) and gathers events in the
background; ``stream.events`` is the list so far, ``stream.wait_for(...)`` polls it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import websockets

from scenario_harness.fabric import Fabric
from testsupport.serving import ws_connect

CONNECT_TIMEOUT_S = 15.0


@dataclass
class EventStream:
    events: list[dict[str, Any]] = field(default_factory=list)
    """Each relayed event (the ``event`` object of an ``{"type": "event"}`` frame), in arrival order."""
    lagged: int = 0
    """Events Weft dropped because this client was slow (must stay 0 for an honest comparison)."""
    errors: list[dict[str, Any]] = field(default_factory=list)

    def of(self, kind: str, action: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.events if e["kind"] == kind and (action is None or e["action"] == action)]

    async def wait_for(
        self, match: Callable[[dict[str, Any]], bool], *, timeout: float = 30.0, what: str = "an event"
    ) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            found = next((e for e in self.events if match(e)), None)
            if found is not None:
                return found
            if loop.time() > deadline:
                seen = [f"{e['kind']}.{e['action']}" for e in self.events[-20:]]
                raise AssertionError(f"timed out after {timeout:g}s waiting for {what}; last events: {seen}")
            await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def event_stream(fabric: Fabric, *topics: str) -> AsyncIterator[EventStream]:
    url = f"{fabric.weft.ws_url}/api/ws?project={fabric.project_id}"
    headers = {"Authorization": f"Bearer {fabric.weft.token}"} if fabric.weft.token else None
    stream = EventStream()
    async with ws_connect(url, additional_headers=headers) as ws:
        welcome = json.loads(await asyncio.wait_for(ws.recv(), CONNECT_TIMEOUT_S))
        assert welcome["type"] == "welcome", welcome
        for topic in topics:
            await ws.send(json.dumps({"type": "subscribe", "topic": topic, "id": topic}))
        pending = set(topics)
        while pending:
            frame = json.loads(await asyncio.wait_for(ws.recv(), CONNECT_TIMEOUT_S))
            if frame["type"] == "subscribed":
                pending.discard(frame["id"])
            elif frame["type"] == "error":
                raise AssertionError(f"subscription refused: {frame}")

        async def gather() -> None:
            with contextlib.suppress(websockets.ConnectionClosed):
                async for raw in ws:
                    frame = json.loads(raw)
                    if frame["type"] == "event":
                        stream.events.append(frame["event"])
                    elif frame["type"] == "lagged":
                        stream.lagged += int(frame["dropped"])
                    elif frame["type"] == "error":
                        stream.errors.append(frame)
                    elif frame["type"] == "ping":
                        await ws.send(json.dumps({"type": "pong"}))

        task = asyncio.create_task(gather(), name="ws-events")
        try:
            yield stream
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
