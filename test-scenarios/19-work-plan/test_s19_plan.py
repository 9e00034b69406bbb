"""Scenario 19: a 12-item plan with dependencies and one review round per item runs to the
end with 3 Warp agents and Shuttle, in dependency order, every change reviewed by an agent
other than its author; another project sees none of it."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from datetime import datetime
from pathlib import Path

from scenario_harness import Fabric, WarpAgent, agents_in, new_project_id

PLAN = [
    ("schema", []),
    ("migration", ["schema"]),
    ("model-users", ["migration"]),
    ("model-orders", ["migration"]),
    ("api-users", ["model-users"]),
    ("api-orders", ["model-orders"]),
    ("auth", ["api-users"]),
    ("billing", ["api-orders", "auth"]),
    ("tests-api", ["api-users", "api-orders"]),
    ("docs", ["api-users", "api-orders"]),
    ("changelog", ["docs"]),
    ("release", ["billing", "tests-api", "changelog"]),
]


def plan_yaml() -> str:
    lines = []
    for name, after in PLAN:
        lines += [
            f"- name: {name}",
            f"  task_id: {name}",
            f"  description: write {name}",
            "  capability: code",
            "  review: {capability: review}",
        ]
        if after:
            lines.append(f"  after: [{', '.join(after)}]")
    return "\n".join(lines) + "\n"


def when(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


async def test_a_twelve_item_plan_runs_in_order_with_every_change_reviewed(
    fabric: Fabric, tmp_path: Path
) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(plan_yaml())
    submitted = await fabric.shuttle_json("submit", "--file", str(plan))
    ids = submitted["names"]
    assert set(ids) == {name for name, _ in PLAN}
    assert [i["status"] for i in submitted["items"]] == ["queued"] + ["blocked"] * 11

    graph = await fabric.shuttle("work", "graph", ids["release"])
    assert graph.exit_code == 0, graph.stderr
    assert all(work_id in graph.stdout for work_id in ids.values())  # every ancestor of the release

    async with fabric.api() as api:

        async def finished() -> bool:
            listing = (await api.get("/api/work", params={"status": "completed", "limit": 50})).json()
            return bool(listing["total"] == len(PLAN))

        async def status_of(work_id: str) -> str:
            return str((await api.get(f"/api/work/{work_id}")).json()["status"])

        handed_in: list[tuple[str, str]] = []  # (task, worker)
        reviewed: list[tuple[str, str, str]] = []  # (task, author, reviewer)

        async def work(agent: WarpAgent) -> None:
            while True:
                item = await agent.claim()
                if item is None:
                    if await finished():
                        return
                    await asyncio.sleep(0.05)
                    continue
                if item["status"] == "reviewing":
                    author = item["reviews"][-1]["author"]
                    reviewed.append((item["task_id"], author, agent.agent_id))
                    await agent.call("warp_work_review", work_id=item["id"], verdict="approve", score=90)
                    continue
                for dependency in item["depends_on"]:  # it was offered only once they had completed
                    assert await status_of(dependency) == "completed", (item["task_id"], dependency)
                done = await agent.call(
                    "warp_work_complete",
                    work_id=item["id"],
                    result={"by": agent.handle, "task": item["task_id"]},
                )
                assert done["item"]["status"] == "in-review"
                handed_in.append((item["task_id"], agent.agent_id))

        async with AsyncExitStack() as stack:
            agents = await agents_in(
                stack,
                fabric,
                {name: {"capabilities": ["code", "review"]} for name in ("alice", "bob", "carol")},
            )
            await asyncio.wait_for(asyncio.gather(*(work(a) for a in agents.values())), timeout=120)

            # Another project sees none of it: no graph, nothing to claim or review.
            other = fabric.project(new_project_id())
            outsider = await stack.enter_async_context(
                other.agent("outsider", capabilities=["code", "review"])
            )
            assert await outsider.claim() is None
            foreign = await other.shuttle("work", "graph", ids["release"])
            assert foreign.exit_code == 1 and "no work item with this id in this project" in foreign.stderr

        items = {name: (await api.get(f"/api/work/{work_id}")).json() for name, work_id in ids.items()}

    assert sorted(task for task, _ in handed_in) == sorted(ids)  # each handed in once: no rejections
    for name, after in PLAN:
        item = items[name]
        assert item["status"] == "completed" and item["result"]["task"] == name
        for dependency in after:  # in dependency order: claimed only after its dependencies counted
            assert when(items[dependency]["finished_at"]) <= when(item["claimed_at"]), (name, dependency)
        (round_,) = item["reviews"]
        assert round_["verdict"] == "approve" and round_["reviewer"] != round_["author"]
        assert item["assigned_to"] == round_["author"]
    assert all(author != reviewer for _, author, reviewer in reviewed) and len(reviewed) == len(PLAN)
    assert len({reviewer for _, _, reviewer in reviewed}) >= 2  # the reviews were shared out
    final = await fabric.shuttle("work", "graph", ids["schema"])
    assert final.exit_code == 0 and final.stdout.count("completed") == len(PLAN)
