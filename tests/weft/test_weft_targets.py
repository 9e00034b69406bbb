"""Targets: CRUD in KV, unique names, field-level validation, secrets never returned."""

from __future__ import annotations

import asyncio
from typing import Any

from nats.aio.client import Client as NatsClient
from weft_helpers import WsClient, ws_connect

from shared.models import Target
from shared.names import ProjectNames

SECRET = "ghp_verysecretvalue123"


def spec(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "gh-runner",
        "agent_type": "claude-code",
        "capabilities": ["code", "review"],
        "boundaries": ["default"],
        "mechanism": "github-actions",
        "config": {
            "repository": "acme/agents",
            "workflow": "agent.yml",
            "token_env": "GH_TOKEN",
            # a workflow input under a secret-looking name: stored (the workflow needs it) but
            # never shown
            "inputs": {"auth_token": SECRET, "mode": "fast"},
        },
        "max_concurrent": 2,
        "cooldown_s": 30,
        "idle_timeout_s": 600,
    }
    data.update(changes)
    return data


async def stored(nc: NatsClient, project_id: str, target_id: str) -> Target:
    kv = await nc.jetstream().key_value(ProjectNames(project_id).targets_bucket)
    entry = await kv.get(f"t.{target_id}")
    assert entry.value is not None
    return Target.model_validate_json(entry.value)


async def test_crud_by_id_and_name(api: Any, nc: NatsClient, project_id: str) -> None:
    created = await api.post("/api/targets", json=spec())
    assert created.status_code == 201, created.text
    target = created.json()
    assert target["name"] == "gh-runner" and target["health"] == "unknown" and target["enabled"] is True
    assert target["capabilities"] == ["code", "review"] and target["project_id"] == project_id
    assert (await api.get(f"/api/targets/{target['id']}")).json()["id"] == target["id"]
    assert (await api.get("/api/targets/gh-runner")).json()["id"] == target["id"]

    patched = await api.patch("/api/targets/gh-runner", json={"max_concurrent": 5, "tags": ["gpu"]})
    assert (
        patched.status_code == 200
        and patched.json()["max_concurrent"] == 5
        and patched.json()["tags"] == ["gpu"]
    )
    renamed = await api.patch(f"/api/targets/{target['id']}", json={"name": "gh-runner-2"})
    assert renamed.json()["name"] == "gh-runner-2"
    assert (await api.get("/api/targets/gh-runner")).status_code == 404
    assert (await api.post("/api/targets", json=spec(name="gh-runner"))).status_code == 201  # old name free

    disabled = await api.post("/api/targets/gh-runner-2/disable")
    assert disabled.json()["enabled"] is False
    assert [
        t["name"] for t in (await api.get("/api/targets", params={"enabled": False})).json()["items"]
    ] == ["gh-runner-2"]
    assert (await api.post(f"/api/targets/{target['id']}/enable")).json()["enabled"] is True

    await api.post(
        "/api/targets",
        json=spec(name="laptop", mechanism="local", capabilities=["docs"], config={"command": ["true"]}),
    )
    listed = (await api.get("/api/targets")).json()
    assert [t["name"] for t in listed["items"]] == ["gh-runner", "gh-runner-2", "laptop"] and listed[
        "total"
    ] == 3
    assert [
        t["name"] for t in (await api.get("/api/targets", params={"mechanism": "local"})).json()["items"]
    ] == ["laptop"]
    assert [
        t["name"] for t in (await api.get("/api/targets", params={"capability": "docs"})).json()["items"]
    ] == ["laptop"]
    first = (await api.get("/api/targets", params={"limit": 2})).json()
    rest = (await api.get("/api/targets", params={"limit": 2, "cursor": first["next_cursor"]})).json()
    assert [t["name"] for t in first["items"] + rest["items"]] == ["gh-runner", "gh-runner-2", "laptop"]
    assert rest["next_cursor"] is None

    deleted = await api.delete("/api/targets/laptop")
    assert deleted.status_code == 200 and deleted.json()["name"] == "laptop"
    assert (await api.get("/api/targets/laptop")).status_code == 404
    assert (await api.delete("/api/targets/laptop")).status_code == 404
    again = spec(name="laptop", mechanism="local", config={"command": ["true"]})
    assert (await api.post("/api/targets", json=again)).status_code == 201


async def test_names_are_unique_even_when_created_at_once(weft_factory: Any, project_id: str) -> None:
    async with (
        weft_factory(project_id=project_id) as one,
        weft_factory(project_id=project_id) as two,
        one.client() as a,
        two.client() as b,
    ):
        results = await asyncio.gather(*(c.post("/api/targets", json=spec()) for c in (a, b, a, b)))
        codes = sorted(r.status_code for r in results)
        assert codes == [201, 409, 409, 409], [r.text for r in results]
        conflict = next(r for r in results if r.status_code == 409).json()
        assert conflict["error"] == "conflict" and conflict["details"]["field"] == "name"
        rename = await a.post("/api/targets", json=spec(name="other"))
        clash = await a.patch(f"/api/targets/{rename.json()['id']}", json={"name": "gh-runner"})
        assert clash.status_code == 409
        assert (await a.get("/api/targets")).json()["total"] == 2


async def test_secrets_never_leave_weft(weft: Any, api: Any, nc: NatsClient, project_id: str) -> None:
    async with ws_connect(f"{weft.ws_url}/api/ws?topics=targets") as conn:
        ws = WsClient(conn)
        await ws.next_of("welcome")
        created = await api.post("/api/targets", json=spec())
        target_id = created.json()["id"]
        responses = [
            created.text,
            (await api.get(f"/api/targets/{target_id}")).text,
            (await api.get("/api/targets")).text,
            (await api.post(f"/api/targets/{target_id}/disable")).text,
        ]
        events = await ws.events_until(lambda evs: len(evs) >= 2)
    for text in [*responses, *(str(e) for e in events)]:
        assert SECRET not in text
    shown = created.json()["config"]
    assert shown["inputs"] == {"auth_token": "***", "mode": "fast"}
    assert shown["repository"] == "acme/agents" and shown["token_env"] == "GH_TOKEN"
    # ...but Weft keeps it for the workflow it dispatches
    assert (await stored(nc, project_id, target_id)).config["inputs"]["auth_token"] == SECRET

    # read-modify-write with the masks keeps the secrets; a new value replaces them
    echoed = {**shown, "workflow": "agent-v2.yml"}
    assert (await api.patch(f"/api/targets/{target_id}", json={"config": echoed})).status_code == 200
    kept = (await stored(nc, project_id, target_id)).config
    assert kept["inputs"] == {"auth_token": SECRET, "mode": "fast"} and kept["workflow"] == "agent-v2.yml"
    replaced = {**echoed, "inputs": {"auth_token": "new-value", "mode": "fast"}}
    await api.patch(f"/api/targets/{target_id}", json={"config": replaced})
    assert (await stored(nc, project_id, target_id)).config["inputs"]["auth_token"] == "new-value"

    # a secret where a variable name belongs is refused, and not repeated
    pasted = spec(name="pasted", config={**spec()["config"], "token": SECRET})
    refused = await api.post("/api/targets", json=pasted)
    assert refused.status_code == 422 and refused.json()["details"]["field"] == "config.token"
    assert SECRET not in refused.text


async def test_validation_errors_name_the_field(api: Any) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        (spec(name="Bad Name"), "name"),
        (spec(mechanism="carrier-pigeon"), "mechanism"),
        (spec(capabilities=["ok", "Not OK"]), "capabilities"),
        (spec(max_concurrent=0), "max_concurrent"),
        (spec(cooldown_s=-1), "cooldown_s"),
        (spec(health_check={"interval_s": 0}), "health_check.interval_s"),
        (spec(extra_field=1), "extra_field"),
        ({"mechanism": "local", "config": {"command": ["true"]}}, "name"),
    ]
    for body, field in cases:
        response = await api.post("/api/targets", json=body)
        assert response.status_code == 422, (body, response.text)
        fields = [e["field"] for e in response.json()["details"]["errors"]]
        assert any(f == field or f.startswith(field + ".") for f in fields), (field, fields)
        assert SECRET not in response.text

    created = (await api.post("/api/targets", json=spec())).json()
    for patch, field in (
        ({"max_concurrent": 0}, "max_concurrent"),
        ({"name": "UPPER"}, "name"),
        ({"name": None}, "name"),
        ({"unknown": 1}, "unknown"),
        ({"boundaries": ["a b"]}, "boundaries"),
    ):
        response = await api.patch(f"/api/targets/{created['id']}", json=patch)
        assert response.status_code == 422, (patch, response.text)
        assert any(e["field"].startswith(field) for e in response.json()["details"]["errors"]), response.text
    unchanged = (await api.get(f"/api/targets/{created['id']}")).json()
    assert unchanged["max_concurrent"] == 2 and unchanged["name"] == "gh-runner"
    bad_ref = await api.get("/api/targets/NOT_A_NAME")
    assert bad_ref.status_code == 422 and bad_ref.json()["details"]["errors"][0]["field"] == "target"


async def test_test_and_spin_up_without_a_mechanism_are_a_clear_409(api: Any) -> None:
    target = (await api.post("/api/targets", json=spec())).json()
    for path in (f"/api/targets/{target['id']}/test", "/api/targets/gh-runner/spin-up"):
        response = await api.post(path)
        assert response.status_code == 409, response.text
        assert response.json()["error"] == "spinup_unavailable"
        assert "no spin-up mechanism installed" in response.json()["message"]
    assert (await api.post("/api/targets/nope/spin-up")).status_code == 404
    bad = await api.post("/api/targets/gh-runner/spin-up", json={"work_id": "zzz"})
    assert bad.status_code == 422 and bad.json()["details"]["errors"][0]["field"] == "work_id"


async def test_two_replicas_deleting_at_once_delete_and_announce_once(
    weft_factory: Any, nc: NatsClient, project_id: str
) -> None:
    async with (
        weft_factory(project_id=project_id) as one,
        weft_factory(project_id=project_id) as two,
        one.client() as a,
        two.client() as b,
    ):
        created = await a.post("/api/targets", json=spec())
        target_id = created.json()["id"]
        assert (await b.get(f"/api/targets/{target_id}")).status_code == 200  # both copies hold it
        results = await asyncio.gather(
            a.delete(f"/api/targets/{target_id}"), b.delete("/api/targets/gh-runner")
        )
        assert sorted(r.status_code for r in results) == [200, 404], [r.text for r in results]
    js = nc.jetstream()
    sub = await js.subscribe(ProjectNames(project_id).event_filter("target"), ordered_consumer=True)
    deleted = 0
    try:
        while True:
            try:
                msg = await sub.next_msg(timeout=0.5)
            except Exception:
                break
            deleted += b'"action":"deleted"' in msg.data
    finally:
        await sub.unsubscribe()
    assert deleted == 1
