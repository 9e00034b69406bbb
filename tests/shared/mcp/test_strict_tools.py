"""The one strict tool builder (shared/mcp/tools.py), through real MCP sessions with each server
that uses it: ``warp``, ``pattern`` and ``warp --with-memory`` (both parts in one process).

The same rules hold for every tool: an unknown argument is refused (and the schema says
``additionalProperties: false``), a value that breaks the schema is refused naming the field
and the rule without the value, a TypeScript Loom argument name is answered with ours, and a
refused call never reaches the tool. Each part keeps its own code for these refusals
(Warp ``validation_error``, Pattern its original's ``VALIDATION_ERROR``).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_types import CallToolResult, TextContent

from shared.nats.server import EmbeddedNatsServer
from testsupport.zygote import zygote_env

BIN = Path(sys.executable).parent
SECRET = "ghp_Zq9TOKEN+sEcReT/42xYwVb="
SERVERS = {
    "warp": ([str(BIN / "warp")], ("warp",)),
    "pattern": ([str(BIN / "pattern")], ("pattern",)),
    "warp --with-memory": ([str(BIN / "warp"), "--with-memory"], ("warp", "pattern")),
}


@dataclass(frozen=True)
class Part:
    code: str
    tool: str
    """A tool that only reads, with its required arguments and every argument it takes."""
    given: dict[str, Any]
    takes: str
    typed: str
    """An integer argument of ``tool``."""
    legacy: tuple[str, dict[str, Any], str]
    """A tool, arguments with one of the TypeScript Loom's names, and the advice expected."""
    writer: tuple[str, dict[str, Any]]
    """A tool that writes, with valid arguments (refused with one more, it must write nothing)."""


PARTS = {
    "warp": Part(
        code="validation_error",
        tool="warp_channels_read",
        given={"channel": "roadmap"},
        takes="channel, limit, cursor, from_beginning",
        typed="limit",
        legacy=(
            "warp_registry_register",
            {"agentType": "developer"},
            "agentType: this is the TypeScript Warp's name; use agent_type",
        ),
        writer=("warp_channels_send", {"channel": "roadmap", "message": "must not be sent"}),
    ),
    "pattern": Part(
        code="VALIDATION_ERROR",
        tool="pattern_recall_context",
        given={},
        takes="scopes, categories, tags, priority_min, priority_max, created_after, created_before, "
        "updated_after, updated_before, search, limit",
        typed="limit",
        legacy=(
            "pattern_forget",
            {"memoryId": "a" * 32},
            "memoryId: this is the TypeScript Pattern's name; use memory_id",
        ),
        writer=("pattern_remember", {"content": "must not be stored", "scope": "team"}),
    ),
}


READ_ROADMAP = {"channel": "roadmap", "from_beginning": True}


def text_of(res: CallToolResult) -> str:
    return "\n".join(c.text for c in res.content if isinstance(c, TextContent))


async def refused(session: ClientSession, tool: str, args: dict[str, Any]) -> tuple[str, str]:
    """The code and message of a refusal, checked against the coded error's shape."""
    res = await session.call_tool(tool, args)
    assert res.is_error, text_of(res)
    assert res.structured_content is None
    body = (res.meta or {}).get("loom/error")
    assert isinstance(body, dict) and body["message"] == text_of(res), body
    return str(body["error"]), str(body["message"])


@asynccontextmanager
async def serve(name: str, nats_url: str, project_id: str, tmp_path: Path) -> AsyncIterator[ClientSession]:
    command, _ = SERVERS[name]
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    env = {
        "NATS_URL": nats_url,
        "LOOM_PROJECT_ID": project_id,
        "LOOM_PROJECT_PATH": str(project),
        "LOOM_USER_ID": "1" * 16,
        "HOME": str(home),
        "PATTERN_EXPORT_DIR": str(project / "exports"),
        **zygote_env(),  # a Warp forked from the suite's zygote (testsupport/zygote.py)
    }
    params = StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=project)
    with (tmp_path / "stderr.log").open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


async def until_ready(session: ClientSession, tool: str, args: dict[str, Any]) -> CallToolResult:
    """``tool``'s answer once the server is on NATS (both parts connect in the background)."""
    with anyio.fail_after(30):
        while True:
            res = await session.call_tool(tool, args)
            if not res.is_error:
                return res
            await anyio.sleep(0.2)


@pytest.mark.parametrize("server", list(SERVERS))
async def test_unknown_arguments_are_refused_and_the_schema_says_so(
    server: str, nats_server: EmbeddedNatsServer, project_id: str, tmp_path: Path
) -> None:
    async with serve(server, nats_server.url, project_id, tmp_path) as session:
        listed = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert all(tool.input_schema.get("additionalProperties") is False for tool in listed.values())
        for part in (PARTS[name] for name in SERVERS[server][1]):
            assert list(listed[part.tool].input_schema["properties"]) == part.takes.split(", ")
            code, message = await refused(session, part.tool, {**part.given, "colour": 1, SECRET: 2})
            assert code == part.code
            assert message == f"invalid arguments: colour, *: unknown field (this tool takes: {part.takes})"
    assert SECRET not in (tmp_path / "stderr.log").read_text()


@pytest.mark.parametrize("server", list(SERVERS))
async def test_a_wrong_value_is_named_by_field_and_rule_never_echoed(
    server: str, nats_server: EmbeddedNatsServer, project_id: str, tmp_path: Path
) -> None:
    async with serve(server, nats_server.url, project_id, tmp_path) as session:
        for part in (PARTS[name] for name in SERVERS[server][1]):
            code, message = await refused(session, part.tool, {**part.given, part.typed: SECRET})
            assert code == part.code
            assert message == (
                f"invalid arguments: {part.typed}: Input should be a valid integer, "
                "unable to parse string as an integer"
            )
            code, message = await refused(session, part.tool, {**part.given, part.typed: 0})
            assert code == part.code and message.startswith(f"invalid arguments: {part.typed}: ")
            assert "greater than or equal to 1" in message
    log = (tmp_path / "stderr.log").read_text()
    assert SECRET not in log and "refused its arguments" in log


@pytest.mark.parametrize("server", list(SERVERS))
async def test_the_typescript_names_are_answered_with_ours(
    server: str, nats_server: EmbeddedNatsServer, project_id: str, tmp_path: Path
) -> None:
    async with serve(server, nats_server.url, project_id, tmp_path) as session:
        for part in (PARTS[name] for name in SERVERS[server][1]):
            tool, args, advice = part.legacy
            code, message = await refused(session, tool, args)
            assert code == part.code and message == f"invalid arguments: {advice}"


async def test_a_refused_call_never_reaches_the_tool(
    nats_server: EmbeddedNatsServer, project_id: str, tmp_path: Path
) -> None:
    async with serve("warp --with-memory", nats_server.url, project_id, tmp_path) as session:
        for part in PARTS.values():
            tool, args = part.writer
            code, _ = await refused(session, tool, {**args, "colour": 1})
            assert code == part.code
        channel = await until_ready(
            session, "warp_channels_read", {"channel": "roadmap", "from_beginning": True}
        )
        assert channel.structured_content is not None and channel.structured_content["messages"] == []
        memories = await until_ready(session, "pattern_recall_context", {"scopes": ["team"]})
        assert memories.structured_content is not None and memories.structured_content["memories"] == []
        for part in PARTS.values():  # the same calls without the unknown argument do write
            tool, args = part.writer
            assert not (await session.call_tool(tool, args)).is_error
        channel = await session.call_tool(
            "warp_channels_read", {"channel": "roadmap", "from_beginning": True}
        )
        assert channel.structured_content is not None and len(channel.structured_content["messages"]) == 1
