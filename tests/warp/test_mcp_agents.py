"""Two (and more) Warp processes talking through NATS, over real MCP stdio sessions."""

from __future__ import annotations

from pathlib import Path

from warp_harness import spawn_warp, stdout_frames_only


def agent_env(base: dict[str, str], handle: str, agent_id: str, **extra: str) -> dict[str, str]:
    return {**base, "LOOM_HANDLE": handle, "LOOM_AGENT_ID": agent_id, **extra}


A_ID = "a" * 32
B_ID = "b" * 32


async def test_two_agents_channel_and_direct_messages(warp_env: dict[str, str], tmp_path: Path) -> None:
    env_a = agent_env(warp_env, "alice", A_ID, LOOM_CAPABILITIES="code")
    env_b = agent_env(warp_env, "bob", B_ID, LOOM_CAPABILITIES="review")
    async with spawn_warp(env_a, tmp_path, name="a") as a:
        async with spawn_warp(env_b, tmp_path, name="b") as b:
            await a.ready_ok("warp_registry_register")
            await b.ready_ok("warp_registry_register")
            # channel: A posts, B sees it
            before = await b.ok("warp_channels_read", {"channel": "parallel-work"})
            await a.ok("warp_channels_send", {"channel": "parallel-work", "message": "I take the parser"})
            after = await b.ok(
                "warp_channels_read", {"channel": "parallel-work", "cursor": before["next_cursor"]}
            )
            assert [(m["sender_handle"], m["body"]) for m in after["messages"]] == [
                ("alice", "I take the parser")
            ]
            # DM: A finds B through discover and writes to the id it shows
            found = await a.ok("warp_registry_discover", {"handle": "bob"})
            assert [x["agent_id"] for x in found["agents"]] == [B_ID]
            for body in ("review my PR", "and the docs", "when you can"):
                sent = await a.ok("warp_messages_send_direct", {"recipient_id": B_ID, "message": body})
                assert sent["recipient_status"] == "online"
            first = await b.ok("warp_messages_read_direct", {"limit": 1})
            assert [(m["sender_id"], m["body"]) for m in first["messages"]] == [(A_ID, "review my PR")]
            assert first["has_more"] is True
            again = await b.ok("warp_messages_read_direct", {"limit": 1, "cursor": first["next_cursor"]})
            assert [m["body"] for m in again["messages"]] == ["and the docs"]
        stdout_frames_only(b.stdout_lines)
        # B is gone (marked offline); a message to it still lands
        sent = await a.ok("warp_messages_send_direct", {"recipient_id": B_ID, "message": "sent while away"})
        assert sent["recipient_status"] == "offline"
        # B restarts: what it did not read is still there, and only that
        async with spawn_warp(env_b, tmp_path, name="b") as b2:
            rest = await b2.ready_ok("warp_messages_read_direct")
            assert [m["body"] for m in rest["messages"]] == ["when you can", "sent while away"]
            assert (await b2.ok("warp_messages_read_direct"))["messages"] == []
    stdout_frames_only(a.stdout_lines)


async def test_second_warp_in_the_same_folder_gets_its_own_identity(
    warp_env: dict[str, str], tmp_path: Path
) -> None:
    env = {**warp_env, "LOOM_CAPABILITIES": "code"}  # no LOOM_AGENT_ID: derived from host + folder
    async with spawn_warp(env, tmp_path, name="one") as one, spawn_warp(env, tmp_path, name="two") as two:
        me1 = await one.ready_ok("warp_registry_register")
        me2 = await two.ready_ok("warp_registry_register")
        assert me1["agent_id"] != me2["agent_id"]
        assert sorted([me1["instance"], me2["instance"]]) == [0, 1]
        found = await one.ok("warp_registry_discover")
        assert {a["agent_id"] for a in found["agents"]} == {me1["agent_id"], me2["agent_id"]}
        await one.ok("warp_messages_send_direct", {"recipient_id": me2["agent_id"], "message": "for two"})
        assert (await one.ok("warp_messages_read_direct"))["messages"] == []
        assert [m["body"] for m in (await two.ok("warp_messages_read_direct"))["messages"]] == ["for two"]


async def test_projects_are_isolated(warp_env: dict[str, str], tmp_path: Path) -> None:
    p1 = {**warp_env, "LOOM_CAPABILITIES": "code", "LOOM_AGENT_ID": A_ID}
    p2 = {**warp_env, "LOOM_PROJECT_ID": warp_env["LOOM_PROJECT_ID"] + "-p2", "LOOM_AGENT_ID": B_ID}
    p2["LOOM_CAPABILITIES"] = "code"
    async with spawn_warp(p1, tmp_path, name="p1") as one, spawn_warp(p2, tmp_path, name="p2") as two:
        await one.ready_ok("warp_registry_register")
        await two.ready_ok("warp_registry_register")
        await one.ok("warp_channels_send", {"channel": "roadmap", "message": "P1 secret"})
        await one.ok("warp_messages_send_direct", {"recipient_id": B_ID, "message": "to B in P1"})
        item = (await one.ok("warp_work_broadcast", {"description": "P1 work", "capability": "code"}))["item"]
        doomed = (await one.ok("warp_work_broadcast", {"description": "P1 doomed", "capability": "code"}))[
            "item"
        ]
        assert (await one.ok("warp_work_claim"))["item"]["id"] == item["id"]
        await one.ok("warp_work_complete", {"work_id": item["id"]})
        assert (await one.ok("warp_work_claim"))["item"]["id"] == doomed["id"]
        await one.ok("warp_work_fail", {"work_id": doomed["id"], "error": "no", "retryable": False})

        read = await two.ok("warp_channels_read", {"channel": "roadmap", "from_beginning": True})
        assert read["messages"] == []
        assert all(c["messages"] == 0 for c in (await two.ok("warp_channels_list"))["channels"])
        agents = await two.ok("warp_registry_discover")
        assert [a["agent_id"] for a in agents["agents"]] == [B_ID]
        assert "no agent" in await two.err("warp_registry_get_info", {"agent_id": A_ID})
        assert (await two.ok("warp_messages_read_direct"))["messages"] == []
        assert (await two.ok("warp_work_list"))["items"] == []
        assert (await two.ok("warp_work_claim"))["claimed"] is False
        assert (await two.ok("warp_work_queue_status"))["dead_letters"] == 0
        assert (await two.ok("warp_dlq_list"))["items"] == []
        assert "work_id" in await two.err("warp_dlq_retry", {"work_id": doomed["id"]})
