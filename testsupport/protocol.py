"""Synadia's Agent Protocol from the caller's side, with the protocol's own package
(``synadia-ai-agents``): finding an agent and collecting its streamed answer (docs/interop.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from synadia_ai.agents import Agent, Agents, DiscoverFilter, ResponseChunk


async def protocol_agent(agents: Agents, owner: str, session_name: str, timeout: float = 30) -> Agent:
    """The one agent serving ``owner``/``session_name``, once discovery finds it (an agent's
    service registers once its Warp has connected)."""
    async with asyncio.timeout(timeout):
        while True:
            hits = await agents.discover(filter=DiscoverFilter(owner=owner, session_name=session_name))
            if hits:
                assert len(hits) == 1, [h.info for h in hits]
                return hits[0]


async def answers(agent: Agent, text: str, timeout: float = 30) -> list[str]:
    """Prompt ``agent`` and collect the text of every response chunk until the stream ends."""
    return [m.text async for m in agent.prompt(text, timeout=timeout) if isinstance(m, ResponseChunk)]


async def next_prompt(read: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
    """The next protocol prompt in the agent's inbox; ``read`` calls ``warp_messages_read_direct``."""
    async with asyncio.timeout(30):
        while True:
            page = await read({"message_type": "prompt"})
            if page["messages"]:
                assert len(page["messages"]) == 1
                return dict(page["messages"][0])
            await asyncio.sleep(0.05)
