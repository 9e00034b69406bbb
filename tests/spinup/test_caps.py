"""Admission control: one start in flight per target, ``max_concurrent`` live agents,
``cooldown_s`` between starts, held across Weft replicas (compare-and-set in KV)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any

import httpx
import pytest
from nats.aio.client import Client as NatsClient

from shared.models import SpinupState, Target, WorkSubmission, utcnow
from shared.names import ProjectNames
from tests.spinup.conftest import (
    ROOT,
    EngineFactory,
    RunningWeft,
    demo_agent_command,
    eventually,
    list_operations,
    register_agent,
)
from tests.spinup.stubs import Seen, StubServer
from testsupport.work import work_queue
from weft.eligibility import Need
from weft.spinup.managed import ManagedSpinup
from weft.spinup.store import LIVE_STATES, RESERVATION_GRACE_S, WorkReservation

MakeTarget = Callable[..., Awaitable[Target]]


async def test_ten_queued_items_never_get_more_than_max_concurrent_agents(
    weft: RunningWeft, api: httpx.AsyncClient, project_id: str, nc: NatsClient
) -> None:
    target = {
        "name": "pair",
        "capabilities": ["code"],
        "mechanism": "local",
        "max_concurrent": 2,
        "idle_timeout_s": 1,
        "config": {
            "command": demo_agent_command(),
            "cwd": str(ROOT),
            "env": {"LOOM_HEARTBEAT_S": "1", "LOOM_DEMO_WORK_S": "0.7"},
        },
    }
    assert (await api.post("/api/targets", json=target)).status_code == 201
    manager = await weft.spinup.manager(project_id)
    peak_ops = peak_agents = 0
    watching = True

    async def watch() -> None:
        nonlocal peak_ops, peak_agents
        while watching:
            # A pending record may be a reservation that loses the slot's compare-and-set to a
            # concurrent admission and is purged at once; only admitted operations start.
            live = [
                r
                for r in await manager.store.all()
                if r.op.state in LIVE_STATES and r.op.state is not SpinupState.PENDING
            ]
            agents = (await api.get("/api/agents", params={"limit": 100})).json()["items"]
            present = [a for a in agents if a["status"] != "offline"]
            peak_ops = max(peak_ops, len(live))
            peak_agents = max(peak_agents, len(present))
            await asyncio.sleep(0.05)

    watcher = asyncio.create_task(watch())
    ids = []
    for n in range(10):
        body = {"task_id": f"t{n}", "description": "d", "capability": "code"}
        ids.append((await api.post("/api/work", json=body)).json()["id"])

    async def all_done() -> bool:
        items = (await api.get("/api/work", params={"status": "completed", "limit": 50})).json()["items"]
        return len(items) == 10

    try:
        await eventually(all_done, timeout=90, what="all ten items to be completed")
    finally:
        watching = False
        await watcher
    operations = await list_operations(weft.spinup, project_id)
    assert peak_ops == 2, peak_ops  # the cap was reached and held
    assert peak_agents <= 2, peak_agents
    done_by = {(await api.get(f"/api/work/{i}")).json()["assigned_to"] for i in ids}
    assert done_by <= {op.agent_id for op in operations}
    assert len(operations) >= 2


@pytest.fixture
async def receiver() -> AsyncIterator[StubServer]:
    def accept(_: Seen) -> tuple[int, Any]:
        return 200, {"ok": True}

    server = await StubServer(accept).start()
    try:
        yield server
    finally:
        await server.stop()


async def _race(engines: list[ManagedSpinup], project_id: str, need: Need, n: int) -> list[Any]:
    managers = [await e.manager(project_id) for e in engines]
    decisions = await asyncio.gather(*(managers[i % len(managers)].request(need) for i in range(n)))
    return [d.operation for d in decisions if d.operation is not None]


async def test_two_replicas_racing_admit_one_start_at_a_time_and_at_most_max_concurrent(
    engine_factory: EngineFactory,
    make_target: MakeTarget,
    receiver: StubServer,
    nc: NatsClient,
    project_id: str,
) -> None:
    replicas = [await engine_factory(), await engine_factory()]
    target = await make_target(
        name="hooked", mechanism="webhook", config={"url": f"{receiver.url}/spawn"}, max_concurrent=3
    )
    need = Need(capability="code")
    started: list[Any] = []
    manager = await replicas[0].manager(project_id)
    for _ in range(5):
        admitted = await _race(replicas, project_id, need, 20)
        if len(started) < 3:
            assert len(admitted) == 1, admitted  # one in flight per target, whichever replica asked
            started += admitted
            op = admitted[0]
            await register_agent(
                nc, project_id, op.agent_id, spinup_id=op.id, target_id=target.id, capabilities=["code"]
            )

            async def linked(spinup_id: str = op.id) -> bool:  # and the target's start slot free again
                registered = (await manager.store.get(spinup_id)).op.state is SpinupState.REGISTERED
                return registered and (await manager.store.slot(target.id)).in_flight is None

            await eventually(linked, what="the registration to be linked")
        else:
            assert admitted == []  # max_concurrent reached
    assert len(started) == 3
    refused = await (await replicas[1].manager(project_id)).request(need)
    assert refused.outcome == "deferred" and [r.code for _, r in refused.refusals] == ["max-concurrent"]

    async def all_live() -> bool:  # a linked start leaves in_flight a moment after it is recorded
        slot = await (await replicas[0].manager(project_id)).store.slot(target.id)
        return sorted(slot.live) == sorted(op.id for op in started) and slot.in_flight is None

    await eventually(all_live, what="the three starts live in the target's slot")
    assert len(receiver.calls("POST", "/spawn")) == 3


async def test_cooldown_spaces_starts_even_when_a_slot_is_free(
    engine_factory: EngineFactory,
    make_target: MakeTarget,
    receiver: StubServer,
    nc: NatsClient,
    names: ProjectNames,
    project_id: str,
) -> None:
    engine = await engine_factory()
    target = await make_target(
        name="slow",
        mechanism="webhook",
        config={"url": f"{receiver.url}/spawn"},
        max_concurrent=5,
        cooldown_s=1.5,
    )
    item = await work_queue(nc, names).submit(WorkSubmission(task_id="c", description="d", capability="code"))
    first = await engine.request_for_work(project_id, item)
    assert first.operation is not None
    store = (await engine.manager(project_id)).store
    first_start = (await store.slot(target.id)).last_start_at  # the moment admission counts from
    await register_agent(
        nc,
        project_id,
        first.operation.agent_id,
        spinup_id=first.operation.id,
        target_id=target.id,
        capabilities=["code"],
    )
    manager = await engine.manager(project_id)

    async def linked() -> bool:
        return (await manager.store.get(first.operation.id)).op.state is SpinupState.REGISTERED  # type: ignore[union-attr]

    await eventually(linked)
    soon = await engine.request_for_work(project_id, item)
    assert soon.outcome == "deferred"
    [(name, refusal)] = soon.refusals
    assert name == "slow" and refusal.code == "cooldown" and refusal.retry_after_s is not None
    assert 0 < refusal.retry_after_s <= 1.5

    async def admitted() -> Any:
        decision = await engine.request_for_work(project_id, item)
        return decision.operation

    await eventually(admitted, what="the cool-down to pass")
    second_start = (await store.slot(target.id)).last_start_at
    assert first_start is not None and second_start is not None
    gap = (second_start - first_start).total_seconds()
    assert gap >= 1.5, gap


async def test_one_waiting_item_gets_one_start_even_with_several_matching_targets(
    engine_factory: EngineFactory,
    make_target: MakeTarget,
    receiver: StubServer,
    nc: NatsClient,
    names: ProjectNames,
    project_id: str,
) -> None:
    replicas = [await engine_factory(), await engine_factory()]
    for name, agent_type in (("claude-pool", "claude-code"), ("copilot-pool", "copilot")):
        await make_target(
            name=name, agent_type=agent_type, mechanism="webhook", config={"url": f"{receiver.url}/{name}"}
        )
    work = work_queue(nc, names)
    item = await work.submit(
        WorkSubmission(task_id="one", description="d", capability="code", preferred_agent_type="copilot")
    )
    first = await replicas[0].request_for_work(project_id, item)
    assert first.operation is not None and first.operation.target_name == "copilot-pool"
    # every sweep (on either replica) finds the item still waiting while its agent starts
    again = await asyncio.gather(*(replicas[i % 2].request_for_work(project_id, item) for i in range(10)))
    assert all(d.outcome == "deferred" for d in again)
    assert {r.code for d in again for _, r in d.refusals} == {"work-in-flight"}
    # another item may still use the other target
    other = await work.submit(WorkSubmission(task_id="two", description="d", capability="code"))
    second = await replicas[1].request_for_work(project_id, other)
    assert second.operation is not None and second.operation.target_name == "claude-pool"
    assert len(receiver.calls("POST", "/copilot-pool")) == 1

    # when the first start fails, the item may get a new one
    manager = await replicas[0].manager(project_id)
    await manager.stop(first.operation.id, "gave up on it")
    retried = await _eventually_admitted(replicas[1], project_id, item)
    assert retried.id != first.operation.id


async def _eventually_admitted(engine: ManagedSpinup, project_id: str, item: Any) -> Any:
    async def admitted() -> Any:
        return (await engine.request_for_work(project_id, item)).operation

    return await eventually(admitted, what="a new start for the item")


async def test_a_start_reserved_but_not_yet_recorded_holds_the_item(
    engine_factory: EngineFactory,
    make_target: MakeTarget,
    receiver: StubServer,
    nc: NatsClient,
    names: ProjectNames,
    project_id: str,
) -> None:
    """A start reserves the item, then records itself a moment later: a second request in
    that moment (scenario 9 under load: the submit's routing and a sweep 10 ms apart) must
    not take the reservation over as if its start had gone."""
    engine = await engine_factory()
    for name in ("claude-pool", "copilot-pool"):
        await make_target(name=name, mechanism="webhook", config={"url": f"{receiver.url}/{name}"})
    work = work_queue(nc, names)
    item = await work.submit(WorkSubmission(task_id="one", description="d", capability="code"))
    store = (await engine.manager(project_id)).store
    assert await store.reserve_work(item.id, "a" * 32) is None  # reserved; its record not written yet
    held = await engine.request_for_work(project_id, item)
    assert held.outcome == "deferred" and [r.code for _, r in held.refusals] == ["work-in-flight"]
    assert receiver.requests == []

    # a reservation that never got its record (its Weft stopped between the two writes) is
    # honoured for RESERVATION_GRACE_S only
    abandoned = WorkReservation(spinup_id="b" * 32, at=utcnow() - timedelta(seconds=RESERVATION_GRACE_S + 1))
    await (await store.bucket()).put(f"work.{item.id}", abandoned.to_json_bytes())
    taken = await engine.request_for_work(project_id, item)
    assert taken.operation is not None

    # and two requests at once for a new item start one agent
    other = await work.submit(WorkSubmission(task_id="two", description="d", capability="code"))
    both = await asyncio.gather(*(engine.request_for_work(project_id, other) for _ in range(2)))
    assert len([d for d in both if d.operation is not None]) == 1
