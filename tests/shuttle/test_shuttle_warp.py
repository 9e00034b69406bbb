"""The operator's loop with a real agent: Warp runs as an MCP server (stdio)
driven by a real MCP client session, Weft coordinates, and Shuttle submits,
watches and shuts the agent down."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from agent_side import until
from shuttle_helpers import Cli

from testsupport.warp import Agent
from testsupport.warp import warp_agent as real_warp


@asynccontextmanager
async def warp_agent(cli: Cli, tmp_path: Path) -> AsyncIterator[Agent]:
    async with real_warp(cli.weft.nats_url, cli.project, tmp_path) as agent:
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
