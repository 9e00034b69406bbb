"""Scenario 13: two projects on one NATS and one Weft see nothing of each other.

Projects A and B run the same kind of team: agents with the same
capability — and one agent id used in both. Channels, registry, direct messages, work,
dead letters, Weft's REST API and Shuttle all answer per project; nothing of A is
visible or reachable from B, and the reverse.
"""

from __future__ import annotations

from contextlib import AsyncExitStack

from scenario_harness import Fabric, agents_in, new_agent_id, new_project_id


async def test_two_projects_share_nothing(fabric: Fabric) -> None:
    a, b = fabric, fabric.project(new_project_id("b"))
    shared_id = new_agent_id()  # the same agent id in both projects

    a_items = [
        (await a.shuttle_json("submit", f"A task {n}", "--capability", "code"))["id"] for n in range(3)
    ]
    b_items = [
        (await b.shuttle_json("submit", f"B task {n}", "--capability", "code"))["id"] for n in range(2)
    ]

    async with AsyncExitStack() as stack:
        agents = await agents_in(
            stack,
            a,
            {
                "builder": {"capabilities": ["code"], "agent_id": shared_id},
                "reviewer": {"capabilities": ["code"]},
                "b-builder": {"fabric": b, "capabilities": ["code"], "agent_id": shared_id},
            },
        )
        a1, a2, b1 = agents["builder"], agents["reviewer"], agents["b-builder"]
        assert a1.agent_id == b1.agent_id == shared_id

        # Channels: same channel name, separate conversations.
        await a1.call("warp_channels_send", channel="roadmap", message="A: the secret plan")
        await b1.call("warp_channels_send", channel="roadmap", message="B: our own plan")
        a_read = await a2.call("warp_channels_read", channel="roadmap", from_beginning=True)
        b_read = await b1.call("warp_channels_read", channel="roadmap", from_beginning=True)
        assert [m["body"] for m in a_read["messages"]] == ["A: the secret plan"]
        assert [m["body"] for m in b_read["messages"]] == ["B: our own plan"]

        # Registry: team entries stay in their project.
        b_sees = await b1.call("warp_registry_discover", limit=500)
        assert a2.agent_id not in {x["agent_id"] for x in b_sees["agents"]}
        assert [x["project_id"] for x in b_sees["agents"] if x["agent_id"] == shared_id] == [b.project_id]
        hidden = await b1.error("warp_registry_get_info", agent_id=a2.agent_id)
        assert "no agent with this id that you can see" in hidden

        # Direct messages: addressed to the shared id in A, they reach A's agent only.
        await a2.call("warp_messages_send_direct", recipient_id=shared_id, message="for A's builder")
        assert (await b1.call("warp_messages_read_direct", peek=True))["messages"] == []
        got = await a1.call("warp_messages_read_direct")
        assert [m["body"] for m in got["messages"]] == ["for A's builder"]
        # B writing to A's reviewer id lands in B's inbox namespace, never A's.
        out = await b1.call("warp_messages_send_direct", recipient_id=a2.agent_id, message="hello from B")
        assert out["recipient_status"] == "unregistered"
        assert (await a2.call("warp_messages_read_direct"))["messages"] == []

        # Work: each agent claims only its own project's items.
        b_claimed = []
        while (item := await b1.claim()) is not None:
            b_claimed.append(item["id"])
            await b1.call("warp_work_complete", work_id=item["id"])
        assert sorted(b_claimed) == sorted(b_items)
        a_claimed = []
        while (item := await a1.claim()) is not None:
            a_claimed.append(item["id"])
            if len(a_claimed) == 1:
                await a1.call("warp_work_fail", work_id=item["id"], error="bad input", retryable=False)
            else:
                await a1.call("warp_work_complete", work_id=item["id"])
        assert sorted(a_claimed) == sorted(a_items)
        assert {w["id"] for w in (await b1.call("warp_work_list"))["items"]} == set(b_items)
        # Agents cannot act on the other project's items either.
        assert "no work item with this id in this project" in await b1.error(
            "warp_work_complete", work_id=a_items[1]
        )

        # Dead letters: A's is in A's DLQ only.
        assert [d["item"]["id"] for d in (await a2.call("warp_dlq_list"))["items"]] == [a_claimed[0]]
        assert (await b1.call("warp_dlq_list"))["items"] == []
        assert "no work item with this id in this project" in await b1.error(
            "warp_dlq_retry", work_id=a_claimed[0]
        )

    # Weft: one server, answers per project.
    async with a.api() as a_api, b.api() as b_api:
        a_work = (await a_api.get("/api/work", params={"limit": 100})).json()["items"]
        b_work = (await b_api.get("/api/work", params={"limit": 100})).json()["items"]
        assert {w["id"] for w in a_work} == set(a_items) and {w["id"] for w in b_work} == set(b_items)
        assert (await b_api.get(f"/api/work/{a_items[0]}")).status_code == 404
        assert (await b_api.post(f"/api/work/{a_items[0]}/cancel")).status_code == 404
        assert (await b_api.get("/api/dlq")).json()["items"] == []
        assert len((await a_api.get("/api/dlq")).json()["items"]) == 1
        a_agents = {x["agent_id"] for x in (await a_api.get("/api/agents")).json()["items"]}
        b_agents = {x["agent_id"] for x in (await b_api.get("/api/agents")).json()["items"]}
        assert a_agents == {shared_id, a2.agent_id} and b_agents == {shared_id}
        b_channel = (
            await b_api.get("/api/channels/roadmap/messages", params={"from_beginning": True})
        ).json()
        assert [m["message"]["body"] for m in b_channel["items"]] == ["B: our own plan"]
        a_stats = (await a_api.get("/api/stats")).json()
        b_stats = (await b_api.get("/api/stats")).json()
        assert a_stats["work"]["total"] == 3 and b_stats["work"]["total"] == 2
        assert a_stats["dead_letters"] == 1 and b_stats["dead_letters"] == 0

    # Shuttle in project B cannot see or touch A's items.
    shown = await b.shuttle("work", "show", a_items[0])
    assert shown.exit_code == 1, (shown.stdout, shown.stderr)
    retried = await b.shuttle("dlq", "retry", a_claimed[0])
    assert retried.exit_code == 1
    projects = await a.shuttle_json("projects")
    listed = str(projects)
    assert a.project_id in listed and b.project_id in listed
