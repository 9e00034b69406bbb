"""Scenario 11: work arrives, no agent is online, Weft starts one from a ``local`` target.

The operator registers a target with Shuttle (the demo agent: Warp driven by a small MCP
client) and submits work with ``shuttle submit --wait``. Nobody is online, so Weft spins
an agent up; the item waits meanwhile with a reason; the agent joins under the id Weft
chose, linked to its target and spin-up; it claims and completes the item, and Shuttle
exits 0 with the completed item. The WebSocket shows the spin-up step by step. A second
item goes to the agent already running (no second spin-up). ``shuttle agents shutdown``
stops it: the process is gone. A disabled target is never used.
"""

from __future__ import annotations

import sys
from typing import Any

from scenario_harness import Fabric, eventually
from scenario_harness.drills import pids_with_env
from scenario_harness.events import event_stream

SPINUP_STEPS = ["requested", "starting", "running", "registered"]


async def add_demo_target(fabric: Fabric, name: str, capability: str, *extra: str) -> dict[str, Any]:
    target: dict[str, Any] = await fabric.shuttle_json(
        "targets", "add", name, "-m", "local",
        "--command", f"{sys.executable} -m weft.spinup.demo_agent",
        "-t", "demo", "-c", capability, "--max-concurrent", "1",
        "--env", "LOOM_HEARTBEAT_S=1", "--cwd", str(fabric.workdir), *extra,
    )  # fmt: skip
    return target


async def test_no_agent_online_spins_one_up_from_a_local_target(fabric: Fabric) -> None:
    target = await add_demo_target(fabric, "summarizers", "summarize", "--idle-timeout", "0")
    async with fabric.api() as api:
        assert (await api.get("/api/agents")).json()["total"] == 0

    async with event_stream(fabric, "work", "targets", "agents") as stream:
        done = await fabric.shuttle(
            "--json", "submit", "summarize the incident", "-c", "summarize", "--wait", "--wait-timeout", "90"
        )
        assert done.exit_code == 0, done
        item = done.json()
        assert item["status"] == "completed" and item["attempts"] == 1, item
        agent_id = item["assigned_to"]

        # The item waited with a reason while the agent started.
        waiting = stream.of("work", "waiting")
        assert any(
            "waiting for an agent" in (e["data"]["item"].get("waiting_reason") or "") for e in waiting
        ), [e["data"] for e in waiting]
        # One spin-up, each step an event, in order, for this target and item.
        steps = [e for e in stream.of("spinup") if e["data"]["operation"]["target_id"] == target["id"]]
        assert [e["action"] for e in steps][:4] == SPINUP_STEPS, [e["action"] for e in steps]
        spinup_id = steps[0]["subject_id"]
        assert {e["subject_id"] for e in steps} == {spinup_id}
        operation = steps[0]["data"]["operation"]
        assert (operation["work_id"], operation["agent_id"], operation["reason"]) == (
            item["id"],
            agent_id,
            "routing",
        )

    async with fabric.api() as api:
        agent = (await api.get(f"/api/agents/{agent_id}")).json()
        assert (agent["target_id"], agent["spinup_id"], agent["agent_type"]) == (
            target["id"],
            spinup_id,
            "demo",
        )
        assert agent["status"] in ("online", "busy"), agent
        shown = (await api.get("/api/targets/summarizers")).json()
        assert shown["last_spinup_at"] is not None
        pids = pids_with_env("LOOM_AGENT_ID", agent_id)
        assert pids, "the spun-up agent's processes are running"

        # A second item goes to the agent already there: no second spin-up.
        second = await fabric.shuttle_json("submit", "summarize the follow-up", "-c", "summarize")

        async def completed() -> dict[str, Any] | None:
            found: dict[str, Any] = (await api.get(f"/api/work/{second['id']}")).json()
            return found if found["status"] == "completed" else None

        again = await eventually(completed, timeout=30, what="the second item done by the running agent")
        assert again["assigned_to"] == agent_id
        spinups = (await api.get("/api/stats")).json()["spinups"]
        assert spinups["total"] == 1, spinups

    # The operator stops it: Warp drains and exits, the process is gone, the agent offline.
    stopped = await fabric.shuttle("agents", "shutdown", agent_id, "--reason", "scenario over")
    assert stopped.exit_code == 0, stopped
    await eventually(lambda: _none_alive(agent_id), timeout=30, what="the spun-up processes to exit")
    async with fabric.api() as api:

        async def offline() -> bool:
            return bool((await api.get(f"/api/agents/{agent_id}")).json()["status"] == "offline")

        await eventually(offline, timeout=15, what="the agent shown offline")


async def _none_alive(agent_id: str) -> bool:
    return not pids_with_env("LOOM_AGENT_ID", agent_id)


async def test_a_disabled_target_is_never_used(fabric: Fabric) -> None:
    await add_demo_target(fabric, "parked", "translate", "--disabled")
    item = await fabric.shuttle_json("submit", "translate the notes", "-c", "translate")
    async with fabric.api() as api:

        async def reason() -> str | None:
            found = (await api.get(f"/api/work/{item['id']}")).json()
            return found.get("waiting_reason") if found["status"] == "queued" else None

        assert "no matching target" in await eventually(reason, timeout=15, what="the waiting reason")
        assert (await api.get("/api/stats")).json()["spinups"]["total"] == 0

        # Enabled, the same target serves the waiting item on Weft's next sweep.
        await fabric.shuttle_json("targets", "enable", "parked")

        async def completed() -> dict[str, Any] | None:
            found: dict[str, Any] = (await api.get(f"/api/work/{item['id']}")).json()
            return found if found["status"] == "completed" else None

        done = await eventually(completed, timeout=60, what="the item done once the target is enabled")
        agent_id = done["assigned_to"]
    assert (await fabric.shuttle("agents", "shutdown", agent_id)).exit_code == 0
    await eventually(lambda: _none_alive(agent_id), timeout=30, what="the spun-up processes to exit")
