"""Scenario 5: direct messages between agents, including to one that is offline.

alice and bob message each other; carol leaves, messages pile up in her inbox while
she is offline, and when she comes back (same agent id) she reads them: filtered by
type first, then the rest in pages, each message exactly once.
"""

from __future__ import annotations

from contextlib import AsyncExitStack

from scenario_harness import Fabric, agents_in, eventually, new_agent_id


async def test_direct_messages_wait_for_an_offline_agent(fabric: Fabric) -> None:
    carol_id = new_agent_id()
    async with AsyncExitStack() as stack:
        team = await agents_in(stack, fabric, {"alice": {}, "bob": {}})
        alice, bob = team["alice"], team["bob"]

        # Online: a message arrives at once and is read exactly once.
        sent = await alice.call("warp_messages_send_direct", recipient_id=bob.agent_id, message="ping")
        assert sent["recipient_status"] == "online"
        inbox = await bob.call("warp_messages_read_direct")
        assert [(m["body"], m["sender_id"]) for m in inbox["messages"]] == [("ping", alice.agent_id)]
        assert inbox["acknowledged"] is True
        assert (await bob.call("warp_messages_read_direct"))["messages"] == []
        await bob.call("warp_messages_send_direct", recipient_id=alice.agent_id, message="pong")
        assert [m["body"] for m in (await alice.call("warp_messages_read_direct"))["messages"]] == ["pong"]

        # Several messages page with the cursor the read hands back.
        for n in range(5):
            await alice.call("warp_messages_send_direct", recipient_id=bob.agent_id, message=f"part {n}")
        pages = [await bob.call("warp_messages_read_direct", limit=2)]
        while pages[-1]["has_more"]:
            pages.append(
                await bob.call("warp_messages_read_direct", limit=2, cursor=pages[-1]["next_cursor"])
            )
        assert [[m["body"] for m in p["messages"]] for p in pages] == [
            ["part 0", "part 1"],
            ["part 2", "part 3"],
            ["part 4"],
        ]

        # carol comes, registers, and leaves: she shows offline.
        async with fabric.agent("carol", agent_id=carol_id) as carol:
            assert carol.agent_id == carol_id

        async def carol_offline() -> bool:
            found = await alice.call("warp_registry_get_info", agent_id=carol_id)
            return bool(found["status"] == "offline")

        await eventually(carol_offline, what="carol to show offline after leaving")

        # Messages for her wait in her inbox.
        for n in range(5):
            out = await alice.call(
                "warp_messages_send_direct",
                recipient_id=carol_id,
                message=f"update {n}",
                message_type="status",
            )
            assert out["recipient_status"] == "offline"
        await bob.call(
            "warp_messages_send_direct",
            recipient_id=carol_id,
            message="please review #42",
            message_type="review",
        )
        nobody = new_agent_id()
        out = await bob.call("warp_messages_send_direct", recipient_id=nobody, message="anyone?")
        assert out["recipient_status"] == "unregistered"

        # carol is back with the same id: her inbox is there.
        carol = await stack.enter_async_context(fabric.agent("carol", agent_id=carol_id))
        assert carol.agent_id == carol_id

        peek = await carol.call("warp_messages_read_direct", peek=True)
        assert len(peek["messages"]) == 6 and peek["acknowledged"] is False

        review = await carol.call("warp_messages_read_direct", message_type="review")
        assert [(m["body"], m["sender_id"]) for m in review["messages"]] == [
            ("please review #42", bob.agent_id)
        ]
        assert review["left_waiting"] == 5

        # The rest, two at a time, until a read comes back empty.
        bodies: list[str] = []
        while page := (await carol.call("warp_messages_read_direct", limit=2))["messages"]:
            bodies += [m["body"] for m in page]
        assert bodies == [f"update {n}" for n in range(5)]
        assert (await carol.call("warp_messages_read_direct"))["messages"] == []

        # Nobody else's inbox was touched.
        assert (await alice.call("warp_messages_read_direct"))["messages"] == []
        assert (await bob.call("warp_messages_read_direct"))["messages"] == []

        # Bad input is a clear tool error naming the field.
        bad = await alice.error("warp_messages_send_direct", recipient_id="not-an-id", message="x")
        assert "recipient_id" in bad


async def test_paging_after_a_filtered_read_says_more_is_waiting(fabric: Fabric) -> None:
    async with AsyncExitStack() as stack:
        team = await agents_in(stack, fabric, {"alice": {}, "carol": {}})
        alice, carol = team["alice"], team["carol"]
        for n in range(3):
            await alice.call("warp_messages_send_direct", recipient_id=carol.agent_id, message=f"status {n}")
        await alice.call(
            "warp_messages_send_direct", recipient_id=carol.agent_id, message="review", message_type="review"
        )
        review = await carol.call("warp_messages_read_direct", message_type="review")
        assert len(review["messages"]) == 1 and review["left_waiting"] == 3
        page = await carol.call("warp_messages_read_direct", limit=2)
        assert [m["body"] for m in page["messages"]] == ["status 0", "status 1"]
        assert page["has_more"] is True and page["next_cursor"]
