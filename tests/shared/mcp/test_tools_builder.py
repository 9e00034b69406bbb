"""The strict tool builder's shared part (shared/mcp/tools.py): what a spec's tools share is
built once per process (``prepare``, a Warp zygote does it before forking), and each build
still calls its own bound object, through real MCP sessions (the SDK's in-memory client)."""

from __future__ import annotations

from dataclasses import dataclass

from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, TextContent

from shared.mcp.tools import ToolHost, ToolSpec, build_tools, prepare, tool


@dataclass
class Counter:
    name: str
    calls: int = 0


async def count(counter: Counter, step: int = 1) -> CallToolResult:
    """Adds ``step`` to the bound counter and says its name and total."""
    counter.calls += step
    return CallToolResult(content=[TextContent(type="text", text=f"{counter.name}={counter.calls}")])


SPECS = [tool(count, title="Count")]


def served(counter: Counter) -> MCPServer[None]:
    return MCPServer("counter", tools=build_tools(SPECS, counter, ToolHost(server="counter")))


def text(result: CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, TextContent))


async def test_two_builds_of_one_spec_each_call_their_own_bound_object() -> None:
    prepare(SPECS)
    one, two = Counter("one"), Counter("two")
    async with Client(served(one)) as first, Client(served(two)) as second:
        assert text(await first.call_tool("count", {"step": 2})) == "one=2"
        assert text(await second.call_tool("count", {})) == "two=1"
        assert text(await first.call_tool("count", {})) == "one=3"
        listed = [(await c.list_tools()).tools[0] for c in (first, second)]
    assert (one.calls, two.calls) == (3, 1)
    assert listed[0].input_schema == listed[1].input_schema
    assert listed[0].input_schema["additionalProperties"] is False


async def test_each_build_refuses_bad_arguments_without_calling_its_object() -> None:
    counter = Counter("c")
    async with Client(served(counter)) as client:
        refused = await client.call_tool("count", {"step": "many", "extra": 1})
    assert refused.is_error
    assert "extra: unknown field (this tool takes: step)" in text(refused)
    assert "many" not in text(refused)
    assert counter.calls == 0


def test_a_spec_is_equal_only_to_itself() -> None:
    """Specs key the shared part: two specs of one function must not share it."""
    again = ToolSpec(count, name="count", title="Count", description=SPECS[0].description)
    assert again != SPECS[0] and SPECS[0] == SPECS[0]
    assert len({again, SPECS[0]}) == 2
