"""The ``warp`` process itself: start-up errors, stdout hygiene, streamable HTTP, spin-up env."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from nats.aio.client import Client as NatsClient
from warp_harness import WARP, eventually, spawn_warp, stdout_frames_only

from pattern.tools import TOOL_NAMES as PATTERN_TOOL_NAMES
from shared.agents.registry import AgentNotFound, Registry
from shared.models import AgentStatus
from shared.names import ProjectNames
from testsupport.mcp import assert_resumes, serving_http
from warp.tools import specs
from warp.zygote import ZYGOTE_ENV

A_ID = "a" * 32


@pytest.fixture
def warp_env(warp_env: dict[str, str]) -> dict[str, str]:
    """The ``warp`` process itself, here: started as an agent's host starts it, not forked
    from the suite's zygote (testsupport/zygote.py)."""
    return {k: v for k, v in warp_env.items() if k != ZYGOTE_ENV}


def run_warp(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [WARP, *args], env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )


def test_bad_configuration_is_one_line_on_stderr_and_nothing_on_stdout(warp_env: dict[str, str]) -> None:
    cases = {
        "LOOM_PROJECT_ID": ("Not_Valid", "LOOM_PROJECT_ID"),
        "LOOM_AGENT_ID": ("xyz", "LOOM_AGENT_ID"),
        "LOOM_CAPABILITIES": ("code,Bad Cap", "LOOM_CAPABILITIES"),
        "LOOM_HEARTBEAT_S": ("never", "LOOM_HEARTBEAT_S"),
        "NATS_URL": ("http://user:hunter2@example:4222", "NATS_URL"),
    }
    for name, (value, expected) in cases.items():
        done = run_warp({**warp_env, name: value})
        assert done.returncode == 2, (name, done.stderr)
        assert done.stdout == ""
        assert expected in done.stderr and done.stderr.startswith("warp: ")
        assert "hunter2" not in done.stderr
    usage = run_warp(warp_env, "--port", "0", "--http")
    assert usage.returncode == 2 and "--port" in usage.stderr


async def test_stdout_carries_only_mcp_frames(warp_env: dict[str, str], tmp_path: Path) -> None:
    env = {**warp_env, "LOOM_LOG_LEVEL": "DEBUG", "LOOM_AUTO_REGISTER": "1", "LOOM_CAPABILITIES": "code"}
    async with spawn_warp(env, tmp_path) as w:
        await w.ready_ok("warp_channels_send", {"channel": "errors", "message": "print('noise')"})
        await w.err("warp_channels_send", {"channel": "nope", "message": "x"})
        await w.ok("warp_work_broadcast", {"description": "d", "capability": "code"})
        await w.ok("warp_work_claim")
    assert w.stdout_lines, "the server wrote no frames at all"
    stdout_frames_only(w.stdout_lines)
    assert "DEBUG" in w.stderr()  # the logging went to stderr


def on_uvloop(pid: int) -> bool:
    """Whether the process has uvloop's event loop loaded (shared/loop.py), seen from outside."""
    return "uvloop/loop." in Path(f"/proc/{pid}/maps").read_text()


async def test_warp_runs_its_event_loop_on_uvloop(warp_env: dict[str, str], tmp_path: Path) -> None:
    async with spawn_warp({**warp_env, "LOOM_AGENT_ID": A_ID}, tmp_path) as w:
        await w.ready_ok("warp_handle_get")
        assert on_uvloop(w.pid)


async def test_spun_up_agent_registers_by_itself(
    warp_env: dict[str, str], tmp_path: Path, nc: NatsClient
) -> None:
    env = {
        **warp_env,
        "LOOM_AGENT_ID": A_ID,
        "LOOM_AUTO_REGISTER": "1",
        "LOOM_CAPABILITIES": "code,review",
        "LOOM_BOUNDARIES": "corporate",
        "LOOM_AGENT_TYPE": "copilot",
        "LOOM_TARGET_ID": "target-1",
        "LOOM_SPINUP_ID": "spin-1",
        "LOOM_WORK_ID": "f" * 32,
    }
    registry = Registry(nc.jetstream(), ProjectNames(warp_env["LOOM_PROJECT_ID"]))
    async with spawn_warp(env, tmp_path):

        async def registered() -> bool:
            try:
                await registry.get(A_ID)
            except AgentNotFound:
                return False
            return True

        await eventually(registered)  # no tool was called
        entry = await registry.get(A_ID)
        assert (entry.target_id, entry.spinup_id) == ("target-1", "spin-1")
        assert entry.metadata["work_id"] == "f" * 32
        assert (entry.capabilities, entry.boundaries, entry.agent_type) == (
            ["code", "review"],
            ["corporate"],
            "copilot",
        )
        assert entry.status is AgentStatus.ONLINE
    assert (await registry.get(A_ID)).status is AgentStatus.OFFLINE


async def test_streamable_http(warp_env: dict[str, str], tmp_path: Path, nc: NatsClient) -> None:
    env = {**warp_env, "LOOM_AGENT_ID": A_ID, "LOOM_AUTO_REGISTER": "1"}
    async with serving_http(WARP, env=env, log=tmp_path / "http.log") as (proc, url):
        assert on_uvloop(proc.pid)
        async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            tools = await session.list_tools()
            assert sorted(t.name for t in tools.tools) == sorted(spec.name for spec in specs())
            res = await session.call_tool(
                "warp_channels_send", {"channel": "roadmap", "message": "over http"}
            )
            assert not res.is_error, res.content
            res = await session.call_tool("warp_channels_read", {"channel": "roadmap"})
            assert res.structured_content is not None
            assert [m["body"] for m in res.structured_content["messages"]] == ["over http"]
        await assert_resumes(url)  # a client that lost a response reconnects and receives it
        # the stateless revision (2026-07-28: server/discover, per-request envelope), as the
        # official client negotiates it first
        async with Client(url, mode="2026-07-28") as modern:
            assert modern.protocol_version == "2026-07-28"
            read = await modern.call_tool(
                "warp_channels_read", {"channel": "roadmap", "from_beginning": True}
            )
            assert read.structured_content is not None
            assert [m["body"] for m in read.structured_content["messages"]] == ["over http"]
        async with Client(url) as negotiated:  # "auto": the newest both speak
            assert negotiated.protocol_version == "2026-07-28"
        proc.send_signal(signal.SIGTERM)
        with anyio.fail_after(20):
            await proc.wait()
        registry = Registry(nc.jetstream(), ProjectNames(warp_env["LOOM_PROJECT_ID"]))
        assert (await registry.get(A_ID)).status is AgentStatus.OFFLINE


async def test_with_memory_serves_pattern_tools_on_the_same_connection(
    warp_env: dict[str, str], tmp_path: Path
) -> None:
    async with spawn_warp({**warp_env, "LOOM_AGENT_ID": A_ID}, tmp_path, args=("--with-memory",)) as w:
        names = {t.name for t in (await w.session.list_tools()).tools}
        assert names == {spec.name for spec in specs()} | set(PATTERN_TOOL_NAMES)
        assert {"warp_channels_send", "pattern_remember", "pattern_recall_context"} <= names
        saved = await w.ready_ok("pattern_remember", {"content": "warp and pattern share a process"})
        recalled = await w.ready_ok("pattern_recall_context", {})
        assert saved["memory"]["id"] in [m["id"] for m in recalled["memories"]]
        health = await w.ok("pattern_health", {})
        assert health["identity"]["agent_id"] == A_ID
        assert "bogus" in await w.err("warp_handle_get", {"bogus": 1})
        assert "NATS connected" in w.stderr() and w.stderr().count("NATS connected") == 1  # one connection
    stdout_frames_only(w.stdout_lines)
