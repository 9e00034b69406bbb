"""The Warp runtime without MCP: background connect, control requests, stop (warp.runtime)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from nats.aio.client import Client as NatsClient
from warp_harness import eventually, make_identity

from shared.agents.registry import AgentNotFound, Registry
from shared.models import AgentStatus, ControlRequest, WorkSubmission
from shared.names import ProjectNames
from shared.nats.jetstream import snapshot
from shared.nats.server import EmbeddedNatsServer, free_port
from testsupport.work import work_queue
from warp.errors import Unavailable
from warp.runtime import WarpRuntime
from warp.settings import WarpSettings

A = "a" * 32


@asynccontextmanager
async def runtime(
    url: str, project_id: str, tmp_path: Path, *, register_when_serving: bool = False, **settings: object
) -> AsyncIterator[WarpRuntime]:
    values: dict[str, object] = {"heartbeat_s": 0.3, "capabilities": ("code",), "ready_wait_s": 10.0}
    values.update(settings)
    rt = WarpRuntime(make_identity(project_id, tmp_path, A), WarpSettings(**values), nats_url=url)  # type: ignore[arg-type]
    exited = asyncio.Event()
    rt.on_exit = exited.set
    rt.start(register_when_serving=register_when_serving)
    try:
        yield rt
    finally:
        await rt.stop("test over")


async def test_reports_clearly_while_nats_is_unreachable(project_id: str, tmp_path: Path) -> None:
    url = f"nats://127.0.0.1:{free_port()}"
    async with runtime(url, project_id, tmp_path, ready_wait_s=0.5) as rt:
        with pytest.raises(Unavailable) as info:
            await rt.services()
        assert "NATS is not reachable yet" in str(info.value)
        assert "127.0.0.1" in str(info.value) and "retry" in str(info.value)


async def test_auto_register_and_stop_marks_offline(
    nats_server: EmbeddedNatsServer, nc: NatsClient, project_id: str, tmp_path: Path
) -> None:
    registry = Registry(nc.jetstream(), ProjectNames(project_id))
    async with runtime(nats_server.url, project_id, tmp_path, auto_register=True, target_id="t9") as rt:
        svc = await rt.services()
        assert svc.agent_id == A and rt.identity.instance == 0
        entry = await registry.get(A)
        assert entry.status is AgentStatus.ONLINE and entry.target_id == "t9"
    assert (await registry.get(A)).status is AgentStatus.OFFLINE
    kv = await nc.jetstream().key_value(ProjectNames(project_id).instance_locks_bucket)
    assert await snapshot(kv) == {}  # instance id released


async def test_auto_register_waits_until_the_tools_are_served(
    nats_server: EmbeddedNatsServer, nc: NatsClient, project_id: str, tmp_path: Path
) -> None:
    """``warp`` on stdio reaches NATS while its tools load; the agent is announced only once
    they answer, since Weft routes work to a registered agent and counts its idle time."""
    registry = Registry(nc.jetstream(), ProjectNames(project_id))
    settings = {"auto_register": True, "ready_wait_s": 2.0}
    async with runtime(nats_server.url, project_id, tmp_path, register_when_serving=True, **settings) as rt:
        with pytest.raises(Unavailable):
            await rt.services()  # connected, but not ready: not registered
        with pytest.raises(AgentNotFound):
            await registry.get(A)
        rt.serving()
        await rt.services()
        assert (await registry.get(A)).status is AgentStatus.ONLINE


async def test_shutdown_request_drains_deregisters_and_exits(
    nats_server: EmbeddedNatsServer, nc: NatsClient, project_id: str, tmp_path: Path
) -> None:
    names = ProjectNames(project_id)
    registry = Registry(nc.jetstream(), names)
    async with runtime(nats_server.url, project_id, tmp_path, auto_register=True) as rt:
        exited = asyncio.Event()
        rt.on_exit = exited.set
        svc = await rt.services()
        svc.presence.held.add("w" * 32)  # holds work: the drain waits for it, up to the grace period
        request = ControlRequest(action="shutdown", reason="idle", grace_s=5)
        reply = await nc.request(names.control_subject(A), request.to_json_bytes(), timeout=5)
        assert json.loads(reply.data) == {"ok": True, "agent_id": A, "action": "shutdown"}
        assert rt.draining is not None
        notice = rt.drain_notice()
        assert notice is not None and "shutdown requested by weft (idle)" in notice
        await asyncio.sleep(0.3)
        assert not exited.is_set()
        assert (await registry.get(A)).status is not AgentStatus.OFFLINE
        svc.presence.held.clear()  # the agent finished its work
        await asyncio.wait_for(exited.wait(), 10)
        entry = await registry.get(A)
        assert entry.status is AgentStatus.OFFLINE
        assert entry.metadata["offline_reason"] == "shutdown requested by weft: idle"
        with pytest.raises(Unavailable, match="shutting down"):
            await rt.services()


async def test_grace_period_bounds_the_drain(
    nats_server: EmbeddedNatsServer, nc: NatsClient, project_id: str, tmp_path: Path
) -> None:
    names = ProjectNames(project_id)
    async with runtime(nats_server.url, project_id, tmp_path, auto_register=True) as rt:
        exited = asyncio.Event()
        rt.on_exit = exited.set
        svc = await rt.services()
        svc.presence.held.add("w" * 32)  # never finished
        await nc.publish(
            names.control_subject(A), ControlRequest(action="shutdown", grace_s=0.2).to_json_bytes()
        )
        await asyncio.wait_for(exited.wait(), 10)
        assert (await Registry(nc.jetstream(), names).get(A)).status is AgentStatus.OFFLINE


async def test_cancel_work_is_remembered_and_stops_counting(
    nats_server: EmbeddedNatsServer, nc: NatsClient, project_id: str, tmp_path: Path
) -> None:
    names = ProjectNames(project_id)
    async with runtime(nats_server.url, project_id, tmp_path, auto_register=True) as rt:
        svc = await rt.services()
        queue = work_queue(nc, names)
        item = await queue.submit(
            WorkSubmission(task_id="t", description="d", capability="code"), submitted_by="test"
        )
        from shared.work.rules import Claimant

        claimed = await svc.work.claim(Claimant(agent_id=A, agent_type="claude-code", capabilities=("code",)))
        assert claimed is not None and claimed.id == item.id
        svc.presence.tasks_changed(claimed=item.id)
        await queue.cancel(item.id, reason="requirements changed", by="operator")

        async def remembered() -> bool:
            return rt.cancelled is not None and rt.cancelled.get(item.id) is not None

        await eventually(remembered)
        message = rt.cancelled.message(item.id) if rt.cancelled else None
        assert message == (
            f"work_id: {item.id} was cancelled by operator: requirements changed; "
            "stop working on it (nothing more to report)"
        )
        assert item.id not in svc.presence.held


async def test_malformed_control_request_is_refused(
    nats_server: EmbeddedNatsServer, nc: NatsClient, project_id: str, tmp_path: Path
) -> None:
    names = ProjectNames(project_id)
    async with runtime(nats_server.url, project_id, tmp_path) as rt:
        await rt.services()
        reply = await nc.request(names.control_subject(A), b'{"action": "explode"}', timeout=5)
        assert json.loads(reply.data) == {"ok": False, "error": "malformed request"}
        assert rt.draining is None
