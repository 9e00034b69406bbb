"""Project isolation: a request for project P2 sees nothing of P1 (work, agents, targets, events)."""

from __future__ import annotations

from typing import Any

from nats.aio.client import Client as NatsClient
from weft_helpers import WsClient, register, ws_connect


async def test_p2_sees_none_of_p1(weft: Any, nc: NatsClient, project_id: str) -> None:
    p1, p2 = project_id, f"{project_id}-two"
    agent = await register(nc, p1)
    async with weft.client(project=p1) as one, weft.client(project=p2) as two:
        work = (
            await one.post("/api/work", json={"task_id": "t", "description": "d", "capability": "code"})
        ).json()
        target = (
            await one.post(
                "/api/targets", json={"name": "box", "mechanism": "local", "config": {"command": ["true"]}}
            )
        ).json()
        assert work["project_id"] == p1

        assert (await two.get("/api/work")).json()["items"] == []
        assert (await two.get(f"/api/work/{work['id']}")).status_code == 404
        assert (await two.post(f"/api/work/{work['id']}/cancel")).status_code == 404
        assert (await two.get("/api/agents")).json()["items"] == []
        assert (await two.get(f"/api/agents/{agent.agent_id}")).status_code == 404
        assert (await two.post(f"/api/agents/{agent.agent_id}/shutdown")).status_code == 404
        assert (await two.get("/api/targets")).json()["items"] == []
        assert (await two.get(f"/api/targets/{target['id']}")).status_code == 404
        assert (await two.get("/api/targets/box")).status_code == 404
        stats = (await two.get("/api/stats")).json()
        assert stats["project_id"] == p2 and stats["work"]["total"] == 0 and stats["agents"]["total"] == 0
        # the same name is free in P2
        assert (
            await two.post(
                "/api/targets", json={"name": "box", "mechanism": "local", "config": {"command": ["true"]}}
            )
        ).status_code == 201

        # P1 still sees its own
        assert [i["id"] for i in (await one.get("/api/work")).json()["items"]] == [work["id"]]
        assert (await one.get(f"/api/agents/{agent.agent_id}")).status_code == 200
    # the query parameter names a project too, and must agree with the header
    async with weft.client() as default:
        assert (await default.get("/api/work", params={"project": p2})).json()["items"] == []
        clash = await default.get("/api/work", params={"project": p2}, headers={"X-Loom-Project": p1})
        assert clash.status_code == 400 and clash.json()["error"] == "invalid_project"


async def test_websocket_delivers_only_its_projects_events(weft: Any, project_id: str) -> None:
    p2 = f"{project_id}-two"
    async with (
        weft.client(project=project_id) as one,
        weft.client(project=p2) as two,
        ws_connect(f"{weft.ws_url}/api/ws?topics=work&project={p2}") as conn,
    ):
        ws = WsClient(conn)
        assert (await ws.next_of("welcome"))["project_id"] == p2
        await one.post("/api/work", json={"task_id": "p1-item", "description": "d", "capability": "code"})
        mine = (
            await two.post("/api/work", json={"task_id": "p2", "description": "d", "capability": "code"})
        ).json()
        events = await ws.events_until(lambda evs: any(e["action"] == "queued" for e in evs))
    assert {e["project_id"] for e in events} == {p2}
    assert {e["subject_id"] for e in events} == {mine["id"]}


async def test_invalid_project_is_a_400_naming_the_rule(api: Any, weft: Any) -> None:
    for bad in ("Upper", "-dash", "a" * 64, "has space", "a.b"):
        response = await api.get("/api/work", headers={"X-Loom-Project": bad})
        assert response.status_code == 400, bad
        body = response.json()
        assert body["error"] == "invalid_project" and body["details"]["field"] == "project"
        assert "lowercase letters, digits and '-'" in body["message"]
    response = await api.get("/api/work", params={"project": "Nope!"})
    assert response.status_code == 400 and "project" in response.json()["message"]
