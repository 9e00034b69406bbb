"""One MCP server process (Warp or Pattern) driven over stdio by the official MCP client.

The process is the real console script from ``.venv/bin``; the session is the SDK's
``ClientSession`` on top of its ``stdio_client`` transport. Its stderr goes to a file
in the scenario's folder, which failures quote.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

BIN = Path(sys.executable).parent
CALL_TIMEOUT_S = 60.0
START_TIMEOUT_S = 30.0


class ToolCallError(AssertionError):
    """A tool answered with an error where the scenario expected success."""


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


class McpProcess:
    """A live MCP session with one server process."""

    def __init__(self, name: str, session: ClientSession, stderr_path: Path, env: dict[str, str]) -> None:
        self.name = name
        self.session = session
        self.stderr_path = stderr_path
        self.env = env
        self.initialized = False

    async def initialize(self) -> None:
        """The MCP handshake (once). Any task may do it, so several servers can start at once."""
        if not self.initialized:
            with anyio.fail_after(START_TIMEOUT_S):
                await self.session.initialize()
            self.initialized = True

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""

    async def raw(self, tool: str, **arguments: Any) -> types.CallToolResult:
        """The tool's full result, error or not."""
        with anyio.fail_after(CALL_TIMEOUT_S):
            return await self.session.call_tool(tool, arguments)

    async def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        """Call a tool that must succeed; returns its structured output."""
        result = await self.raw(tool, **arguments)
        if result.is_error:
            raise ToolCallError(
                f"{self.name}: {tool}({arguments}) failed: {text_of(result)}\n"
                f"--- {self.name} stderr (tail) ---\n{self.stderr()[-2000:]}"
            )
        if result.structured_content is None:
            raise ToolCallError(f"{self.name}: {tool} returned no structured content")
        return dict(result.structured_content)

    async def error(self, tool: str, **arguments: Any) -> str:
        """Call a tool that must fail; returns the error text the agent would read."""
        result = await self.raw(tool, **arguments)
        if not result.is_error:
            raise ToolCallError(f"{self.name}: {tool}({arguments}) unexpectedly succeeded: {text_of(result)}")
        return text_of(result)

    async def tool_names(self) -> set[str]:
        listed = await self.session.list_tools()
        return {tool.name for tool in listed.tools}


@asynccontextmanager
async def spawn_mcp(
    command: str,
    env: dict[str, str],
    *,
    cwd: Path,
    stderr_path: Path,
    name: str,
    initialize: bool = True,
    args: Sequence[str] = (),
) -> AsyncIterator[McpProcess]:
    """Start ``command`` (with ``args``) as an MCP stdio server; stops it (stdin closed) on exit.
    ``initialize=False`` leaves the handshake to the caller (:meth:`McpProcess.initialize`)."""
    params = StdioServerParameters(command=command, args=list(args), env=env, cwd=str(cwd))
    with stderr_path.open("a") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            proc = McpProcess(name, session, stderr_path, env)
            if initialize:
                await proc.initialize()
            yield proc
