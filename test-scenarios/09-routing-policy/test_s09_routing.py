"""Scenario 9: who may take which work — boundary policy, required and preferred agent type.

Weft loads a boundary policy file: only ``copilot`` agents may work in the ``corporate``
boundary and ``untrusted`` agents may work nowhere else. Three agents of different types
claim from one queue; each gets exactly what the policy and the items' required type
allow, whether the work came from Shuttle or was broadcast by an agent. A preferred type
does not stop another eligible agent, but it decides which target Weft wakes when no
agent is online.
"""

from __future__ import annotations

import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from scenario_harness import Fabric, agents_in, eventually

POLICY = """
default:
  denied_agent_types: [untrusted]
boundaries:
  corporate:
    allowed_agent_types: [copilot]
"""


async def test_policy_and_required_type_decide_who_claims(fabric: Fabric, weft_factory: Any) -> None:
    policy_file = fabric.workdir / "policy.yaml"
    policy_file.write_text(POLICY)
    with weft_factory(policy_file=policy_file) as weft:
        fab = fabric.served_by(weft)

        async def submit(description: str, *flags: str) -> str:
            item = await fab.shuttle_json("submit", description, "--capability", "code", *flags)
            return str(item["id"])

        corporate = await submit("patch the corporate portal", "--boundary", "corporate", "--priority", "9")
        for_claude = await submit("refactor with claude", "--required-type", "claude-code", "--priority", "8")
        prefers_copilot = await submit("small fix", "--preferred-type", "copilot", "--priority", "7")
        anyone = await submit("update docs", "--priority", "5")
        for_gemini = await submit("needs gemini", "--required-type", "gemini", "--priority", "10")

        both = ["default", "corporate"]
        async with AsyncExitStack() as stack:
            agents = await agents_in(
                stack,
                fab,
                {
                    "claude": {"capabilities": ["code"], "boundaries": both, "agent_type": "claude-code"},
                    "copilot": {"capabilities": ["code"], "boundaries": both, "agent_type": "copilot"},
                    "rogue": {"capabilities": ["code"], "boundaries": both, "agent_type": "untrusted"},
                },
            )
            claude, copilot, rogue = agents["claude"], agents["copilot"], agents["rogue"]

            async def take(agent: Any) -> str | None:
                item = await agent.claim()
                if item is None:
                    return None
                await agent.call("warp_work_complete", work_id=item["id"], result={"by": agent.handle})
                return str(item["id"])

            assert await take(rogue) is None  # denied by the default rule, allowed nowhere
            assert await take(claude) == for_claude  # corporate (p9) is not for claude-code
            assert await take(claude) == prefers_copilot  # a preference does not stop claude
            assert await take(copilot) == corporate
            assert await take(copilot) == anyone
            assert await take(claude) is None and await take(copilot) is None

            # Work an agent broadcasts obeys the same policy.
            sent = await claude.call(
                "warp_work_broadcast",
                description="audit corporate logs",
                capability="code",
                boundary="corporate",
            )
            assert await take(claude) is None and await take(rogue) is None
            assert await take(copilot) == sent["item"]["id"]

            # Nobody of the required type: the item waits, and Weft says why.
            async with fab.api() as api:

                async def waiting() -> str | None:
                    item = (await api.get(f"/api/work/{for_gemini}")).json()
                    return item.get("waiting_reason") if item["status"] == "queued" else None

                assert "no eligible agent" in await eventually(
                    waiting, what="the gemini item's waiting reason"
                )
                done = (await api.get("/api/work", params={"status": "completed"})).json()["items"]
            by = {w["id"]: w["result"]["by"] for w in done}
            assert by == {
                for_claude: "claude",
                prefers_copilot: "claude",
                corporate: "copilot",
                anyone: "copilot",
                sent["item"]["id"]: "copilot",
            }


def demo_target(name: str, agent_type: str) -> dict[str, Any]:
    """A local target whose agent is the demo agent (Warp driven by a small MCP client)."""
    return {
        "name": name,
        "agent_type": agent_type,
        "capabilities": ["summarize"],
        "mechanism": "local",
        "config": {
            "command": [sys.executable, "-m", "weft.spinup.demo_agent"],
            "cwd": str(Path(__file__).resolve().parents[2]),
            "env": {"LOOM_HEARTBEAT_S": "1"},
        },
        "idle_timeout_s": 1,
    }


async def test_preferred_type_picks_the_target_weft_wakes(fabric: Fabric) -> None:
    async with fabric.api() as api:
        targets = {}
        for name, agent_type in (("claude-pool", "claude-code"), ("copilot-pool", "copilot")):
            created = await api.post("/api/targets", json=demo_target(name, agent_type))
            assert created.status_code == 201, created.text
            targets[name] = created.json()["id"]

        # No agent online; by name claude-pool would come first, but the item prefers copilot.
        item = await fabric.shuttle_json(
            "submit", "summarize the incident", "--capability", "summarize", "--preferred-type", "copilot"
        )

        async def completed() -> dict[str, Any] | None:
            found = dict((await api.get(f"/api/work/{item['id']}")).json())
            return found if found["status"] == "completed" else None

        done = await eventually(completed, timeout=60, what="an agent spun up from a target to complete it")

        agent = (await api.get(f"/api/agents/{done['assigned_to']}")).json()
        starts = (await api.get("/api/spinups")).json()["items"]  # named when an assertion fails
        assert agent["agent_type"] == "copilot" and agent["target_id"] == targets["copilot-pool"], starts

        # Exactly one spin-up, from the preferred target — although the sweeper re-routed the
        # waiting item (every 0.2 s) while that agent was starting. (It idles out after 1 s.)
        stats = (await api.get("/api/stats")).json()
        assert stats["spinups"]["mechanism"] == "managed" and stats["spinups"]["total"] == 1, starts
        assert (await api.get("/api/targets/claude-pool")).json()["last_spinup_at"] is None
        assert (await api.get("/api/targets/copilot-pool")).json()["last_spinup_at"] is not None
