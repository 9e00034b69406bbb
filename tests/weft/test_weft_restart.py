"""Weft keeps nothing it would lose: a restart between submit and claim loses nothing."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

import httpx
from nats.aio.client import Client as NatsClient
from weft_helpers import claimant, register

from shared.names import ProjectNames
from testsupport.work import LATE, submit_due_soon, work_queue


async def test_restart_between_submit_and_claim(weft_factory: Any, nc: NatsClient, project_id: str) -> None:
    async with weft_factory(project_id=project_id) as first, first.client() as api:
        work = (
            await api.post("/api/work", json={"task_id": "t", "description": "d", "capability": "code"})
        ).json()
        target = (
            await api.post(
                "/api/targets", json={"name": "box", "mechanism": "local", "config": {"command": ["true"]}}
            )
        ).json()
    # Weft was down between the submit and the claim.
    async with weft_factory(project_id=project_id) as second, second.client() as api:
        shown = (await api.get(f"/api/work/{work['id']}")).json()
        assert shown["status"] == "queued" and shown["created_at"] == work["created_at"]
        assert [i["id"] for i in (await api.get("/api/work")).json()["items"]] == [work["id"]]
        assert (await api.get("/api/targets/box")).json()["id"] == target["id"]

        agent = await register(nc, project_id)
        queue = work_queue(nc, ProjectNames(project_id))
        claimed = await queue.claim(claimant(agent))
        assert claimed is not None and claimed.id == work["id"]
        assert (await api.get(f"/api/work/{work['id']}")).json()["status"] == "claimed"
        await queue.complete(work["id"], agent.agent_id, "done")
        assert (await api.get(f"/api/work/{work['id']}")).json()["status"] == "completed"
        assert (await api.get("/api/agents")).json()["total"] == 1


async def test_restart_while_claimed_then_complete(
    weft_factory: Any, nc: NatsClient, project_id: str
) -> None:
    agent = await register(nc, project_id)
    queue = work_queue(nc, ProjectNames(project_id))
    async with weft_factory(project_id=project_id) as first, first.client() as api:
        work = (
            await api.post("/api/work", json={"task_id": "t", "description": "d", "capability": "code"})
        ).json()
    assert (await queue.claim(claimant(agent))) is not None
    await queue.progress(work["id"], agent.agent_id, 30, "while Weft was down")
    async with weft_factory(project_id=project_id) as second, second.client() as api:
        shown = (await api.get(f"/api/work/{work['id']}")).json()
        assert shown["status"] == "in-progress" and shown["progress"]["note"] == "while Weft was down"
        await queue.complete(work["id"], agent.agent_id)
        assert (await api.get(f"/api/work/{work['id']}")).json()["status"] == "completed"


async def test_two_replicas_expire_an_item_once(weft_factory: Any, nc: NatsClient, project_id: str) -> None:
    from weft_helpers import eventually

    names = ProjectNames(project_id)
    async with (
        weft_factory(project_id=project_id, sweep_interval_s=0.05) as one,
        weft_factory(project_id=project_id, sweep_interval_s=0.05),
        one.client() as api,
    ):

        async def post(deadline: datetime) -> httpx.Response | None:
            body = {"task_id": "t", "description": "d", "capability": "code"}
            body["deadline"] = deadline.isoformat()
            response = await api.post("/api/work", json=body)
            late = response.status_code == 400 and response.json()["message"] == LATE
            return None if late else response

        response = await submit_due_soon(post)
        assert response.status_code == 201, response.text
        work = response.json()

        async def expired() -> bool:
            return bool((await api.get(f"/api/work/{work['id']}")).json()["status"] == "expired")

        # both replicas sweep every 50 ms, so both race for the transition; CAS lets one win
        await eventually(expired, what="the item to expire")
        subject = names.event_subject("work", "expired")

        async def expired_events() -> int:
            info = await nc.jetstream().stream_info(names.events_stream, subjects_filter=subject)
            return (info.state.subjects or {}).get(subject, 0)

        # The event follows the record's change, so it may land a moment after the status shows.
        await eventually(expired_events, what="the expired event")
        await asyncio.sleep(0.5)  # ten more sweeps by each replica: a second event would show by now
        assert await expired_events() == 1
