"""GET /api/agents/protocol: the agents of Synadia's Agent Protocol on Weft's NATS account that
are not Loom's (weft/interop.py, docs/interop.md). The foreign agent is the protocol's own
agent-host package; Loom's agent is a real Warp, which serves the protocol too."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import httpx
from nats.aio.client import Client as NatsClient
from synadia_ai.agent_service import AgentService, PromptStream
from synadia_ai.agents import Agents, Envelope

from shared.nats.server import EmbeddedNatsServer
from testsupport.protocol import protocol_agent
from testsupport.warp import warp_agent


async def echo(envelope: Envelope, stream: PromptStream) -> None:
    await stream.send(envelope.prompt)


async def listed(api: httpx.AsyncClient, owner: str, want: Any, timeout: float = 30) -> list[dict[str, Any]]:
    """The protocol's agents of ``owner`` Weft lists, once ``want(items)`` holds."""
    async with asyncio.timeout(timeout):
        while True:
            response = await api.get("/api/agents/protocol")
            assert response.status_code == 200, response.text
            items = [i for i in response.json()["items"] if i["owner"] == owner]
            if want(items):
                return items
            await asyncio.sleep(0.2)


async def test_weft_lists_the_protocols_other_agents_and_leaves_its_own_out(
    api: httpx.AsyncClient, nc: NatsClient, nats_server: EmbeddedNatsServer, project_id: str, tmp_path: Path
) -> None:
    owner = f"dana-{uuid.uuid4().hex[:8]}"
    foreign = AgentService(
        agent="claude-code",
        owner=owner,
        session_name="fix-parser",
        nc=nc,
        description="Claude Code in dana's checkout",
        heartbeat_interval_s=1,
        extra_metadata={"model": "opus"},
    )
    foreign.on_prompt(echo)
    await foreign.start()
    try:
        async with warp_agent(nats_server.url, project_id, tmp_path) as loom_agent:
            callers = Agents(nc=nc)
            try:  # Loom's agent serves the protocol: a caller finds it, with its Loom id
                ours = await protocol_agent(callers, project_id, loom_agent.agent_id)
                assert ours.metadata["loom_project"] == project_id
            finally:
                await callers.close()

            [item] = await listed(api, owner, lambda items: items and items[0]["online"])
            assert item["agent"] == "claude-code" and item["session_name"] == "fix-parser"
            assert item["description"] == "Claude Code in dana's checkout"
            assert item["metadata"]["model"] == "opus"
            assert item["instance_id"] == foreign.instance_id
            assert item["prompt_subject"] == f"agents.prompt.claude-code.{owner}.fix-parser"
            assert item["last_heartbeat"] is not None

            everything = (await api.get("/api/agents/protocol")).json()["items"]
            assert all("loom_agent_id" not in i["metadata"] for i in everything)
            assert all(i["owner"] != project_id for i in everything)

            # The same listing for a token of another project: these agents are nobody's project.
            other = (await api.get("/api/agents/protocol", headers={"X-Loom-Project": "elsewhere"})).json()
            assert [i["instance_id"] for i in other["items"] if i["owner"] == owner] == [foreign.instance_id]
    finally:
        await foreign.stop()
    await listed(api, owner, lambda items: items == [])  # gone once it stopped
