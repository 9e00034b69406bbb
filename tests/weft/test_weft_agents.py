"""The agents view: Warp's registry read correctly, derived agent events, shutdown requests."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import pytest
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from weft_helpers import WsClient, actions, agent_id, eventually, register, ws_connect

from shared.agents.registry import Registry
from shared.events import ensure_events_stream
from shared.models import AgentEntry, AgentStatus, ControlRequest, Scope, utcnow
from shared.names import ProjectNames
from shared.nats.client import settle
from weft.project import agents as agents_module
from weft.project.agents import AgentDirectory


async def test_listing_shows_every_field_and_stale_agents_offline(
    api: Any, nc: NatsClient, project_id: str
) -> None:
    parent = agent_id()
    entry = await register(
        nc,
        project_id,
        handle="alpha",
        agent_type="copilot",
        capabilities=("code", "review"),
        boundaries=("corporate", "default"),
        status=AgentStatus.BUSY,
        current_tasks=1,
        max_concurrent_tasks=3,
        scope=Scope.PERSONAL,
        parent_id=parent,
        instance=2,
        heartbeat_interval_s=5,
        metadata={"model": "gpt"},
    )
    stale = await register(nc, project_id, handle="beta", stale=True)
    body = (await api.get("/api/agents")).json()
    assert body["total"] == 2 and [a["handle"] for a in body["items"]] == ["alpha", "beta"]
    shown = body["items"][0]
    expected = entry.model_dump(mode="json")
    for field, value in expected.items():
        if field in ("registered_at", "last_heartbeat", "last_activity"):
            continue
        assert shown[field] == value, field
    assert shown["reported_status"] == "busy" and shown["stale"] is False
    assert body["items"][1]["status"] == "offline" and body["items"][1]["reported_status"] == "online"
    assert body["items"][1]["stale"] is True
    assert 0 < shown["revision"] < body["items"][1]["revision"]  # the registry's: written later

    one = (await api.get(f"/api/agents/{stale.agent_id}")).json()
    assert one["agent_id"] == stale.agent_id and one["status"] == "offline"
    missing = await api.get(f"/api/agents/{agent_id()}")
    assert missing.status_code == 404 and missing.json()["error"] == "not_found"
    malformed = await api.get("/api/agents/XYZ")
    assert malformed.status_code == 422 and malformed.json()["details"]["errors"][0]["field"] == "agent_id"


async def test_filters_and_paging(api: Any, nc: NatsClient, project_id: str) -> None:
    await register(nc, project_id, handle="a1", agent_type="copilot", capabilities=("code",))
    await register(nc, project_id, handle="a2", capabilities=("docs",), boundaries=("corporate",))
    await register(nc, project_id, handle="a3", status=AgentStatus.BUSY)
    await register(nc, project_id, handle="a4", stale=True)

    async def handles(**params: Any) -> list[str]:
        return [a["handle"] for a in (await api.get("/api/agents", params=params)).json()["items"]]

    assert await handles(type="copilot") == ["a1"]
    assert await handles(capability="docs") == ["a2"]
    assert await handles(boundary="corporate") == ["a2"]
    assert await handles(status="busy") == ["a3"]
    assert await handles(status="offline") == ["a4"]
    assert await handles(status="online") == ["a1", "a2"]
    assert await handles(handle="a3") == ["a3"]
    pages: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 3}
        if cursor:
            params["cursor"] = cursor
        body = (await api.get("/api/agents", params=params)).json()
        pages += [a["handle"] for a in body["items"]]
        cursor = body["next_cursor"]
        if not cursor:
            break
    assert pages == ["a1", "a2", "a3", "a4"]
    bad = await api.get("/api/agents", params={"type": "Not Valid"})
    assert bad.status_code == 400 and bad.json()["details"]["field"] == "type"
    assert (await api.get("/api/agents", params={"status": "asleep"})).status_code == 422


async def test_agent_events_are_derived_from_registry_changes(
    weft: Any, nc: NatsClient, project_id: str
) -> None:
    registry = Registry(nc.jetstream(), ProjectNames(project_id))
    async with ws_connect(f"{weft.ws_url}/api/ws?topics=agents") as conn:
        ws = WsClient(conn)
        await ws.next_of("welcome")
        entry = await register(nc, project_id, heartbeat_interval_s=0.5)
        aid = entry.agent_id
        await registry.heartbeat(aid)  # a plain heartbeat is not news
        await registry.heartbeat(aid, AgentStatus.BUSY)
        await registry.update(aid, lambda e: e.model_copy(update={"capabilities": ["code", "docs"]}))
        # heartbeats stop: Weft notices within 3 intervals and says so once
        events = await ws.events_until(lambda evs: "agent.offline" in actions(evs, aid))
        await registry.heartbeat(aid, AgentStatus.ONLINE)
        await registry.remove(aid)
        events += await ws.events_until(lambda evs: "agent.deregistered" in actions(evs, aid))
    assert actions(events, aid) == [
        "agent.registered",
        "agent.status-changed",
        "agent.updated",
        "agent.offline",
        "agent.status-changed",
        "agent.deregistered",
    ]
    offline = next(e for e in events if e["action"] == "offline")
    assert offline["data"]["reason"] == "heartbeats stopped" and offline["data"]["previous_status"] == "busy"
    assert events[1]["data"]["status"] == "busy" and events[1]["data"]["previous_status"] == "online"
    assert events[2]["data"]["agent"]["capabilities"] == ["code", "docs"]


async def test_a_change_read_late_is_news_not_an_offline(
    weft_factory: Any, nc: NatsClient, project_id: str
) -> None:
    """A Weft short of CPU reads the registry late; by the clock every change then looks like
    heartbeats missed. A change is taken as what it says; missed heartbeats are the periodic
    check's to tell (here too far off to run)."""
    registry = Registry(nc.jetstream(), ProjectNames(project_id))
    async with (
        weft_factory(project_id=project_id, stale_check_interval_s=600) as weft,
        ws_connect(f"{weft.ws_url}/api/ws?topics=agents") as conn,
    ):
        ws = WsClient(conn)
        await ws.next_of("welcome")
        entry = await register(nc, project_id, stale=True)  # registered ten minutes ago, read now
        aid = entry.agent_id
        late = utcnow() - timedelta(minutes=5)  # a later heartbeat, read five minutes late
        await registry.update(aid, lambda e: e.model_copy(update={"last_heartbeat": late}))
        await registry.update(aid, lambda e: e.model_copy(update={"capabilities": ["docs"]}))
        await registry.remove(aid)
        events = await ws.events_until(lambda evs: "agent.deregistered" in actions(evs, aid))
    assert actions(events, aid) == ["agent.registered", "agent.updated", "agent.deregistered"]
    assert [e["data"]["status"] for e in events] == ["online", "online", "offline"]
    assert events[1]["data"]["agent"]["capabilities"] == ["docs"]


async def test_while_the_copy_cannot_catch_up_nobody_is_taken_for_offline(
    nc: NatsClient, project_id: str
) -> None:
    """A copy held back longer than a sync waits makes every agent look stale: the check
    then announces nobody and asks again next time."""
    directory = AgentDirectory(nc, nc.jetstream(), ProjectNames(project_id))
    await directory.start(stale_check_interval_s=3600)  # checked by hand below
    try:
        async with copy_behind_a_heartbeat(directory, nc, project_id) as (beating, release):
            assert await directory.check_staleness() == []  # the sync timed out: not judged
            assert await directory.still_stale(beating.agent_id) is False
            release.set()
            assert await directory.mirror.sync()
            assert await directory.check_staleness() == []  # caught up: it beats
    finally:
        await directory.stop()


async def test_two_replicas_publish_each_agent_event_once(
    weft_factory: Any, nc: NatsClient, project_id: str
) -> None:
    names = ProjectNames(project_id)
    async with weft_factory(project_id=project_id), weft_factory(project_id=project_id):
        entry = await register(nc, project_id)
        await Registry(nc.jetstream(), names).heartbeat(entry.agent_id, AgentStatus.BUSY)
        await Registry(nc.jetstream(), names).remove(entry.agent_id)
        js = nc.jetstream()

        async def all_three() -> list[str] | None:
            info = await js.stream_info(names.events_stream, subjects_filter=names.event_filter("agent"))
            subjects = info.state.subjects or {}
            return list(subjects) if sum(subjects.values()) >= 3 and len(subjects) >= 3 else None

        await eventually(all_three, what="three agent events")
    info = await js.stream_info(names.events_stream, subjects_filter=names.event_filter("agent"))
    assert info.state.subjects == {
        names.event_subject("agent", "registered"): 1,
        names.event_subject("agent", "status-changed"): 1,
        names.event_subject("agent", "deregistered"): 1,
    }


async def test_shutdown_publishes_a_control_request(api: Any, nc: NatsClient, project_id: str) -> None:
    names = ProjectNames(project_id)
    first = await register(nc, project_id)
    second = await register(nc, project_id)
    inbox = await nc.subscribe(f"loom.{project_id}.control.*")
    response = await api.post(f"/api/agents/{first.agent_id}/shutdown", json={"reason": "idle", "grace_s": 5})
    assert response.status_code == 202 and response.json() == {
        "agent_id": first.agent_id,
        "requested": True,
        "status": "online",
    }
    message = await inbox.next_msg(timeout=5)
    assert message.subject == names.control_subject(first.agent_id)
    request = ControlRequest.model_validate_json(message.data)
    assert request.action == "shutdown" and request.reason == "idle" and request.grace_s == 5

    unknown = agent_id()
    batch = await api.post("/api/agents/shutdown-batch", json={"agent_ids": [second.agent_id, unknown]})
    assert batch.status_code == 200
    results = {r["id"]: r for r in batch.json()["results"]}
    assert results[second.agent_id]["ok"] and not results[unknown]["ok"]
    assert results[unknown]["error"]["error"] == "not_found"
    message = await inbox.next_msg(timeout=5)
    assert message.subject == names.control_subject(second.agent_id)
    assert json.loads(message.data)["action"] == "shutdown"
    await inbox.unsubscribe()

    missing = await api.post(f"/api/agents/{unknown}/shutdown")
    assert missing.status_code == 404
    bad = await api.post(f"/api/agents/{first.agent_id}/shutdown", json={"grace_s": -1})
    assert bad.status_code == 422 and bad.json()["details"]["errors"][0]["field"] == "grace_s"


async def test_agent_that_stops_heartbeating_shows_offline(api: Any, nc: NatsClient, project_id: str) -> None:
    """Its last heartbeat grows older than three intervals: shown offline. The heartbeat is
    dated back rather than waited for, so a loaded machine cannot make the first read late
    (with a 0.1 s interval, a read 0.3 s after registering already saw it offline)."""
    entry = await register(nc, project_id, heartbeat_interval_s=5.0)
    assert (await api.get(f"/api/agents/{entry.agent_id}")).json()["status"] == "online"
    silent = await register(nc, project_id, aid=entry.agent_id, heartbeat_interval_s=5.0, stale=True)

    async def offline() -> bool:
        return bool((await api.get(f"/api/agents/{entry.agent_id}")).json()["status"] == "offline")

    await eventually(offline, what="the agent to be shown offline")
    assert utcnow() - silent.last_heartbeat > timedelta(seconds=15)  # three intervals


async def test_a_copy_that_lags_behind_does_not_call_a_beating_agent_offline(
    nc: NatsClient, project_id: str
) -> None:
    """On a loaded machine Weft's copy of the registry can hold heartbeats NATS already has;
    staleness is asked again once the copy has caught up, so no false ``offline`` (nor a
    spun-up agent stopped as "went offline") comes of the lag."""
    directory = AgentDirectory(nc, nc.jetstream(), ProjectNames(project_id))
    await directory.start(stale_check_interval_s=3600)  # checked by hand below
    try:
        async with copy_behind_a_heartbeat(directory, nc, project_id) as (beating, release):
            shown = directory.mirror.get(beating.agent_id)
            assert shown is not None and shown.is_stale(), "the copy lags behind NATS"

            checking = asyncio.create_task(directory.check_staleness())
            asking = asyncio.create_task(directory.still_stale(beating.agent_id))
            await asyncio.sleep(0)
            release.set()
            assert await checking == [] and await asking is False
        # and an agent whose heartbeats really stopped is still announced
        gone = await register(nc, project_id, stale=True)
        await directory.mirror.sync()
        assert gone.agent_id in await directory.check_staleness()
        assert await directory.still_stale(gone.agent_id)
    finally:
        await directory.stop()


@asynccontextmanager
async def copy_behind_a_heartbeat(
    directory: AgentDirectory, nc: NatsClient, project_id: str
) -> AsyncIterator[tuple[AgentEntry, asyncio.Event]]:
    """An agent whose copy in ``directory`` is stale while NATS holds its fresh heartbeat: the
    copy stops at another agent's registration until ``release`` is set (a loop too busy to
    follow). Yields the agent and ``release``."""
    beating = await register(nc, project_id, stale=True)
    await directory.mirror.sync()
    held, release = asyncio.Event(), asyncio.Event()
    blocker = agent_id()

    async def hold_the_copy(key: str, *_: Any) -> None:
        if key == blocker:
            held.set()
            await release.wait()

    directory.mirror.listen(hold_the_copy)
    await register(nc, project_id, aid=blocker)
    await held.wait()
    await register(nc, project_id, aid=beating.agent_id)  # a fresh heartbeat, in NATS
    try:
        yield beating, release
    finally:
        release.set()


async def test_a_shutdown_request_is_told_before_the_offline_it_causes(
    nc: NatsClient, project_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An idle Warp leaves within milliseconds of the request; a Weft short of CPU can relay
    its offline before its own ``shutdown-requested``, which carries the entry as read before
    asking (online): told last, it put a stopped agent back online in the console. The
    request's event comes first, and each event says the registry revision of its entry."""
    names = ProjectNames(project_id)
    js = nc.jetstream()
    await ensure_events_stream(js, names)
    registry = Registry(js, names)
    directory = AgentDirectory(nc, js, names)
    await directory.start(stale_check_interval_s=3600)
    entry = await register(nc, project_id)
    await directory.mirror.sync()
    registered = directory.mirror.revision_of(entry.agent_id)
    left: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def warp(_msg: Msg) -> None:  # drained at once: marks itself offline
        leaving = {"status": AgentStatus.OFFLINE}
        _, revision = await registry.update_known(entry.agent_id, lambda e: e.model_copy(update=leaving))
        left.set_result(revision)

    async def late_settle(conn: NatsClient, timeout: int = 10) -> None:
        """Weft goes on only once the agent's offline is relayed (a loop short of CPU)."""
        await settle(conn, timeout)
        assert await directory.mirror.wait_for(await asyncio.wait_for(left, 10))

    inbox = await nc.subscribe(names.control_subject(entry.agent_id), cb=warp)
    monkeypatch.setattr(agents_module, "settle", late_settle)
    try:
        await directory.request_shutdown(entry.agent_id, reason="test")
        offline = await left
    finally:
        await inbox.unsubscribe()
        await directory.stop()
    last = (await js.stream_info(names.events_stream)).state.last_seq
    events = [
        json.loads((await js.get_msg(names.events_stream, seq)).data or b"{}") for seq in range(1, last + 1)
    ]
    told = [(e["action"], e["data"]["status"], e["data"]["revision"]) for e in events]
    assert told == [
        ("registered", "online", registered),
        ("shutdown-requested", "online", registered),
        ("offline", "offline", offline),
    ]
