"""Pausing a project over Weft's REST API (docs/operations.md, Pause): who paused it and
why, recorded and shown (stats, metrics); a second pause or a resume of a running project
refused naming the field; bad input refused without echo; other projects untouched."""

from __future__ import annotations

from typing import Any

from nats.aio.client import Client as NatsClient
from weft_helpers import eventually

from shared.names import ProjectNames
from shared.work.rules import BudgetReached, Claimant
from testsupport.work import work_queue


async def test_an_operator_pauses_and_resumes_a_project(
    weft: Any, api: Any, nc: NatsClient, project_id: str
) -> None:
    assert (await api.get("/api/pause")).json() == {"project_id": project_id, "paused": None, "revision": 0}
    await api.post("/api/work", json={"task_id": "t", "description": "d", "capability": "pause-code"})

    paused = await api.put("/api/pause", json={"reason": "release freeze", "by": "ana"})
    assert paused.status_code == 200, paused.text
    body = paused.json()["paused"]
    assert (body["by"], body["reason"]) == ("ana", "release freeze") and body["at"]
    again = await api.put("/api/pause", json={"reason": "mine"})
    assert again.status_code == 409 and again.json()["details"]["field"] == "paused"
    assert "by ana" in again.json()["message"]
    assert (await api.get("/api/pause")).json()["paused"]["by"] == "ana"  # not overwritten

    worker = Claimant(agent_id="a" * 32, agent_type="generic", capabilities=("pause-code",))
    try:
        await work_queue(nc, ProjectNames(project_id)).claim(worker)
        raise AssertionError("a claim was admitted while the project was paused")
    except BudgetReached as held:
        assert held.field == "project" and "paused by ana: release freeze" in held.message

    stats = (await api.get("/api/stats")).json()
    assert "paused by ana" in stats["budget_hold"]

    async def gauged() -> bool | None:
        text = (await api.get("/metrics")).text
        return f'weft_project_paused{{project="{project_id}"}} 1.0' in text or None

    await eventually(gauged, what="the paused gauge")
    async with weft.client(project=f"{project_id}-other") as other:
        assert (await other.get("/api/pause")).json()["paused"] is None  # its own project

    resumed = await api.delete("/api/pause")
    assert resumed.status_code == 200 and resumed.json()["paused"] is None
    twice = await api.delete("/api/pause")
    assert twice.status_code == 409 and twice.json()["details"]["field"] == "paused"
    taken = await work_queue(nc, ProjectNames(project_id)).claim(worker)
    assert taken is not None


async def test_bad_pauses_are_refused_naming_the_field(api: Any) -> None:
    secret = "s3cr3t-value"
    long = await api.put("/api/pause", json={"reason": secret * 100})
    assert long.status_code == 422 and long.json()["details"]["errors"][0]["field"] == "reason"
    assert secret not in long.text
    who = await api.put("/api/pause", json={"by": f"Not A Handle {secret}"})
    assert who.status_code == 422 and who.json()["details"]["errors"][0]["field"] == "by"
    assert secret not in who.text
    extra = await api.put("/api/pause", json={"running": "stop"})
    assert extra.status_code == 422 and extra.json()["details"]["errors"][0]["field"] == "running"
    flag = await api.put("/api/pause", json={"stop_running": f"maybe {secret}"})
    assert flag.status_code == 422 and flag.json()["details"]["errors"][0]["field"] == "stop_running"
    assert secret not in flag.text
    assert (await api.get("/api/pause")).json()["paused"] is None  # nothing changed
