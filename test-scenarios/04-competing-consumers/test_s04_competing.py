"""Scenario 4: three agents compete for 100 items; each item is done exactly once.

An operator submits 100 items in one Shuttle batch. Three Warp agents loop
claim → complete concurrently, each through its own MCP session. No item is claimed
twice, every item completes on its first attempt, the queue ends empty and every
agent gets a share of the work.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from contextlib import AsyncExitStack

from scenario_harness import Fabric, WarpAgent, agents_in

ITEMS = 100


async def worker(agent: WarpAgent, claimed: dict[str, str]) -> list[str]:
    """Claim and complete until the queue has nothing left for this agent."""
    mine: list[str] = []
    while (item := await agent.claim()) is not None:
        assert item["id"] not in claimed, (
            f"{item['id']} claimed by {claimed.get(item['id'])} and {agent.handle}"
        )
        claimed[item["id"]] = agent.handle
        done = await agent.call("warp_work_complete", work_id=item["id"], result={"n": item["context"]["n"]})
        assert done["item"]["status"] == "completed"
        mine.append(item["id"])
    return mine


async def test_three_agents_share_a_hundred_items_exactly_once(fabric: Fabric) -> None:
    batch = [
        {"task_id": f"batch-{n:03d}", "description": f"item {n}", "capability": "build", "context": {"n": n}}
        for n in range(ITEMS)
    ]
    batch_file = fabric.workdir / "batch.json"
    batch_file.write_text(json.dumps(batch))
    submitted = await fabric.shuttle_json("submit", "--file", str(batch_file))
    rows = submitted["items"] if isinstance(submitted, dict) else submitted
    assert len(rows) == ITEMS
    ids = {row["id"] for row in rows}
    assert len(ids) == ITEMS

    async with AsyncExitStack() as stack:
        agents = await agents_in(
            stack, fabric, {f"worker-{n}": {"capabilities": ["build"]} for n in range(3)}
        )
        claimed: dict[str, str] = {}
        results = await asyncio.gather(*(worker(agent, claimed) for agent in agents.values()))

        share = Counter({handle: len(done) for handle, done in zip(agents, results, strict=True)})
        assert sum(share.values()) == ITEMS, share
        assert set(claimed) == ids
        assert all(count >= 5 for count in share.values()), f"load not spread: {share}"

        status = await agents["worker-0"].call("warp_work_queue_status")
        assert status["total"] == 0 and status["dead_letters"] == 0 and status["held_by_me"] == []

    # Weft's records: every item completed once, on its first attempt, by the agent that claimed it.
    handles = {agent.agent_id: handle for handle, agent in agents.items()}
    async with fabric.api() as api:
        items = []
        cursor = None
        while True:
            params: dict[str, str | int] = {"limit": 100}
            if cursor:
                params["cursor"] = cursor
            page = (await api.get("/api/work", params=params)).json()
            items += page["items"]
            cursor = page.get("next_cursor")
            if not cursor:
                break
        stats = (await api.get("/api/stats")).json()
    assert len(items) == ITEMS
    for item in items:
        assert item["status"] == "completed", item
        assert item["attempts"] == 1, item
        assert handles[item["assigned_to"]] == claimed[item["id"]]
        assert item["result"] == {"n": item["context"]["n"]}
    print(f"\nshare of {ITEMS} items: {dict(share)}; stats: {stats.get('work')}")
