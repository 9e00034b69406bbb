"""Agents that Weft started from one target are told apart in the console (issue 36: three
agents from one target all carried the host's name, so a review by another one read as
self-review). A real Weft with managed spin-up starts two real demo agents (each with its
real Warp) from one local target; the Fleet view lists two names, each the target's name
and the start of that agent's id."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path

from console_helpers import ADMIN_TOKEN, Tab, eventually, serving_weft, sign_in
from playwright.async_api import expect

from shared.identity import spun_up_handle
from shared.nats.server import EmbeddedNatsServer
from testsupport.processes import pid_alive
from weft.spinup.managed import ManagedSpinup
from weft.spinup.settings import SpinupSettings

ROOT = Path(__file__).resolve().parents[2]
TARGET = "vm-loom"


def slow_local_target() -> dict[str, object]:
    """A local target whose demo agents work 60 s on an item, so the second item waits for a
    second agent instead of the first one's next poll."""
    return {
        "name": TARGET,
        "capabilities": ["code"],
        "mechanism": "local",
        "max_concurrent": 2,
        "config": {
            "command": [sys.executable, "-m", "weft.spinup.demo_agent"],
            "cwd": str(ROOT),
            "env": {"LOOM_HEARTBEAT_S": "1", "LOOM_DEMO_WORK_S": "60"},
        },
    }


async def test_two_agents_from_one_target_carry_two_names(
    nats_server: EmbeddedNatsServer, tab: Tab, project: str, tmp_path: Path
) -> None:
    settings = SpinupSettings(
        register_timeout_s=60,
        tick_s=0.1,
        shutdown_grace_s=3,
        stop_retry_s=30,
        health_checks=False,
        log_dir=tmp_path / "agent-logs",
    )
    spinup = ManagedSpinup(settings, discover=False)
    async with serving_weft(nats_server.url, [ADMIN_TOKEN], spinup=spinup) as weft, weft.api(project) as api:
        pids: list[int] = []
        try:
            created = await api.post("/api/targets", json=slow_local_target())
            assert created.status_code == 201, created.text
            for n in (1, 2):
                body = {"task_id": f"build-{n}", "description": f"build part {n}", "capability": "code"}
                assert (await api.post("/api/work", json=body)).status_code == 201

            ops: list[dict[str, object]] = []

            async def two_registered() -> bool:
                listed = (await api.get("/api/spinups")).json()["items"]
                pids[:] = [int(op["handle"]["pid"]) for op in listed if op["handle"].get("pid")]
                ops[:] = [op for op in listed if op["state"] == "registered"]
                return len(ops) == 2

            await eventually(two_registered, timeout=90, what="two agents started from the target")
            expected = sorted(spun_up_handle(TARGET, str(op["agent_id"])) for op in ops)
            assert len(set(expected)) == 2

            page = tab.page
            await sign_in(page, weft.console(project))
            names = page.locator("#agents tr[data-agent-id] th")
            await expect(names).to_have_count(2, timeout=15_000)
            shown = sorted(await names.all_inner_texts())
            assert shown == expected and all(name.startswith(f"{TARGET}-") for name in shown)
            for op in ops:  # each name is on its own agent's row, doing its own item
                row = page.locator(f'#agents tr[data-agent-id="{op["agent_id"]}"]')
                await expect(row.locator("th")).to_have_text(spun_up_handle(TARGET, str(op["agent_id"])))
                await expect(row).to_contain_text("build part", timeout=15_000)
        finally:
            await stop_all(pids)


async def stop_all(pids: list[int]) -> None:
    """SIGTERM the started demo agents (each stops its Warp) and wait until they are gone."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    for _ in range(200):
        if not any(pid_alive(pid) for pid in pids):
            return
        await asyncio.sleep(0.1)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
