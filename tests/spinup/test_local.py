"""``local`` mechanism end to end against a real nats-server and real agent processes."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import nats.errors
import pytest
from nats.aio.client import Client as NatsClient

from shared.identity import spun_up_handle
from shared.models import SpinupState, Target, WorkStatus, WorkSubmission
from shared.names import ProjectNames
from shared.trace.tracing import read_timeline, trace_id_of
from tests.spinup.conftest import eventually, published_events, read_text
from testsupport.processes import pid_alive
from testsupport.work import work_queue
from weft.spinup.base import SpinupError
from weft.spinup.managed import ManagedSpinup

MakeTarget = Callable[..., Awaitable[Target]]


async def _op_state(service: ManagedSpinup, project_id: str, spinup_id: str, *states: SpinupState) -> Any:
    record = await (await service.manager(project_id)).store.get(spinup_id)
    return record if record.op.state in states else None


async def _slot_free(manager: Any, target_id: str) -> bool:
    slot = await manager.store.slot(target_id)
    return slot.in_flight is None and not slot.live


async def test_work_with_no_agent_starts_a_local_agent_that_completes_it_and_idles_out(
    service: ManagedSpinup, make_target: MakeTarget, nc: NatsClient, names: ProjectNames, project_id: str
) -> None:
    target = await make_target(idle_timeout_s=2)
    work = work_queue(nc, names)
    item = await work.submit(WorkSubmission(task_id="local-1", description="do it", capability="code"))

    decision = await service.request_for_work(project_id, item)
    assert decision.outcome == "started", decision.detail
    op = decision.operation
    assert op is not None and op.target_id == target.id and op.work_id == item.id

    registered = await eventually(
        lambda: _op_state(service, project_id, op.id, SpinupState.REGISTERED, SpinupState.STOPPING),
        what="the agent to register",
    )
    pid = int(registered.op.handle["pid"])
    assert registered.op.registered_at is not None and registered.op.started_at is not None

    async def completed() -> Any:
        current = await work.get(item.id)
        return current if current.status is WorkStatus.COMPLETED else None

    done = await eventually(completed, what="the work to be completed")
    assert done.assigned_to == op.agent_id
    assert done.result == {"done_by": op.agent_id, "task_id": "local-1"}

    stopped = await eventually(
        lambda: _op_state(service, project_id, op.id, SpinupState.STOPPED), what="idle shutdown"
    )
    assert stopped.shutdown_reason and "idle" in stopped.shutdown_reason
    assert not pid_alive(pid)
    entry = await (await service.manager(project_id)).context.registry.get(op.agent_id)
    assert entry.status.value == "offline"
    # agents started from one target are told apart by name (not all "the host")
    assert entry.handle == spun_up_handle(target.name, op.agent_id) and op.agent_id[:8] in entry.handle

    # the stop is recorded, then announced, then its slot freed: each a moment after the last
    async def freed() -> list[str] | None:
        actions = [e.action for e in await published_events(nc, names, "spinup") if e.subject_id == op.id]
        slot = await (await service.manager(project_id)).store.slot(target.id)
        free = slot.live == [] and slot.in_flight is None
        return actions if free and "stopped" in actions else None

    actions = await eventually(freed, what="the stop announced and the target's slot freed")
    expected = ["requested", "starting", "running", "registered", "shutdown-requested", "stopping", "stopped"]
    assert [a for a in actions if a in expected] == expected

    # the spin-up's start and stop are spans of the item's trace, next to the agent's claim
    await (await service.manager(project_id)).context.traces.flush(stored=True)
    spans = {s.name: s for s in (await read_timeline(nc, names, item.id))[0]}
    assert {"spinup.start", "spinup.stop", "work.claim", "work.complete"} <= set(spans), sorted(spans)
    submit_trace = trace_id_of(item.traceparent)
    for name in ("spinup.start", "spinup.stop"):
        assert spans[name].trace_id == submit_trace and spans[name].status == "ok"
        assert spans[name].attributes["loom.spinup.id"] == op.id
        assert spans[name].attributes["loom.spinup.mechanism"] == "local"
    assert spans["work.claim"].trace_id == submit_trace


async def test_agent_that_dies_at_start_fails_the_operation_with_exit_code_and_stderr(
    service: ManagedSpinup, make_target: MakeTarget, nc: NatsClient, names: ProjectNames, project_id: str
) -> None:
    # sh, not a Python: it dies in milliseconds even on a loaded machine, inside the 2 s start check
    script = "echo 'cannot reach the model API' >&2; exit 3"
    await make_target(config={"command": ["sh", "-c", script]})
    work = work_queue(nc, names)
    item = await work.submit(WorkSubmission(task_id="dies", description="x", capability="code"))

    decision = await service.request_for_work(project_id, item)
    assert decision.operation is not None
    failed = await eventually(
        lambda: _op_state(service, project_id, decision.operation.id, SpinupState.FAILED),  # type: ignore[union-attr]
        what="the failed start",
    )
    assert "exited with code 3" in (failed.op.error or "")
    assert "cannot reach the model API" in (failed.op.error or "")
    # the work waits in its queue, not lost
    assert (await work.get(item.id)).status is WorkStatus.QUEUED
    assert (await work.queue_depths()).get("code") == 1


async def test_missing_program_fails_the_start_with_the_field(
    service: ManagedSpinup, make_target: MakeTarget, project_id: str
) -> None:
    target = await make_target(config={"command": ["/nonexistent/loom-agent", "--x"]})
    op = await (await service.manager(project_id)).spin_up(target.id)
    failed = await eventually(lambda: _op_state(service, project_id, op.id, SpinupState.FAILED))
    assert failed.op.error.startswith("config.command:")
    assert "not an executable program" in failed.op.error


async def test_a_target_whose_starts_keep_failing_is_disabled_once_and_announced(
    service: ManagedSpinup, make_target: MakeTarget, nc: NatsClient, names: ProjectNames, project_id: str
) -> None:
    target = await make_target(config={"command": ["/nonexistent/loom-agent"]})
    manager = await service.manager(project_id)
    for n in range(3):  # the breaker's default: 3 failed starts within 10 minutes
        assert (await manager.targets.resolve(target.id)).enabled, n
        op = await manager.spin_up(target.id)
        await eventually(lambda: _op_state(service, project_id, op.id, SpinupState.FAILED))  # noqa: B023
        await eventually(lambda: _slot_free(manager, target.id), what="the failed start's slot freed")
    tripped = await manager.targets.resolve(target.id)
    assert not tripped.enabled and tripped.tripped_at is not None
    assert (tripped.tripped_reason or "").startswith("3 starts failed or timed out within 10 minutes")
    with pytest.raises(SpinupError) as refused:
        await manager.spin_up(target.id)
    assert "disabled" in refused.value.message
    actions = [e.action for e in await published_events(nc, names, "target") if e.subject_id == target.id]
    assert actions.count("tripped") == 1
    assert await manager.targets.trip(target.id, "again") is None  # disabled already: not announced twice
    enabled = await manager.targets.set_enabled(target.id, True)
    assert enabled.enabled and enabled.tripped_at is None and enabled.tripped_reason is None


async def test_stop_escalates_to_sigkill_after_the_grace_period(
    service: ManagedSpinup, make_target: MakeTarget, project_id: str
) -> None:
    stubborn = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); "
        "time.sleep(600)"
    )
    target = await make_target(
        config={"command": [sys.executable, "-c", stubborn], "stop_grace_s": 0.5, "startup_check_s": 0.5},
    )
    op = await (await service.manager(project_id)).spin_up(target.id)
    running = await eventually(lambda: _op_state(service, project_id, op.id, SpinupState.RUNNING))
    pid = int(running.op.handle["pid"])
    stdout = Path(running.op.handle["stdout_log"])

    async def ignoring_sigterm() -> bool:
        return "ready" in read_text(stdout)

    await eventually(ignoring_sigterm, what="the process to ignore SIGTERM")
    manager = await service.manager(project_id)
    await manager.stop(op.id, "operator stop")
    await manager.drain(10)
    record = await manager.store.get(op.id)
    assert record.op.state is SpinupState.FAILED  # stopped before it ever registered
    assert record.stop_note == "killed with SIGKILL after 0.5s"
    assert not pid_alive(pid)


async def test_agent_that_never_registers_is_timed_out_and_stopped(
    service: ManagedSpinup, make_target: MakeTarget, project_id: str
) -> None:
    silent = "import time; time.sleep(600)"
    target = await make_target(
        config={"command": [sys.executable, "-c", silent], "startup_check_s": 0.2, "register_timeout_s": 1},
    )
    op = await (await service.manager(project_id)).spin_up(target.id)
    timed_out = await eventually(lambda: _op_state(service, project_id, op.id, SpinupState.TIMED_OUT))
    assert "did not register within 1s" in (timed_out.op.error or "")
    manager = await service.manager(project_id)

    async def cleaned() -> Any:
        record = await manager.store.get(op.id)
        return record if record.stop_done_at else None

    record = await eventually(cleaned, what="the timed-out process to be stopped")
    assert record.stop_note == "stopped with SIGTERM"
    assert not pid_alive(int(record.op.handle["pid"]))
    # the slot is freed right after the stop is recorded (and announced): wait for it too

    async def slot_freed() -> bool:
        return (await manager.store.slot(target.id)).live == []

    await eventually(slot_freed, what="the target's slot to be freed")


async def test_a_start_that_went_through_stands_when_its_target_cannot_be_written(
    service: ManagedSpinup, make_target: MakeTarget, project_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The target's record of its last start is bookkeeping: NATS timing out on it (a loaded
    host) must not fail a start whose process runs (it did, and that agent was never stopped)."""
    target = await make_target(idle_timeout_s=1)
    manager = await service.manager(project_id)

    async def timed_out(*args: Any, **kwargs: Any) -> Any:
        raise nats.errors.TimeoutError

    monkeypatch.setattr(manager.targets, "record", timed_out)
    op = await manager.spin_up(target.id)
    registered = await eventually(
        lambda: _op_state(service, project_id, op.id, SpinupState.REGISTERED, SpinupState.STOPPING),
        what="the agent to register",
    )
    assert registered.op.error is None and registered.op.handle.get("pid")
    stopped = await eventually(
        lambda: _op_state(service, project_id, op.id, SpinupState.STOPPED), what="idle shutdown"
    )
    assert not pid_alive(int(stopped.op.handle["pid"]))
