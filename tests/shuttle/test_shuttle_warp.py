"""The operator's loop with a real agent: Warp runs as an MCP server (stdio)
driven by a real MCP client session, Weft coordinates, and Shuttle submits,
watches and shuts the agent down."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
from agent_side import until
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from shuttle_helpers import Cli

WARP = str(Path(sys.executable).parent / "warp")


class WarpAgent:
    def __init__(self, session: ClientSession, agent_id: str) -> None:
        self.session = session
        self.agent_id = agent_id

    async def call(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """Call a tool; retried while Warp is still connecting to NATS."""
        for _ in range(100):
            result = await asyncio.wait_for(self.session.call_tool(tool, arguments or {}), 60)
            if not result.is_error:
                assert result.structured_content is not None, f"{tool}: no structured output"
                return dict(result.structured_content)
            text = " ".join(c.text for c in result.content if isinstance(c, types.TextContent))
            assert "NATS" in text, f"{tool} failed: {text}"
            await asyncio.sleep(0.2)
        raise AssertionError(f"{tool}: Warp never reached NATS")


@asynccontextmanager
async def warp_agent(cli: Cli, tmp_path: Path) -> AsyncIterator[WarpAgent]:
    agent_id = uuid.uuid4().hex
    params = StdioServerParameters(
        command=WARP,
        env={
            "NATS_URL": cli.weft.nats_url,
            "LOOM_PROJECT_ID": cli.project,
            "LOOM_AGENT_ID": agent_id,
            "LOOM_PROJECT_PATH": str(tmp_path),
            "LOOM_CAPABILITIES": "code",
            "LOOM_AUTO_REGISTER": "1",
        },
        cwd=str(tmp_path),
    )
    with (tmp_path / f"warp-{agent_id[:8]}.stderr").open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            agent = WarpAgent(session, agent_id)
            await agent.call("warp_work_queue_status")  # returns once Warp is on NATS
            yield agent


async def first_line(proc: subprocess.Popen[str]) -> str:
    """The first line after the one naming the item (id, task id, description)."""
    assert proc.stdout is not None
    heading = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 30)
    assert heading, proc.stderr.read() if proc.stderr else ""
    line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 30)
    assert line, proc.stderr.read() if proc.stderr else ""
    return line


async def test_submit_and_watch_follow_a_real_warp_agent(cli: Cli, tmp_path: Path) -> None:
    async with warp_agent(cli, tmp_path) as agent:
        await until(
            lambda: cli("agents", "show", agent.agent_id).exit_code == 0, what="Warp's registration in Weft"
        )
        shown = cli.json("agents", "show", agent.agent_id)
        assert shown["status"] == "online" and shown["capabilities"] == ["code"]

        r = await asyncio.to_thread(cli, "submit", "fix the login bug", "-c", "code", "-q")
        work_id = r.stdout.strip()
        proc = cli.popen("watch", work_id)
        assert "queued" in await first_line(proc)
        claimed = await agent.call("warp_work_claim")
        assert claimed["claimed"] and claimed["item"]["id"] == work_id
        await agent.call("warp_work_progress", {"work_id": work_id, "percent": 50, "note": "reproduced"})
        await agent.call("warp_work_complete", {"work_id": work_id, "result": {"commit": "abc123"}})
        stdout, stderr = await asyncio.to_thread(proc.communicate, timeout=60)
        assert proc.returncode == 0, stderr
        assert f"by {agent.agent_id}" in stdout and "50% reproduced" in stdout
        assert "work.completed" in stdout and "abc123" in stdout
        assert cli.json("work", "show", work_id)["status"] == "completed"

        # a failure the agent calls final: watch (and submit --wait) end with exit 1
        proc = cli.popen("submit", "impossible", "-c", "code", "--wait", "--json")
        claimed = {"claimed": False}
        while not claimed["claimed"]:
            claimed = await agent.call("warp_work_claim")
        doomed = claimed["item"]["id"]
        await agent.call("warp_work_fail", {"work_id": doomed, "error": "cannot be done", "retryable": False})
        stdout, stderr = await asyncio.to_thread(proc.communicate, timeout=60)
        assert proc.returncode == 1
        assert stderr == f"shuttle: error: work {doomed} ended dead-lettered: cannot be done\n"
        assert json.loads(stdout)["status"] == "dead-lettered"

        # the operator shuts the agent down: Warp drains, deregisters and exits
        r = await asyncio.to_thread(cli, "agents", "shutdown", agent.agent_id, "--reason", "test over")
        assert r.exit_code == 0, r.stderr

        def gone() -> bool:
            r = cli("agents", "show", agent.agent_id, "--json")
            return r.exit_code == 1 or json.loads(r.stdout)["status"] == "offline"

        await until(gone, timeout=30, what="the agent to leave")
