"""The spin-up manager of one project: decide, start, link, time out, stop.

It works on the project's context (:class:`~weft.project.hub.ProjectContext`):
targets come from the project's target store, agents from its registry copy.
Every decision and transition goes through the spinups bucket with
compare-and-set (see :mod:`weft.spinup.store`), so several Weft replicas can
run a manager for the same project: admission is atomic per target, and each
transition of an operation happens once. Nothing is kept only in memory; a
restarted Weft picks up every live operation from the bucket on its next tick.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from shared.events import publish_event
from shared.models import (
    AgentEntry,
    AgentStatus,
    ControlRequest,
    SpinupOperation,
    SpinupState,
    Target,
    WorkItem,
    new_id,
    utcnow,
)
from shared.redact import redact
from shared.tasks import Background
from weft.eligibility import Need, matching_targets
from weft.spinup.base import SpinupError
from weft.spinup.breaker import FAILED_STATES, recent_failures, tripped_reason, trips
from weft.spinup.config import InvalidTargetConfig, MechanismConfig
from weft.spinup.mechanisms import parse_config
from weft.spinup.mechanisms.base import Launch, Mechanism, MechanismError
from weft.spinup.settings import SpinupSettings
from weft.spinup.store import (
    FINAL_STATES,
    IN_FLIGHT_STATES,
    Refusal,
    SpinupNotFound,
    SpinupRecord,
    SpinupStore,
)
from weft.targets.store import TargetNotFound

if TYPE_CHECKING:
    from weft.project.hub import ProjectContext

log = logging.getLogger("loom.weft.spinup")


@dataclass
class SpinupDecision:
    """What a routing request led to."""

    outcome: Literal["started", "deferred", "no-target"]
    detail: str
    operation: SpinupOperation | None = None
    refusals: list[tuple[str, Refusal]] = field(default_factory=list)
    decision_ms: float = 0.0


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, MechanismError | InvalidTargetConfig):
        return str(exc)
    return redact(f"{type(exc).__name__}: {exc}")


class SpinupManager:
    def __init__(
        self,
        context: ProjectContext,
        store: SpinupStore,
        mechanisms: Mapping[str, Mechanism],
        *,
        agent_nats_url: str,
        settings: SpinupSettings | None = None,
    ) -> None:
        self.context = context
        self.names = context.names
        self.targets = context.targets
        self.store = store
        self.mechanisms = mechanisms
        self.settings = settings or SpinupSettings()
        self.agent_nats_url = agent_nats_url
        self.host = socket.gethostname()
        self._tasks = Background(log)
        self._stopping: set[str] = set()
        self._alive_checked: dict[str, float] = {}

    async def drain(self, timeout: float = 30.0) -> None:
        """Wait for background starts and stops (tests, orderly shutdown)."""
        await self._tasks.wait(timeout)

    async def close(self) -> None:
        await self._tasks.close()

    async def _event(self, action: str, record: SpinupRecord, **extra: Any) -> None:
        data: dict[str, Any] = {"operation": record.op.model_dump(mode="json")}
        data.update(extra)
        try:
            await publish_event(self.context.js, self.names, "spinup", action, record.op.id, data)
        except Exception as exc:  # an event lost is bad, a transition undone would be worse
            log.warning("spin-up event %s for %s not published: %s", action, record.op.id, redact(exc))

    def config_of(self, target: Target) -> MechanismConfig:
        return parse_config(target.mechanism, target.config)

    def mechanism_of(self, target: Target) -> Mechanism:
        mechanism = self.mechanisms.get(target.mechanism)
        if mechanism is None:
            raise MechanismError(f"mechanism: {target.mechanism} is not available in this Weft")
        return mechanism

    # -- decisions -------------------------------------------------------------------
    async def request_for_work(self, item: WorkItem) -> SpinupDecision:
        """Routing found no eligible agent online for ``item``: start one if a target allows."""
        return await self.request(Need.of(item), work_id=item.id)

    async def request(self, need: Need, *, work_id: str | None = None) -> SpinupDecision:
        started = time.perf_counter()
        policy = await self.context.queue.policy()
        candidates = matching_targets(need, self.targets.all(), policy)
        if not candidates:
            return SpinupDecision(
                "no-target",
                f"no enabled, healthy target offers capability {need.capability} "
                f"for boundary {need.boundary}",
                decision_ms=(time.perf_counter() - started) * 1000,
            )
        spinup_id = new_id()
        if work_id is not None:
            holder = await self.store.reserve_work(work_id, spinup_id)
            if holder is not None:
                refusal = Refusal("work-in-flight", f"an agent is already starting for this work ({holder})")
                return SpinupDecision(
                    "deferred",
                    refusal.message,
                    refusals=[("", refusal)],
                    decision_ms=(time.perf_counter() - started) * 1000,
                )
        refusals: list[tuple[str, Refusal]] = []
        for target in candidates:
            outcome = await self._admit(target, work_id=work_id, reason="routing", spinup_id=spinup_id)
            if isinstance(outcome, Refusal):
                refusals.append((target.name, outcome))
                continue
            return SpinupDecision(
                "started",
                f"starting an agent on target {target.name}",
                operation=outcome.op,
                decision_ms=(time.perf_counter() - started) * 1000,
            )
        await self.store.release_work(work_id, spinup_id)
        detail = "; ".join(r.message for _, r in refusals)
        log.debug("spin-up deferred for %s: %s", work_id, detail)
        return SpinupDecision(
            "deferred", detail, refusals=refusals, decision_ms=(time.perf_counter() - started) * 1000
        )

    async def spin_up(self, target_id: str, *, work_id: str | None = None) -> SpinupOperation:
        """Manual spin-up (``POST /api/targets/{id}/spin-up``): caps and cool-down still apply."""
        target = await self.targets.resolve(target_id)
        if not target.enabled:
            raise SpinupError(f"target {target.name} is disabled; enable it first", field="target")
        try:
            self.config_of(target)
        except InvalidTargetConfig as exc:
            raise SpinupError(str(exc), code="invalid", field=exc.errors[0].field) from None
        outcome = await self._admit(target, work_id=work_id, reason="manual")
        if isinstance(outcome, Refusal):
            raise SpinupError(outcome.message, field="target", retry_after_s=outcome.retry_after_s)
        return outcome.op

    def _register_timeout(self, target: Target) -> float:
        try:
            configured = self.config_of(target).register_timeout_s
        except InvalidTargetConfig:
            configured = None
        return configured or self.settings.register_timeout_s

    async def _admit(
        self,
        target: Target,
        *,
        work_id: str | None,
        reason: Literal["routing", "manual"],
        spinup_id: str | None = None,
    ) -> SpinupRecord | Refusal:
        now = utcnow()
        hold = await self.context.ledger.hold(now, target_id=target.id)
        if hold is not None:  # a daily budget reached or the project paused: it could claim nothing
            wait = None if hold.until is None else (hold.until - now).total_seconds()
            return Refusal(hold.kind, hold.message, retry_after_s=wait)
        timeout = self._register_timeout(target)
        op = SpinupOperation(
            id=spinup_id or new_id(),
            project_id=self.names.project_id,
            target_id=target.id,
            target_name=target.name,
            agent_id=uuid.uuid4().hex,
            work_id=work_id,
            reason=reason,
        )
        record = SpinupRecord(
            op=op,
            register_deadline=now + timedelta(seconds=timeout),
            register_timeout_s=timeout,
            started_by=self.host,
            mechanism=target.mechanism,
            config=dict(target.config),
        )
        refusal = await self.store.admit(target, record)
        if refusal is not None:
            return refusal
        # the decision ends here: announcing it and starting happen in the background
        self._tasks.spawn(self._start(target, record), f"spinup-start-{op.id}")
        return record

    # -- starting ------------------------------------------------------------------------
    async def _start(self, target: Target, record: SpinupRecord) -> None:
        op_id = record.op.id
        await self._event("requested", record, target=target.name, work_id=record.op.work_id)
        try:
            mechanism = self.mechanism_of(target)
            config = self.config_of(target)
        except (MechanismError, InvalidTargetConfig) as exc:
            await self.finish(op_id, SpinupState.FAILED, reason="could not start", error=_error_text(exc))
            return

        def to_starting(r: SpinupRecord) -> SpinupRecord | None:
            if r.op.state is not SpinupState.PENDING:
                return None
            r.op.state = SpinupState.STARTING
            return r

        _, current = await self.store.mutate(op_id, to_starting)
        await self._event("starting", current, mechanism=target.mechanism)
        try:
            creds = await self._credentials(op_id, record.op.agent_id)
        except Exception as exc:
            await self.finish(op_id, SpinupState.FAILED, reason="no NATS credentials", error=_error_text(exc))
            return
        launch = Launch(
            spinup_id=op_id,
            agent_id=record.op.agent_id,
            project_id=self.names.project_id,
            target_id=target.id,
            target_name=target.name,
            nats_url=config.nats_url or self.agent_nats_url,
            work_id=record.op.work_id,
            agent_type=target.agent_type,
            capabilities=tuple(target.capabilities),
            boundaries=tuple(target.boundaries),
            extra_env=dict(config.env),
            nats_creds=creds,
        )

        async def on_handle(handle: dict[str, str]) -> None:
            def to_running(r: SpinupRecord) -> SpinupRecord | None:
                r.op.handle = dict(handle)
                if r.op.started_at is None:
                    r.op.started_at = utcnow()
                if r.op.state in (SpinupState.PENDING, SpinupState.STARTING):
                    r.op.state = SpinupState.RUNNING
                return r

            before, after = await self.store.mutate(op_id, to_running)
            if before.op.state is not after.op.state:
                await self._event("running", after)
            if before.op.started_at is None:
                try:  # the target's bookkeeping: a start that went through does not fail on it
                    await self.targets.record(
                        target.id, "spun-up", last_spinup_at=after.op.started_at or utcnow()
                    )
                except TargetNotFound:
                    pass
                except Exception as exc:
                    log.warning("the start of %s is not on its target's record: %s", op_id, redact(exc))

        traceparent = await self._trace_of(record.op.work_id)
        try:
            with self.context.traces.span(
                "spinup.start",
                work_id=record.op.work_id,
                traceparent=traceparent,
                attributes={"loom.spinup.id": op_id, "loom.spinup.mechanism": target.mechanism},
            ):
                handle = await mechanism.start(config, launch, on_handle)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not isinstance(exc, MechanismError):
                log.exception("mechanism %s failed to start %s", target.mechanism, op_id)
            # an agent that registered before its start-up check ended is not a failed start
            await self.finish(
                op_id,
                SpinupState.FAILED,
                reason="start failed",
                error=_error_text(exc),
                only_from=IN_FLIGHT_STATES,
            )
            return
        await on_handle(handle)

    async def _credentials(self, op_id: str, agent_id: str) -> str | None:
        """Scoped NATS auth: the agent's own credentials; their public key and expiry go on the
        operation (the credentials themselves nowhere), so its end can revoke them."""
        authority = self.context.credentials
        if authority is None:
            return None
        issued = await authority.issue(self.names.project_id, agent_id=agent_id)

        def note(r: SpinupRecord) -> SpinupRecord:
            r.nats_user_key, r.nats_expires_at = issued.user_key, issued.expires_at
            return r

        await self.store.mutate(op_id, note)
        return issued.creds.get_secret_value()

    async def _revoke(self, record: SpinupRecord) -> None:
        """The operation ended: its agent's credentials stop working now (not at their expiry)."""
        authority = self.context.credentials
        if authority is None or record.nats_user_key is None:
            return
        try:
            await authority.revoke(record.nats_user_key, record.nats_expires_at)
        except Exception as exc:  # they still expire; the stop must go on
            log.warning("could not revoke the NATS credentials of spin-up %s: %s", record.op.id, redact(exc))

    # -- registration ------------------------------------------------------------------------
    async def link(self, entry: AgentEntry) -> SpinupOperation | None:
        """An agent registered: if it is the one an operation started, mark that operation registered."""
        if not entry.spinup_id:
            return None
        try:
            record = await self.store.get(entry.spinup_id)
        except SpinupNotFound:
            return None
        return await self._link(record, entry)

    async def _link(self, record: SpinupRecord, entry: AgentEntry) -> SpinupOperation | None:
        if record.op.agent_id != entry.agent_id:
            log.warning(
                "agent %s claims spin-up %s, which started agent %s; not linked",
                entry.agent_id,
                record.op.id,
                record.op.agent_id,
            )
            return None
        if record.op.state not in IN_FLIGHT_STATES or entry.effective_status() is AgentStatus.OFFLINE:
            return None

        def registered(r: SpinupRecord) -> SpinupRecord | None:
            if r.op.state not in IN_FLIGHT_STATES:
                return None
            r.op.state = SpinupState.REGISTERED
            r.op.registered_at = utcnow()
            return r

        before, after = await self.store.mutate(record.op.id, registered)
        if before.op.state is after.op.state:
            return None
        await self.store.release(after.op.target_id, after.op.id, keep_live=True)
        await self.store.release_work(after.op.work_id, after.op.id)
        self._alive_checked.pop(after.op.id, None)
        await self._event("registered", after, handle_name=entry.handle)
        return after.op

    # -- ending ------------------------------------------------------------------------------------
    async def finish(
        self,
        spinup_id: str,
        state: SpinupState,
        *,
        reason: str,
        error: str | None = None,
        only_from: frozenset[SpinupState] | None = None,
    ) -> SpinupRecord | None:
        """Move an operation to ``state`` (failed, timed-out or stopping) and stop what it started.

        Returns None when the operation had already ended.
        """
        assert state in (SpinupState.FAILED, SpinupState.TIMED_OUT, SpinupState.STOPPING)

        def end(r: SpinupRecord) -> SpinupRecord | None:
            if r.op.state in FINAL_STATES or r.op.state is state:
                return None
            if only_from is not None and r.op.state not in only_from:
                return None
            r.op.state = state
            if error is not None:
                r.op.error = error
            r.shutdown_reason = r.shutdown_reason or reason
            return r

        before, after = await self.store.mutate(spinup_id, end)
        if before.op.state in FINAL_STATES or (only_from is not None and before.op.state not in only_from):
            return None
        if before.op.state is not after.op.state:
            await self.store.release(after.op.target_id, spinup_id, keep_live=True)
            await self.store.release_work(after.op.work_id, spinup_id)
            self._alive_checked.pop(spinup_id, None)
            if state is not SpinupState.STOPPING:  # "stopping" is published when the stop begins
                await self._event(state.value, after, reason=reason, error=error)
            if state in FAILED_STATES:
                await self._check_breaker(after)
        await self.stop_through_mechanism(spinup_id)
        return after

    async def _check_breaker(self, failed: SpinupRecord) -> None:
        """Trip the target's circuit breaker when its starts keep failing (weft/spinup/breaker.py)."""
        threshold, window_s = self.settings.breaker_failures, self.settings.breaker_window_s
        if threshold <= 0:
            return
        others = [r for r in await self.store.all() if r.op.id != failed.op.id]
        failures = recent_failures([*others, failed], failed.op.target_id, utcnow(), window_s)
        if not trips(failures, threshold):
            return
        try:
            tripped = await self.targets.trip(failed.op.target_id, tripped_reason(failures, window_s))
        except Exception as exc:  # the target was deleted meanwhile, or a replica changes it now
            log.warning("circuit breaker of target %s: %s", failed.op.target_name, redact(exc))
            return
        if tripped is not None:
            log.warning("spin-up target %s disabled: %s", tripped.name, tripped.tripped_reason)

    async def stop_through_mechanism(self, spinup_id: str) -> None:
        """Claim the stop of an operation (once across replicas) and run it in the background."""
        if spinup_id in self._stopping:
            return
        now = utcnow()
        retry = timedelta(seconds=self.settings.stop_retry_s)

        def claim(r: SpinupRecord) -> SpinupRecord | None:
            if r.stop_done_at is not None:
                return None
            if r.stop_started_at is not None and now - r.stop_started_at < retry:
                return None
            r.stop_started_at = now
            return r

        before, after = await self.store.mutate(spinup_id, claim)
        if after.stop_started_at is None or after.stop_started_at == before.stop_started_at:
            if after.stop_done_at is not None and after.op.state in FINAL_STATES:
                await self.store.release(after.op.target_id, spinup_id, keep_live=False)
            return
        self._stopping.add(spinup_id)
        await self._event(
            "stopping",
            after,
            reason=after.shutdown_reason,
            retry=before.stop_started_at is not None,
        )
        self._tasks.spawn(self._run_stop(after), f"spinup-stop-{spinup_id}")

    async def _run_stop(self, record: SpinupRecord) -> None:
        op = record.op
        await self._revoke(record)
        try:
            note = "nothing was started" if not op.handle else await self._mechanism_stop(record)
            failed = False
        except asyncio.CancelledError:
            self._stopping.discard(op.id)
            raise
        except Exception as exc:
            note, failed = f"stop failed: {_error_text(exc)}", True
            log.warning("could not stop spin-up %s: %s", op.id, note)

        def done(r: SpinupRecord) -> SpinupRecord:
            r.stop_note = note
            if not failed:
                r.stop_done_at = utcnow()
                if r.op.state is SpinupState.STOPPING:
                    r.op.state = SpinupState.STOPPED
                    r.op.stopped_at = r.stop_done_at
            return r

        try:
            before, after = await self.store.mutate(op.id, done)
            # The event goes out before the slot is freed, so in the events stream an
            # operation's end always precedes the start that takes its place.
            if before.op.state is not after.op.state:
                await self._event("stopped", after, note=note, reason=after.shutdown_reason)
            elif not failed:
                await self._event("cleaned-up", after, note=note)
            else:
                await self._event("stop-failed", after, note=note)
            if not failed:
                await self.store.release(op.target_id, op.id, keep_live=False)
        finally:
            self._stopping.discard(op.id)

    async def _mechanism_stop(self, record: SpinupRecord) -> str:
        mechanism, config = self._snapshot(record)
        attributes = {"loom.spinup.id": record.op.id, "loom.spinup.mechanism": record.mechanism}
        traceparent = await self._trace_of(record.op.work_id)
        with self.context.traces.span(
            "spinup.stop", work_id=record.op.work_id, traceparent=traceparent, attributes=attributes
        ):
            return await mechanism.stop(config, record.op.handle)

    async def _trace_of(self, work_id: str | None) -> str | None:
        """The trace of the item a spin-up is for, so its start and stop join it (None when
        the spin-up is for no item, or the item is gone)."""
        if work_id is None:
            return None
        try:
            return (await self.context.queue.get(work_id)).traceparent
        except Exception as exc:  # a timeline bar is not worth failing a spin-up for
            log.debug("spin-up for %s: no trace (%s)", work_id, type(exc).__name__)
            return None

    def _snapshot(self, record: SpinupRecord) -> tuple[Mechanism, MechanismConfig]:
        """The mechanism and config the operation was started with (the target may have changed since)."""
        mechanism = self.mechanisms.get(record.mechanism)
        if mechanism is None:
            raise MechanismError(f"mechanism: {record.mechanism} is not available in this Weft")
        return mechanism, parse_config(record.mechanism, record.config)

    async def request_shutdown(self, spinup_id: str, reason: str, grace_s: float) -> SpinupRecord | None:
        """Ask the agent to shut down itself (through Warp); its mechanism stops it after the grace period."""

        def ask(r: SpinupRecord) -> SpinupRecord | None:
            if r.op.state is not SpinupState.REGISTERED:
                return None
            r.op.state = SpinupState.STOPPING
            r.shutdown_requested_at = utcnow()
            r.shutdown_reason = reason
            return r

        before, after = await self.store.mutate(spinup_id, ask)
        if before.op.state is after.op.state:
            return None
        request = ControlRequest(action="shutdown", reason=reason, grace_s=grace_s)
        await self.context.nc.publish(self.names.control_subject(after.op.agent_id), request.to_json_bytes())
        await self._event("shutdown-requested", after, reason=reason, grace_s=grace_s)
        return after

    async def stop(self, spinup_id: str, reason: str = "stopped by an operator") -> SpinupRecord:
        """Stop an operation now through its mechanism (manual stop)."""
        record = await self.store.get(spinup_id)
        if record.op.state in FINAL_STATES:
            return record
        if record.op.state in IN_FLIGHT_STATES:
            await self.finish(spinup_id, SpinupState.FAILED, reason=reason, error=reason)
        else:
            await self.finish(spinup_id, SpinupState.STOPPING, reason=reason)
        return await self.store.get(spinup_id)

    # -- reconciliation ----------------------------------------------------------------------------
    async def tick(self, agents: Mapping[str, AgentEntry]) -> list[SpinupRecord]:
        """Bring every live operation up to date; returns the live records after the pass.

        Links registered agents, times out operations whose agent never registered,
        fails starts whose process is gone, notices agents that went away, retries
        stops that did not finish, and repairs slots that point at ended operations.
        """
        now = utcnow()
        live: list[SpinupRecord] = []
        for slot in await self.store.slots():
            ids = list(dict.fromkeys([*slot.live, *([slot.in_flight] if slot.in_flight else [])]))
            for spinup_id in ids:
                try:
                    record = await self.store.get(spinup_id)
                except SpinupNotFound:
                    await self.store.release(slot.target_id, spinup_id, keep_live=False)
                    continue
                try:
                    current = await self._reconcile(record, agents.get(record.op.agent_id), now)
                except Exception as exc:
                    log.warning("reconciling spin-up %s failed: %s", spinup_id, redact(exc))
                    current = record
                if current is not None:
                    live.append(current)
        await self._forget_old(now)
        return live

    async def _forget_old(self, now: datetime) -> None:
        """Purge ended operations older than ``WEFT_SPINUP_RETENTION_S`` (their events remain)."""
        horizon = now - timedelta(seconds=self.settings.retention_s)
        for record in await self.store.all():
            if record.op.state in FINAL_STATES and record.op.updated_at < horizon:
                if record.op.handle and record.stop_done_at is None:
                    continue  # still to be cleaned up
                await self.store.remove(record.op.id)

    async def _reconcile(
        self, record: SpinupRecord, agent: AgentEntry | None, now: datetime
    ) -> SpinupRecord | None:
        op = record.op
        if op.state in FINAL_STATES:
            if op.handle and record.stop_done_at is None:
                await self.stop_through_mechanism(op.id)
                return record
            await self.store.release(op.target_id, op.id, keep_live=False)
            return None
        online = agent is not None and agent.effective_status(now) is not AgentStatus.OFFLINE
        if op.state in IN_FLIGHT_STATES:
            if online and agent is not None and await self._link(record, agent) is not None:
                return await self.store.get(op.id)
            if record.register_deadline is not None and now > record.register_deadline:
                await self.finish(
                    op.id,
                    SpinupState.TIMED_OUT,
                    reason="never registered",
                    error=f"the agent did not register within {self._timeout_of(record):g}s",
                )
                return None
            if op.state is SpinupState.RUNNING and op.handle and record.started_by == self.host:
                await self._check_alive(record)
            return record
        if (
            op.state is SpinupState.REGISTERED
            and not online
            and await self.context.agents.still_stale(op.agent_id)
        ):
            await self.finish(op.id, SpinupState.STOPPING, reason="the agent went offline")
            return None
        stop_unfinished = record.stop_started_at is not None and record.stop_done_at is None
        if op.state is SpinupState.STOPPING and stop_unfinished:
            await self.stop_through_mechanism(op.id)  # retried once stop_retry_s has passed
        return record

    def _timeout_of(self, record: SpinupRecord) -> float:
        return record.register_timeout_s or self.settings.register_timeout_s

    async def _check_alive(self, record: SpinupRecord) -> None:
        """A started process that is gone before registering is a failed start (not a time-out)."""
        try:
            mechanism, config = self._snapshot(record)
            now = time.monotonic()
            if now - self._alive_checked.get(record.op.id, -1e9) < mechanism.alive_check_interval_s:
                return
            self._alive_checked[record.op.id] = now
            alive = await mechanism.alive(config, record.op.handle)
        except (MechanismError, InvalidTargetConfig):
            return
        if alive is False:
            exit_note = getattr(mechanism, "exit_note", None)
            error = str(exit_note(record.op.handle)) if callable(exit_note) else ""
            error = error or "the agent exited before registering"
            await self.finish(record.op.id, SpinupState.FAILED, reason="exited", error=error)
