"""Every Warp tool through a real MCP session with a spawned ``warp`` process."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from nats.aio.client import Client as NatsClient
from warp_harness import WARP, spawn_warp, stdout_frames_only

from shared.names import ProjectNames
from shared.work.rules import Claimant
from testsupport.work import work_queue

TOOLS = {
    "warp_handle_set",
    "warp_handle_get",
    "warp_channels_list",
    "warp_channels_send",
    "warp_channels_read",
    "warp_channels_status",
    "warp_registry_register",
    "warp_registry_discover",
    "warp_registry_get_info",
    "warp_registry_update_presence",
    "warp_registry_deregister",
    "warp_messages_send_direct",
    "warp_messages_read_direct",
    "warp_work_broadcast",
    "warp_work_claim",
    "warp_work_list",
    "warp_work_queue_status",
    "warp_work_progress",
    "warp_work_complete",
    "warp_work_fail",
    "warp_work_review",
    "warp_question_ask",
    "warp_question_get",
    "warp_question_list",
    "warp_lease_acquire",
    "warp_lease_renew",
    "warp_lease_release",
    "warp_lease_list",
    "warp_dlq_list",
    "warp_dlq_retry",
    "warp_dlq_discard",
    "warp_work_context",
    "warp_channels_thread",
    "warp_channels_threads",
    "warp_messages_thread",
    "warp_context_create",
    "warp_context_append",
    "warp_context_update",
    "warp_context_tombstone",
    "warp_context_path",
    "warp_context_structure",
    "warp_context_resolve",
    "warp_context_changes",
    "warp_context_list",
    "warp_context_read",
    "warp_context_node",
    "warp_context_leaves",
    "warp_context_handles",
    "warp_context_tree_update",
    "warp_context_tree_delete",
    "warp_context_tree_restore",
}


def names_field(text: str, field: str) -> bool:
    """A tool error names the field: ``<field>: ...`` or pydantic's ``\\n<field>\\n  rule``."""
    return re.search(rf"(?:^|\n|: ){re.escape(field)}(?:\n|:|\.\d)", text) is not None


async def test_tools_list_through_the_sdk_stdio_client(warp_env: dict[str, str]) -> None:
    params = StdioServerParameters(command=WARP, env=warp_env, cwd=warp_env["LOOM_PROJECT_PATH"])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        assert init.server_info.name == "warp"
        listed = await session.list_tools()
    by_name = {t.name: t for t in listed.tools}
    assert set(by_name) == TOOLS
    for tool in listed.tools:
        schema = tool.input_schema
        assert schema["type"] == "object" and schema["additionalProperties"] is False, tool.name
        assert tool.description and tool.output_schema is not None, tool.name
    send = by_name["warp_channels_send"].input_schema
    assert send["required"] == ["channel", "message"]
    assert send["properties"]["channel"]["pattern"] == "^[a-z0-9][a-z0-9_-]{0,63}$"
    read = by_name["warp_channels_read"].input_schema["properties"]["limit"]
    assert (read["minimum"], read["maximum"]) == (1, 200)


async def test_each_tool_good_and_bad_input(warp_env: dict[str, str], tmp_path: Path, nc: NatsClient) -> None:
    env = {**warp_env, "LOOM_HANDLE": "tester", "LOOM_CAPABILITIES": "code"}
    async with spawn_warp(env, tmp_path) as w:
        calls: list[tuple[str, dict[str, Any], dict[str, Any], str]] = []

        async def check(tool: str, good: dict[str, Any], bad: dict[str, Any], field: str) -> dict[str, Any]:
            out = await w.ready_ok(tool, good)
            text = await w.err(tool, bad)
            assert names_field(text, field), f"{tool}: error does not name {field!r}: {text}"
            calls.append((tool, good, bad, field))
            return out

        me = await check("warp_handle_get", {}, {"x": 1}, "x")
        assert me["project_id"] == warp_env["LOOM_PROJECT_ID"] and me["handle"] == "tester"
        assert (await check("warp_handle_set", {"handle": "tester-2"}, {"handle": "Bad Handle"}, "handle"))[
            "handle"
        ] == "tester-2"
        listing = await check("warp_channels_list", {}, {"channel": "roadmap"}, "channel")
        assert {c["name"] for c in listing["channels"]} == {"roadmap", "parallel-work", "errors"}
        await check("warp_channels_status", {"channel": "roadmap"}, {"channel": "nope"}, "channel")
        sent = await check(
            "warp_channels_send",
            {"channel": "roadmap", "message": "plan"},
            {"channel": "roadmap", "message": ""},
            "message",
        )
        read = await check(
            "warp_channels_read", {"channel": "roadmap"}, {"channel": "roadmap", "limit": 0}, "limit"
        )
        assert [m["seq"] for m in read["messages"]] == [sent["seq"]]
        reg = await check(
            "warp_registry_register",
            {"capabilities": ["code"]},
            {"capabilities": ["Not Valid"]},
            "capabilities",
        )
        agent_id = reg["agent_id"]
        assert reg["handle"] == "tester-2" and reg["status"] == "online"
        found = await check("warp_registry_discover", {"capability": "code"}, {"status": "asleep"}, "status")
        assert [a["agent_id"] for a in found["agents"]] == [agent_id]
        await check("warp_registry_get_info", {}, {"agent_id": "xyz"}, "agent_id")
        busy = await check(
            "warp_registry_update_presence", {"status": "busy", "note": "n"}, {"status": "offline"}, "status"
        )
        assert busy["status"] == "busy"
        await check(
            "warp_messages_send_direct",
            {"recipient_id": agent_id, "message": "note to self"},
            {"recipient_id": "ABC", "message": "x"},
            "recipient_id",
        )
        inbox = await check("warp_messages_read_direct", {}, {"cursor": "!!!"}, "cursor")
        assert [m["body"] for m in inbox["messages"]] == ["note to self"]
        queued = await check(
            "warp_work_broadcast",
            {"description": "write tests", "capability": "code", "priority": 8},
            {"description": "d", "capability": "code", "priority": 11},
            "priority",
        )
        work_id = queued["item"]["id"]
        claim = await check("warp_work_claim", {}, {"capability": "review"}, "capability")
        assert claim["claimed"] and claim["item"]["id"] == work_id
        listed = await check("warp_work_list", {"mine": True}, {"status": "nope"}, "status")
        assert [i["id"] for i in listed["items"]] == [work_id]
        status = await check("warp_work_queue_status", {}, {"verbose": True}, "verbose")
        assert status["held_by_me"] == [work_id] and status["depths"] == {"code": 1}
        await check(
            "warp_work_progress",
            {"work_id": work_id, "percent": 10},
            {"work_id": work_id, "percent": 101},
            "percent",
        )
        done = await check(
            "warp_work_complete",
            {"work_id": work_id, "result": {"ok": True}},
            {"work_id": "0" * 32},
            "work_id",
        )
        assert done["item"]["status"] == "completed" and done["item"]["result"] == {"ok": True}
        reviewed = (
            await w.ok(
                "warp_work_broadcast",
                {"description": "r", "capability": "code", "review": {"capability": "code"}},
            )
        )["item"]["id"]
        other = Claimant(agent_id="e" * 32, agent_type="generic", capabilities=("code",))
        queue = work_queue(nc, ProjectNames(warp_env["LOOM_PROJECT_ID"]))
        assert (await queue.claim(other)) is not None
        await queue.complete(reviewed, other.agent_id, "by someone else")
        assert (await w.ok("warp_work_claim"))["review"] is True
        approved = await check(
            "warp_work_review",
            {"work_id": reviewed, "verdict": "approve", "score": 90},
            {"work_id": reviewed, "verdict": "maybe"},
            "verdict",
        )
        assert approved["item"]["status"] == "completed" and approved["item"]["reviews"][0]["score"] == 90
        asked = await check(
            "warp_question_ask", {"question": "lunch?"}, {"question": "x", "choices": ["a", "a"]}, "choices"
        )
        question_id = asked["question"]["id"]
        got = await check(
            "warp_question_get", {"question_id": question_id}, {"question_id": "nothex"}, "question_id"
        )
        assert got["question"]["status"] == "open"
        mine = await check("warp_question_list", {}, {"status": "maybe"}, "status")
        assert [q["id"] for q in mine["items"]] == [question_id]
        leased = await check(
            "warp_lease_acquire",
            {"patterns": ["src/api/**"], "reason": "refactor"},
            {"patterns": ["../outside"]},
            "patterns",
        )
        lease_id = leased["lease"]["id"]
        assert leased["lease"]["token"] > 0 and leased["lease"]["holder"] == agent_id
        renewed = await check(
            "warp_lease_renew",
            {"lease_id": lease_id, "ttl_s": 60},
            {"lease_id": lease_id, "ttl_s": 1},
            "ttl_s",
        )
        assert renewed["lease"]["token"] == leased["lease"]["token"]
        clear = await check("warp_lease_list", {"paths": ["src/api/a.py"]}, {"scope": "theirs"}, "scope")
        assert clear["conflicts"] == [], "one's own lease is not in one's way"
        assert [lease["id"] for lease in (await w.ok("warp_lease_list"))["items"]] == [lease_id]
        released = await check(
            "warp_lease_release", {"lease_id": lease_id}, {"lease_id": "nothex"}, "lease_id"
        )
        assert [lease["id"] for lease in released["released"]] == [lease_id]
        second = (await w.ok("warp_work_broadcast", {"description": "flaky", "capability": "code"}))["item"][
            "id"
        ]
        assert (await w.ok("warp_work_claim"))["item"]["id"] == second
        failed = await check(
            "warp_work_fail",
            {"work_id": second, "error": "broken", "retryable": False},
            {"work_id": second, "error": ""},
            "error",
        )
        assert failed["item"]["status"] == "dead-lettered"
        letters = await check("warp_dlq_list", {}, {"limit": 0}, "limit")
        assert [d["item"]["id"] for d in letters["items"]] == [second]
        retried = await check("warp_dlq_retry", {"work_id": second}, {"work_id": "nothex"}, "work_id")
        assert retried["item"]["status"] == "queued"
        assert (await w.ok("warp_work_claim"))["item"]["id"] == second
        await w.ok("warp_work_fail", {"work_id": second, "error": "still broken", "retryable": False})
        discarded = await check("warp_dlq_discard", {"work_id": second}, {"work_id": "f" * 32}, "work_id")
        assert discarded["item"]["id"] == second
        assert (await w.ok("warp_dlq_list"))["items"] == []
        handed = await check(
            "warp_work_context", {"work_id": second}, {"work_id": second, "limit": 0}, "limit"
        )
        assert handed["nodes"][-1]["kind"] == "submission"
        reply = await check(
            "warp_channels_send",
            {"channel": "roadmap", "message": "re", "reply_to": sent["seq"]},
            {"channel": "roadmap", "message": "re", "reply_to": 0},
            "reply_to",
        )
        thread = await check(
            "warp_channels_thread", {"channel": "roadmap", "seq": reply["seq"]}, {"channel": "roadmap"}, "seq"
        )
        assert [n["depth"] for n in thread["nodes"]] == [0, 1]
        threads = await check(
            "warp_channels_threads", {"channel": "roadmap"}, {"channel": "Road map"}, "channel"
        )
        assert threads["threads"][0]["replies"] == 1
        dm = await w.ok("warp_messages_send_direct", {"recipient_id": agent_id, "message": "q"})
        answer = await w.ok(
            "warp_messages_send_direct",
            {"recipient_id": agent_id, "message": "a", "reply_to": dm["message_id"]},
        )
        await check(
            "warp_messages_thread", {"thread_id": answer["thread_id"]}, {"thread_id": "zz"}, "thread_id"
        )
        tree = await check("warp_context_create", {"title": "t", "text": "root"}, {"title": ""}, "title")
        tid, root = tree["tree_id"], tree["root"]["id"]
        node = (
            await check(
                "warp_context_append",
                {"tree_id": tid, "parent_id": root, "text": "n"},
                {"tree_id": tid, "parent_id": root, "text": "n", "kind": "Bad Kind"},
                "kind",
            )
        )["node"]
        await check(
            "warp_context_update",
            {"tree_id": tid, "node_id": node["id"], "text": "n2"},
            {"tree_id": tid, "node_id": "x"},
            "node_id",
        )
        await check("warp_context_path", {"tree_id": tid, "node_id": node["id"]}, {"tree_id": tid}, "node_id")
        await check("warp_context_structure", {"tree_id": tid}, {"tree_id": tid, "limit": 0}, "limit")
        await check(
            "warp_context_resolve",
            {"tree_id": tid, "node_ids": [root]},
            {"tree_id": tid, "node_ids": []},
            "node_ids",
        )
        await check("warp_context_changes", {"tree_id": tid}, {"limit": 501}, "limit")
        await check("warp_context_list", {}, {"limit": 0}, "limit")
        await check("warp_context_read", {"tree_id": tid}, {"tree_id": tid, "limit": 0}, "limit")
        node_ref = {"tree_id": tid, "node_id": node["id"]}
        await check("warp_context_node", node_ref, {"tree_id": tid, "node_id": "x"}, "node_id")
        await check("warp_context_leaves", {"tree_id": tid}, {"tree_id": tid, "limit": 0}, "limit")
        await check("warp_context_handles", node_ref, {"tree_id": tid}, "node_id")
        await check(
            "warp_context_tree_update",
            {"tree_id": tid, "title": "t2"},
            {"tree_id": tid, "title": ""},
            "title",
        )
        await check("warp_context_tree_delete", {"tree_id": tid}, {"tree_id": "x"}, "tree_id")
        await check("warp_context_tree_restore", {"tree_id": tid}, {"tree_id": "x"}, "tree_id")
        await check(
            "warp_context_tombstone", {"tree_id": tid, "node_id": node["id"]}, {"tree_id": "t"}, "tree_id"
        )
        gone = await check("warp_registry_deregister", {}, {"now": True}, "now")
        assert gone["was_registered"] is True
        assert {c[0] for c in calls} == TOOLS
        claim_text = await w.err("warp_work_claim")
        assert "registration: register first" in claim_text
    stdout_frames_only(w.stdout_lines)
