"""One submission, one trace, exported over OTLP by every process it crosses: Shuttle's
command, Weft's REST handling, routing and queueing, and the claiming agent's Warp (each a
real process, exporting to a real OTLP/HTTP receiver; docs/operations.md, Traces)."""

from __future__ import annotations

import asyncio
import json
import sys
from asyncio.subprocess import PIPE
from pathlib import Path

import httpx
from test_weft_cli import clean_env, wait_healthy, weft_process
from weft_helpers import eventually

from shared.nats.server import EmbeddedNatsServer, free_port
from testsupport.env import without_fabric
from testsupport.otlp import OtlpReceiver, ReceivedSpan, otlp_receiver
from testsupport.serving import ws_connect
from testsupport.warp import warp_agent

SHUTTLE = str(Path(sys.executable).parent / "shuttle")
TOKEN = "operate:trace-token-never-exported-7f3a"
SECRET = TOKEN.split(":", 1)[1]


def _connected(spans: list[ReceivedSpan]) -> bool:
    """One tree: exactly one root, and every other span's parent is in the trace."""
    ids = {s.span_id for s in spans}
    roots = [s for s in spans if s.parent_id is None]
    return len(roots) == 1 and all(s.parent_id in ids for s in spans if s.parent_id is not None)


def _the_trace(receiver: OtlpReceiver) -> list[ReceivedSpan] | None:
    command = [s for s in receiver.spans if s.service == "loom-shuttle" and s.name == "shuttle submit"]
    if not command:
        return None
    spans = receiver.traces()[command[0].trace_id]
    services = {s.service for s in spans}
    names = {s.name for s in spans}
    done = {"loom-shuttle", "loom-weft", "loom-warp"} <= services and "work.complete" in names
    return spans if done and _connected(spans) else None


def _refused(receiver: OtlpReceiver) -> bool:
    return any(
        s.service == "loom-weft" and s.attributes.get("http.response.status_code") == "401"
        for s in receiver.spans
    )


async def test_one_submission_is_one_connected_trace_across_shuttle_weft_and_warp(
    nats_server: EmbeddedNatsServer, project_id: str, tmp_path: Path
) -> None:
    async with otlp_receiver() as receiver:
        otel = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_BSP_SCHEDULE_DELAY": "100"}
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        env = clean_env(
            tmp_path, NATS_URL=nats_server.url, WEFT_PORT=str(port), WEFT_API_TOKENS=TOKEN, **otel
        )
        with weft_process(["serve", "--project", project_id], env) as weft:
            await wait_healthy(base, weft)
            async with warp_agent(nats_server.url, project_id, tmp_path, **otel) as agent:
                await agent.call("warp_work_queue_status")
                shuttle_env = {
                    **without_fabric(also=("OTEL_",)),
                    "LOOM_API_URL": base,
                    "LOOM_PROJECT_ID": project_id,
                    "LOOM_API_TOKEN": SECRET,
                    **otel,
                }
                shuttle = await asyncio.create_subprocess_exec(
                    SHUTTLE,
                    "-q",
                    "submit",
                    "fix the build",
                    "-c",
                    "code",
                    env=shuttle_env,
                    stdout=PIPE,
                    stderr=PIPE,
                )
                out, err = await asyncio.wait_for(shuttle.communicate(), 60)
                assert shuttle.returncode == 0, err.decode()
                work_id = out.decode().strip()
                claimed = await agent.call("warp_work_claim")
                assert claimed["claimed"] and claimed["item"]["id"] == work_id
                await agent.call("warp_work_complete", {"work_id": work_id, "result": "built"})
                # the token in a WebSocket's query and a refused one in a header: never exported
                async with ws_connect(f"ws://127.0.0.1:{port}/api/ws?token={SECRET}") as ws:
                    assert json.loads(await ws.recv())["type"] == "welcome"
                async with httpx.AsyncClient(base_url=base) as client:
                    bad = await client.get("/api/work", headers={"Authorization": f"Bearer {SECRET}x"})
                    assert bad.status_code == 401
                spans = await eventually(
                    lambda: asyncio.sleep(0, _the_trace(receiver)),
                    timeout=20,
                    what="one connected trace from Shuttle, Weft and Warp",
                )
                await eventually(
                    lambda: asyncio.sleep(0, _refused(receiver) or None),
                    timeout=20,
                    what="the refused request's span",
                )
                assert not any(SECRET.encode() in body for body in receiver.bodies)

    by_name = {s.name: s for s in spans}
    root = next(s for s in spans if s.parent_id is None)
    assert root.service == "loom-shuttle" and root.name == "shuttle submit"
    # Shuttle's request -> Weft's server span -> the submission -> the agent's claim and completion
    submit = by_name["work.submit"]
    assert submit.service == "loom-weft" and submit.attributes["loom.work.id"] == work_id
    server = next(s for s in spans if s.span_id == submit.parent_id)
    assert server.service == "loom-weft"
    assert next(s for s in spans if s.span_id == server.parent_id).service == "loom-shuttle"
    for name in ("work.claim", "work.complete"):
        assert by_name[name].service == "loom-warp" and by_name[name].parent_id == submit.span_id
    assert by_name["weft.route"].service == "loom-weft"
