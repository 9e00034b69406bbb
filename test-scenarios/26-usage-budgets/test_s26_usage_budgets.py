"""Scenario 26: a plan runs with two agents reporting usage; one item goes over its budget
and is stopped; the project's daily budget is reached and the rest waits, with the reason in
``shuttle fleet``; raising the budget resumes it. Another project is neither shown nor held.
The trace of a completed item shows its whole path (``shuttle work trace``)."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from pathlib import Path

from scenario_harness import Fabric, WarpAgent, agents_in, new_project_id, text_of

IMPL = ["impl-1", "impl-2", "impl-3", "impl-4"]
HALF = {"input_tokens": 1000, "output_tokens": 200, "cost": 0.5}
"""What each agent reports with each progress and each completion of an ordinary item."""


def plan_yaml() -> str:
    lines = ["- name: design", "  task_id: design", "  description: design it", "  capability: code"]
    lines += [
        "- name: costly",
        "  task_id: costly",
        "  description: the expensive part",
        "  capability: code",
        "  after: [design]",
        "  budget: {cost: 1.0}",
    ]
    for name in IMPL:
        lines += [
            f"- name: {name}",
            f"  task_id: {name}",
            f"  description: write {name}",
            "  capability: code",
        ]
        lines.append("  after: [design]")
    return "\n".join(lines) + "\n"


async def test_budgets_stop_an_item_and_hold_the_project_until_raised(fabric: Fabric, tmp_path: Path) -> None:
    held = await fabric.shuttle_json("budget", "set", "--cost", "4")
    assert held["project_daily"]["cost"] == 4.0 and held["hold"] is None
    plan = tmp_path / "plan.yaml"
    plan.write_text(plan_yaml())
    ids = (await fabric.shuttle_json("submit", "--file", str(plan)))["names"]

    told: dict[str, list[str]] = {"stopped": [], "after_stop": [], "held": []}
    done: list[tuple[str, str]] = []  # (task, agent handle)

    async def work(agent: WarpAgent, model: str, *, until_done: bool) -> None:
        """Claim and work until the project is held (or, once raised, until the plan is done)."""
        while True:
            result = await agent.raw("warp_work_claim")
            if result.is_error:
                assert "reached its daily budget" in text_of(result), text_of(result)
                told["held"].append(text_of(result))
                if not until_done:
                    return
                await asyncio.sleep(0.1)
                continue
            assert result.structured_content is not None
            if not result.structured_content["claimed"]:
                async with fabric.api() as api:
                    queued = (await api.get("/api/work", params={"status": "queued"})).json()["total"]
                    blocked = (await api.get("/api/work", params={"status": "blocked"})).json()["total"]
                if until_done and queued == 0 and blocked == 0:
                    return
                await asyncio.sleep(0.05)
                continue
            item = result.structured_content["item"]
            usage = {**HALF, "model": model}
            if item["task_id"] == "costly":
                first = await agent.call(
                    "warp_work_progress", work_id=item["id"], percent=30, usage={"cost": 0.6, "model": model}
                )
                assert first["item"]["status"] == "in-progress"
                stop = await agent.raw(
                    "warp_work_progress", work_id=item["id"], percent=60, usage={"cost": 0.6, "model": model}
                )
                assert not stop.is_error
                told["stopped"].append(text_of(stop))
                told["after_stop"].append(
                    await agent.error("warp_work_complete", work_id=item["id"], result="late")
                )
                continue
            await agent.call("warp_work_progress", work_id=item["id"], percent=50, usage=usage)
            finished = await agent.call(
                "warp_work_complete", work_id=item["id"], result={"by": agent.handle}, usage=usage
            )
            assert finished["item"]["status"] == "completed"
            done.append((item["task_id"], agent.handle))

    async with AsyncExitStack() as stack:
        agents = await agents_in(
            stack, fabric, {name: {"capabilities": ["code"]} for name in ("alice", "bob")}
        )
        alice, bob = agents["alice"], agents["bob"]
        await asyncio.wait_for(
            asyncio.gather(work(alice, "model-a", until_done=False), work(bob, "model-b", until_done=False)),
            timeout=120,
        )

        # The costly item was stopped by its budget; its agent was told, and told again.
        (stopped,) = told["stopped"]
        assert stopped.startswith("Stopped: budget exceeded: cost 1.2 over its budget of 1")
        assert "Stop working on it" in stopped
        (again,) = told["after_stop"]
        assert "was stopped: budget exceeded" in again and "stop working on it" in again
        async with fabric.api() as api:
            costly = (await api.get(f"/api/work/{ids['costly']}")).json()
            assert costly["status"] == "dead-lettered" and costly["error"].startswith("budget exceeded")
            assert sum(row["cost"] for row in costly["usage"]) == 1.2

            # The project is held: what is left waits, and the reason is everywhere.
            statuses = {n: (await api.get(f"/api/work/{ids[n]}")).json()["status"] for n in IMPL}
            waiting = [n for n, status in statuses.items() if status == "queued"]
            assert waiting, "the daily budget held nothing back"
            assert all(status == "completed" for n, status in statuses.items() if n not in waiting), statuses
            metrics = (await api.get("/metrics")).text
            assert f'weft_budget_hold{{project="{fabric.project_id}"}} 1.0' in metrics
        assert len(told["held"]) == 2 and all("raises it" in t for t in told["held"])
        fleet = await fabric.shuttle("fleet")
        assert fleet.exit_code == 0, fleet.stderr
        assert "On hold: budget: the project reached its daily budget" in " ".join(fleet.stdout.split())
        by_agent = await fabric.shuttle_json("usage", "--by", "agent")
        costs = {row["key"]: row["cost"] for row in by_agent["rows"]}
        assert set(costs) <= {alice.agent_id, bob.agent_id}
        assert round(sum(costs.values()), 6) == round(1.0 * (len(done)) + 1.2, 6)
        assert by_agent["today"]["cost"] >= 4.0
        by_model = {row["key"] for row in (await fabric.shuttle_json("usage", "--by", "model"))["rows"]}
        assert by_model <= {"model-a", "model-b"} and by_model

        # Raising the budget resumes the work.
        raised = await fabric.shuttle_json("budget", "set", "--cost", "100")
        assert raised["hold"] is None
        await asyncio.wait_for(
            asyncio.gather(work(alice, "model-a", until_done=True), work(bob, "model-b", until_done=True)),
            timeout=120,
        )
        assert "On hold" not in (await fabric.shuttle("fleet")).stdout

        # Another project sees no usage, no budget, and is not held.
        other = fabric.project(new_project_id())
        usage = await other.shuttle_json("usage", "--by", "agent")
        assert usage["rows"] == [] and usage["today"]["reports"] == 0
        budgets = await other.shuttle_json("budget", "show")
        assert budgets["project_daily"] is None and budgets["hold"] is None
        outsider = await stack.enter_async_context(other.agent("outsider", capabilities=["code"]))
        await other.shuttle_json("submit", "elsewhere", "-c", "code")
        assert (await outsider.claim()) is not None

    async with fabric.api() as api:
        for name in ["design", *IMPL]:
            assert (await api.get(f"/api/work/{ids[name]}")).json()["status"] == "completed", name
    assert sorted(task for task, _ in done) == sorted(["design", *IMPL])

    # The trace of a completed item shows its whole path: submitted by Weft, routed, waiting
    # in the queue, claimed, worked on and completed by one agent's Warp, all one trace.
    design = await fabric.shuttle_json("work", "trace", ids["design"])
    names = [span["name"] for span in design["spans"]]
    for name in ("work.submit", "work.queued", "work.claim", "work.progress", "work.complete"):
        assert name in names, (name, names)
    assert {span["trace_id"] for span in design["spans"]} == {design["trace_id"]}
    spans = {span["name"]: span for span in design["spans"]}
    assert spans["work.submit"]["service"] == "loom-weft"
    worker = spans["work.claim"]["attributes"]["loom.agent.id"]
    for name in ("work.claim", "work.progress", "work.complete"):
        assert (
            spans[name]["service"] == "loom-warp"
            and spans[name]["parent_id"] == spans["work.submit"]["span_id"]
        )
        assert spans[name]["attributes"]["loom.agent.id"] == worker
    assert [e["kind"] for e in design["events"]][:2] == ["submission", "attempt"]
    drawn = await fabric.shuttle("work", "trace", ids["design"])
    assert drawn.exit_code == 0 and "work.complete" in drawn.stdout and "◆ result" in drawn.stdout
    # ...and the costly item's shows where its budget stopped it, and the refused call after
    costly_trace = await fabric.shuttle_json("work", "trace", ids["costly"])
    stops = [s for s in costly_trace["spans"] if s["attributes"].get("loom.work.status") == "dead-lettered"]
    assert [s["name"] for s in stops] == ["work.progress"]
    refused = [s for s in costly_trace["spans"] if s["name"] == "work.complete"]
    assert [s["status"] for s in refused] == ["error"] and "budget exceeded" in (refused[0]["error"] or "")
