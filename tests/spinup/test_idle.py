"""Idle shutdown, driven tick by tick (no background loop) so "not yet" is deterministic."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest
from nats.aio.client import Client as NatsClient

from shared.agents.registry import Registry
from shared.models import (
    AgentEntry,
    ControlRequest,
    SpinupOperation,
    SpinupState,
    Target,
    WorkSubmission,
    utcnow,
)
from shared.names import ProjectNames
from shared.nats.server import EmbeddedNatsServer
from shared.work.rules import Claimant
from tests.spinup.conftest import eventually, hook, published_events, start_spinup, stop_spinup, tick
from tests.spinup.stubs import StubServer
from testsupport.work import work_queue
from weft.project.hub import ProjectHub
from weft.spinup.managed import ManagedSpinup
from weft.spinup.manager import SpinupManager
from weft.spinup.settings import SpinupSettings
from weft.spinup.store import SpinupNotFound, SpinupRecord

MakeTarget = Callable[..., Awaitable[Target]]
LONG_AGO = timedelta(hours=1)


@pytest.fixture
async def engine(
    nc: NatsClient, nats_server: EmbeddedNatsServer, hubs: list[ProjectHub]
) -> AsyncIterator[ManagedSpinup]:
    """A replica that only moves when the test calls ``tick``."""
    settings = SpinupSettings(shutdown_grace_s=0.2, health_checks=False, register_timeout_s=60, tick_s=600)
    made = await start_spinup(nc, nats_server.url, settings)
    hubs.append(made.hub)
    yield made
    await stop_spinup(made, stop_agents=False)


class Fleet:
    """A target whose agents the test plays: started through the webhook, registered by hand."""

    def __init__(self, engine: ManagedSpinup, nc: NatsClient, project_id: str, target: Target) -> None:
        self.engine = engine
        self.nc = nc
        self.project_id = project_id
        self.target = target
        self.registry = Registry(nc.jetstream(), ProjectNames(project_id))

    async def manager(self) -> SpinupManager:
        return await self.engine.manager(self.project_id)

    async def registered_agent(self, **entry: Any) -> tuple[SpinupRecord, AgentEntry]:
        op = await (await self.manager()).spin_up(self.target.id)
        await (await self.manager()).drain(10)
        agent = AgentEntry(
            agent_id=op.agent_id,
            handle=f"played-{op.agent_id[:6]}",
            project_id=self.project_id,
            user_id="0" * 16,
            capabilities=["code"],
            spinup_id=op.id,
            target_id=self.target.id,
            heartbeat_interval_s=60,
            registered_at=utcnow() - LONG_AGO,
            last_activity=utcnow() - LONG_AGO,
            **entry,
        )
        await self.registry.put(agent)
        linked = await (await self.manager()).link(agent)
        assert linked is not None and linked.state is SpinupState.REGISTERED
        return await self.record(op.id), agent

    async def record(self, spinup_id: str) -> SpinupRecord:
        return await (await self.manager()).store.get(spinup_id)

    async def tick(self) -> None:
        await tick(self.engine, self.project_id)
        await (await self.manager()).drain(10)


@pytest.fixture
async def fleet(
    engine: ManagedSpinup, make_target: MakeTarget, receiver: StubServer, nc: NatsClient, project_id: str
) -> Fleet:
    target = await make_target(
        name="played",
        mechanism="webhook",
        config=hook(receiver),
        idle_timeout_s=0.2,
        max_concurrent=10,
    )
    return Fleet(engine, nc, project_id, target)


async def test_an_agent_holding_work_is_never_asked_to_stop(
    fleet: Fleet, nc: NatsClient, names: ProjectNames
) -> None:
    record, agent = await fleet.registered_agent()
    work = work_queue(nc, names)
    item = await work.submit(WorkSubmission(task_id="long", description="d", capability="code"))
    claimed = await work.claim(Claimant(agent.agent_id, agent.agent_type, ("code",), ("default",)))
    assert claimed is not None and claimed.id == item.id
    for _ in range(3):
        await fleet.tick()
    assert (
        await fleet.record(record.op.id)
    ).op.state is SpinupState.REGISTERED  # held work, though idle long

    busy_record, _ = await fleet.registered_agent(current_tasks=1)
    await fleet.tick()
    assert (await fleet.record(busy_record.op.id)).op.state is SpinupState.REGISTERED  # task count says busy

    await work.complete(item.id, agent.agent_id, "ok")
    requests: list[ControlRequest] = []

    async def heard(msg: Any) -> None:
        requests.append(ControlRequest.model_validate_json(msg.data))

    await nc.subscribe(names.control_subject(agent.agent_id), cb=heard)
    await nc.flush()

    async def asked() -> SpinupRecord | None:
        await fleet.tick()
        current = await fleet.record(record.op.id)
        return current if current.shutdown_requested_at else None

    stopping = await eventually(asked, what="the idle timeout after the work finished")
    assert stopping.op.state is SpinupState.STOPPING and "idle for" in (stopping.shutdown_reason or "")
    await eventually(lambda: _truthy(requests), what="the shutdown request on the control subject")
    assert requests[0].action == "shutdown" and requests[0].requested_by == "weft"
    assert requests[0].grace_s == 0.2


async def test_a_claim_the_copy_has_not_seen_yet_keeps_the_agent(
    fleet: Fleet, nc: NatsClient, names: ProjectNames
) -> None:
    """On a loaded machine Weft's copy of the work records can miss a claim made a moment
    ago; the agent then looks idle. Asking it to leave is decided again on caught-up copies."""
    record, agent = await fleet.registered_agent()
    await asyncio.sleep(0.3)  # idle past the target's 0.2 s since it registered
    work = work_queue(nc, names)
    item = await work.submit(WorkSubmission(task_id="real", description="d", capability="code"))
    part = await fleet.engine.project(fleet.project_id)
    await part.context.work.mirror.sync()
    held, release = asyncio.Event(), asyncio.Event()

    async def hold_the_copy(_key: str, _before: Any, after: Any, _initial: bool) -> None:
        if after is not None and b'"blocker"' in after.raw:  # the copy stops here until released
            held.set()
            await release.wait()

    part.context.work.mirror.listen(hold_the_copy)
    await work.submit(WorkSubmission(task_id="blocker", description="d", capability="other"))
    await held.wait()
    claimed = await work.claim(Claimant(agent.agent_id, agent.agent_type, ("code",), ("default",)))
    assert claimed is not None and claimed.id == item.id
    shown = part.context.work.mirror.get(item.id)
    assert shown is not None and shown.assigned_to is None, "the copy has not seen the claim"

    ticking = asyncio.create_task(part.tick(health=False))  # not fleet.tick: that syncs the copies first
    await asyncio.sleep(0.3)  # time enough for a tick that does not wait for the copies to ask
    release.set()
    await ticking
    await (await fleet.manager()).drain(10)
    assert (await fleet.record(record.op.id)).shutdown_requested_at is None


async def _truthy(value: Any) -> Any:
    return value


async def test_shutdown_waits_for_work_claimed_after_the_request_then_stops_the_agent(
    fleet: Fleet, receiver: StubServer, nc: NatsClient, names: ProjectNames
) -> None:
    record, agent = await fleet.registered_agent()

    async def asked() -> SpinupRecord | None:
        await fleet.tick()
        current = await fleet.record(record.op.id)
        return current if current.shutdown_requested_at else None

    await eventually(asked, what="the shutdown request")
    work = work_queue(nc, names)
    item = await work.submit(WorkSubmission(task_id="late", description="d", capability="code"))
    assert await work.claim(Claimant(agent.agent_id, agent.agent_type, ("code",), ("default",))) is not None
    await asyncio.sleep(0.3)  # the grace period passes while it holds work
    await fleet.tick()
    still = await fleet.record(record.op.id)
    assert still.op.state is SpinupState.STOPPING and still.stop_started_at is None
    assert receiver.calls("POST", "/stop") == []

    await work.complete(item.id, agent.agent_id, "done")

    async def stopped() -> SpinupRecord | None:
        await fleet.tick()
        now = await fleet.record(record.op.id)
        return now if now.op.state is SpinupState.STOPPED else None

    final = await eventually(stopped, what="the stop once the work is done")
    assert "still running" in (final.shutdown_reason or "") or "idle" in (final.shutdown_reason or "")
    assert len(receiver.calls("POST", "/stop")) == 1
    assert final.stop_note == "stop webhook answered 200"


async def test_idle_timeout_zero_means_never(
    fleet: Fleet, make_target: MakeTarget, receiver: StubServer
) -> None:
    fleet.target = await make_target(
        name="forever", mechanism="webhook", config={"url": f"{receiver.url}/start"}, idle_timeout_s=0
    )
    record, _ = await fleet.registered_agent()
    for _ in range(3):
        await fleet.tick()
    assert (await fleet.record(record.op.id)).op.state is SpinupState.REGISTERED


async def test_an_agent_that_went_offline_is_cleaned_up_through_its_mechanism(
    fleet: Fleet, receiver: StubServer, nc: NatsClient, names: ProjectNames
) -> None:
    record, agent = await fleet.registered_agent()

    def crashed(entry: AgentEntry) -> AgentEntry:
        entry.last_heartbeat = utcnow() - LONG_AGO  # heartbeats stopped; it never said goodbye
        return entry

    await fleet.registry.update(agent.agent_id, crashed)
    await fleet.tick()
    final = await fleet.record(record.op.id)
    assert final.op.state is SpinupState.STOPPED and final.shutdown_reason == "the agent went offline"
    assert len(receiver.calls("POST", "/stop")) == 1
    actions = [e.action for e in await published_events(nc, names, "spinup") if e.subject_id == record.op.id]
    assert actions[-2:] == ["stopping", "stopped"]


async def test_ended_operations_are_purged_after_the_retention(fleet: Fleet, nc: NatsClient) -> None:
    manager = await fleet.manager()
    store = manager.store
    kv = await store.bucket()
    old = utcnow() - timedelta(days=8)

    def ended(state: SpinupState, updated: Any, handle: dict[str, str]) -> SpinupRecord:
        op = SpinupOperation(
            project_id=fleet.project_id,
            target_id=fleet.target.id,
            target_name=fleet.target.name,
            agent_id=uuid.uuid4().hex,
            state=state,
            handle=handle,
            created_at=updated,
            updated_at=updated,
        )
        return SpinupRecord(op=op)

    gone = ended(SpinupState.FAILED, old, {})
    recent = ended(SpinupState.STOPPED, utcnow(), {})
    uncleaned = ended(SpinupState.TIMED_OUT, old, {"url": "x"})  # its stop never finished
    for record in (gone, recent, uncleaned):
        await kv.put(f"op.{record.op.id}", record.to_json_bytes())
    await fleet.tick()
    assert (await store.get(recent.op.id)).op.state is SpinupState.STOPPED
    assert (await store.get(uncleaned.op.id)).op.state is SpinupState.TIMED_OUT
    with pytest.raises(SpinupNotFound):
        await store.get(gone.op.id)


async def test_an_agent_holding_a_review_is_not_idle(
    fleet: Fleet, nc: NatsClient, names: ProjectNames
) -> None:
    record, agent = await fleet.registered_agent()
    work = work_queue(nc, names)
    item = await work.submit(
        WorkSubmission(task_id="r", description="d", capability="code", review={"capability": "code"})
    )
    author = "e" * 32
    assert await work.claim(Claimant(author, "generic", ("code",), ("default",))) is not None
    await work.complete(item.id, author, "to review")
    review = await work.claim(Claimant(agent.agent_id, agent.agent_type, ("code",), ("default",)))
    assert review is not None and review.status.value == "reviewing"
    for _ in range(3):
        await fleet.tick()
    assert (
        await fleet.record(record.op.id)
    ).op.state is SpinupState.REGISTERED  # reviewing, though idle long
    await work.review(item.id, agent.agent_id, "approve")

    async def asked() -> SpinupRecord | None:
        await fleet.tick()
        current = await fleet.record(record.op.id)
        return current if current.shutdown_requested_at else None

    await eventually(asked, what="the idle timeout after the review")


async def test_an_agent_waiting_on_the_operator_is_not_idle(
    fleet: Fleet, nc: NatsClient, names: ProjectNames
) -> None:
    from shared.work.questions import QuestionBook

    record, agent = await fleet.registered_agent()
    work = work_queue(nc, names)
    item = await work.submit(WorkSubmission(task_id="q", description="d", capability="code"))
    assert await work.claim(Claimant(agent.agent_id, agent.agent_type, ("code",), ("default",))) is not None
    book = QuestionBook(nc, names, work)
    asked = await book.ask(agent.agent_id, "which way?", work_id=item.id)
    for _ in range(3):
        await fleet.tick()
    assert (await fleet.record(record.op.id)).op.state is SpinupState.REGISTERED  # waits on a person
    await book.answer(asked.id, "left")
    await work.complete(item.id, agent.agent_id)

    async def asked_to_stop() -> SpinupRecord | None:
        await fleet.tick()
        current = await fleet.record(record.op.id)
        return current if current.shutdown_requested_at else None

    await eventually(asked_to_stop, what="the idle timeout once the work is done")
