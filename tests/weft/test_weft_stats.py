"""Stats, project discovery, channels and Prometheus metrics."""

from __future__ import annotations

from typing import Any

from nats.aio.client import Client as NatsClient
from weft_helpers import channel, claimant, eventually, register

from shared.models import AgentStatus, ChannelMessage
from shared.names import ProjectNames
from testsupport.work import work_queue

WORK = {"description": "d", "capability": "code"}


async def test_stats_count_agents_work_targets_and_queues(api: Any, nc: NatsClient, project_id: str) -> None:
    agent = await register(nc, project_id, agent_type="copilot")
    await register(nc, project_id, agent_type="copilot", status=AgentStatus.BUSY)
    await register(nc, project_id, stale=True)
    for task in ("a", "b", "c"):
        await api.post("/api/work", json={**WORK, "task_id": task})
    await api.post("/api/work", json={**WORK, "task_id": "d", "capability": "docs"})
    queue = work_queue(nc, ProjectNames(project_id))
    taken = await queue.claim(claimant(agent))
    assert taken is not None
    await queue.fail(taken.id, agent.agent_id, "no", retryable=False)
    await api.post(
        "/api/targets", json={"name": "box", "mechanism": "local", "config": {"command": ["true"]}}
    )
    await api.post(
        "/api/targets",
        json={
            "name": "ci",
            "mechanism": "webhook",
            "config": {"url": "http://127.0.0.1:9/hook"},
            "enabled": False,
        },
    )

    stats = (await api.get("/api/stats")).json()
    assert stats["agents"]["total"] == 3
    assert stats["agents"]["by_status"] == {"online": 1, "busy": 1, "offline": 1}
    assert stats["agents"]["by_type"] == {"copilot": {"online": 1, "busy": 1}, "claude-code": {"offline": 1}}
    assert stats["work"]["total"] == 4
    assert stats["work"]["by_status"]["queued"] == 3 and stats["work"]["by_status"]["dead-lettered"] == 1
    assert stats["queue_depths"] == {"code": 2, "docs": 1}
    assert stats["dead_letters"] == 1
    assert stats["targets"] == {
        "total": 2,
        "enabled": 1,
        "by_health": {"unknown": 2, "healthy": 0, "unhealthy": 0},
        "by_mechanism": {"local": 1, "webhook": 1},
    }
    assert stats["spinups"] == {"total": 0, "by_state": {}, "mechanism": "none"}


async def test_projects_lists_every_project_with_data(
    weft: Any, api: Any, nc: NatsClient, project_id: str
) -> None:
    other = f"{project_id}-x"
    await work_queue(nc, ProjectNames(other)).ensure()  # data written without Weft ever serving it
    body = (await api.get("/api/stats/projects")).json()
    assert body["default_project"] == project_id
    by_id = {p["project_id"]: p for p in body["projects"]}
    assert by_id[project_id]["served"] and by_id[project_id]["default"]
    assert body["projects"][0]["project_id"] == project_id  # the default first
    assert not by_id[other]["served"] and not by_id[other]["default"]
    names = ProjectNames(other)
    assert (
        names.work_stream in by_id[other]["streams"] and names.work_records_bucket in by_id[other]["buckets"]
    )


async def test_channels_and_paged_messages(api: Any, nc: NatsClient, project_id: str) -> None:
    js = nc.jetstream()
    subject = await channel(nc, project_id, "roadmap")
    await channel(nc, project_id, "errors")
    await channel(nc, f"{project_id}-other", "roadmap")
    for i in range(7):
        message = ChannelMessage(channel="roadmap", sender_id="a" * 32, sender_handle="alice", body=f"m{i}")
        await js.publish(subject, message.to_json_bytes())
    await js.publish(subject, b"plain text, not a Loom message")

    listed = (await api.get("/api/channels")).json()["channels"]
    assert [c["name"] for c in listed] == ["errors", "roadmap"]
    roadmap = listed[1]
    assert roadmap["messages"] == 8 and roadmap["last_seq"] == 8 and roadmap["last_message_at"]

    latest = (await api.get("/api/channels/roadmap/messages", params={"limit": 3})).json()
    assert [m["seq"] for m in latest["items"]] == [6, 7, 8] and latest["next_cursor"] is None
    assert latest["items"][0]["message"]["body"] == "m5"
    assert latest["items"][2]["message"] is None and latest["items"][2]["raw"].startswith("plain text")

    bodies: list[int] = []
    page = (
        await api.get("/api/channels/roadmap/messages", params={"limit": 3, "from_beginning": True})
    ).json()
    while True:
        bodies += [m["seq"] for m in page["items"]]
        if not page["next_cursor"]:
            break
        page = (
            await api.get(
                "/api/channels/roadmap/messages", params={"limit": 3, "cursor": page["next_cursor"]}
            )
        ).json()
    assert bodies == list(range(1, 9))

    follow = page["follow_cursor"]
    message = ChannelMessage(channel="roadmap", sender_id="a" * 32, sender_handle="alice", body="later")
    await js.publish(subject, message.to_json_bytes())
    newer = (await api.get("/api/channels/roadmap/messages", params={"cursor": follow})).json()
    assert [m["message"]["body"] for m in newer["items"]] == ["later"]

    assert (await api.get("/api/channels/nope/messages")).status_code == 404
    wrong = await api.get("/api/channels/errors/messages", params={"cursor": follow})
    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_cursor"
    assert (await api.get("/api/channels/Bad Name/messages")).status_code == 422


async def test_metrics_count_requests_transitions_and_queue_depth(
    api: Any, nc: NatsClient, project_id: str
) -> None:
    agent = await register(nc, project_id)
    work = (await api.post("/api/work", json={**WORK, "task_id": "m"})).json()
    await api.post("/api/work", json={**WORK, "task_id": "n"})
    queue = work_queue(nc, ProjectNames(project_id))
    claimed = await queue.claim(claimant(agent))
    assert claimed is not None and claimed.id == work["id"]
    await queue.complete(work["id"], agent.agent_id)

    async def scraped() -> str | None:
        text = str((await api.get("/metrics")).text)
        done = f'weft_work_transitions_total{{action="completed",project="{project_id}"}} 1.0'
        return text if done in text else None

    text = await eventually(scraped, what="the completed transition in /metrics")
    assert f'weft_work_transitions_total{{action="submitted",project="{project_id}"}} 2.0' in text
    assert f'weft_queue_depth{{capability="code",project="{project_id}"}} 1.0' in text
    assert (
        'weft_http_request_duration_seconds_count{method="POST",route="/api/work",status="201"} 2.0' in text
    )
    assert f'weft_agents{{project="{project_id}",status="online"}} 1.0' in text
    assert "weft_spinups_total" in text
