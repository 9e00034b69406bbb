"""Scenario 16: agents share a team learning through Pattern and recall it after a restart.

alice learns something, keeps it private at first, then shares it with her team and
tells them on a Warp channel. bob recalls it through his own Pattern session; an agent
of another project does not see it. Both agents' processes stop and start again: the
learning (and alice's private notes) are still there, in NATS, for both.
"""

from __future__ import annotations

from scenario_harness import Fabric, PatternSession, new_agent_id, new_project_id, new_user_id

LEARNING = "pytest-asyncio: session-scoped async fixtures need the session event loop"


async def recall_contents(memory: PatternSession, **filters: object) -> list[str]:
    found = await memory.call("pattern_recall_context", **filters)
    return [m["content"] for m in found["memories"]]


async def test_a_shared_learning_survives_restarts(fabric: Fabric) -> None:
    alice_id, bob_id = new_agent_id(), new_agent_id()
    alice_user, bob_user = new_user_id(), new_user_id()
    other = fabric.project(new_project_id())

    async with (
        fabric.agent("alice", agent_id=alice_id, user_id=alice_user) as alice,
        fabric.agent("bob", agent_id=bob_id, user_id=bob_user) as bob,
        fabric.memory("alice", agent_id=alice_id, user_id=alice_user) as alice_mem,
        fabric.memory("bob", agent_id=bob_id, user_id=bob_user) as bob_mem,
        other.memory("outsider", user_id=bob_user) as outsider_mem,
    ):
        learned = await alice_mem.call(
            "pattern_remember_learning", content=LEARNING, tags=["testing", "asyncio"], priority=7
        )
        private_id = learned["memory"]["id"]
        assert learned["memory"]["scope"] == "private" and learned["memory"]["category"] == "learnings"
        note = await alice_mem.call("pattern_remember", content="ask bob about the flaky CI runner")
        assert note["memory"]["scope"] == "private"

        # Private: bob does not see it yet.
        assert LEARNING not in await recall_contents(bob_mem, tags=["testing"])

        # alice shares it with the team and says so on the roadmap channel.
        shared = await alice_mem.call("pattern_share_learning", memory_id=private_id, scope="team")
        shared_id = shared["memory"]["id"]
        assert shared["memory"]["scope"] == "team" and shared["source_id"] == private_id
        await alice.call("warp_channels_send", channel="roadmap", message=f"shared learning {shared_id}")

        # bob hears about it on the channel and recalls it from memory.
        heard = await bob.call("warp_channels_read", channel="roadmap", from_beginning=True)
        mentioned = heard["messages"][-1]["body"].rsplit(" ", 1)[-1]
        assert mentioned == shared_id
        found = await bob_mem.call("pattern_recall_context", tags=["testing"], scopes=["team"])
        assert [(m["id"], m["content"], m["own"]) for m in found["memories"]] == [
            (shared_id, LEARNING, False)
        ]
        assert LEARNING in found["summary"]
        assert "flaky CI runner" not in str(found)  # alice's private note stays hers

        # Another project does not see the team's memory, even for the same user.
        assert LEARNING not in await recall_contents(outsider_mem, search="pytest-asyncio")

        # The secret scanner warns (and stores nothing worse than what it was given).
        risky = await bob_mem.call(
            "pattern_remember",
            content="deploy with AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        )
        assert risky["warnings"], risky

    # Everyone restarts: new processes, same agents.
    async with (
        fabric.memory("alice", agent_id=alice_id, user_id=alice_user) as alice_mem,
        fabric.memory("bob", agent_id=bob_id, user_id=bob_user) as bob_mem,
    ):
        assert await recall_contents(bob_mem, search="pytest-asyncio", scopes=["team"]) == [LEARNING]
        mine = await recall_contents(alice_mem)
        assert LEARNING in mine and "ask bob about the flaky CI runner" in mine
        counts = (await bob_mem.call("pattern_recall_context", scopes=["team"]))["counts"]
        assert counts["by_category"].get("learnings") == 1
