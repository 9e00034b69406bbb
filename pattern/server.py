"""The standalone ``pattern`` MCP server: identity, runtime and tools wired together."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer

from pattern.runtime import PatternRuntime
from pattern.tools import pattern_tools
from shared.mcp.toolerrors import UnknownTools

INSTRUCTIONS = (
    "Pattern is your long-lived memory. Call pattern_recall_context at the start of a task; store what "
    "you learn with pattern_remember (recent, expires in 24 h), pattern_remember_learning and "
    "pattern_commit_insight (keep it), pattern_core_memory (who you are; protected). Share with the team "
    "via pattern_share_learning. Never store secrets."
)


def build_server(runtime: PatternRuntime, version: str = "") -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer(
        "pattern",
        title="Loom Pattern memory",
        instructions=INSTRUCTIONS,
        version=version,
        tools=pattern_tools(runtime.get_service, health=runtime.health, until_ready=runtime.until_ready),
    )
    server.middleware.append(UnknownTools(server))
    return server
