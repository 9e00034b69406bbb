"""``/api/contexts`` tree operations: a tree's metadata, staged deletion (purged by the
sweep, with a ``context.deleted`` event), one node, leaves, handles and as-of reads,
against a real Weft and nats-server; project isolation for each new route."""

from __future__ import annotations

from typing import Any

from weft_helpers import WsClient, ws_connect


async def _tree(api: Any) -> tuple[str, str, dict[str, Any], dict[str, Any]]:
    tree = (await api.post("/api/contexts", json={"title": "plan", "text": "ship 2.0"})).json()
    tid, root = tree["tree_id"], tree["root"]["id"]
    one = (await api.post(f"/api/contexts/{tid}/nodes", json={"parent_id": root, "text": "freeze"})).json()[
        "node"
    ]
    two = (
        await api.post(
            f"/api/contexts/{tid}/nodes",
            json={
                "parent_id": one["id"],
                "kind": "link",
                "handle": {"source": "url", "id": "https://example.org/r"},
            },
        )
    ).json()["node"]
    return tid, root, one, two


async def test_one_node_leaves_handles_and_as_of_reads(api: Any) -> None:
    tid, root, one, two = await _tree(api)
    seq = (await api.get(f"/api/contexts/{tid}/nodes/{two['id']}")).json()["versions"][0]["seq"]
    await api.post(f"/api/contexts/{tid}/nodes/{one['id']}/versions", json={"text": "code freeze"})
    late = (await api.post(f"/api/contexts/{tid}/nodes", json={"parent_id": root, "text": "late"})).json()[
        "node"
    ]
    node = (await api.get(f"/api/contexts/{tid}/nodes/{one['id']}")).json()
    assert node["node"]["text"] == "code freeze" and [v["seq"] > 0 for v in node["versions"]] == [True, True]
    assert (node["parent_id"], node["children"], node["hidden"]) == (root, [two["id"]], False)
    then = (await api.get(f"/api/contexts/{tid}/nodes/{one['id']}", params={"as_of_seq": seq})).json()
    assert then["node"]["text"] == "freeze"
    at = then["versions"][0]["at"]
    by_time = (await api.get(f"/api/contexts/{tid}/nodes/{one['id']}/path", params={"as_of": at})).json()
    assert [n["text"] for n in by_time["nodes"]] == ["ship 2.0", "freeze"]
    leaves = (await api.get(f"/api/contexts/{tid}/leaves")).json()
    assert [n["id"] for n in leaves["nodes"]] == [two["id"], late["id"]] and leaves["more"] is False
    past = (await api.get(f"/api/contexts/{tid}/leaves", params={"as_of_seq": seq})).json()
    assert [n["id"] for n in past["nodes"]] == [two["id"]]
    handles = (await api.get(f"/api/contexts/{tid}/nodes/{two['id']}/handles")).json()["handles"]
    assert [h["handle"]["source"] for h in handles] == ["inline", "inline", "url"]
    shape = (await api.get(f"/api/contexts/{tid}/structure", params={"as_of_seq": seq})).json()
    assert [n["id"] for n in shape["nodes"]] == [root, one["id"], two["id"]]
    page = (await api.get(f"/api/contexts/{tid}/nodes", params={"as_of_seq": seq})).json()
    assert [i["node"]["text"] for i in page["items"]] == ["ship 2.0", "freeze", None]
    # refusals name the field
    both = await api.get(f"/api/contexts/{tid}/structure", params={"as_of_seq": seq, "as_of": at})
    assert both.status_code == 400 and both.json()["details"]["field"] == "as_of"
    early = await api.get(f"/api/contexts/{tid}/nodes/{late['id']}", params={"as_of_seq": seq})
    assert early.status_code == 404 and early.json()["details"]["field"] == "node_id"
    zone = await api.get(f"/api/contexts/{tid}/leaves", params={"as_of": "2026-01-01T00:00:00"})
    assert zone.status_code == 400 and zone.json()["details"]["field"] == "as_of"
    bad = await api.get(f"/api/contexts/{tid}/leaves", params={"as_of_seq": 0})
    assert bad.status_code == 422 and "as_of_seq" in bad.text


async def test_metadata_and_staged_deletion(weft_factory: Any, project_id: str) -> None:
    async with (
        weft_factory(project_id=project_id, context_deletion_window_s=0.5) as weft,
        weft.client() as api,
    ):
        tid, root, _, _ = await _tree(api)
        changed = await api.patch(
            f"/api/contexts/{tid}", json={"title": "release plan", "description": "2.0"}
        )
        assert changed.status_code == 200, changed.text
        assert (changed.json()["meta"]["title"], changed.json()["meta"]["description"]) == (
            "release plan",
            "2.0",
        )
        listed = (await api.get("/api/contexts")).json()["items"]
        assert [(t["title"], t["description"]) for t in listed] == [("release plan", "2.0")]
        kind = await api.patch(f"/api/contexts/{tid}", json={"kind": "work"})
        assert kind.status_code == 422 and "kind" in kind.text
        work = (
            await api.post("/api/work", json={"task_id": "t", "description": "d", "capability": "c"})
        ).json()
        refused = await api.delete(f"/api/contexts/{work['id']}")
        assert refused.status_code == 409 and refused.json()["details"]["field"] == "tree_id"
        ref = await api.patch(f"/api/contexts/{work['id']}", json={"ref": {"work_id": "0" * 32}})
        assert ref.status_code == 400 and ref.json()["details"]["field"] == "ref"
        async with ws_connect(f"{weft.ws_url}/api/ws") as conn:
            ws = WsClient(conn)
            await ws.next_of("welcome")
            await ws.subscribe("contexts", {"tree_id": tid}, sub_id="t")
            deleted = await api.delete(f"/api/contexts/{tid}")
            assert deleted.status_code == 202 and deleted.json()["deleting"]["by"] == "weft-api"
            frozen = await api.post(f"/api/contexts/{tid}/nodes", json={"parent_id": root, "text": "x"})
            assert frozen.status_code == 409 and frozen.json()["details"]["field"] == "tree_id"
            restored = await api.post(f"/api/contexts/{tid}/restore")
            assert restored.status_code == 200 and restored.json()["deleting"] is None
            again = await api.post(f"/api/contexts/{tid}/restore")
            assert again.status_code == 409
            assert (await api.delete(f"/api/contexts/{tid}")).status_code == 202
            actions = [(await ws.next_of("event"))["event"]["action"] for _ in range(4)]
        assert actions == ["deleting", "restored", "deleting", "deleted"]  # the sweep purged it
        assert (await api.get(f"/api/contexts/{tid}")).status_code == 404
        assert (await api.get("/api/contexts")).json()["items"] == []


async def test_another_project_cannot_reach_the_new_operations(weft: Any, project_id: str) -> None:
    async with weft.client(project=project_id) as one, weft.client(project=f"{project_id}-ops") as two:
        tid, root, one_node, _ = await _tree(one)
        for path in (
            f"/api/contexts/{tid}/nodes/{one_node['id']}",
            f"/api/contexts/{tid}/leaves",
            f"/api/contexts/{tid}/nodes/{root}/handles",
        ):
            answer = await two.get(path)
            assert answer.status_code == 404 and "ship 2.0" not in answer.text, path
        assert (await two.patch(f"/api/contexts/{tid}", json={"title": "mine"})).status_code == 404
        assert (await two.delete(f"/api/contexts/{tid}")).status_code == 404
        assert (await two.post(f"/api/contexts/{tid}/restore")).status_code == 404
        assert (await one.get(f"/api/contexts/{tid}")).json()["meta"]["title"] == "plan"


async def test_export_and_import_between_projects(weft: Any, project_id: str) -> None:
    secret = "ghp_" + "Q" * 36
    async with weft.client(project=project_id) as one, weft.client(project=f"{project_id}-imp") as two:
        tid, root, first, _ = await _tree(one)
        await one.post(f"/api/contexts/{tid}/nodes", json={"parent_id": root, "text": f"see {secret}"})
        assert (await two.get(f"/api/contexts/{tid}/export")).status_code == 404  # isolation
        exported = await one.get(f"/api/contexts/{tid}/export")
        assert exported.status_code == 200
        document = exported.json()
        assert document["warnings"] == ["nodes.3.text: possible GitHub token at character 4"]
        done = await two.post("/api/contexts/import", json=document)
        assert done.status_code == 201, done.text
        body = done.json()
        assert body["imported"] == 4 and body["warnings"] == document["warnings"]
        copy = body["tree"]["tree_id"]
        read = (await two.get(f"/api/contexts/{copy}/nodes")).json()["items"]
        assert [i["node"]["text"] for i in read][:2] == ["ship 2.0", "freeze"]
        assert (await two.get("/api/contexts")).json()["items"][0]["tree_id"] == copy
        assert (await one.get(f"/api/contexts/{copy}")).status_code == 404
        assert (await two.post("/api/contexts/import", json=document)).json()["imported"] == 0
        # a document whose node refers to one it does not hold: refused, nothing stored
        broken = {**document, "tree_id": "9" * 32, "nodes": [document["nodes"][0] | {"tree_id": "9" * 32}]}
        broken["nodes"].append(document["nodes"][2] | {"tree_id": "9" * 32})
        refused = await two.post("/api/contexts/import", json=broken)
        assert refused.status_code == 400 and refused.json()["details"]["field"] == "nodes.1.parent_id"
        assert first["id"] not in refused.text and secret not in refused.text
        assert len((await two.get("/api/contexts")).json()["items"]) == 1
