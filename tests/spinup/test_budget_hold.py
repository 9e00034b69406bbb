"""Spin-ups wait while a daily budget is reached: the project's (every target) or a
target's own (that target only), refused with the code ``budget``; raising it admits again."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from nats.aio.client import Client as NatsClient

from shared.models import Target, WorkSubmission, utcnow
from shared.names import ProjectNames
from shared.usage.ledger import UsageLedger
from shared.usage.rules import Budget, Pause, Usage, paused, resumed, with_project_budget, with_target_budget
from tests.spinup.conftest import EngineFactory
from tests.spinup.stubs import StubServer
from testsupport.work import work_queue
from weft.spinup.base import SpinupError

MakeTarget = Callable[..., Awaitable[Target]]


async def test_a_reached_budget_refuses_spin_ups_until_raised(
    engine_factory: EngineFactory,
    make_target: MakeTarget,
    receiver: StubServer,
    nc: NatsClient,
    names: ProjectNames,
    project_id: str,
) -> None:
    engine = await engine_factory()
    pool = await make_target(
        name="pool", mechanism="webhook", config={"url": f"{receiver.url}/spawn"}, max_concurrent=5
    )
    spare = await make_target(
        name="spare", mechanism="webhook", config={"url": f"{receiver.url}/spawn"}, max_concurrent=5
    )
    ledger = UsageLedger(nc.jetstream(), names)
    await ledger.add(Usage(cost=3.0), target_id=pool.id, now=utcnow())
    manager = await engine.manager(project_id)
    shared_ledger = manager.context.ledger

    async def change(rule: Callable[[Any], Any]) -> None:
        await shared_ledger.change_budgets(rule)  # what PUT /api/budgets does (and the cache it refreshes)

    item = await work_queue(nc, names).submit(WorkSubmission(task_id="b", description="d", capability="code"))
    await change(lambda d: with_project_budget(d, Budget(cost=3.0)))
    held = await engine.request_for_work(project_id, item)
    assert held.outcome == "deferred" and held.operation is None
    assert {name for name, _ in held.refusals} == {"pool", "spare"}
    assert all(r.code == "budget" and "reached its daily budget" in r.message for _, r in held.refusals)
    with pytest.raises(SpinupError) as manual:
        await manager.spin_up(pool.id)
    assert "reached its daily budget" in manual.value.message

    # the project's budget raised, the pool's own budget still holds the pool only
    await change(
        lambda d: with_target_budget(with_project_budget(d, Budget(cost=100.0)), pool.id, Budget(cost=3.0))
    )
    started = await engine.request_for_work(project_id, item)
    assert started.operation is not None and started.operation.target_id == spare.id
    assert [(n, r.code) for n, r in started.refusals] == [] or all(
        r.code == "budget" for _, r in started.refusals
    )


async def test_a_paused_project_refuses_spin_ups_until_resumed(
    engine_factory: EngineFactory,
    make_target: MakeTarget,
    receiver: StubServer,
    nc: NatsClient,
    names: ProjectNames,
    project_id: str,
) -> None:
    engine = await engine_factory()
    pool = await make_target(
        name="pool", mechanism="webhook", config={"url": f"{receiver.url}/spawn"}, max_concurrent=5
    )
    manager = await engine.manager(project_id)
    ledger = manager.context.ledger
    item = await work_queue(nc, names).submit(WorkSubmission(task_id="p", description="d", capability="code"))
    await ledger.change_budgets(lambda d: paused(d, Pause(by="ana", reason="freeze", at=utcnow())))
    held = await engine.request_for_work(project_id, item)
    assert held.outcome == "deferred" and held.operation is None
    assert [(name, r.code, r.retry_after_s) for name, r in held.refusals] == [("pool", "pause", None)]
    assert "paused by ana: freeze" in held.refusals[0][1].message
    with pytest.raises(SpinupError) as manual:
        await manager.spin_up(pool.id)
    assert "paused by ana" in manual.value.message
    await ledger.change_budgets(resumed)
    started = await engine.request_for_work(project_id, item)
    assert started.operation is not None and started.operation.target_id == pool.id
