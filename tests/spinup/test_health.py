"""Health checks on each target's interval, their events, and routing around unhealthy targets."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from nats.aio.client import Client as NatsClient

from shared.models import Target, TargetHealth, TargetSpec
from shared.names import ProjectNames
from shared.nats.server import EmbeddedNatsServer
from tests.spinup.conftest import eventually, published_events, start_spinup, stop_spinup, tick
from tests.spinup.stubs import Seen, StubServer
from weft.eligibility import Need
from weft.project.hub import ProjectHub
from weft.spinup.managed import ManagedSpinup
from weft.spinup.settings import SpinupSettings
from weft.targets.store import TargetStore

MakeTarget = Callable[..., Awaitable[Target]]


@pytest.fixture
async def engine(
    nc: NatsClient, nats_server: EmbeddedNatsServer, hubs: list[ProjectHub]
) -> AsyncIterator[ManagedSpinup]:
    """A replica that only moves when the test calls ``tick``."""
    made = await start_spinup(nc, nats_server.url, SpinupSettings(health_checks=True, tick_s=600))
    hubs.append(made.hub)
    yield made
    await stop_spinup(made)


async def _checked(targets: TargetStore, target_id: str, after: Any = None) -> Target | None:
    target = await targets.resolve(target_id)
    if target.last_health_check is None or (after is not None and target.last_health_check <= after):
        return None
    return target


async def test_due_checks_set_health_publish_events_and_steer_routing(
    engine: ManagedSpinup,
    make_target: MakeTarget,
    targets: TargetStore,
    nc: NatsClient,
    names: ProjectNames,
    project_id: str,
) -> None:
    interval = {"interval_s": 1, "timeout_s": 5}
    good = await make_target(name="good", config={"command": [sys.executable, "-V"]}, health_check=interval)
    broken = await make_target(
        name="broken", config={"command": ["/nonexistent/agent"]}, health_check=interval, agent_type="copilot"
    )
    disabled = await make_target(name="off", config={"command": ["/nonexistent/x"]}, enabled=False)

    await tick(engine, project_id, health=True)
    good_now = await eventually(lambda: _checked(targets, good.id), what="the good target's check")
    broken_now = await eventually(lambda: _checked(targets, broken.id), what="the broken target's check")
    assert good_now.health is TargetHealth.HEALTHY and good_now.health_detail.endswith("is executable")
    assert broken_now.health is TargetHealth.UNHEALTHY
    assert broken_now.health_detail == "'/nonexistent/agent' is not an executable program"
    assert (await targets.resolve(disabled.id)).last_health_check is None  # disabled: not checked

    events = await published_events(nc, names, "target")
    changed = {
        (e.subject_id, e.data["health"], e.data["previous"]) for e in events if e.action == "health-changed"
    }
    assert changed == {(good.id, "healthy", "unknown"), (broken.id, "unhealthy", "unknown")}
    checked = [e.subject_id for e in events if e.action == "health-checked"]
    assert sorted(checked) == sorted([good.id, broken.id])

    # not due again before the interval: a second tick checks nothing
    project = await engine.project(project_id)
    assert project.health.due([good_now, broken_now]) == []

    # automatic spin-up skips the unhealthy target even when the work prefers its agent type
    manager = await engine.manager(project_id)
    decision = await manager.request(Need(capability="code", required_agent_type="copilot"))
    assert decision.outcome == "no-target"
    # ...and recovers once the target is fixed and checked again
    await targets.patch(broken.id, {"config": {"command": [sys.executable, "-V"]}})

    async def recovered() -> Target | None:
        await tick(engine, project_id, health=True)
        target = await _checked(targets, broken.id, after=broken_now.last_health_check)
        return target if target is not None and target.health is TargetHealth.HEALTHY else None

    await eventually(recovered, what="the next check after the interval")
    events = await published_events(nc, names, "target")
    assert (broken.id, "healthy", "unhealthy") in {
        (e.subject_id, e.data["health"], e.data["previous"]) for e in events if e.action == "health-changed"
    }


async def test_a_probe_that_hangs_is_unhealthy_after_its_timeout(
    engine: ManagedSpinup, make_target: MakeTarget, targets: TargetStore, project_id: str
) -> None:
    async def slow(_: Seen) -> tuple[int, Any]:
        await asyncio.sleep(1.5)
        return 200, None

    server = await StubServer(slow).start()
    try:
        hook = await make_target(
            name="slow-hook",
            mechanism="webhook",
            config={"url": f"{server.url}/spawn", "health_url": f"{server.url}/health"},
            health_check={"interval_s": 60, "timeout_s": 0.3},
        )
        report = await engine.check_health(project_id, hook.id)
    finally:
        await server.stop()
    assert report.result.ok is False and "ReadTimeout" in report.result.detail
    assert (await targets.resolve(hook.id)).health is TargetHealth.UNHEALTHY


async def test_an_invalid_stored_config_is_reported_unhealthy(
    engine: ManagedSpinup, targets: TargetStore, project_id: str
) -> None:
    # written before validation existed, or by hand: the store itself does not check configs
    stored = await targets.create(TargetSpec(name="legacy", mechanism="ssh", config={"host": "x"}))
    report = await engine.check_health(project_id, stored.id)
    assert report.result.ok is False and report.result.detail.startswith("invalid config: config.username")
