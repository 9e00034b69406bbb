"""Traces without a collector: an item's trace context travels with it (record, queue message,
events, the agent's messages) and every process's spans for it come back from
``GET /api/work/{id}/trace`` (docs/operations.md, Traces)."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from asyncio.subprocess import PIPE
from pathlib import Path
from typing import Any

from nats.aio.client import Client as NatsClient
from weft_helpers import eventually

from shared.names import ProjectNames
from shared.nats.server import EmbeddedNatsServer
from testsupport.warp import warp_agent

SHUTTLE = str(Path(sys.executable).parent / "shuttle")
TASK = {"task_id": "t", "description": "d", "capability": "code"}


def _trace_id(traceparent: str | None) -> str:
    assert traceparent, "no traceparent"
    version, trace_id, _span_id, _flags = traceparent.split("-")
    assert version == "00"
    return trace_id


async def _stored_headers(nc: NatsClient, stream: str, subject: str) -> dict[str, str]:
    """The headers of the last message the stream holds on ``subject``."""
    msg = await nc.jetstream().get_last_msg(stream, subject)
    return dict(msg.headers or {})


async def test_one_item_one_trace_across_weft_and_a_real_warp(
    weft: Any, api: Any, nc: NatsClient, nats_server: EmbeddedNatsServer, project_id: str, tmp_path: Path
) -> None:
    trace_id, caller_span = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    names = ProjectNames(project_id)
    async with (
        warp_agent(nats_server.url, project_id, tmp_path) as agent,
        warp_agent(nats_server.url, project_id, tmp_path, LOOM_CAPABILITIES="review") as peer,
    ):
        await agent.call("warp_work_queue_status")  # connected and registered
        await peer.call("warp_work_queue_status")
        submitted = await api.post(
            "/api/work",
            json={"task_id": "traced", "description": "follow me", "capability": "code"},
            headers={"traceparent": f"00-{trace_id}-{caller_span}-01"},
        )
        assert submitted.status_code == 201, submitted.text
        work = submitted.json()
        # the record keeps the caller's trace; the queue message and the events carry it on
        assert _trace_id(work["traceparent"]) == trace_id
        queued = await _stored_headers(nc, names.work_stream, names.work_subjects.replace(">", "*.>"))
        assert _trace_id(queued.get("traceparent")) == trace_id
        event = await _stored_headers(nc, names.events_stream, names.event_subject("work", "queued"))
        assert _trace_id(event.get("traceparent")) == trace_id

        claimed = await agent.call("warp_work_claim")
        assert claimed["claimed"] and claimed["item"]["id"] == work["id"]
        # a conversation about the item joins its trace: the sender's side and the reader's
        await agent.call("warp_messages_send_direct", {"recipient_id": peer.agent_id, "message": "on it"})
        dm = await _stored_headers(nc, names.inbox_stream, names.inbox_subjects)
        assert _trace_id(dm.get("traceparent")) == trace_id
        assert (await peer.call("warp_messages_read_direct"))["messages"][0]["body"] == "on it"
        await agent.call("warp_channels_send", {"channel": "parallel-work", "message": "taking the build"})
        await peer.call("warp_channels_read", {"channel": "parallel-work", "from_beginning": True})
        await agent.call("warp_work_progress", {"work_id": work["id"], "percent": 50, "note": "half"})
        await agent.call("warp_work_complete", {"work_id": work["id"], "result": "done"})

        wanted = {"work.submit", "weft.route", "work.queued", "work.claim", "message.send", "work.progress"}
        wanted |= {"work.complete", "message.receive"}

        async def recorded() -> dict[str, Any] | None:
            timeline = (await api.get(f"/api/work/{work['id']}/trace")).json()
            return timeline if wanted <= {s["name"] for s in timeline["spans"]} else None

        timeline = await eventually(recorded, timeout=15, what="every process's spans in the timeline")

    assert timeline["trace_id"] == trace_id and timeline["truncated"] is False
    spans = {s["name"]: s for s in timeline["spans"]}
    sends = [s for s in timeline["spans"] if s["name"] == "message.send"]
    receives = [s for s in timeline["spans"] if s["name"] == "message.receive"]
    assert len(sends) == 2 and len(receives) == 2  # the direct message and the channel message
    assert {r["parent_id"] for r in receives} == {s["span_id"] for s in sends}
    assert {r["attributes"]["messaging.destination.name"] for r in receives} == {
        "inbox",
        "channel parallel-work",
    }
    assert {s["trace_id"] for s in timeline["spans"]} == {trace_id}
    # Weft's spans and the agent's Warp's spans, one tree: the claim is a child of the submission
    for name in ("work.claim", "work.progress", "work.complete", "message.send", "work.queued"):
        assert spans[name]["service"] == "loom-warp", name
        assert spans[name]["attributes"]["loom.work.id"] == work["id"]
    assert spans["work.submit"]["service"] == spans["weft.route"]["service"] == "loom-weft"
    assert spans["work.claim"]["parent_id"] == spans["work.submit"]["span_id"]
    assert spans["work.claim"]["attributes"]["loom.agent.id"] == agent.agent_id
    assert spans["weft.route"]["attributes"]["loom.routing.outcome"] == "agent-available"
    assert all(s["status"] == "ok" for s in timeline["spans"])
    kinds = [e["kind"] for e in timeline["events"]]
    assert kinds[0] == "submission" and "attempt" in kinds
    # its phases: queued from the submission to the claim, working from the claim to the result
    phases = timeline["phases"]
    assert [p["name"] for p in phases] == ["queued", "working"], phases
    moments = {e["kind"]: e["at"] for e in timeline["events"]}
    assert phases[0]["start"] == moments["submission"] and phases[0]["end"] == phases[1]["start"]
    assert phases[1]["start"] == moments["attempt"] and phases[1]["end"] == moments["result"]

    # the terminal waterfall, drawn by Shuttle from the same answer
    env = {**os.environ, "LOOM_API_URL": weft.base_url, "LOOM_PROJECT_ID": project_id, "NO_COLOR": "1"}
    env.pop("LOOM_API_TOKEN", None)
    shuttle = await asyncio.create_subprocess_exec(  # Weft runs in this loop: never block it
        SHUTTLE, "work", "trace", work["id"], env=env, stdout=PIPE, stderr=PIPE
    )
    out, err = await asyncio.wait_for(shuttle.communicate(), 60)
    drawn = out.decode()
    assert shuttle.returncode == 0, err.decode()
    assert trace_id in drawn
    for name in ("work.submit", "work.claim", "work.complete", "◆ submission", "queued", "working"):
        assert name in drawn, name
    assert "warp" in drawn  # the process column


async def test_an_items_trace_is_its_projects_alone(weft: Any, api: Any, project_id: str) -> None:
    work = (
        await api.post("/api/work", json={"task_id": "t", "description": "d", "capability": "code"})
    ).json()
    mine = await api.get(f"/api/work/{work['id']}/trace")
    assert mine.status_code == 200 and {s["name"] for s in mine.json()["spans"]} >= {"work.submit"}
    async with weft.client(project=f"{project_id}-other") as other:
        theirs = await other.get(f"/api/work/{work['id']}/trace")
    assert theirs.status_code == 404


async def test_trace_of_an_unknown_or_malformed_id(api: Any) -> None:
    unknown = await api.get(f"/api/work/{uuid.uuid4().hex}/trace")
    assert unknown.status_code == 404 and unknown.json()["error"] == "not_found"
    malformed = await api.get("/api/work/not-an-id!/trace")
    assert malformed.status_code == 422
    assert "work_id" in malformed.text and "not-an-id!" not in malformed.text


async def test_a_submission_without_a_caller_trace_starts_one(api: Any) -> None:
    work = (
        await api.post("/api/work", json={"task_id": "t", "description": "d", "capability": "code"})
    ).json()
    timeline = (await api.get(f"/api/work/{work['id']}/trace")).json()
    submit = next(s for s in timeline["spans"] if s["name"] == "work.submit")
    assert timeline["trace_id"] == _trace_id(work["traceparent"]) == submit["trace_id"]
