"""One Warp process: its NATS connection, identity, services and lifecycle.

The connection is opened in the background so the MCP handshake never waits
for NATS; tools ask :meth:`WarpRuntime.services` for a live connection and get
a clear error while NATS is away. nats-py reconnects on its own; after a
reconnect Warp forgets what it believed existed on the server and writes a
heartbeat at once.

The agent id is not known until the instance lock is taken on NATS (another
Warp in the same folder may hold instance 0), so :attr:`WarpRuntime.identity`
is None until then and nothing answers with an id before it is settled.

Exit paths, all of which mark the agent offline first:
stdin closed (the MCP session ends), SIGTERM, and a ``shutdown`` control
request (drain within its grace period, then exit).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shared.agents.local import LocalAgent, remove_note, write_note
from shared.identity import Identity
from shared.names import ProjectNames
from shared.redact import redact
from shared.tasks import raise_if_cancelling, tick
from warp.config import ConfigLoader
from warp.errors import Unavailable
from warp.protocol import Follow, ProtocolEndpoint, ProtocolPrompts, Submit, item_changes
from warp.settings import WarpSettings

if TYPE_CHECKING:
    from nats.aio.client import Client as NatsClient

    from shared.models import ControlRequest, WorkItem
    from shared.settings import NatsSettings
    from warp.control import CancelledWork, ControlListener
    from warp.messages import InboxMessage
    from warp.services import Services

log = logging.getLogger("loom.warp")

_BACKOFF_MAX_S = 5.0
_STOP_STEP_S = 3.0
WORKSTREAM_SWEEP_S = 3600.0
"""How often an agent's Warp sweeps its host's leftover worktrees (and at start)."""


class WarpRuntime:
    def __init__(
        self,
        identity: Identity,
        settings: WarpSettings,
        *,
        nats_url: str | None = None,
        nats_settings: NatsSettings | None = None,
        explicit_instance: int | None = None,
        loader: ConfigLoader | None = None,
    ) -> None:
        self.base_identity = identity
        self.identity: Identity | None = None
        """This process's identity, once its instance lock is taken; None until then."""
        self.handle = identity.handle
        self.settings = settings
        self.names = ProjectNames(identity.project_id)
        self.loader = loader or ConfigLoader(identity.project_path)
        self.nats_url = nats_url
        self.nats_settings = nats_settings
        """How to reach NATS, as read at start-up (None: :func:`shared.nats.client.connect` reads them)."""
        self.explicit_instance = explicit_instance
        self.display_url = "NATS"
        self.state = "starting"
        self.last_error: str | None = None
        self.inflight = 0
        self.draining: ControlRequest | None = None
        self.drain_deadline: float | None = None
        self.on_exit: Callable[[], None] | None = None
        """Called once the agent is marked offline after a shutdown request or SIGTERM."""
        self.on_ready: list[Callable[[Services], None]] = []
        """Called once, when the connection and identity are settled (e.g. to start Pattern on it)."""
        self.on_stop: list[Callable[[], Awaitable[None]]] = []
        """Awaited while stopping, before the NATS connection closes."""
        self._svc: Services | None = None
        self._built: Services | None = None
        self._cancelled: CancelledWork | None = None
        self._control: ControlListener | None = None
        self.protocol_prompts = ProtocolPrompts()
        """Prompts of the agent protocol this agent holds open (warp/protocol.py)."""
        self._protocol: ProtocolEndpoint | None = None
        self._ready = asyncio.Event()
        self._serving = asyncio.Event()
        self._serving.set()
        self._identity_settled = asyncio.Event()
        self._local_note: Path | None = None
        """Where this Warp noted itself for its host's hooks (shared/agents/local.py)."""
        self._idle = asyncio.Event()
        self._idle.set()
        self._tasks: list[asyncio.Task[None]] = []
        self._started = False
        self._stopped = False
        self._recovered = False
        self._stop_lock = asyncio.Lock()
        self._nc: NatsClient | None = None

    def _signing_creds(self) -> str | None:
        """The creds this Warp's connection authenticated with, when their user NKEY may sign
        its registration and heartbeats in the agent protocol (None: unsigned). Not an agent's
        scoped creds: the protocol's package binds a signer to the connection by reading the
        server's answer on its own inbox (``_INBOX.agents.>``), where every caller of the
        protocol on the account gets its replies; a scoped agent may not read there."""
        from shared.nats.auth import credential_of, creds_in_use

        found = creds_in_use(self.nats_settings) if self.nats_settings is not None else None
        if found is None or credential_of(*found) is not None:
            return None
        return found[0]

    async def _serve_agent_protocol(self, svc: Services) -> None:
        """Serve the agent protocol (docs/interop.md); a failure costs that alone, not the agent."""
        assert self._nc is not None
        inbox, agent_id = svc.inbox, svc.agent_id

        async def deliver(**message: Any) -> InboxMessage:
            return await inbox.send(recipient_id=agent_id, **message)

        as_work: tuple[Submit, Follow] | None = None
        capability = self.settings.work_capability()
        if self.settings.agent_protocol == "work" and capability is not None:  # load_warp_settings checks
            from shared.models import WorkSubmission

            async def submit(text: str, caller: str) -> WorkItem:
                asked = {"agent_protocol": {"caller": caller, "through": agent_id}}
                submission = WorkSubmission(
                    task_id="agent-protocol-prompt", description=text, capability=capability, context=asked
                )
                return await svc.work.submit(submission, submitted_by=agent_id)

            def follow(work_id: str) -> AsyncGenerator[WorkItem, None]:
                return item_changes(svc.js, svc.names.work_records_bucket, work_id)

            as_work = (submit, follow)

        endpoint = ProtocolEndpoint(
            self._nc,
            project_id=self.names.project_id,
            agent_id=agent_id,
            handle=self.handle,
            project_path=Path(svc.identity.project_path),
            deliver=deliver,
            prompts=self.protocol_prompts,
            wait_s=self.settings.agent_protocol_wait_s,
            as_work=as_work,
            signing_creds=self._signing_creds(),
        )
        try:
            await endpoint.start()
        except Exception as exc:
            log.warning("not serving the agent protocol: %s", redact(exc))
            return
        self._protocol = endpoint

    # -- start -------------------------------------------------------------------
    def start(self, *, register_when_serving: bool = False) -> None:
        """Begin connecting in the background; once started, a second call changes nothing
        (``warp`` starts the runtime before its MCP server exists, the server's lifespan again).

        ``register_when_serving``: auto-registration waits for :meth:`serving`. An agent that
        is registered is taken to be able to work (Weft routes to it, and its idle time runs),
        so it is announced only once its tools answer, not while they are still loading."""
        if not self._started:
            self._started = True
            if register_when_serving:
                self._serving.clear()
            self._tasks.append(asyncio.create_task(self._connect_loop(), name="warp-connect"))

    def serving(self) -> None:
        """The MCP server answers tool calls now: auto-registration may go ahead."""
        self._serving.set()

    def when_ready(self, hook: Callable[[Services], None]) -> None:
        """Run ``hook`` once the services are up: now, if they are already."""
        if self._svc is not None:
            hook(self._svc)
        else:
            self.on_ready.append(hook)

    async def _connect_loop(self) -> None:
        # Load nats-py and the JetStream layer off the event loop, so the MCP
        # handshake is answered meanwhile.
        await asyncio.to_thread(importlib.import_module, "warp.services")
        from shared.nats.client import NatsConnectError, connect, display_url

        self.display_url = display_url(self.nats_url)
        delay = 0.25
        while self._nc is None and not self._stopped:
            try:
                self._nc = await connect(
                    self.nats_settings,
                    url=self.nats_url,
                    name=f"warp-{self.handle}",
                    mode="service",
                    timeout=5.0,
                    on_state=self._on_state,
                    replicas=self.settings.js_replicas,
                )
            except NatsConnectError as exc:
                self.last_error = str(exc)
                log.warning("%s (retrying)", exc)
                await tick(delay)
                delay = min(_BACKOFF_MAX_S, delay * 2)
        delay = 0.25
        while self._svc is None and not self._stopped:
            try:
                await self._setup()
            except Exception as exc:  # JetStream not ready yet, a lost connection, ...
                self.last_error = f"setting up on NATS failed: {exc}"
                log.warning("%s (retrying)", self.last_error)
                await tick(delay)
                delay = min(_BACKOFF_MAX_S, delay * 2)

    async def _setup(self) -> None:
        """Take an instance id, listen for control requests, auto-register; then ready.

        Retried by the connect loop until it succeeds, so each step is done once.
        """
        from warp.control import CancelledWork, ControlListener
        from warp.instances import REFRESH_S
        from warp.services import build

        assert self._nc is not None
        if self._built is None:
            self._built = await build(
                self._nc,
                self.names,
                self.base_identity,
                self.settings,
                self.loader,
                explicit_instance=self.explicit_instance,
                handle=lambda: self.handle,
            )
            self.identity = self._built.identity
            self._identity_settled.set()
            # the hooks of the host that started this Warp find their agent here (docs/hosts.md)
            self._local_note = write_note(
                self.identity.project_path,
                LocalAgent(self.identity.agent_id, self.handle, os.getpid()),
            )
            self._tasks.append(asyncio.create_task(self._refresh_lock(REFRESH_S), name="warp-instance-lock"))
        svc = self._built
        if self._control is None:
            self._cancelled = CancelledWork()
            control = ControlListener(self._nc, self.names, svc.agent_id, self._on_control)
            await control.start()
            self._control = control
        starting = any(t.get_name() == "warp-agent-protocol" and not t.done() for t in self._tasks)
        if self.settings.agent_protocol != "off" and self._protocol is None and not starting:
            # beside registration, not before it: the protocol is an extra way in, not a start-up
            # step (a start that failed is tried again on the next connection)
            self._tasks.append(
                asyncio.create_task(self._serve_agent_protocol(svc), name="warp-agent-protocol")
            )
        if self.settings.auto_register and not svc.presence.registered:
            await self._serving.wait()
            await self.recover_held_work(svc)
            entry = await svc.presence.register(svc.presence.defaults())
            caps = ", ".join(entry.capabilities) or "no capabilities"
            log.info("auto-registered as %s (%s)", entry.handle, caps)
        self._svc = svc
        if not any(t.get_name() == "warp-keep-waiting" for t in self._tasks):
            self._tasks.append(asyncio.create_task(self._keep_waiting_alive(), name="warp-keep-waiting"))
        if self.settings.checkpoint_s > 0 and not any(
            t.get_name() == "warp-checkpoints" for t in self._tasks
        ):
            self._tasks.append(asyncio.create_task(self._checkpoints(), name="warp-checkpoints"))
        self.state = "ready"
        self.last_error = None
        for hook in self.on_ready:
            try:
                hook(svc)
            except Exception:
                log.exception("a start-up hook failed")
        self._ready.set()
        log.info(
            "Warp ready: project %s, agent %s (instance %d), NATS %s",
            self.names.project_id,
            svc.agent_id,
            svc.identity.instance,
            self.display_url,
        )

    async def recover_held_work(self, svc: Services) -> None:
        """Claims this agent id still holds from a previous run count as its tasks (once)."""
        if self._recovered:
            return
        from shared.models import WorkStatus
        from shared.work.rules import HOLDING, WorkFilter

        page = await svc.work.list_items(WorkFilter(assigned_to=svc.agent_id), limit=1000)
        for item in page.items:
            if item.status in HOLDING:
                svc.presence.held.add(item.id)
                if item.traceparent:
                    svc.presence.held_traces[item.id] = item.traceparent
                if item.workstream is not None and item.status is not WorkStatus.MERGING:
                    # its worktree is checkpointed again (a lander's items have none here)
                    try:
                        await svc.workstreams.adopt(item)
                    except Exception as exc:
                        log.warning("the worktree of held item %s is not taken up: %s", item.id, exc)
        self._recovered = True

    async def _keep_waiting_alive(self) -> None:
        """While this agent waits on the operator about an item it holds, its claim must not
        lapse: ``+WPI`` on it every third of the ack deadline (Weft is not needed for that;
        after a restart, the held items are recovered and kept alive again). Should the agent
        be gone for longer, the claim still does not move (``shared.work``, ``_keep_waiting``)."""
        while not self._stopped:
            svc = self._svc
            every = max(0.2, (svc.work.ack_wait_s if svc is not None else 60.0) / 3)
            await tick(every)
            if svc is None or not svc.nc.is_connected:
                continue
            for work_id in list(svc.presence.held):
                try:
                    await svc.work.keep_alive(work_id, svc.agent_id)
                except Exception as exc:
                    raise_if_cancelling()
                    log.warning("keeping the claim of %s alive failed: %s", work_id, exc)

    async def _checkpoints(self) -> None:
        """Every ``LOOM_CHECKPOINT_S``, a checkpoint of each worktree that changed: edits the
        agent never reports are still captured (docs/workstreams.md)."""
        while not self._stopped:
            await tick(self.settings.checkpoint_s)
            svc = self._svc
            if svc is None or not svc.nc.is_connected:
                continue
            await svc.workstreams.checkpoint_all(svc.work)

    async def _sweep_workstreams(self) -> None:
        """At start and every ``WORKSTREAM_SWEEP_S``: this host's leftover worktrees and the
        repository's old checkpoint refs (docs/workstreams.md, Cleanup)."""
        while not self._stopped:
            svc = self._svc
            if svc is not None and svc.nc.is_connected:
                try:
                    await svc.workstreams.sweep(svc.work)
                except Exception as exc:
                    raise_if_cancelling()
                    log.warning("workstream sweep not done now: %s", exc)
            await tick(WORKSTREAM_SWEEP_S)

    async def _refresh_lock(self, every: float) -> None:
        while not self._stopped:
            await tick(every)
            svc = self._built
            if svc is None or not svc.nc.is_connected:
                continue
            try:
                await svc.lock.refresh()
            except Exception as exc:
                log.warning("instance lock refresh failed: %s", exc)

    async def _on_state(self, state: str) -> None:
        if state == "disconnected":
            self.last_error = f"lost the connection to NATS at {self.display_url}"
        elif state == "reconnected":
            self.last_error = None
            svc = self._built
            if svc is not None:
                svc.rebuild_after_reconnect()
                self._tasks.append(asyncio.create_task(self._after_reconnect(svc), name="warp-reconnected"))

    async def _after_reconnect(self, svc: Services) -> None:
        try:
            await svc.lock.refresh()
            if svc.presence.registered:
                await svc.presence.beat()
        except Exception as exc:
            log.warning("re-announcing after reconnect failed: %s", exc)

    # -- access for tools ---------------------------------------------------------
    @property
    def ready(self) -> bool:
        return self._svc is not None

    @property
    def cancelled(self) -> CancelledWork | None:
        return self._cancelled

    def not_ready_reason(self) -> str:
        """Why the first connection is not there yet (for "not ready" answers)."""
        return self.last_error or f"still connecting to NATS at {self.display_url}"

    async def settled_identity(self) -> Identity | None:
        """This process's identity, waiting for its instance lock as long as a tool waits
        for the first connection (``LOOM_WARP_READY_WAIT_S``); None if it is not settled
        by then. Never the identity another Warp in this folder may hold."""
        if self.identity is None and not self._stopped:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._identity_settled.wait(), self.settings.ready_wait_s)
        return self.identity

    async def services(self) -> Services:
        """The live services, or :class:`Unavailable` saying why not."""
        if self._stopped:
            raise Unavailable("Warp is shutting down")
        if self._svc is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ready.wait(), self.settings.ready_wait_s)
        svc = self._svc
        if svc is None:
            reason = self.not_ready_reason()
            raise Unavailable(f"NATS is not reachable yet: {reason}. Warp keeps retrying; try again shortly.")
        if not svc.nc.is_connected:
            for _ in range(10):  # a short blip: give the reconnect a moment
                await asyncio.sleep(0.1)
                if svc.nc.is_connected:
                    break
            else:
                raise Unavailable(
                    f"NATS at {self.display_url} is unreachable right now "
                    f"({self.last_error or 'disconnected'}); Warp keeps reconnecting, try again shortly."
                )
        return svc

    def services_now(self) -> Services:
        """The services without waiting (for state that needs no round trip)."""
        if self._svc is None:
            raise Unavailable(f"NATS is not reachable yet: {self.not_ready_reason()}")
        return self._svc

    def call_started(self) -> None:
        self.inflight += 1
        self._idle.clear()
        if self._svc is not None:
            self._svc.presence.touch()

    def call_finished(self) -> None:
        self.inflight -= 1
        if self.inflight <= 0:
            self.inflight = 0
            self._idle.set()

    def drain_notice(self) -> str | None:
        if self.draining is None or self.drain_deadline is None:
            return None
        left = max(0.0, self.drain_deadline - time.monotonic())
        why = f" ({self.draining.reason})" if self.draining.reason else ""
        return (
            f"NOTICE: shutdown requested by {self.draining.requested_by}{why}; this Warp claims no new work "
            f"and exits in at most {left:.0f}s. Complete or fail the work you hold now."
        )

    # -- control ------------------------------------------------------------------
    async def _on_control(self, request: ControlRequest) -> None:
        if request.action == "shutdown":
            self.request_shutdown(request)
        elif request.action == "cancel-work" and request.work_id and self._cancelled is not None:
            self._cancelled.add(request)
            if self._built is not None and request.work_id in self._built.presence.held:
                self._built.presence.tasks_changed(released=request.work_id)

    def request_shutdown(self, request: ControlRequest) -> None:
        """Drain, mark offline, then call :attr:`on_exit` (idempotent)."""
        if self.draining is not None:
            return
        self.draining = request
        self.drain_deadline = time.monotonic() + request.grace_s
        log.info("draining: shutdown requested by %s (grace %.0fs)", request.requested_by, request.grace_s)
        self._tasks.append(asyncio.create_task(self._drain_and_exit(request), name="warp-drain"))

    async def _drain_and_exit(self, request: ControlRequest) -> None:
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(request.grace_s):
                    while True:
                        await self._idle.wait()
                        held = self._built.presence.held if self._built is not None else set()
                        if not held and self.inflight == 0:
                            break
                        await asyncio.sleep(0.05)
            await self.stop(
                f"shutdown requested by {request.requested_by}"
                + (f": {request.reason}" if request.reason else "")
            )
        finally:
            if self.on_exit is not None:
                self.on_exit()

    # -- stop ---------------------------------------------------------------------
    async def stop(self, reason: str = "stopped") -> None:
        """Mark offline, release the instance id, close NATS. Safe to call twice."""
        async with self._stop_lock:
            if self._stopped:
                return
            self._stopped = True
            self.state = "stopped"
            current = asyncio.current_task()
            for task in self._tasks:
                if task is not current and not task.done() and task.get_name() != "warp-drain":
                    task.cancel()
            svc = self._built
            connected = self._nc is not None and self._nc.is_connected
            if svc is not None and not connected:
                svc.presence.stop_heartbeat()
                log.warning("NATS is unreachable: not marking offline (the entry goes stale instead)")
            elif svc is not None:
                svc.presence.stop_heartbeat()
                if svc.workstreams.held_ids():  # the next attempt starts from these files
                    try:
                        await asyncio.wait_for(svc.workstreams.checkpoint_all(svc.work), _STOP_STEP_S * 3)
                    except Exception as exc:
                        log.warning("checkpoints while stopping (%s): %s", reason, exc)
                try:
                    await asyncio.wait_for(svc.work.settle(), _STOP_STEP_S)  # events still in flight
                    await asyncio.wait_for(svc.traces.close(), _STOP_STEP_S)  # spans not yet sent
                except Exception as exc:
                    log.warning("work events while stopping (%s): %s", reason, exc)
                if svc.leases.started:  # its leases end with it (Weft would end them once it is offline)
                    try:
                        mine = svc.agent_id
                        await asyncio.wait_for(
                            svc.leases.end_where(
                                lambda lease: "holder offline" if lease.holder == mine else None
                            ),
                            _STOP_STEP_S,
                        )
                        await asyncio.wait_for(svc.leases.settle(), _STOP_STEP_S)
                    except Exception as exc:
                        log.warning("releasing leases while stopping (%s): %s", reason, exc)
                    await svc.leases.stop()
                try:
                    await asyncio.wait_for(svc.presence.deregister(reason), _STOP_STEP_S)
                except Exception as exc:
                    log.warning("marking offline while stopping (%s): %s", reason, exc)
                try:
                    await asyncio.wait_for(svc.lock.release(), _STOP_STEP_S)
                except Exception as exc:
                    log.warning("releasing the instance id while stopping (%s): %s", reason, exc)
            if self.identity is not None:
                remove_note(self._local_note, self.identity.agent_id)
            for stop_hook in self.on_stop:
                try:
                    await asyncio.wait_for(stop_hook(), _STOP_STEP_S)
                except Exception as exc:
                    log.warning("while stopping (%s): %s", reason, exc)
            if self._protocol is not None:
                try:
                    await asyncio.wait_for(self._protocol.stop(), _STOP_STEP_S)
                except Exception as exc:
                    log.warning("leaving the agent protocol while stopping (%s): %s", reason, exc)
            if self._control is not None:
                await self._control.stop()
            if self._nc is not None:
                try:
                    await asyncio.wait_for(self._nc.close(), _STOP_STEP_S)
                except Exception as exc:
                    log.debug("closing NATS: %s", exc)
            log.info("Warp stopped: %s", reason)
