"""A real Warp agent for tests: the ``warp`` process as an MCP stdio server, driven by the
official MCP client, exactly as an agent's MCP host drives it."""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from testsupport.zygote import zygote_env

WARP = str(Path(sys.executable).parent / "warp")


class Agent:
    def __init__(self, session: ClientSession, agent_id: str) -> None:
        self.session = session
        self.agent_id = agent_id

    async def call(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """Call a tool; retried while Warp is still connecting to NATS."""
        for _ in range(100):
            result = await asyncio.wait_for(self.session.call_tool(tool, arguments or {}), 60)
            text = " ".join(c.text for c in result.content if isinstance(c, types.TextContent))
            if not result.is_error:
                assert result.structured_content is not None, f"{tool}: no structured output"
                return dict(result.structured_content)
            assert "NATS" in text, f"{tool} failed: {text}"
            await asyncio.sleep(0.2)
        raise AssertionError(f"{tool}: Warp never reached NATS")


@asynccontextmanager
async def warp_agent(nats_url: str, project: str, tmp_path: Path, **env: str) -> AsyncIterator[Agent]:
    agent_id = uuid.uuid4().hex
    params = StdioServerParameters(
        command=WARP,
        env={
            "NATS_URL": nats_url,
            "LOOM_PROJECT_ID": project,
            "LOOM_AGENT_ID": agent_id,
            "LOOM_PROJECT_PATH": str(tmp_path),
            "LOOM_CAPABILITIES": "code",
            "LOOM_AUTO_REGISTER": "1",
            **zygote_env(),
            **env,
        },
        cwd=str(tmp_path),
    )
    with (tmp_path / f"warp-{agent_id[:8]}.stderr").open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield Agent(session, agent_id)
