"""Scenario 3: work submitted with Shuttle reaches exactly the agents that have the capability.

Four agents with different capabilities claim from one project's queue. Every item
ends with an agent that registered its capability, highest priority first; work no
agent can do waits in its queue, and Weft says why.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

from scenario_harness import Fabric, agents_in, drain, eventually


async def submit(fabric: Fabric, description: str, capability: str, priority: int = 5) -> dict[str, Any]:
    item = await fabric.shuttle_json(
        "submit", description, "--capability", capability, "--priority", str(priority)
    )
    assert item["status"] == "queued" and item["capability"] == capability
    return dict(item)


async def test_each_item_goes_to_an_agent_with_its_capability(fabric: Fabric) -> None:
    submitted = [
        await submit(fabric, "low priority fix", "code", 2),
        await submit(fabric, "urgent fix", "code", 9),
        await submit(fabric, "normal fix", "code", 5),
        await submit(fabric, "review PR 12", "review"),
        await submit(fabric, "review PR 13", "review"),
        await submit(fabric, "write the guide", "docs"),
        await submit(fabric, "update the changelog", "docs"),
    ]
    nobody = await submit(fabric, "deploy to production", "deploy")
    by_id = {item["id"]: item for item in submitted}

    async with AsyncExitStack() as stack:
        agents = await agents_in(
            stack,
            fabric,
            {
                "coder": {"capabilities": ["code"]},
                "reviewer": {"capabilities": ["review"]},
                "writer": {"capabilities": ["docs"]},
                "polyglot": {"capabilities": ["code", "docs"]},
            },
        )
        # The coder claims first: priority decides the order within its queue.
        coder = agents["coder"]
        first = await coder.claim()
        assert first is not None and first["description"] == "urgent fix"
        await coder.call("warp_work_complete", work_id=first["id"], result={"by": "coder"})

        # A capability the agent did not register is refused, naming the field.
        refused = await agents["reviewer"].error("warp_work_claim", capability="code")
        assert "capability: is not one of your registered capabilities" in refused and "code" not in refused

        # Everyone works until nothing eligible is left for them.
        done: dict[str, str] = {first["id"]: "coder"}
        order: dict[str, list[str]] = {}
        for handle in ("writer", "reviewer", "polyglot", "coder"):
            agent = agents[handle]
            async for item in drain(agent):
                assert item["capability"] in agent.env["LOOM_CAPABILITIES"].split(",")
                assert item["id"] not in done, f"{item['id']} claimed twice"
                await agent.call("warp_work_complete", work_id=item["id"], result={"by": handle})
                done[item["id"]] = handle
                order.setdefault(handle, []).append(item["description"])

        assert set(done) == set(by_id)
        assert sorted(order["writer"]) == ["update the changelog", "write the guide"]
        assert sorted(order["reviewer"]) == ["review PR 12", "review PR 13"]
        assert order["polyglot"] == ["normal fix", "low priority fix"]  # what code was left, by priority
        assert "coder" not in order  # nothing left for it

        # Nobody can deploy: the item waits in its queue, and Weft says why.
        async with fabric.api() as api:

            async def waiting_reason() -> str | None:
                item = (await api.get(f"/api/work/{nobody['id']}")).json()
                return item.get("waiting_reason") if item["status"] == "queued" else None

            reason = await eventually(waiting_reason, what="Weft to explain why the deploy item waits")
            assert "no eligible agent" in reason

            # Weft's list, filtered by agent and capability, agrees with what the agents did.
            for handle, agent in agents.items():
                listed = await api.get("/api/work", params={"assigned_to": agent.agent_id, "limit": 100})
                assert listed.status_code == 200, listed.text
                page = listed.json()
                mine = {i for i, h in done.items() if h == handle}
                assert {w["id"] for w in page["items"]} == mine
                assert all(
                    w["status"] == "completed" and w["result"] == {"by": handle} for w in page["items"]
                )
            listed = await api.get("/api/work", params={"capability": "docs"})
            assert listed.status_code == 200, listed.text
            docs = listed.json()
            assert {w["id"] for w in docs["items"]} == {
                i for i, w in by_id.items() if w["capability"] == "docs"
            }

    shown = await fabric.shuttle_json("work", "list", "--status", "completed")
    rows = shown["items"] if isinstance(shown, dict) else shown
    assert len(rows) == len(submitted)
