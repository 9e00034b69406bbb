"""An MCP client session over stdio, as Claude Code or any MCP client runs a server from
an ``mcpServers`` entry: the command, its environment, the project folder."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from shared.tasks import tick


@asynccontextmanager
async def mcp_session(
    command: str, env: Mapping[str, str], cwd: Path, args: list[str] | None = None
) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=command, args=args or [], env=dict(env), cwd=str(cwd))
    with (cwd / f"{Path(command).name}.stderr").open("a") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def call(session: ClientSession, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    """A tool call that must succeed; retried while the server is still reaching NATS.

    ``asyncio.timeout`` and ``tick``, not ``wait_for`` and ``sleep``: Python 3.11's
    ``wait_for`` drops a cancellation that arrives with the answer, and this loop would then
    go on retrying long after its example was cancelled (shared/tasks.py)."""
    for _ in range(150):
        async with asyncio.timeout(60):
            result = await session.call_tool(tool, arguments or {})
        if not result.is_error:
            return dict(result.structured_content or {})
        text = text_of(result)
        assert "NATS" in text or "try again shortly" in text, f"{tool} failed: {text}"
        await tick(0.2)
    raise AssertionError(f"{tool}: never reached NATS")
