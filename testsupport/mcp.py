"""What tests expect of Loom's MCP servers (Warp, Pattern) beyond a tool's own result."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final, Protocol

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from shared.errors import UNAVAILABLE
from shared.mcp.toolerrors import META_KEY
from shared.nats.failures import JETSTREAM_ERROR, NATS_UNAVAILABLE
from testsupport.env import without_fabric

RIDE_OUT: Final = frozenset({UNAVAILABLE, NATS_UNAVAILABLE, JETSTREAM_ERROR})
"""The error codes of a tool refusal that says "not now": NATS or JetStream away, or the
server not (or no longer) connected to them."""


def is_outage(result: CallToolResult) -> bool:
    """Whether a tool's error is an outage to ride out rather than a refusal of the call
    itself, judged by its code (``_meta["loom/error"].error``), never by its text: "JetStream
    is unavailable" names no NATS, and "Warp keeps reconnecting" is code ``unavailable``."""
    document = (result.meta or {}).get(META_KEY) or {}
    return bool(result.is_error) and document.get("error") in RIDE_OUT


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


async def sse_events(response: Any) -> AsyncIterator[tuple[str | None, str]]:
    """The ``(id, data)`` of each server-sent event of an httpx streaming response."""
    event_id: str | None = None
    data: list[str] = []
    async for line in response.aiter_lines():
        if line == "":
            if event_id is not None or data:
                yield event_id, "\n".join(data)
            event_id, data = None, []
        elif line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())


async def assert_resumes(url: str) -> None:
    """Streamable HTTP resumability against a served MCP endpoint, as the protocol states it:
    every event of a request's stream has an id, and a GET with ``Last-Event-ID`` (the
    stream's first id) replays the response the client lost."""
    import httpx2

    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": LATEST_HANDSHAKE_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "resume-test", "version": "1"},
        },
    }
    async with httpx2.AsyncClient(timeout=30) as http:
        async with http.stream("POST", url, json=init, headers=accept) as opened:
            assert opened.status_code == 200
            session = opened.headers["mcp-session-id"]
            async for _, data in sse_events(opened):
                if data:
                    version = json.loads(data)["result"]["protocolVersion"]
                    break
        headers = {**accept, "mcp-session-id": session, "mcp-protocol-version": version}
        done = await http.post(
            url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers
        )
        assert done.status_code == 202
        ids: list[str | None] = []
        answer = None
        request = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
        async with http.stream("POST", url, json=request, headers=headers) as listed:
            async for event_id, data in sse_events(listed):
                ids.append(event_id)
                if data:
                    answer = json.loads(data)
                    break
        assert answer is not None and answer["id"] == 2 and ids[0] and all(ids), ids
        resume = {**headers, "Accept": "text/event-stream", "Last-Event-ID": ids[0]}
        async with http.stream("GET", url, headers=resume) as replay:
            assert replay.status_code == 200
            async for event_id, data in sse_events(replay):
                if data:
                    assert json.loads(data) == answer and event_id == ids[-1]  # the lost response
                    return
    raise AssertionError("the response was not replayed")


async def http_listening(port: int) -> bool:
    """Whether a server (``warp --http``, ``pattern --http``) accepts HTTP on ``port`` yet."""
    import httpx2

    try:
        async with httpx2.AsyncClient() as http:
            await http.get(f"http://127.0.0.1:{port}/")
    except httpx2.TransportError:
        return False
    return True


async def until_listening(port: int, timeout: float = 30.0) -> None:
    """Wait until :func:`http_listening` (a started server's port opens once it is ready)."""
    import anyio

    with anyio.fail_after(timeout):
        for _ in itertools.count():
            if await http_listening(port):
                return
            await anyio.sleep(0.1)


def server_env(part: str, nats_url: str, project_id: str, folder: Path) -> dict[str, str]:
    """What ``warp`` or ``pattern`` (``part``) needs to start as an MCP host would start it:
    this process's environment without any Loom or NATS setting, and the test's own."""
    return {
        **without_fabric(),
        "NATS_URL": nats_url,
        "LOOM_PROJECT_ID": project_id,
        "LOOM_PROJECT_PATH": str(folder),
        "LOOM_AGENT_ID": ("a" if part == "warp" else "b") * 32,
        "LOOM_USER_ID": "0123456789abcdef",
        "PATTERN_EXPORT_DIR": str(folder / "exports"),
    }


@asynccontextmanager
async def serving_http(
    command: str, *, env: dict[str, str], log: Path, cwd: Path | None = None
) -> AsyncIterator[tuple[Any, str]]:
    """``command --http --port <free port>`` (``warp``, ``pattern``) started and listening:
    the process and its endpoint URL. Its output goes to ``log``; a process the test did not
    stop is killed on the way out."""
    import subprocess

    import anyio

    from shared.nats.server import free_port

    port = free_port()
    with log.open("wb") as out:
        proc = await anyio.open_process(
            [command, "--http", "--port", str(port)],
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
        )
        try:
            await until_listening(port)
            yield proc, f"http://127.0.0.1:{port}/mcp"
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
