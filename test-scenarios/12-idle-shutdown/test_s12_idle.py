"""Scenario 12: a spun-up agent that has nothing to do is shut down, and its process is gone.

A ``local`` target starts the demo agent with an idle timeout of 1 s; its work takes 3 s.
The agent holds its item longer than the idle timeout and is *not* stopped meanwhile (an
agent holding work is never idle). Once it has finished and stayed idle past the timeout,
Weft asks it to leave (``spinup.shutdown-requested``), stops it through the mechanism
(``stopping``, ``stopped``), the agent is offline and no process of it is left. New work
afterwards starts a fresh agent: the fleet scales from zero again.
"""

from __future__ import annotations

import sys
from datetime import datetime
from typing import Any

from scenario_harness import Fabric, eventually
from scenario_harness.drills import pids_with_env
from scenario_harness.events import EventStream, event_stream

IDLE_TIMEOUT_S = 1.0
WORK_S = 3.0
STOP_STEPS = ["shutdown-requested", "stopping", "stopped"]


def at(event: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(event["at"])


async def run_one(fabric: Fabric, stream: EventStream, description: str) -> dict[str, Any]:
    """Submit an item, wait for it to complete and for its spun-up agent to be stopped."""
    item = await fabric.shuttle_json("submit", description, "-c", "triage")
    async with fabric.api() as api:

        async def completed() -> dict[str, Any] | None:
            found: dict[str, Any] = (await api.get(f"/api/work/{item['id']}")).json()
            return found if found["status"] == "completed" else None

        try:
            done = await eventually(completed, timeout=60, what=f"{description!r} completed")
        except AssertionError as exc:  # say where it stopped: the item, the starts, the agents
            shown = {
                "item": (await api.get(f"/api/work/{item['id']}")).json(),
                "spinups": (await api.get("/api/spinups")).json(),
                "agents": (await api.get("/api/agents")).json(),
            }
            raise AssertionError(f"{exc}: {shown}") from None
        agent_id = done["assigned_to"]
        assert pids_with_env("LOOM_AGENT_ID", agent_id), "the agent's processes run while it works"

        def op_of(event: dict[str, Any]) -> dict[str, Any]:
            return dict(event["data"]["operation"])

        stopped = await stream.wait_for(
            lambda e: e["kind"] == "spinup" and e["action"] == "stopped" and op_of(e)["agent_id"] == agent_id,
            timeout=30,
            what="spinup.stopped for the idle agent",
        )
        await eventually(lambda: _gone(agent_id), timeout=15, what="no process of the stopped agent is left")

        async def offline() -> bool:
            return bool((await api.get(f"/api/agents/{agent_id}")).json()["status"] == "offline")

        await eventually(offline, timeout=15, what="the stopped agent shown offline")

    spinup_id = stopped["subject_id"]
    steps = [e for e in stream.of("spinup") if e["subject_id"] == spinup_id]
    actions = [e["action"] for e in steps]
    assert actions[: actions.index("registered") + 1] == ["requested", "starting", "running", "registered"]
    assert [a for a in actions if a in STOP_STEPS] == STOP_STEPS, [(e["action"], e["data"]) for e in steps]
    requested = next(e for e in steps if e["action"] == "shutdown-requested")
    assert "idle" in str(requested["data"]).lower(), requested["data"]

    # Not stopped while it held the item (3 s of work > 1 s idle timeout), nor before it had
    # been idle for the whole timeout after completing it.
    finished = next(e for e in stream.of("work", "completed") if e["subject_id"] == item["id"])
    claimed = next(e for e in stream.of("work", "claimed") if e["subject_id"] == item["id"])
    assert (at(finished) - at(claimed)).total_seconds() >= WORK_S
    # Idle counts from the item's last change as stored (its completed event is published a
    # moment after that write, so the event's own time can be later than the moment idle began).
    idle_s = (at(requested) - datetime.fromisoformat(done["updated_at"])).total_seconds()
    assert idle_s >= IDLE_TIMEOUT_S, f"asked to leave {idle_s:.2f}s after its last work"
    print(
        f"\n[idle] {description}: shutdown requested {idle_s:.2f}s after completion "
        f"(timeout {IDLE_TIMEOUT_S:g}s), stopped {(at(stopped) - at(finished)).total_seconds():.2f}s after"
    )
    return {"item": done, "agent_id": agent_id, "spinup_id": spinup_id}


async def _gone(agent_id: str) -> bool:
    return not pids_with_env("LOOM_AGENT_ID", agent_id)


async def test_idle_agent_is_stopped_and_the_fleet_scales_from_zero(fabric: Fabric) -> None:
    await fabric.shuttle_json(
        "targets", "add", "triage-pool", "-m", "local",
        "--command", f"{sys.executable} -m weft.spinup.demo_agent",
        "-t", "demo", "-c", "triage", "--max-concurrent", "1", "--idle-timeout", str(IDLE_TIMEOUT_S),
        "--env", "LOOM_HEARTBEAT_S=1", "--env", f"LOOM_DEMO_WORK_S={WORK_S}", "--cwd", str(fabric.workdir),
    )  # fmt: skip
    async with event_stream(fabric, "work", "targets", "agents") as stream:
        first = await run_one(fabric, stream, "triage the first report")
        assert first["item"]["attempts"] == 1
        second = await run_one(fabric, stream, "triage the second report")
        assert second["agent_id"] != first["agent_id"] and second["spinup_id"] != first["spinup_id"]
        assert stream.lagged == 0
        async with fabric.api() as api:
            stats = (await api.get("/api/stats")).json()
        steps = [  # named when an assertion fails: what each start did and why
            (e["subject_id"][:8], e["action"], e["at"][11:23], e["data"].get("reason"))
            for e in stream.of("spinup")
        ]
        assert stats["spinups"]["total"] == 2 and stats["spinups"]["by_state"].get("stopped") == 2, steps
    assert stats["agents"]["by_status"]["offline"] == 2, stats["agents"]
