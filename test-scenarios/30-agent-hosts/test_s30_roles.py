"""Scenario 30: three agents started the way the plugin starts them (the launcher of
``plugins/loom/.mcp.json``, Warp with memory) carry a plan from goal to reviewed work,
each following its role's skill step by step (scripted: no model). The coordinator writes
the plan file and submits it with Shuttle, the worker claims, reports and hands in, the
reviewer passes the first item on condition, and the follow-up it names becomes work of
its own that the worker then does. Every step is visible to the operator."""

from __future__ import annotations

import sys
from contextlib import AsyncExitStack
from pathlib import Path

import yaml
from scenario_harness import Fabric, agents_in

ROOT = Path(__file__).resolve().parents[2]
LAUNCH = [str(ROOT / "plugins" / "loom" / "bin" / "loom-launch"), "warp", "--with-memory"]
BIN = str(Path(sys.executable).parent)


async def test_a_plan_goes_from_goal_to_reviewed_work_with_a_follow_up(
    fabric: Fabric, tmp_path: Path
) -> None:
    plugin = {"launch": LAUNCH, "extra_env": {"LOOM_BIN": BIN}}
    async with AsyncExitStack() as stack:
        agents = await agents_in(
            stack,
            fabric,
            {
                "coordinator": {**plugin, "capabilities": ["plan"]},
                "worker": {**plugin, "capabilities": ["code"]},
                "reviewer": {**plugin, "capabilities": ["review"]},
            },
        )
        coordinator, worker, reviewer = (agents[n] for n in ("coordinator", "worker", "reviewer"))
        assert "pattern_core_memory" in await worker.tool_names()  # Warp with memory, as the plugin starts it

        # coordinator (skills/loom-coordinator, loom-plan): the goal becomes a plan file, submitted at once
        plan = {
            "items": [
                {
                    "name": "parser",
                    "task_id": "config-parser",
                    "description": "Parse the new config format",
                    "capability": "code",
                    "review": {"capability": "review", "rounds": 2},
                },
                {
                    "name": "cli",
                    "task_id": "config-cli",
                    "description": "Read the config through the parser in the CLI",
                    "capability": "code",
                    "after": ["parser"],
                },
            ]
        }
        plan_file = tmp_path / ".loom" / "plans" / "config.yaml"
        plan_file.parent.mkdir(parents=True)
        plan_file.write_text(yaml.safe_dump(plan))
        submitted = await fabric.shuttle_json("submit", "--file", str(plan_file))
        by_task = {i["task_id"]: i for i in submitted["items"]}
        parser, cli = by_task["config-parser"], by_task["config-cli"]
        assert (parser["status"], cli["status"]) == ("queued", "blocked")
        assert (await coordinator.call("warp_work_list", status="blocked"))["items"][0]["id"] == cli["id"]

        # worker (skills/loom-next-work, loom-worker, loom-hand-in)
        claimed = await worker.claim()
        assert claimed is not None and claimed["id"] == parser["id"]
        await worker.call("warp_work_context", work_id=parser["id"])
        await worker.call("warp_work_progress", work_id=parser["id"], percent=50, note="parser written")
        handed = await worker.call(
            "warp_work_complete",
            work_id=parser["id"],
            result={"changed": ["config/parser.py"], "checks": "pytest: 12 passed"},
        )
        assert handed["item"]["status"] == "in-review"

        # reviewer (skills/loom-reviewer and its rubric): checks pass, docs are missing
        review = await reviewer.call("warp_work_claim")
        assert review["review"] is True and review["item"]["id"] == parser["id"]
        verdict = await reviewer.call(
            "warp_work_review",
            work_id=parser["id"],
            verdict="conditional",
            score=80,
            feedback="tests pass: yes; lint: yes; does what was asked: yes; scope: yes. Scores 4/4/4/4.",
            follow_ups=["Document the config format's error messages"],
        )
        assert verdict["item"]["status"] == "completed"
        (follow_up_id,) = verdict["item"]["reviews"][-1]["follow_ups"]

        # the operator sees both ends of the link
        follow_up = await fabric.shuttle_json("work", "show", follow_up_id)
        assert follow_up["follow_up_of"] == parser["id"] and follow_up["status"] == "queued"
        assert follow_up["description"] == "Document the config format's error messages"
        shown = await fabric.shuttle_json("work", "show", parser["id"])
        assert shown["reviews"][-1]["verdict"] == "conditional"

        # the worker goes on: the unblocked item and the follow-up, each claimed and handed in
        done = set()
        while (item := await worker.claim()) is not None:
            await worker.call("warp_work_complete", work_id=item["id"], result={"done": item["task_id"]})
            done.add(item["id"])
        assert done == {cli["id"], follow_up_id}
        # the follow-up is work of the parser's kind: reviewed like it, and approved this time
        again = await reviewer.claim()
        assert again is not None and again["id"] == follow_up_id
        await reviewer.call("warp_work_review", work_id=follow_up_id, verdict="approve", score=90)
        assert await reviewer.claim() is None

    for work_id in (parser["id"], cli["id"], follow_up_id):
        assert (await fabric.shuttle_json("work", "show", work_id))["status"] == "completed"
