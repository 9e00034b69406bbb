"""Warp's context tools, threads and work hand-offs, through the SDK's in-memory client
(several agents of one project in one process, real nats-server)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import Client
from warp_harness import make_identity, ok, text

from shared.nats.server import EmbeddedNatsServer
from warp.runtime import WarpRuntime
from warp.server import build_server
from warp.settings import WarpSettings

A = "a" * 32
B = "b" * 32
C = "c" * 32


@asynccontextmanager
async def agents(url: str, project_id: str, root: Path, *ids: str) -> AsyncIterator[list[Client]]:
    async with AsyncExitStack() as stack:
        clients = []
        for agent in ids:
            folder = root / agent[:4]
            folder.mkdir(exist_ok=True)
            settings = WarpSettings(capabilities=("code",), heartbeat_s=5.0)
            rt = WarpRuntime(make_identity(project_id, folder, agent), settings, nats_url=url)
            client = await stack.enter_async_context(Client(build_server(rt)))
            await rt.services()
            clients.append(client)
        yield clients


async def err(client: Client, tool: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    res = await client.call_tool(tool, args)
    assert res.is_error, text(res)
    meta = res.meta or {}
    return text(res), dict(meta.get("loom/error") or {})


async def test_tree_operations(nats_server: EmbeddedNatsServer, project_id: str, tmp_path: Path) -> None:
    async with agents(nats_server.url, project_id, tmp_path, A, B) as (a, b):
        tree = await ok(
            a,
            "warp_context_create",
            {"title": "parser plan", "text": "rewrite the parser", "metadata": {"ticket": "PAR-7"}},
        )
        tid, root = tree["tree_id"], tree["root"]["id"]
        assert tree["root"]["meta"] == {"ticket": "PAR-7"}  # kept (it was dropped), as docs/warp.md says
        one = (await ok(a, "warp_context_append", {"tree_id": tid, "parent_id": root, "text": "try regex"}))[
            "node"
        ]
        alt = await ok(
            b,
            "warp_context_append",
            {"tree_id": tid, "parent_id": root, "text": "try a PEG", "kind": "idea", "role": "agent"},
        )
        deep = await ok(
            b, "warp_context_append", {"tree_id": tid, "parent_id": one["id"], "text": "regex fails"}
        )
        path = await ok(b, "warp_context_path", {"tree_id": tid, "node_id": deep["node"]["id"]})
        assert [n["text"] for n in path["nodes"]] == ["rewrite the parser", "try regex", "regex fails"]
        assert path["nodes"][0]["meta"] == {"ticket": "PAR-7"}  # read back by another agent
        shape = await ok(b, "warp_context_structure", {"tree_id": tid})
        assert [(n["id"], n["depth"], n["children"]) for n in shape["nodes"]] == [
            (root, 0, 2),
            (one["id"], 1, 1),
            (deep["node"]["id"], 2, 0),
            (alt["node"]["id"], 1, 0),
        ]
        assert "text" not in shape["nodes"][0]  # structure without content
        updated = await ok(
            a, "warp_context_update", {"tree_id": tid, "node_id": one["id"], "text": "regex, v2"}
        )
        assert updated["node"]["supersedes"] == one["id"]
        path = await ok(b, "warp_context_path", {"tree_id": tid, "node_id": deep["node"]["id"]})
        assert path["nodes"][1]["text"] == "regex, v2"
        await ok(a, "warp_context_tombstone", {"tree_id": tid, "node_id": one["id"], "reason": "dead end"})
        shape = await ok(b, "warp_context_structure", {"tree_id": tid})
        assert [n["id"] for n in shape["nodes"]] == [root, alt["node"]["id"]]
        _, envelope = await err(b, "warp_context_path", {"tree_id": tid, "node_id": deep["node"]["id"]})
        assert envelope["error"] == "not_found" and envelope["details"]["field"] == "node_id"
        resolved = await ok(
            b, "warp_context_resolve", {"tree_id": tid, "node_ids": [root, alt["node"]["id"]]}
        )
        assert [i["content"] for i in resolved["items"]] == ["rewrite the parser", "try a PEG"]
        changes = await ok(b, "warp_context_changes", {"tree_id": tid})
        assert len(changes["changes"]) == 6
        again = await ok(b, "warp_context_changes", {"tree_id": tid, "cursor": changes["next_cursor"]})
        assert again["changes"] == []


async def test_refusals_name_the_field(
    nats_server: EmbeddedNatsServer, project_id: str, tmp_path: Path
) -> None:
    async with agents(nats_server.url, project_id, tmp_path, A) as (a,):
        message, envelope = await err(
            a, "warp_context_append", {"tree_id": "d" * 32, "parent_id": A, "text": "x"}
        )
        assert envelope["error"] == "not_found" and envelope["details"]["field"] == "tree_id"
        tid = (await ok(a, "warp_context_create", {"title": "t", "text": "r"}))["tree_id"]
        _, envelope = await err(a, "warp_context_append", {"tree_id": tid, "parent_id": B, "text": "x"})
        assert envelope["details"]["field"] == "parent_id"
        _, envelope = await err(a, "warp_context_append", {"tree_id": tid, "parent_id": B})
        assert envelope["error"] == "invalid" and envelope["details"]["field"] == "text"
        secret = "ghp_" + "Q" * 36
        message, envelope = await err(
            a,
            "warp_context_append",
            {"tree_id": tid, "parent_id": B, "handle": {"source": "git", "id": "a.py", "version": secret}},
        )
        assert secret not in message and envelope["error"] == "validation_error"
        _, envelope = await err(a, "warp_context_create", {"title": "t"})
        assert envelope["details"]["field"] == "text"
        _, envelope = await err(a, "warp_context_changes", {"cursor": "nope!"})
        assert envelope["error"] == "invalid_cursor"


async def test_channel_thread_across_three_agents(
    nats_server: EmbeddedNatsServer, project_id: str, tmp_path: Path
) -> None:
    async with agents(nats_server.url, project_id, tmp_path, A, B, C) as (a, b, c):
        root = await ok(
            a, "warp_channels_send", {"channel": "roadmap", "message": "Should we split the parser?"}
        )
        plain = await ok(b, "warp_channels_send", {"channel": "roadmap", "message": "unrelated"})
        assert plain["thread_id"] is None and plain["reply_to"] is None
        r1 = await ok(
            b, "warp_channels_send", {"channel": "roadmap", "message": "yes", "reply_to": root["seq"]}
        )
        r2 = await ok(
            c, "warp_channels_send", {"channel": "roadmap", "message": "why?", "reply_to": r1["seq"]}
        )
        r3 = await ok(
            a, "warp_channels_send", {"channel": "roadmap", "message": "+1 to split", "reply_to": root["seq"]}
        )
        assert r1["thread_id"] == r2["thread_id"] == r3["thread_id"] is not None
        thread = await ok(c, "warp_channels_thread", {"channel": "roadmap", "seq": r2["seq"]})
        assert [(n["depth"], n["node"]["text"]) for n in thread["nodes"]] == [
            (0, "Should we split the parser?"),
            (1, "yes"),
            (2, "why?"),
            (1, "+1 to split"),
        ]
        assert [n["node"]["author"] for n in thread["nodes"]] == [A, B, C, A]
        first = await ok(a, "warp_channels_thread", {"channel": "roadmap", "seq": root["seq"], "limit": 2})
        rest = await ok(
            a,
            "warp_channels_thread",
            {"channel": "roadmap", "seq": root["seq"], "cursor": first["next_cursor"]},
        )
        assert [n["node"]["text"] for n in first["nodes"] + rest["nodes"]] == [
            n["node"]["text"] for n in thread["nodes"]
        ]
        listing = await ok(b, "warp_channels_threads", {"channel": "roadmap"})
        assert [(t["root_seq"], t["replies"]) for t in listing["threads"]] == [(root["seq"], 3)]
        read = await ok(b, "warp_channels_read", {"channel": "roadmap", "from_beginning": True})
        assert [m["reply_to"] for m in read["messages"]] == [None, None, root["seq"], r1["seq"], root["seq"]]
        _, envelope = await err(
            a, "warp_channels_send", {"channel": "roadmap", "message": "x", "reply_to": 999}
        )
        assert envelope["error"] == "not_found" and envelope["details"]["field"] == "reply_to"
        _, envelope = await err(a, "warp_channels_thread", {"channel": "roadmap", "seq": plain["seq"]})
        assert envelope["details"]["field"] == "seq"


async def test_direct_message_thread_is_for_its_participants(
    nats_server: EmbeddedNatsServer, project_id: str, tmp_path: Path
) -> None:
    async with agents(nats_server.url, project_id, tmp_path, A, B, C) as (a, b, c):
        first = await ok(
            a, "warp_messages_send_direct", {"recipient_id": B, "message": "can you review PR 4?"}
        )
        got = await ok(b, "warp_messages_read_direct")
        assert got["messages"][0]["id"] == first["message_id"]
        reply = await ok(
            b,
            "warp_messages_send_direct",
            {"recipient_id": A, "message": "yes, after lunch", "reply_to": first["message_id"]},
        )
        tid = reply["thread_id"]
        answer = (await ok(a, "warp_messages_read_direct"))["messages"][0]
        assert answer["thread_id"] == tid and answer["reply_to"] == first["message_id"]
        back = await ok(
            a, "warp_messages_send_direct", {"recipient_id": B, "message": "thanks", "reply_to": answer["id"]}
        )
        assert back["thread_id"] == tid
        thread = await ok(a, "warp_messages_thread", {"thread_id": tid})
        assert [(n["depth"], n["node"]["text"]) for n in thread["nodes"]] == [
            (0, "can you review PR 4?"),
            (1, "yes, after lunch"),
            (2, "thanks"),
        ]
        assert (await ok(b, "warp_messages_thread", {"thread_id": first["message_id"]}))["tree_id"] == tid
        _, envelope = await err(c, "warp_messages_thread", {"thread_id": tid})
        assert envelope["error"] == "not_found"
        _, envelope = await err(
            c, "warp_context_path", {"tree_id": tid, "node_id": thread["nodes"][0]["node"]["id"]}
        )
        assert envelope["error"] == "not_found" and envelope["details"]["field"] == "tree_id"
        _, envelope = await err(
            b, "warp_messages_send_direct", {"recipient_id": C, "message": "psst", "reply_to": answer["id"]}
        )
        assert envelope["details"]["field"] == "recipient_id"


async def test_claim_carries_the_context_of_earlier_attempts(
    nats_server: EmbeddedNatsServer, project_id: str, tmp_path: Path
) -> None:
    async with agents(nats_server.url, project_id, tmp_path, A, B) as (a, b):
        for client in (a, b):
            await ok(client, "warp_registry_register", {"capabilities": ["code"]})
        item = (await ok(a, "warp_work_broadcast", {"description": "fix the lexer", "capability": "code"}))[
            "item"
        ]
        first = await ok(a, "warp_work_claim")
        assert [n["kind"] for n in first["context"]["nodes"]] == ["submission"]
        node = first["context"]["attempt_node"]
        await ok(a, "warp_work_progress", {"work_id": item["id"], "percent": 30, "note": "tokens done"})
        await ok(
            a, "warp_context_append", {"tree_id": item["id"], "parent_id": node, "text": "avoid the regex"}
        )
        await ok(a, "warp_work_fail", {"work_id": item["id"], "error": "segfault in the old lexer"})
        second = await ok(b, "warp_work_claim")
        handed = second["context"]
        assert handed["attempt_node"] != node and second["item"]["attempts"] == 2
        texts = [n["text"] for n in handed["nodes"]]
        assert texts[:3] == ["segfault in the old lexer", "avoid the regex", "tokens done"]
        page = await ok(b, "warp_work_context", {"work_id": item["id"], "limit": 2})
        assert len(page["nodes"]) == 2 and page["next_cursor"]
        more = await ok(b, "warp_work_context", {"work_id": item["id"], "cursor": page["next_cursor"]})
        assert more["nodes"][-1]["kind"] == "submission"
