"""Scenario 14: end to end — an operator's batch, a mixed fleet, one consistent picture.

The operator registers two ``local`` targets (``docs`` and ``test`` agents, started on
demand) and submits 20 items of mixed capability and priority in one Shuttle batch. Three
agents are already around for ``code`` and ``review`` (Warp MCP sessions); nobody can do
``docs`` or ``test`` work, so Weft spins those agents up. Everything completes, each
item by an agent with its capability, each agent taking its work highest priority first.
At the end ``shuttle fleet --json``, the REST API and what a WebSocket client saw live
all tell the same story; the spun-up agents idle out and are stopped.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from contextlib import AsyncExitStack
from typing import Any

from scenario_harness import Fabric, agents_in, eventually
from scenario_harness.drills import pids_with_env, rest_items, workers
from scenario_harness.events import EventStream, event_stream

# (capability, priority) for the 20 items: 8 code, 4 review, 5 docs, 3 test.
MIX = [
    ("code", 3), ("docs", 9), ("code", 10), ("review", 2), ("test", 5),
    ("code", 1), ("docs", 4), ("review", 8), ("code", 7), ("test", 10),
    ("code", 5), ("docs", 1), ("review", 6), ("code", 9), ("test", 2),
    ("docs", 7), ("code", 2), ("review", 10), ("docs", 5), ("code", 8),
]  # fmt: skip
STATIC = {
    "coder-1": {"capabilities": ["code"], "agent_type": "claude-code"},
    "coder-2": {"capabilities": ["code"], "agent_type": "claude-code"},
    "reviewer": {"capabilities": ["review"], "agent_type": "copilot"},
}
IDLE_TIMEOUT_S = 2


async def add_pool(fabric: Fabric, name: str, capability: str, max_concurrent: int) -> dict[str, Any]:
    target: dict[str, Any] = await fabric.shuttle_json(
        "targets", "add", name, "-m", "local",
        "--command", f"{sys.executable} -m weft.spinup.demo_agent",
        "-t", "demo", "-c", capability, "--max-concurrent", str(max_concurrent),
        "--idle-timeout", str(IDLE_TIMEOUT_S), "--env", "LOOM_HEARTBEAT_S=1",
        "--env", "LOOM_DEMO_WORK_S=0.2", "--cwd", str(fabric.workdir),
    )  # fmt: skip
    return target


def last_work_state(stream: EventStream) -> dict[str, dict[str, Any]]:
    """Each item as the last work event about it showed it."""
    state: dict[str, dict[str, Any]] = {}
    for event in stream.of("work"):
        item = event["data"].get("item")
        if item:
            state[event["subject_id"]] = item
    return state


def most_live(stream: EventStream) -> dict[str, int]:
    """The most operations each target had live at once, replaying spin-up events in order.

    An operation is live from its ``requested`` event to its ``stopped`` or ``cleaned-up``
    one; Weft publishes that before it frees the target's slot for another start."""
    live: Counter[str] = Counter()
    most: dict[str, int] = {}
    for event in stream.of("spinup"):
        target = event["data"]["operation"]["target_id"]
        if event["action"] == "requested":
            live[target] += 1
            most[target] = max(most.get(target, 0), live[target])
        elif event["action"] in ("stopped", "cleaned-up"):
            live[target] -= 1
    return most


def last_agent_status(stream: EventStream) -> dict[str, str]:
    """Each agent's effective status as Weft's last derived ``agent.*`` event gave it."""
    return {e["subject_id"]: e["data"]["status"] for e in stream.of("agent")}


async def test_operator_batch_with_a_mixed_fleet(fabric: Fabric) -> None:
    docs_pool = await add_pool(fabric, "docs-pool", "docs", 2)
    test_pool = await add_pool(fabric, "test-pool", "test", 1)
    pools = {docs_pool["id"]: "docs", test_pool["id"]: "test"}

    batch = [
        {"task_id": f"e2e-{n:02d}", "description": f"{cap} task {n}", "capability": cap, "priority": prio}
        for n, (cap, prio) in enumerate(MIX)
    ]
    batch_file = fabric.workdir / "batch.json"
    batch_file.write_text(json.dumps(batch))

    async with event_stream(fabric, "work", "agents", "targets") as stream:
        submitted = await fabric.shuttle_json("submit", "--file", str(batch_file))
        ids = {row["id"]: row for row in submitted["items"]}
        assert len(ids) == 20

        async with AsyncExitStack() as stack:
            agents = await agents_in(stack, fabric, STATIC)
            async with fabric.api() as api, workers(agents, work_s=0.05) as logs:

                async def all_done() -> bool:
                    items = await rest_items(api)
                    return all(items.get(w, {}).get("status") == "completed" for w in ids)

                await eventually(all_done, timeout=120, interval=0.25, what="all 20 items completed")
                final = await rest_items(api)
                agents_now = {a["agent_id"]: a for a in (await api.get("/api/agents")).json()["items"]}

            # Each static agent took its items highest priority first (all were queued before it started).
            for handle, log in logs.items():
                priorities = [ids[w]["priority"] for w in log.completed]
                assert priorities == sorted(priorities, reverse=True), (handle, priorities)
            done_by_static = Counter(h for h, log in logs.items() for _ in log.completed)
            assert (
                done_by_static["reviewer"] == 4 and done_by_static["coder-1"] + done_by_static["coder-2"] == 8
            )

        # Every item: completed once, by an agent with its capability; docs/test by spun-up agents.
        spun_up: set[str] = set()
        for work_id, item in final.items():
            assert item["status"] == "completed" and item["attempts"] == 1, item
            agent = agents_now[item["assigned_to"]]
            assert item["capability"] in agent["capabilities"], (item, agent)
            if item["capability"] in ("docs", "test"):
                assert pools[agent["target_id"]] == item["capability"], agent
                spun_up.add(agent["agent_id"])
            else:
                assert agent["target_id"] is None
            assert work_id in ids

        # shuttle fleet --json, REST and the live stream agree.
        async with fabric.api() as api:

            async def fleet_matches_rest() -> dict[str, Any] | None:
                doc: dict[str, Any] = await fabric.shuttle_json("fleet")
                listed = {a["agent_id"] for a in (await api.get("/api/agents")).json()["items"]}
                return doc if {a["agent_id"] for a in doc["agents"]} == listed else None

            fleet = await eventually(
                fleet_matches_rest, timeout=20, what="fleet --json agents == REST agents"
            )
        stats = fleet["stats"]
        assert stats["work"]["total"] == 20 and stats["work"]["by_status"]["completed"] == 20, stats["work"]
        assert stats["work"]["waiting_for_agent"] == 0 and stats["dead_letters"] == 0
        assert sum(stats["queue_depths"].values()) == 0, stats["queue_depths"]
        assert set(agents_now) <= {a["agent_id"] for a in fleet["agents"]}
        assert {t["name"] for t in fleet["targets"]} == {"docs-pool", "test-pool"}
        assert all(t["last_spinup_at"] for t in fleet["targets"]), fleet["targets"]
        assert stats["spinups"]["total"] == len(stream.of("spinup", "requested")), stats["spinups"]
        from_targets = {a["agent_id"] for a in fleet["agents"] if a["target_id"] in pools}
        assert spun_up <= from_targets, (spun_up, from_targets)
        # The caps held throughout (an agent that idled out may be replaced while work waits).
        caps = {docs_pool["id"]: 2, test_pool["id"]: 1}
        peaks = most_live(stream)
        assert peaks.keys() == caps.keys() and all(peaks[t] <= cap for t, cap in caps.items()), (peaks, caps)

        seen = last_work_state(stream)
        assert set(seen) == set(ids), "the stream saw every item"
        for work_id, item in final.items():
            assert (seen[work_id]["status"], seen[work_id]["assigned_to"], seen[work_id]["attempts"]) == (
                item["status"],
                item["assigned_to"],
                item["attempts"],
            )
        assert Counter(e["subject_id"] for e in stream.of("work", "completed")) == Counter(
            dict.fromkeys(ids, 1)
        )
        registered = {e["data"]["operation"]["agent_id"] for e in stream.of("spinup", "registered")}
        assert spun_up <= registered
        assert stream.lagged == 0

        # The spun-up agents idle out: stopped, offline, no process left; the stream saw it too.
        async with fabric.api() as api:

            async def pools_stopped() -> bool:
                spinups = (await api.get("/api/stats")).json()["spinups"]
                return bool(spinups["by_state"].get("stopped") == spinups["total"])

            await eventually(pools_stopped, timeout=60, what="every spun-up agent stopped after idling")

            async def processes_gone() -> bool:
                return not any(pids_with_env("LOOM_AGENT_ID", a) for a in registered)

            await eventually(processes_gone, timeout=15, what="no process of a spun-up agent left")

            async def offline_everywhere() -> bool:
                listed = {a["agent_id"]: a for a in (await api.get("/api/agents")).json()["items"]}
                statuses = last_agent_status(stream)
                return all(listed[a]["status"] == "offline" == statuses.get(a) for a in registered)

            await eventually(offline_everywhere, timeout=20, what="spun-up agents offline in REST and stream")
        fleet = await fabric.shuttle_json("fleet")
        assert fleet["stats"]["agents"]["by_status"]["offline"] >= len(registered), fleet["stats"]["agents"]
        spinups = fleet["stats"]["spinups"]
        assert spinups["by_state"].get("stopped") == spinups["total"], spinups
    print(
        f"\n[e2e] 20 items; static {dict(done_by_static)}; "
        f"{len(registered)} agents spun up, {len(spun_up)} did work"
    )


async def test_one_agent_event_per_registration(fabric: Fabric) -> None:
    async with event_stream(fabric, "agents") as stream:
        async with fabric.agent("once", capabilities=["code"]) as agent:
            agent_id = agent.agent_id
        # Leaving the block marks it offline; Weft's offline event comes after every registration copy.
        await stream.wait_for(
            lambda e: (
                e["subject_id"] == agent_id
                and e["action"] in ("offline", "deregistered")
                and "status" in e["data"]
            ),
            what="Weft's offline event",
        )
    mine = [e for e in stream.of("agent") if e["subject_id"] == agent_id]
    assert [e["action"] for e in mine].count("registered") == 1, [e["action"] for e in mine]
    assert all("status" in e["data"] for e in mine), [sorted(e["data"]) for e in mine]
