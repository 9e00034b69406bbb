"""Tool errors for the MCP servers (Warp, Pattern): one result shape for every refusal.

A refusal is a tool result with ``isError: true``, its message as the text (what
the model reads), and the error envelope every part uses as structured content
(:func:`shared.errors.error_document`: ``{"error": code, "message", "details"}``),
so a client can branch on ``structuredContent.error`` instead of parsing text. The
MCP SDK validates structured content against a tool's output schema only for
results that are not errors, on both ends, so an error can carry its own shape.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp_types import CallToolResult, TextContent

from shared.errors import LoomError, error_document, shown_name
from shared.legacy import tool_advice
from shared.redact import redact

if TYPE_CHECKING:
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
    from mcp.server.mcpserver import MCPServer

VALIDATION_ERROR = "validation_error"
"""A tool's arguments break its input schema (Warp; Pattern keeps its original's VALIDATION_ERROR)."""
UNKNOWN_TOOL = "unknown_tool"
INTERNAL = "internal"


def error_result(exc: LoomError) -> CallToolResult:
    """``exc`` as a tool error result (message redacted once more, as Weft does)."""
    document = error_document(exc)
    document["message"] = redact(document["message"])
    return CallToolResult(
        content=[TextContent(type="text", text=document["message"])],
        structured_content=document,
        is_error=True,
    )


class UnknownTools:
    """Server middleware: a call to a tool this server does not have is a coded tool
    error (``unknown_tool``) instead of the SDK's bare text, and a name of the
    TypeScript Loom's (``remember``, ``register_agent``) says which tool to call now.

    The server's tool names are read once and again only when a name is not found
    (tools may be added after the server is built, e.g. ``warp --with-memory``)."""

    def __init__(self, server: MCPServer[Any]) -> None:
        self._server = server
        self._names: frozenset[str] = frozenset()

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        params = ctx.params or {}
        name = params.get("name") if ctx.method == "tools/call" else None
        if isinstance(name, str) and name not in self._names:
            self._names = frozenset(tool.name for tool in await self._server.list_tools())
            if name not in self._names:
                advice = tool_advice(name)
                message = advice or f"unknown tool {shown_name(name)!r}; tools/list names this server's tools"
                return error_result(LoomError(message, code=UNKNOWN_TOOL))
        return await call_next(ctx)
