"""Nothing lives only in a Weft's memory: another replica (or a restarted Weft) picks up
every operation from KV and carries it on."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from nats.aio.client import Client as NatsClient

from shared.models import SpinupState, Target, TargetSpec
from shared.names import ProjectNames
from shared.nats.server import EmbeddedNatsServer
from tests.spinup.conftest import EngineFactory, eventually, hook, register_agent, stop_spinup
from tests.spinup.stubs import StubServer
from weft.targets.store import TargetStore

MakeTarget = Callable[..., Awaitable[Target]]


async def test_a_new_replica_links_the_agent_and_shuts_it_down_when_idle(
    engine_factory: EngineFactory,
    make_target: MakeTarget,
    receiver: StubServer,
    nc: NatsClient,
    project_id: str,
) -> None:
    first = await engine_factory()
    target = await make_target(name="hooked", mechanism="webhook", config=hook(receiver), idle_timeout_s=0.3)
    op = await (await first.manager(project_id)).spin_up(target.id)
    manager = await first.manager(project_id)
    await manager.drain(10)
    assert (await manager.store.get(op.id)).op.state is SpinupState.RUNNING
    await stop_spinup(first, stop_agents=False)  # this Weft goes away before the agent registers

    second = await engine_factory(shutdown_grace_s=0.2)
    await register_agent(
        nc, project_id, op.agent_id, spinup_id=op.id, target_id=target.id, capabilities=["code"]
    )
    other = await second.manager(project_id)

    async def state(wanted: SpinupState) -> Any:
        record = await other.store.get(op.id)
        return record if record.op.state is wanted else None

    await eventually(lambda: state(SpinupState.REGISTERED), what="the new replica to link the agent")
    final = await eventually(lambda: state(SpinupState.STOPPED), what="the new replica's idle shutdown")
    assert final.stop_note == "stop webhook answered 200"
    assert len(receiver.calls("POST", "/stop")) == 1
    # the slot is freed right after the stop is recorded (and announced): wait for it too

    async def slot_freed() -> bool:
        return (await other.store.slot(target.id)).live == []

    await eventually(slot_freed, what="the target's slot to be freed")


async def test_a_start_abandoned_by_a_crashed_replica_times_out_and_is_stopped_by_another(
    engine_factory: EngineFactory, make_target: MakeTarget, receiver: StubServer, project_id: str
) -> None:
    first = await engine_factory(register_timeout_s=0.5)
    target = await make_target(name="hooked", mechanism="webhook", config=hook(receiver))
    op = await (await first.manager(project_id)).spin_up(target.id)
    await (await first.manager(project_id)).drain(10)
    await stop_spinup(first, stop_agents=False)

    second = await engine_factory()
    other = await second.manager(project_id)

    async def cleaned() -> Any:
        record = await other.store.get(op.id)
        return record if record.op.state is SpinupState.TIMED_OUT and record.stop_done_at else None

    record = await eventually(cleaned, what="the time-out and clean-up by the other replica")
    assert record.op.error == "the agent did not register within 0.5s"
    assert len(receiver.calls("POST", "/stop")) == 1

    async def slot_freed() -> bool:  # freed just after the stop is recorded (and announced)
        slot = await other.store.slot(target.id)
        return slot.live == [] and slot.in_flight is None

    await eventually(slot_freed, what="the target's slot to be freed")
    again = await other.spin_up(target.id)  # the target is free again
    assert again.id != op.id


async def test_a_restarted_weft_finds_projects_with_live_operations_by_itself(
    engine_factory: EngineFactory,
    make_target: MakeTarget,
    receiver: StubServer,
    nc: NatsClient,
    nats_server: EmbeddedNatsServer,
    project_id: str,
) -> None:
    first = await engine_factory()
    target = await make_target(name="hooked", mechanism="webhook", config=hook(receiver))
    await (await first.manager(project_id)).spin_up(target.id)
    await (await first.manager(project_id)).drain(10)
    await stop_spinup(first, stop_agents=False)

    restarted = await engine_factory()  # discovery is called by hand below
    assert restarted.project_ids == []
    assert project_id in await restarted.discover_projects()
    assert project_id in restarted.project_ids

    quiet = f"{project_id}-quiet"  # a project with targets but nothing live is left alone
    quiet_targets = TargetStore(nc, nc.jetstream(), ProjectNames(quiet))
    await quiet_targets.start()
    await quiet_targets.create(TargetSpec(name="idle", mechanism="webhook", config=hook(receiver)))
    await quiet_targets.stop()
    assert quiet not in await restarted.discover_projects()
