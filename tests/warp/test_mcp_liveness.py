"""Liveness of a spawned Warp: crash, stdin closed, SIGTERM, shutdown request."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from nats.aio.client import Client as NatsClient
from warp_harness import eventually, spawn_warp

from shared.agents.registry import Registry
from shared.models import AgentStatus, ControlRequest
from shared.names import ProjectNames

A_ID = "a" * 32
B_ID = "b" * 32


def env_for(base: dict[str, str], agent_id: str, **extra: str) -> dict[str, str]:
    return {
        **base,
        "LOOM_AGENT_ID": agent_id,
        "LOOM_CAPABILITIES": "code",
        "LOOM_AUTO_REGISTER": "1",
        "LOOM_HEARTBEAT_S": "0.5",
        **extra,
    }


def registry(nc: NatsClient, env: dict[str, str]) -> Registry:
    return Registry(nc.jetstream(), ProjectNames(env["LOOM_PROJECT_ID"]))


async def test_killed_agent_shows_offline_to_others(
    warp_env: dict[str, str], tmp_path: Path, nc: NatsClient
) -> None:
    async with spawn_warp(env_for(warp_env, B_ID), tmp_path, name="observer") as observer:
        async with spawn_warp(env_for(warp_env, A_ID), tmp_path, name="victim") as victim:
            await victim.ready_ok("warp_registry_get_info")
            online = await observer.ready_ok("warp_registry_discover", {"handle": None, "status": "online"})
            assert A_ID in {a["agent_id"] for a in online["agents"]}
            victim.kill9()
            assert await victim.wait_exit() == -signal.SIGKILL

            async def offline() -> bool:
                found = await observer.ok("warp_registry_discover", {"status": "offline"})
                return A_ID in {a["agent_id"] for a in found["agents"]}

            await eventually(offline, timeout=20)
        # nobody marked it offline: its heartbeats stopped, so everyone sees it offline
        assert (await registry(nc, warp_env).get(A_ID)).status is AgentStatus.ONLINE


async def test_closing_stdin_marks_offline_and_exits(
    warp_env: dict[str, str], tmp_path: Path, nc: NatsClient
) -> None:
    async with spawn_warp(env_for(warp_env, A_ID), tmp_path) as w:
        await w.ready_ok("warp_registry_get_info")
        await w.close_stdin()
        assert await w.wait_exit() == 0
    entry = await registry(nc, warp_env).get(A_ID)
    assert entry.status is AgentStatus.OFFLINE
    assert entry.metadata["offline_reason"] == "MCP session ended"


async def test_sigterm_marks_offline_and_exits(
    warp_env: dict[str, str], tmp_path: Path, nc: NatsClient
) -> None:
    async with spawn_warp(env_for(warp_env, A_ID), tmp_path) as w:
        await w.ready_ok("warp_registry_get_info")
        w.signal(signal.SIGTERM)
        assert await w.wait_exit() == 0
    entry = await registry(nc, warp_env).get(A_ID)
    assert entry.status is AgentStatus.OFFLINE
    assert entry.metadata["offline_reason"] == "shutdown requested by signal: SIGTERM"


async def test_shutdown_request_drains_deregisters_and_exits(
    warp_env: dict[str, str], tmp_path: Path, nc: NatsClient
) -> None:
    names = ProjectNames(warp_env["LOOM_PROJECT_ID"])
    async with spawn_warp(env_for(warp_env, A_ID), tmp_path) as w:
        item = (await w.ready_ok("warp_work_broadcast", {"description": "last job", "capability": "code"}))[
            "item"
        ]
        assert (await w.ok("warp_work_claim"))["claimed"]
        request = ControlRequest(action="shutdown", reason="idle too long", grace_s=30)
        reply = await nc.request(names.control_subject(A_ID), request.to_json_bytes(), timeout=5)
        assert json.loads(reply.data)["ok"] is True
        # draining: no new claims, a notice on every result, held work may still be finished
        await w.ok("warp_work_broadcast", {"description": "too late", "capability": "code"})
        refusal = await w.err("warp_work_claim")
        assert "claim: Warp is shutting down (requested by weft)" in refusal
        done = await w.call("warp_work_complete", {"work_id": item["id"]})
        assert not done.is_error
        assert "NOTICE: shutdown requested by weft (idle too long)" in done.content[0].text  # type: ignore[union-attr]
        assert await w.wait_exit() == 0
    entry = await registry(nc, warp_env).get(A_ID)
    assert entry.status is AgentStatus.OFFLINE
    assert entry.metadata["offline_reason"] == "shutdown requested by weft: idle too long"
