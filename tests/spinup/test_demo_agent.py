"""The demo agent (weft/spinup/demo_agent.py) as a real process with its real Warp: asked to
stop while nats-server is down and its claims are being retried, it stops (issue 34: it
stayed alive over 50 s, retrying claims that NATS could not answer)."""

from __future__ import annotations

import asyncio
import signal
import uuid
from pathlib import Path

import pytest

from shared.agents.registry import Registry
from shared.names import ProjectNames
from shared.nats.client import connect
from shared.nats.server import EmbeddedNatsServer, ServerConfig
from tests.spinup.conftest import ROOT, demo_agent_command, eventually
from testsupport.env import without_fabric
from testsupport.processes import children, pid_alive

pytestmark = pytest.mark.timeout(120)


async def test_sigterm_while_nats_is_down_stops_the_agent_and_its_warp(tmp_path: Path) -> None:
    project = f"t-{uuid.uuid4().hex[:12]}"
    agent_id = uuid.uuid4().hex
    with EmbeddedNatsServer(ServerConfig(store_dir=tmp_path / "nats")) as server:
        env = {
            **without_fabric(),
            "NATS_URL": server.url,
            "LOOM_PROJECT_ID": project,
            "LOOM_AGENT_ID": agent_id,
            "LOOM_CAPABILITIES": "code",
            "LOOM_AUTO_REGISTER": "1",
            "LOOM_DEMO_POLL_S": "0.2",
        }
        proc = await asyncio.create_subprocess_exec(
            *demo_agent_command(),
            env=env,
            cwd=str(ROOT),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=(tmp_path / "agent.log").open("w"),
        )
        try:
            nc = await connect(url=server.url)
            registry = Registry(nc.jetstream(), ProjectNames(project))

            async def registered() -> bool | None:
                try:
                    await registry.get(agent_id)
                except Exception:
                    return None
                return True

            await eventually(registered, timeout=60, what="the demo agent's Warp registered")
            await nc.close()
            warps = children(proc.pid)
            assert warps, "the demo agent runs its Warp as a child process"
        except BaseException:
            proc.kill()
            raise
    # nats-server is gone: the agent's claims cannot be answered, and it tries them again
    log = tmp_path / "agent.log"
    await eventually(
        lambda: asyncio.sleep(0, result="Warp cannot reach NATS; trying again" in log.read_text() or None),
        timeout=60,
        what="the agent retrying its claim",
    )
    proc.send_signal(signal.SIGTERM)
    try:
        code = await asyncio.wait_for(proc.wait(), 60)  # a liveness bound, not a speed figure
    finally:
        if proc.returncode is None:
            proc.kill()
    assert code == 0, log.read_text()[-3000:]
    said = log.read_text()
    assert "stopping on request" in said or "stopped mid-step" in said, said[-3000:]
    await eventually(
        lambda: asyncio.sleep(0, result=not any(pid_alive(pid) for pid in warps) or None),
        timeout=30,
        what="its Warp gone too",
    )
