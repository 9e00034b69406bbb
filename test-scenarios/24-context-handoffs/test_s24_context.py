"""Scenario 24: context that survives hand-offs (docs/context.md)."""

from __future__ import annotations

from scenario_harness import Fabric, eventually, new_agent_id, new_user_id
from scenario_harness.drills import kill_agent
from scenario_harness.mcp_process import BIN

from shared.identity import subagent_id

ACK_WAIT_S = "2"


async def test_a_redelivered_item_carries_the_first_attempts_context(fabric: Fabric) -> None:
    fast = {"LOOM_WORK_ACK_WAIT_S": ACK_WAIT_S}
    item = await fabric.shuttle_json("submit", "migrate the config loader", "--capability", "code")
    async with fabric.agent("first", capabilities=["code"], extra_env=fast) as first:
        claimed = await first.call("warp_work_claim")
        assert claimed["claimed"] and claimed["item"]["id"] == item["id"]
        attempt = claimed["context"]["attempt_node"]
        await first.call("warp_work_progress", work_id=item["id"], percent=40, note="loader parses TOML now")
        await first.call(
            "warp_context_append",
            tree_id=item["id"],
            parent_id=attempt,
            text="YAML anchors break the old loader; keep the TOML path",
            kind="note",
        )
        kill_agent(first)  # no goodbye: the claim just goes silent
    async with fabric.agent("second", capabilities=["code"], extra_env=fast) as second:

        async def redelivered() -> dict[str, object] | None:
            out = await second.call("warp_work_claim")
            return out if out["claimed"] else None

        taken = await eventually(redelivered, timeout=30, interval=0.5)
        assert taken["item"]["attempts"] == 2
        context = taken["context"]
        texts = [n["text"] for n in context["nodes"]]
        assert "YAML anchors break the old loader; keep the TOML path" in texts
        assert "loader parses TOML now" in texts
        lapsed = [n for n in context["nodes"] if n["kind"] == "failure"]
        assert lapsed and lapsed[0]["meta"].get("lapsed") == "true" and lapsed[0]["author"] == first.agent_id
        assert context["attempt_node"] != attempt
        await second.call("warp_work_complete", work_id=item["id"], result={"pr": 12})

    async with fabric.api() as api:
        shape = (await api.get(f"/api/contexts/{item['id']}/structure")).json()
    attempts = [n for n in shape["nodes"] if n["kind"] == "attempt"]
    assert len(attempts) == 2 and all(n["depth"] == 1 for n in attempts)
    kinds = [n["kind"] for n in shape["nodes"]]
    assert kinds[0] == "submission" and "result" in kinds and "note" in kinds
    shown = await fabric.shuttle("context", "show", item["id"])
    assert shown.exit_code == 0, shown.stderr
    assert shown.stdout.count("attempt") == 2 and "keep the TOML path" in shown.stdout

    # A sub-agent builds its context for the item: its parent's memories, the item's history,
    # and nothing private of another agent.
    user = new_user_id()
    parent_id, stranger_id = new_agent_id(), new_agent_id()
    async with (
        fabric.memory("parent", agent_id=parent_id, user_id=user) as parent,
        fabric.memory("stranger", agent_id=stranger_id, user_id=new_user_id()) as stranger,
    ):
        await parent.call("pattern_remember", content="the config loader must stay backwards compatible")
        await stranger.call("pattern_remember", content="stranger: private musings about the loader")
    async with fabric.memory(
        "reviewer", agent_id=parent_id, user_id=user, extra_env={"LOOM_SUBAGENT_TYPE": "reviewer"}
    ) as sub:
        health = await sub.call("pattern_health")
        assert health["identity"]["agent_id"] == subagent_id(parent_id, "reviewer")
        assert health["identity"]["parent_id"] == parent_id
        built = await sub.call("pattern_build_context", budget_tokens=1500, work_id=item["id"])
    texts = {i["text"]: i["layer"] for i in built["items"]}
    assert texts.get("the config loader must stay backwards compatible") == "inherited"
    assert texts.get("YAML anchors break the old loader; keep the TOML path") == "work"
    assert "stranger: private musings about the loader" not in texts
    assert built["used_tokens"] <= 1500 and built["counter"].startswith("tiktoken")


async def test_a_thread_across_three_agents_reads_back_in_tree_order(fabric: Fabric) -> None:
    async with fabric.agent("ana") as ana, fabric.agent("ben") as ben, fabric.agent("cy") as cy:
        root = await ana.call("warp_channels_send", channel="roadmap", message="Ship 2.0 on Friday?")
        yes = await ben.call(
            "warp_channels_send", channel="roadmap", message="Yes if CI is green", reply_to=root["seq"]
        )
        why = await cy.call(
            "warp_channels_send", channel="roadmap", message="CI is flaky on arm", reply_to=yes["seq"]
        )
        await ana.call("warp_channels_send", channel="roadmap", message="Then Monday", reply_to=root["seq"])
        await ben.call("warp_channels_send", channel="roadmap", message="unrelated note")
        thread = await cy.call("warp_channels_thread", channel="roadmap", seq=why["seq"])
        expected = [
            (0, "Ship 2.0 on Friday?"),
            (1, "Yes if CI is green"),
            (2, "CI is flaky on arm"),
            (1, "Then Monday"),
        ]
        assert [(n["depth"], n["node"]["text"]) for n in thread["nodes"]] == expected
        assert [n["node"]["author"] for n in thread["nodes"]] == [
            ana.agent_id,
            ben.agent_id,
            cy.agent_id,
            ana.agent_id,
        ]
        listed = await ben.call("warp_channels_threads", channel="roadmap")
        assert [(t["root_seq"], t["replies"]) for t in listed["threads"]] == [(root["seq"], 3)]
    async with fabric.api() as api:
        nodes = (await api.get(f"/api/contexts/{thread['tree_id']}/nodes")).json()
    assert [(i["depth"], i["node"]["text"]) for i in nodes["items"]] == expected
    shown = await fabric.shuttle("context", "show", thread["tree_id"])
    assert shown.exit_code == 0, shown.stderr
    positions = [shown.stdout.index(text) for _, text in expected]
    assert positions == sorted(positions)


async def test_an_agent_near_its_limit_packs_and_a_new_conversation_finishes_the_item(fabric: Fabric) -> None:
    """The context loop (docs/pattern.md, Packing a conversation): an agent whose context is
    nearly full packs its working state; its next conversation (a new Warp process, the same
    agent) starts from the pack and its hot memories, and finishes the item."""
    item = await fabric.shuttle_json(
        "submit", "port the lexer to the new token types", "--capability", "code"
    )
    agent_id, user = new_agent_id(), new_user_id()
    launch = [str(BIN / "warp"), "--with-memory"]
    options = {"capabilities": ["code"], "agent_id": agent_id, "user_id": user, "launch": launch}
    async with fabric.agent("coder", **options) as first:
        claimed = await first.call("warp_work_claim")
        assert claimed["claimed"] and claimed["item"]["id"] == item["id"]
        rule = await first.call(
            "pattern_remember", content="token kinds are an enum, never strings", category="longterm"
        )
        aside = await first.call(
            "pattern_remember", content="the coffee machine is on floor 3", category="longterm"
        )
        for _ in range(40):  # read over and over while working: it becomes hot
            await first.call("pattern_read", memory_id=rule["memory"]["id"])
        await first.call("warp_work_progress", work_id=item["id"], percent=60, note="tests 1-40 pass")
        packed = await first.call(
            "pattern_pack",
            summary="Porting the lexer: tests 1-40 pass; the keyword table is next.",
            open_work=["tests 41-60", "the keyword table"],
            decisions=["keep the old Token alias for one release"],
            files=["src/lexer.py"],
            work_id=item["id"],
            budget_tokens=3000,
        )
        assert packed["context"]["items"][0]["layer"] == "pack"
    # the conversation ends (the process exits, writing back what it read); a new one starts
    async with fabric.agent("coder", **options) as second:
        restored = await second.call("pattern_restore", work_id=item["id"], budget_tokens=3000, shape="chat")
        context = restored["context"]
        assert restored["pack"]["id"] == packed["pack"]["id"]
        assert "the keyword table is next" in context["context"]
        taken = {i["id"]: i["layer"] for i in context["items"]}
        assert taken.get(rule["memory"]["id"]) == "own"  # hot: read 40 times
        assert aside["memory"]["id"] not in taken  # never read: not hot, not loaded
        assert "tests 1-40 pass" in context["context"]  # the item's tree (its progress note)
        assert context["used_tokens"] <= 3000
        assert "restored from a pack" in context["chat"]["messages"][0]["content"]
        assert "token kinds are an enum" in context["chat"]["system"]
        done = await second.call("warp_work_complete", work_id=item["id"], result={"pr": 41})
        assert done["item"]["status"] == "completed"
