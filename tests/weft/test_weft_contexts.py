"""``/api/contexts`` and the ``contexts`` WebSocket topic against a real Weft and nats-server."""

from __future__ import annotations

from typing import Any

from nats.aio.client import Client as NatsClient
from weft_helpers import WsClient, ws_connect

from shared.channels import Viewer
from shared.context.store import ContextStore
from shared.context.threads import Threads
from shared.context.trees import NodeInput, TreeMeta, channel_thread_id
from shared.models import ChannelMessage
from shared.names import ProjectNames

A = "a" * 32
B = "b" * 32


async def test_create_append_read_and_tombstone(api: Any) -> None:
    created = await api.post(
        "/api/contexts", json={"title": "release plan", "text": "ship 2.0", "meta": {"milestone": "2.0"}}
    )
    assert created.status_code == 201, created.text
    tree = created.json()
    tid, root = tree["tree_id"], tree["root"]["id"]
    assert tree["root"]["meta"] == {"milestone": "2.0"}  # kept (it was dropped), as docs/weft.md says
    read = (await api.get(f"/api/contexts/{tid}/nodes")).json()["items"]
    assert [i["node"]["meta"] for i in read if i["node"]["id"] == root] == [{"milestone": "2.0"}]
    assert tree["meta"]["title"] == "release plan" and tree["nodes"] == 1
    one = (await api.post(f"/api/contexts/{tid}/nodes", json={"parent_id": root, "text": "freeze"})).json()[
        "node"
    ]
    two = (await api.post(f"/api/contexts/{tid}/nodes", json={"parent_id": one["id"], "text": "tag"})).json()[
        "node"
    ]
    alt = await api.post(
        f"/api/contexts/{tid}/nodes",
        json={"parent_id": root, "kind": "link", "handle": {"source": "url", "id": "https://example.org/r"}},
    )
    assert alt.status_code == 201, alt.text
    path = (await api.get(f"/api/contexts/{tid}/nodes/{two['id']}/path")).json()
    assert [n["text"] for n in path["nodes"]] == ["ship 2.0", "freeze", "tag"]
    shape = (await api.get(f"/api/contexts/{tid}/structure")).json()
    assert [(n["depth"], n["children"]) for n in shape["nodes"]] == [(0, 2), (1, 1), (2, 0), (1, 0)]
    assert all("text" not in n for n in shape["nodes"])
    page = (await api.get(f"/api/contexts/{tid}/nodes", params={"limit": 2})).json()
    rest = (await api.get(f"/api/contexts/{tid}/nodes", params={"cursor": page["next_cursor"]})).json()
    assert [i["depth"] for i in page["items"] + rest["items"]] == [0, 1, 2, 1]
    version = await api.post(f"/api/contexts/{tid}/nodes/{one['id']}/versions", json={"text": "code freeze"})
    assert version.status_code == 201 and version.json()["node"]["supersedes"] == one["id"]
    resolved = (await api.post(f"/api/contexts/{tid}/resolve", json={"node_ids": [one["id"]]})).json()
    assert resolved["items"][0]["content"] == "code freeze"
    gone = await api.post(f"/api/contexts/{tid}/nodes/{one['id']}/tombstone", json={"reason": "cancelled"})
    assert gone.status_code == 201
    shape = (await api.get(f"/api/contexts/{tid}/structure")).json()
    assert len(shape["nodes"]) == 2
    hidden = await api.get(f"/api/contexts/{tid}/nodes/{two['id']}/path")
    assert hidden.status_code == 404 and hidden.json()["details"]["field"] == "node_id"
    listed = (await api.get("/api/contexts", params={"kind": "tree"})).json()
    assert [t["tree_id"] for t in listed["items"]] == [tid]
    changes = (await api.get(f"/api/contexts/{tid}/changes")).json()
    assert len(changes["items"]) == 6
    later = (await api.get(f"/api/contexts/{tid}/changes", params={"cursor": changes["next_cursor"]})).json()
    assert later["items"] == []


async def test_errors_name_the_field(api: Any) -> None:
    missing = await api.get(f"/api/contexts/{'d' * 32}")
    assert missing.status_code == 404 and missing.json()["details"]["field"] == "tree_id"
    assert (await api.get("/api/contexts/nothex")).status_code == 422
    tid = (await api.post("/api/contexts", json={"title": "t", "text": "r"})).json()["tree_id"]
    orphan = await api.post(f"/api/contexts/{tid}/nodes", json={"parent_id": B, "text": "x"})
    assert orphan.status_code == 404 and orphan.json()["details"]["field"] == "parent_id"
    empty = await api.post(f"/api/contexts/{tid}/nodes", json={"parent_id": B})
    assert empty.status_code == 422 and "text" in empty.text
    secret = "sk-" + "A1b2C3d4" * 6
    bad = await api.post(
        f"/api/contexts/{tid}/nodes", json={"parent_id": B, "handle": {"source": "url", "id": secret}}
    )
    assert bad.status_code == 422 and secret not in bad.text
    assert (await api.get(f"/api/contexts/{tid}/nodes", params={"cursor": "zz!"})).status_code == 400
    assert (await api.post("/api/contexts", json={"title": "t"})).status_code == 400


async def test_work_tree_and_channel_threads(api: Any, nc: NatsClient, project_id: str) -> None:
    item = (
        await api.post("/api/work", json={"task_id": "t", "description": "build it", "capability": "c"})
    ).json()
    tree = await api.get(f"/api/contexts/{item['id']}")
    assert tree.status_code == 200 and tree.json()["meta"]["kind"] == "work"
    names = ProjectNames(project_id)
    js = nc.jetstream()
    from nats.js.api import StreamConfig

    await js.add_stream(
        StreamConfig(
            name=names.channel_stream("ops"), subjects=[names.channel_subject("ops")], allow_direct=True
        )
    )
    message = ChannelMessage(channel="ops", sender_id=A, sender_handle="a", body="deploy now?")
    ack = await js.publish(names.channel_subject("ops"), message.to_json_bytes())
    threads = Threads(nc, names, ContextStore(nc, names))
    link = await threads.channel_reply("ops", ack.seq, Viewer(agent_id=B, user_id="u"))
    assert link.tree_id == channel_thread_id("ops", ack.seq)
    listing = (await api.get("/api/channels/ops/threads")).json()
    assert [(t["root_seq"], t["replies"]) for t in listing["threads"]] == [(ack.seq, 0)]
    by_channel = (await api.get("/api/contexts", params={"channel": "ops"})).json()
    assert [t["tree_id"] for t in by_channel["items"]] == [link.tree_id]


async def test_websocket_follows_context_changes(
    weft: Any, api: Any, nc: NatsClient, project_id: str
) -> None:
    store = ContextStore(nc, ProjectNames(project_id))
    state, root, _ = await store.create_tree(TreeMeta(title="w"), author=A, text="r")
    async with ws_connect(f"{weft.ws_url}/api/ws") as conn:
        ws = WsClient(conn)
        await ws.next_of("welcome")
        await ws.subscribe(
            "contexts", {"tree_id": state.tree_id, "action": ["appended", "tombstoned"]}, sub_id="t"
        )
        other, other_root, _ = await store.create_tree(TreeMeta(title="other"), author=A, text="x")
        await store.append(other.tree_id, NodeInput(parent_id=other_root.id, text="not this"), author=A)
        node = await store.append(state.tree_id, NodeInput(parent_id=root.id, text="this"), author=B)
        await store.tombstone(state.tree_id, node.id, author=A)
        first = await ws.next_of("event")
        second = await ws.next_of("event")
    assert first["topic"] == "contexts" and first["event"]["subject_id"] == state.tree_id
    assert first["event"]["action"] == "appended" and first["event"]["data"]["node"]["text"] == "this"
    assert second["event"]["action"] == "tombstoned" and first["seq"] < second["seq"]


async def test_another_projects_trees_are_invisible(weft: Any, nc: NatsClient, project_id: str) -> None:
    """Project isolation for context trees: trees, work trees, nodes and changes of P1 are not
    found through P2 (REST) nor in P2's store (what Warp reads), and P2's listing is empty."""
    p2 = f"{project_id}-ctx"
    async with weft.client(project=project_id) as one, weft.client(project=p2) as two:
        tree = (await one.post("/api/contexts", json={"title": "p1 plan", "text": "secret plan"})).json()
        tid, root = tree["tree_id"], tree["root"]["id"]
        item = (
            await one.post("/api/work", json={"task_id": "t", "description": "p1 work", "capability": "c"})
        ).json()
        for path in (
            f"/api/contexts/{tid}",
            f"/api/contexts/{tid}/structure",
            f"/api/contexts/{tid}/nodes",
            f"/api/contexts/{tid}/nodes/{root}/path",
            f"/api/contexts/{item['id']}",
        ):
            answer = await two.get(path)
            assert answer.status_code == 404, (path, answer.text)
            assert "secret plan" not in answer.text and "p1 work" not in answer.text
        appended = await two.post(f"/api/contexts/{tid}/nodes", json={"parent_id": root, "text": "x"})
        assert appended.status_code == 404
        resolved = await two.post(f"/api/contexts/{tid}/resolve", json={"node_ids": [root]})
        assert resolved.status_code == 404 and "secret plan" not in resolved.text
        assert (await two.get("/api/contexts")).json()["items"] == []
        assert [
            t["tree_id"] for t in (await one.get("/api/contexts", params={"kind": "tree"})).json()["items"]
        ] == [tid]
    theirs = ContextStore(nc, ProjectNames(p2))
    assert not (await theirs.tree(tid)).exists and not (await theirs.tree(item["id"])).exists
    assert (await ContextStore(nc, ProjectNames(project_id)).tree(tid)).exists
