"""The agent side of the tests: what a Warp agent does to work, through the
same shared.work module Warp uses (claim, progress, complete, fail)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from nats.aio.client import Client as NatsClient

from shared.agents.registry import Registry
from shared.models import AgentEntry, WorkItem
from shared.names import ProjectNames
from shared.work.rules import Claimant
from testsupport.work import work_queue

AGENT = "a" * 32


class Agent:
    def __init__(
        self, nc: NatsClient, project_id: str, agent_id: str = AGENT, caps: tuple[str, ...] = ("code",)
    ):
        self.names = ProjectNames(project_id)
        self.queue = work_queue(nc, self.names)
        self.registry = Registry(nc.jetstream(), self.names)
        self.claimant = Claimant(agent_id=agent_id, agent_type="claude-code", capabilities=caps)
        self.agent_id = agent_id

    async def register(self, **fields: Any) -> AgentEntry:
        entry = AgentEntry(
            agent_id=self.agent_id,
            handle=fields.pop("handle", f"agent-{self.agent_id[:6]}"),
            agent_type=fields.pop("agent_type", "claude-code"),
            project_id=self.names.project_id,
            user_id="0123456789abcdef",
            capabilities=list(self.claimant.capabilities),
            **fields,
        )
        await self.registry.put(entry)
        return entry

    async def claim(self, timeout: float = 10) -> WorkItem:
        """Claim the next eligible item, polling until one is there."""
        deadline = time.monotonic() + timeout
        while True:
            item = await self.queue.claim(self.claimant)
            if item is not None:
                return item
            if time.monotonic() > deadline:
                raise AssertionError("nothing to claim")
            await asyncio.sleep(0.05)


async def until(check: Callable[[], Any], timeout: float = 10, what: str = "condition") -> Any:
    """Poll ``check`` (sync, run in a thread) until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = await asyncio.to_thread(check)
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)
