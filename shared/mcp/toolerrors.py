"""Tool errors for the MCP servers (Warp, Pattern): one result shape for every refusal.

A refusal is a tool result with ``isError: true`` and its message as the text
(what the model reads); the error envelope every part uses
(:func:`shared.errors.error_document`: ``{"error": code, "message", "details"}``)
travels in the result's ``_meta`` under :data:`META_KEY`, so a client branches
on ``_meta["loom/error"].error`` instead of parsing text.

Why ``_meta`` and not ``structuredContent``: the MCP Python SDK (v2) checks a
result against the tool's output schema only when it is not an error, but the
TypeScript SDK's v1 client (what most Node-based agent hosts run) validates any
``structuredContent`` against the *success* schema even on an error result and
turns the refusal into a protocol error (-32602) the agent never sees
(modelcontextprotocol/typescript-sdk#1943). ``_meta`` is passed through by every
client unchecked, and every tool keeps its strict output schema.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, TextContent

from shared.errors import LoomError, error_document, shown_name
from shared.legacy import tool_advice
from shared.redact import redact

if TYPE_CHECKING:
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
    from mcp.server.mcpserver import MCPServer

VALIDATION_ERROR = "validation_error"
"""A tool's arguments break its input schema (Warp; Pattern keeps its original's VALIDATION_ERROR)."""
UNKNOWN_TOOL = "unknown_tool"
UNKNOWN_PROMPT = "unknown_prompt"
INTERNAL = "internal"


META_KEY = "loom/error"
"""Where a tool error result carries its envelope in ``_meta``."""


def error_result(exc: LoomError) -> CallToolResult:
    """``exc`` as a tool error result (message redacted once more, as Weft does)."""
    document = error_document(exc)
    document["message"] = redact(document["message"])
    return CallToolResult(
        content=[TextContent(type="text", text=document["message"])],
        is_error=True,
        _meta={META_KEY: document},
    )


class UnknownTools:
    """Server middleware: a call to a tool this server does not have is the protocol error
    the MCP specification names for it (JSON-RPC ``-32602``, invalid params), not a tool
    result; its ``data`` is Loom's envelope (code ``unknown_tool``), and a name of the
    TypeScript Loom's (``remember``, ``register_agent``) says which tool to call now. A
    prompt this server does not have (it has none) is the same error, not the SDK's code 0.

    The server's tool names are read once and again only when a name is not found
    (tools may be added after the server is built, e.g. ``warp --with-memory``)."""

    def __init__(self, server: MCPServer[Any]) -> None:
        self._server = server
        self._names: frozenset[str] = frozenset()

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        params = ctx.params or {}
        name = params.get("name")
        if ctx.method == "tools/call" and isinstance(name, str) and name not in self._names:
            self._names = frozenset(tool.name for tool in await self._server.list_tools())
            if name not in self._names:
                advice = tool_advice(name)
                message = advice or f"unknown tool {shown_name(name)!r}; tools/list names this server's tools"
                _refuse(message, UNKNOWN_TOOL)
        if (
            ctx.method == "prompts/get"
            and isinstance(name, str)
            and name not in {prompt.name for prompt in await self._server.list_prompts()}
        ):
            message = f"unknown prompt {shown_name(name)!r}; prompts/list names this server's prompts"
            _refuse(message, UNKNOWN_PROMPT)
        return await call_next(ctx)


def _refuse(message: str, code: str) -> NoReturn:
    text = redact(message)
    raise MCPError(INVALID_PARAMS, text, data=error_document(LoomError(text, code=code)))
