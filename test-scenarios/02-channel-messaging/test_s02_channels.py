"""Scenario 2: three agents talk on project channels; a late joiner catches up by paging.

alice, bob and carol post to ``parallel-work`` through their own Warp sessions and
each follows the conversation with a cursor (only what is new). A private note is
hidden from the others. dave joins after the conversation and pages through the whole
history from the beginning, then follows new messages from where he stopped.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

from scenario_harness import Fabric, WarpAgent, agents_in

CHANNEL = "parallel-work"


async def read_all(agent: WarpAgent, **args: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every page until has_more is false; the messages and the last page."""
    messages: list[dict[str, Any]] = []
    pages = 0
    while True:
        page = await agent.call("warp_channels_read", channel=CHANNEL, **args)
        pages += 1
        messages += page["messages"]
        if not page["has_more"]:
            return messages, page | {"pages": pages}
        args = {"limit": args.get("limit", 20), "cursor": page["next_cursor"]}


async def test_three_agents_converse_and_a_late_joiner_pages_the_history(fabric: Fabric) -> None:
    async with AsyncExitStack() as stack:
        team = await agents_in(stack, fabric, {"alice": {}, "bob": {}, "carol": {}})
        alice, bob, carol = team["alice"], team["bob"], team["carol"]

        channels = await alice.call("warp_channels_list")
        assert {"roadmap", "parallel-work", "errors"} <= {c["name"] for c in channels["channels"]}

        # Everyone takes a position in the channel before the conversation starts.
        cursors = {}
        for agent in (alice, bob, carol):
            start = await agent.call("warp_channels_read", channel=CHANNEL)
            assert start["messages"] == []
            cursors[agent.handle] = start["next_cursor"]

        # Round 1: each posts once; each sees exactly the two others' posts plus its own, in order.
        for agent in (alice, bob, carol):
            sent = await agent.call("warp_channels_send", channel=CHANNEL, message=f"{agent.handle}: on it")
            assert sent["seq"] >= 1
        for agent in (alice, bob, carol):
            page = await agent.call("warp_channels_read", channel=CHANNEL, cursor=cursors[agent.handle])
            assert [m["body"] for m in page["messages"]] == ["alice: on it", "bob: on it", "carol: on it"]
            assert [m["sender_handle"] for m in page["messages"]] == ["alice", "bob", "carol"]
            cursors[agent.handle] = page["next_cursor"]

        # A private note: only its author reads it; the others are told something was hidden.
        await bob.call("warp_channels_send", channel=CHANNEL, message="bob: note to self", scope="private")
        await carol.call("warp_channels_send", channel=CHANNEL, message="carol: done with the parser")
        bob_view = await bob.call("warp_channels_read", channel=CHANNEL, cursor=cursors["bob"])
        assert [m["body"] for m in bob_view["messages"]] == [
            "bob: note to self",
            "carol: done with the parser",
        ]
        alice_view = await alice.call("warp_channels_read", channel=CHANNEL, cursor=cursors["alice"])
        assert [m["body"] for m in alice_view["messages"]] == ["carol: done with the parser"]
        assert alice_view["hidden"] == 1

        # A longer conversation: 40 more messages, interleaved.
        for n in range(40):
            speaker = (alice, bob, carol)[n % 3]
            await speaker.call("warp_channels_send", channel=CHANNEL, message=f"{speaker.handle} #{n}")
        expected = ["alice: on it", "bob: on it", "carol: on it", "carol: done with the parser"] + [
            f"{('alice', 'bob', 'carol')[n % 3]} #{n}" for n in range(40)
        ]

        # dave joins late: pages of 10 from the beginning, sees every visible message once, in order.
        dave = await stack.enter_async_context(fabric.agent("dave"))
        history, last = await read_all(dave, from_beginning=True, limit=10)
        assert [m["body"] for m in history] == expected
        assert last["pages"] == 5
        seqs = [m["seq"] for m in history]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)

        # From where he stopped, dave gets only what is new.
        await alice.call("warp_channels_send", channel=CHANNEL, message="alice: welcome dave")
        fresh = await dave.call("warp_channels_read", channel=CHANNEL, cursor=last["next_cursor"])
        assert [m["body"] for m in fresh["messages"]] == ["alice: welcome dave"]

        status = await dave.call("warp_channels_status", channel=CHANNEL)
        assert status["channels"][0]["messages"] == len(expected) + 2  # the private note is stored too

    # The operator's view through Weft: every stored message, every scope, oldest first.
    async with fabric.api() as api:
        page = (
            await api.get(f"/api/channels/{CHANNEL}/messages", params={"from_beginning": True, "limit": 100})
        ).json()
    bodies = [item["message"]["body"] for item in page["items"]]
    assert len(bodies) == len(expected) + 2 and "bob: note to self" in bodies
