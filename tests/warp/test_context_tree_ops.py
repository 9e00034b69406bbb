"""Warp's context-tree operations beyond append and path: list and read trees, read one
node with its versions, leaves, handles along a path, as-of reads, a tree's metadata,
staged deletion, and the per-agent creation rate (real nats-server, in-memory MCP)."""

from __future__ import annotations

from pathlib import Path

from test_contexts_tools import A, B, C, agents, err
from warp_harness import ok

from shared.nats.server import EmbeddedNatsServer


async def test_agents_list_and_read_trees_as_of_any_point(
    nats_server: EmbeddedNatsServer, project_id: str, tmp_path: Path
) -> None:
    async with agents(nats_server.url, project_id, tmp_path, A, B) as (a, b):
        tree = await ok(a, "warp_context_create", {"title": "parser plan", "text": "rewrite the parser"})
        tid, root = tree["tree_id"], tree["root"]["id"]
        one = (await ok(a, "warp_context_append", {"tree_id": tid, "parent_id": root, "text": "regex"}))[
            "node"
        ]
        two = (await ok(b, "warp_context_append", {"tree_id": tid, "parent_id": one["id"], "text": "fails"}))[
            "node"
        ]
        before = (await ok(b, "warp_context_node", {"tree_id": tid, "node_id": two["id"]}))["versions"][-1][
            "seq"
        ]
        await ok(a, "warp_context_update", {"tree_id": tid, "node_id": one["id"], "text": "regex, v2"})
        private = (
            await ok(
                a,
                "warp_context_append",
                {"tree_id": tid, "parent_id": root, "text": "my notes", "scope": "private"},
            )
        )["node"]
        # b lists the tree and reads it in order, a's private note withheld
        listing = await ok(b, "warp_context_list", {})
        assert [t["tree_id"] for t in listing["trees"]] == [tid]
        read = await ok(b, "warp_context_read", {"tree_id": tid})
        assert [(n["depth"], n["node"]["text"]) for n in read["nodes"]] == [
            (0, "rewrite the parser"),
            (1, "regex, v2"),
            (2, "fails"),
            (1, None),
        ]
        assert read["withheld"] == 1
        # as it stood before the update and the private note
        past = await ok(b, "warp_context_read", {"tree_id": tid, "as_of_seq": before})
        assert [n["node"]["text"] for n in past["nodes"]] == ["rewrite the parser", "regex", "fails"]
        path = await ok(b, "warp_context_path", {"tree_id": tid, "node_id": two["id"], "as_of_seq": before})
        assert path["nodes"][1]["text"] == "regex"
        shape = await ok(b, "warp_context_structure", {"tree_id": tid, "as_of_seq": before})
        assert [n["updated"] for n in shape["nodes"]] == [False, False, False]
        # one node, directly: both versions, its child
        node = await ok(b, "warp_context_node", {"tree_id": tid, "node_id": one["id"]})
        assert node["node"]["text"] == "regex, v2" and len(node["versions"]) == 2
        assert node["children"] == [two["id"]] and node["parent_id"] == root and not node["withheld"]
        then = await ok(b, "warp_context_node", {"tree_id": tid, "node_id": one["id"], "as_of_seq": before})
        assert then["node"]["text"] == "regex" and len(then["versions"]) == 1
        hidden = await ok(b, "warp_context_node", {"tree_id": tid, "node_id": private["id"]})
        assert hidden["withheld"] and hidden["node"]["text"] is None
        _, envelope = await err(
            b, "warp_context_node", {"tree_id": tid, "node_id": private["id"], "as_of_seq": before}
        )
        assert envelope["error"] == "not_found" and envelope["details"]["field"] == "node_id"
        # leaves and handles
        leaves = await ok(b, "warp_context_leaves", {"tree_id": tid})
        assert [n["id"] for n in leaves["nodes"]] == [two["id"], private["id"]] and not leaves["more"]
        handles = await ok(b, "warp_context_handles", {"tree_id": tid, "node_id": two["id"]})
        assert [h["node_id"] for h in handles["handles"]] == [root, node["node"]["id"], two["id"]]
        assert all(h["handle"]["source"] == "inline" for h in handles["handles"])
        assert "text" not in handles["handles"][0]
        # refusals
        _, envelope = await err(
            b, "warp_context_read", {"tree_id": tid, "as_of_seq": 1, "as_of": "2026-01-01T00:00:00Z"}
        )
        assert envelope["details"]["field"] == "as_of"
        _, envelope = await err(
            b, "warp_context_path", {"tree_id": tid, "node_id": root, "as_of": "2000-01-01T00:00:00Z"}
        )
        assert envelope["error"] == "not_found" and envelope["details"]["field"] == "as_of"
        _, envelope = await err(b, "warp_context_list", {"cursor": "nope!"})
        assert envelope["error"] == "invalid_cursor"


async def test_only_participants_list_a_direct_message_thread(
    nats_server: EmbeddedNatsServer, project_id: str, tmp_path: Path
) -> None:
    async with agents(nats_server.url, project_id, tmp_path, A, B, C) as (a, b, c):
        first = await ok(a, "warp_messages_send_direct", {"recipient_id": B, "message": "review?"})
        await ok(b, "warp_messages_read_direct")
        reply = await ok(
            b,
            "warp_messages_send_direct",
            {"recipient_id": A, "message": "yes", "reply_to": first["message_id"]},
        )
        listed_a = await ok(a, "warp_context_list", {"kind": "dm-thread"})
        assert [t["tree_id"] for t in listed_a["trees"]] == [reply["thread_id"]]
        assert (await ok(c, "warp_context_list", {}))["trees"] == []
        _, envelope = await err(c, "warp_context_read", {"tree_id": reply["thread_id"]})
        assert envelope["error"] == "not_found"


async def test_a_tree_is_changed_and_deleted_by_its_creator_only(
    nats_server: EmbeddedNatsServer, project_id: str, tmp_path: Path
) -> None:
    async with agents(nats_server.url, project_id, tmp_path, A, B) as (a, b):
        tid = (await ok(a, "warp_context_create", {"title": "plan", "text": "r"}))["tree_id"]
        changed = await ok(
            a,
            "warp_context_tree_update",
            {"tree_id": tid, "title": "parser plan", "description": "the PEG try"},
        )
        assert (changed["meta"]["title"], changed["meta"]["description"]) == ("parser plan", "the PEG try")
        assert (await ok(b, "warp_context_list", {}))["trees"][0]["title"] == "parser plan"
        _, envelope = await err(b, "warp_context_tree_update", {"tree_id": tid, "title": "mine now"})
        assert envelope["error"] == "forbidden" and envelope["details"]["field"] == "tree_id"
        _, envelope = await err(a, "warp_context_tree_update", {"tree_id": tid, "ref": {"bad key!": "x"}})
        assert envelope["error"] == "invalid" and envelope["details"]["field"].startswith("ref")
        _, envelope = await err(b, "warp_context_tree_delete", {"tree_id": tid})
        assert envelope["error"] == "forbidden"
        gone = await ok(a, "warp_context_tree_delete", {"tree_id": tid})
        assert gone["deleting"]["by"] == A
        assert (await ok(b, "warp_context_list", {}))["trees"][0]["deleting"]["by"] == A
        root = gone["root"]["id"]
        _, envelope = await err(b, "warp_context_append", {"tree_id": tid, "parent_id": root, "text": "x"})
        assert envelope["error"] == "conflict" and "restore it first" in envelope["message"]
        _, envelope = await err(a, "warp_context_tree_delete", {"tree_id": tid})
        assert envelope["error"] == "conflict"
        back = await ok(a, "warp_context_tree_restore", {"tree_id": tid})
        assert back["deleting"] is None
        await ok(b, "warp_context_append", {"tree_id": tid, "parent_id": root, "text": "x"})
        _, envelope = await err(a, "warp_context_tree_restore", {"tree_id": tid})
        assert envelope["error"] == "conflict"


async def test_tree_creation_is_rate_limited_per_agent(
    nats_server: EmbeddedNatsServer, project_id: str, tmp_path: Path, monkeypatch: object
) -> None:
    import pytest

    assert isinstance(monkeypatch, pytest.MonkeyPatch)
    monkeypatch.setenv("LOOM_CONTEXT_TREES_PER_MINUTE", "2")
    async with agents(nats_server.url, project_id, tmp_path, A, B) as (a, b):
        for n in range(2):
            await ok(a, "warp_context_create", {"title": f"t{n}", "text": "r"})
        message, envelope = await err(a, "warp_context_create", {"title": "one too many", "text": "r"})
        assert envelope == {
            "error": "too_many_requests",
            "message": message,
            "details": {"rule": "trees-per-minute"},
        }
        assert "at most 2 new context trees a minute per agent" in message
        await ok(b, "warp_context_create", {"title": "b's own", "text": "r"})  # per agent
