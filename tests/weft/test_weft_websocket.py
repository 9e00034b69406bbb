"""The /api/ws protocol: topics, filters, ping/pong, errors, stats."""

from __future__ import annotations

from typing import Any

import pytest
from nats.aio.client import Client as NatsClient
from websockets.exceptions import InvalidStatus
from weft_helpers import WsClient, claimant, register, ws_connect

from shared.names import ProjectNames
from testsupport.work import work_queue

WORK = {"description": "d", "capability": "code"}


async def test_filters_select_events(weft: Any, api: Any, nc: NatsClient, project_id: str) -> None:
    agent = await register(nc, project_id, capabilities=("code", "docs"))
    queue = work_queue(nc, ProjectNames(project_id))
    async with ws_connect(f"{weft.ws_url}/api/ws") as conn:
        ws = WsClient(conn)
        assert (await ws.next_of("welcome"))["subscriptions"] == []
        await ws.subscribe("work", {"capability": "docs"}, sub_id="docs")
        await ws.subscribe("work", {"status": ["completed"]}, sub_id="done")
        await ws.subscribe("work", {"agent_id": agent.agent_id, "action": "claimed"}, sub_id="mine")
        code = (await api.post("/api/work", json={**WORK, "task_id": "code"})).json()
        docs = (await api.post("/api/work", json={**WORK, "task_id": "docs", "capability": "docs"})).json()
        first = await queue.claim(claimant(agent))
        assert first is not None and first.id == code["id"]
        await queue.complete(code["id"], agent.agent_id)
        frames: list[dict[str, Any]] = []
        while not any(f["event"]["action"] == "completed" for f in frames):
            frame = await ws.next_of("event")
            frames.append(frame)
    seen = [(f["event"]["subject_id"], f["event"]["action"], f["subscriptions"]) for f in frames]
    assert (code["id"], "claimed", ["mine"]) in seen
    assert (code["id"], "completed", ["done"]) in seen
    assert (docs["id"], "submitted", ["docs"]) in seen and (docs["id"], "queued", ["docs"]) in seen
    assert all(sid != code["id"] or action in ("claimed", "completed") for sid, action, _ in seen)
    seqs = [f["seq"] for f in frames]
    assert seqs == sorted(seqs)  # stream order


async def test_ping_unsubscribe_and_protocol_errors(weft: Any, api: Any) -> None:
    async with ws_connect(f"{weft.ws_url}/api/ws?topics=work,agents") as conn:
        ws = WsClient(conn)
        welcome = await ws.next_of("welcome")
        assert [s["topic"] for s in welcome["subscriptions"]] == ["work", "agents"]
        await ws.send({"type": "ping"})
        assert (await ws.next())["type"] == "pong"
        for bad, words in (
            ("not json", "not JSON"),
            ([1, 2], "JSON object"),
            ({"type": "dance"}, "type"),
            ({"type": "subscribe", "topic": "weather"}, "topic"),
            ({"type": "subscribe", "topic": "work", "filters": {"colour": "red"}}, "filters.colour"),
            ({"type": "subscribe", "topic": "work", "filters": {"status": 5}}, "filters.status"),
            ({"type": "subscribe", "topic": "stats", "filters": {"interval_s": 0}}, "interval_s"),
            ({"type": "unsubscribe", "id": "nope"}, "no such subscription"),
            ({"type": "unsubscribe"}, "unsubscribe"),
        ):
            await conn.send(bad if isinstance(bad, str) else __import__("json").dumps(bad))
            error = await ws.next_of("error")
            assert error["error"] == "invalid" and words in error["message"], (bad, error)
        await ws.send({"type": "unsubscribe", "topic": "work"})
        assert (await ws.next_of("unsubscribed"))["ids"] == ["q0"]
        # the connection still works after errors
        await ws.send({"type": "ping"})
        assert (await ws.next_of("pong"))["type"] == "pong"


async def test_server_pings_and_stats_topic(weft_factory: Any, project_id: str) -> None:
    async with weft_factory(project_id=project_id, ws_ping_interval_s=0.2) as weft:
        async with weft.client() as api:
            await api.post("/api/work", json={**WORK, "task_id": "s"})
        async with ws_connect(f"{weft.ws_url}/api/ws?topics=stats&interval_s=1") as conn:
            ws = WsClient(conn)
            await ws.next_of("welcome")
            stats = await ws.next_of("stats")
            assert stats["stats"]["project_id"] == project_id and stats["stats"]["work"]["total"] == 1
            assert stats["stats"]["queue_depths"] == {"code": 1}
            assert (await ws.next_of("ping"))["type"] == "ping"
            await ws.send({"type": "pong"})


async def test_bad_connect_parameters_are_refused(weft: Any) -> None:
    for query, words, rejected in (
        ("topics=weather", b"topics: each must be one of", b"weather"),
        ("topics=work&colour=red", b"colour: not a filter", b"red"),
        ("project=Bad9Token", b"invalid_project", b"Bad9Token"),
        ("topics=work&X9secretKey=1", b"*: not a filter", b"X9secretKey"),
    ):
        with pytest.raises(InvalidStatus) as refused:
            async with ws_connect(f"{weft.ws_url}/api/ws?{query}"):
                pass
        assert refused.value.response.status_code == 400
        assert words in refused.value.response.body
        assert rejected not in refused.value.response.body  # rejected input is never echoed
