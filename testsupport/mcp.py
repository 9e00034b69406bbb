"""What tests expect of Loom's MCP servers (Warp, Pattern) beyond a tool's own result."""

from __future__ import annotations

from typing import Any, Protocol

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS


class ToolCaller(Protocol):
    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any: ...


async def unknown_tool(client: ToolCaller, tool: str, args: dict[str, Any]) -> tuple[str, str]:
    """Call a tool the server does not have: the protocol error MCP names for it (JSON-RPC
    -32602), with Loom's envelope as its data. Returns the envelope's code and the message."""
    with pytest.raises(MCPError) as refusal:
        await client.call_tool(tool, args)
    error = refusal.value.error
    assert error.code == INVALID_PARAMS and isinstance(error.data, dict), error
    assert set(error.data) == {"error", "message", "details"} and error.data["message"] == error.message
    return str(error.data["error"]), error.message
