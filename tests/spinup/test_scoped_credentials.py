"""A spun-up agent with scoped NATS auth (issue 24): Weft gives it credentials of its own,
which are never stored, do the agent's whole job, and stop working when its operation ends."""

from __future__ import annotations

import shlex
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from shared.models import SpinupState, TargetSpec, WorkStatus, WorkSubmission
from shared.names import ProjectNames
from shared.nats.auth import parse_creds
from shared.nats.client import NatsConnectError, connect
from shared.settings import NatsSettings
from tests.spinup.conftest import ROOT, eventually
from testsupport.work import work_queue
from weft.metrics import Metrics
from weft.project.hub import ProjectHub
from weft.runtime import NatsRuntime, open_nats
from weft.settings import WeftSettings
from weft.spinup.base import SPINUP_EXTENSION
from weft.spinup.managed import ManagedSpinup
from weft.spinup.mechanisms import validate_target_config
from weft.spinup.settings import SpinupSettings
from weft.targets.store import TargetStore


@pytest.fixture
async def scoped_runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[NatsRuntime]:
    monkeypatch.setenv("LOOM_DATA_DIR", str(tmp_path / "data"))
    settings = WeftSettings(project_id="p", nats_auth="scoped", nats_port=-1, nats_ws_port=-1, nats_sync="1s")
    runtime = await open_nats(settings)
    assert runtime.authority is not None
    await runtime.authority.start()
    try:
        yield runtime
    finally:
        await runtime.authority.stop()
        await runtime.close()


async def test_a_spun_up_agents_credentials_die_with_its_operation(
    scoped_runtime: NatsRuntime, spinup_settings: SpinupSettings, project_id: str, tmp_path: Path
) -> None:
    nc, authority = scoped_runtime.nc, scoped_runtime.authority
    assert authority is not None and scoped_runtime.server is not None
    url = scoped_runtime.server.url
    names = ProjectNames(project_id)
    spinup = ManagedSpinup(spinup_settings)
    hub = ProjectHub(
        nc,
        WeftSettings(project_id=project_id, stale_check_interval_s=0.2),
        Metrics(),
        None,
        extensions={SPINUP_EXTENSION: spinup.attach},
        credentials=authority,
    )
    await spinup.start(hub)
    saved = tmp_path / "creds-seen-by-the-agent"
    # the agent: Weft's demo agent, started through a shell line that first keeps a copy of the
    # credentials it was given (so the test can try them after the operation ended)
    agent = " ".join(shlex.quote(p) for p in (sys.executable, "-m", "weft.spinup.demo_agent"))
    command = ["sh", "-c", f'printf %s "$NATS_CREDS_CONTENT" > {shlex.quote(str(saved))}; exec {agent}']
    config = validate_target_config(
        "local", {"command": command, "cwd": str(ROOT), "env": {"LOOM_HEARTBEAT_S": "1"}}
    )
    targets = TargetStore(nc, nc.jetstream(), names)
    await targets.start()
    try:
        await targets.create(
            TargetSpec(name="t1", capabilities=["code"], mechanism="local", config=config, idle_timeout_s=2)
        )
        context = await hub.get(project_id)
        await context.targets.mirror.sync()
        work = work_queue(nc, names)
        item = await work.submit(WorkSubmission(task_id="scoped-1", description="do it", capability="code"))
        decision = await spinup.request_for_work(project_id, item)
        assert decision.outcome == "started", decision.detail
        op = decision.operation
        assert op is not None
        manager = await spinup.manager(project_id)

        async def state(*wanted: SpinupState) -> Any:
            record = await manager.store.get(op.id)
            return record if record.op.state in wanted else None

        async def completed() -> Any:
            current = await work.get(item.id)
            return current if current.status is WorkStatus.COMPLETED else None

        done = await eventually(completed, what="the agent to complete the work with its own credentials")
        assert done.assigned_to == op.agent_id
        running = await manager.store.get(op.id)
        creds = saved.read_text()
        _, seed = parse_creds(creds)
        assert running.nats_user_key is not None and running.nats_expires_at is not None
        assert seed.decode() not in running.model_dump_json()  # never stored with the operation
        assert seed.decode() not in (await targets.resolve("t1")).model_dump_json()
        # while it lives they work ...
        live = await connect(NatsSettings(creds_content=SecretStr(creds)), url=url, timeout=5)
        await live.close()
        await eventually(lambda: state(SpinupState.STOPPED), what="idle shutdown")
        # ... and once its operation ended, not any more
        with pytest.raises(NatsConnectError, match="authorization failed"):
            await connect(NatsSettings(creds_content=SecretStr(creds)), url=url, timeout=3)
    finally:
        await targets.stop()
        for project in spinup.project_ids:
            await (await spinup.manager(project)).drain(15)
        await spinup.stop()
        await hub.close()
