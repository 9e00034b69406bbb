"""This agent's registry entry and its liveness.

Registration writes the entry and starts a heartbeat every
``LOOM_HEARTBEAT_S``; the entry records that interval, so anyone reading it
shows the agent offline after three missed beats even if the process crashed.
``current_tasks`` follows the work this agent holds once it settles
(``COUNT_SETTLE_S``: a short item costs no write); ``last_activity`` is the
last tool call, written with the next heartbeat rather than on every call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from nats.js import JetStreamContext

from shared.agents.registry import AgentNotFound, Registry
from shared.identity import Identity
from shared.models import AgentEntry, AgentStatus, Scope, utcnow
from shared.names import ProjectNames
from shared.tasks import tick
from warp.errors import WarpError
from warp.settings import WarpSettings

COUNT_SETTLE_S = 0.25
"""How long a task-count change waits before it is written: an item claimed and finished
within it (or any run of changes that ends where it began) costs no registry write."""

log = logging.getLogger("loom.warp.presence")


@dataclass
class Registration:
    """What the agent (or its environment) asked to be registered as."""

    handle: str
    agent_type: str
    capabilities: list[str]
    boundaries: list[str]
    max_concurrent_tasks: int
    scope: Scope
    metadata: dict[str, str] = field(default_factory=dict)


class Presence:
    def __init__(
        self,
        registry: Registry,
        js: JetStreamContext,
        names: ProjectNames,
        identity: Identity,
        settings: WarpSettings,
        *,
        handle: Callable[[], str],
    ) -> None:
        self.registry = registry
        self._js = js
        self.names = names
        self.identity = identity
        self.settings = settings
        self._handle = handle
        self.entry: AgentEntry | None = None
        self._revision = 0
        """The registry revision of ``entry`` as this process wrote it (0: none yet)."""
        self.registered = False
        self.held: set[str] = set()
        self.held_traces: dict[str, str] = {}
        """The trace of each held item that has one (messages about it join that trace)."""
        self._manual_status: AgentStatus | None = None
        self._last_activity = time.time()
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._counts_dirty = False
        self._count_writer: asyncio.Task[None] | None = None
        self._count_due = asyncio.Event()
        """Set by :meth:`flush`: the pending task-count write goes now, not after its settle."""

    @property
    def agent_id(self) -> str:
        return self.identity.agent_id

    def defaults(self) -> Registration:
        s = self.settings
        metadata: dict[str, str] = {}
        if s.work_id:
            metadata["work_id"] = s.work_id
        return Registration(
            handle=self._handle(),
            agent_type=self.identity.agent_type,
            capabilities=list(s.capabilities),
            boundaries=list(s.boundaries),
            max_concurrent_tasks=s.max_concurrent_tasks,
            scope=s.scope,
            metadata=metadata,
        )

    def touch(self) -> None:
        self._last_activity = time.time()

    def _status(self) -> AgentStatus:
        if self._manual_status is not None:
            return self._manual_status
        limit = self.entry.max_concurrent_tasks if self.entry else self.settings.max_concurrent_tasks
        return AgentStatus.BUSY if len(self.held) >= limit else AgentStatus.ONLINE

    # -- registration -----------------------------------------------------------
    async def register(self, request: Registration) -> AgentEntry:
        async with self._lock:
            now = utcnow()
            previous = self.entry
            entry = AgentEntry(
                agent_id=self.agent_id,
                handle=request.handle,
                agent_type=request.agent_type,
                project_id=self.names.project_id,
                user_id=self.identity.user_id,
                hostname=self.identity.hostname,
                capabilities=request.capabilities,
                boundaries=request.boundaries,
                status=AgentStatus.ONLINE,
                current_tasks=len(self.held),
                max_concurrent_tasks=request.max_concurrent_tasks,
                scope=request.scope,
                parent_id=self.identity.parent_id,
                instance=self.identity.instance,
                target_id=self.settings.target_id,
                spinup_id=self.settings.spinup_id,
                heartbeat_interval_s=self.settings.heartbeat_s,
                registered_at=previous.registered_at if previous and self.registered else now,
                last_heartbeat=now,
                last_activity=datetime.fromtimestamp(self._last_activity, UTC),
                metadata=request.metadata,
            )
            self._manual_status = None
            entry.status = self._status()
            self._revision = await self.registry.put(entry)
            self.entry = entry
            self.registered = True
        self.start_heartbeat()
        return entry

    def _require(self) -> AgentEntry:
        if not self.registered or self.entry is None:
            raise WarpError(
                "this agent is not registered; call warp_registry_register first", field="registration"
            )
        return self.entry

    async def _write(self, change: Callable[[AgentEntry], None]) -> AgentEntry:
        """Apply ``change`` to the stored entry (revision-checked), re-creating it if it vanished."""

        def mutate(entry: AgentEntry) -> AgentEntry:
            change(entry)
            return entry

        known = (self.entry, self._revision) if self.entry is not None and self._revision else None
        try:
            entry, self._revision = await self.registry.update_known(self.agent_id, mutate, known)
        except AgentNotFound:
            assert self.entry is not None
            entry = self.entry.model_copy(deep=True)
            change(entry)
            self._revision = await self.registry.put(entry)
        self.entry = entry
        return entry

    async def update_presence(self, status: AgentStatus | None, note: str | None) -> AgentEntry:
        self._require()
        if status is AgentStatus.OFFLINE:
            raise WarpError("use warp_registry_deregister to go offline", field="status")
        self._manual_status = status

        def change(entry: AgentEntry) -> None:
            entry.status = self._status()
            entry.last_heartbeat = utcnow()
            entry.last_activity = utcnow()
            if note is not None:
                if note:
                    entry.metadata["status_note"] = note
                else:
                    entry.metadata.pop("status_note", None)

        async with self._lock:
            entry = await self._write(change)
        return entry

    async def set_handle(self, handle: str) -> AgentEntry | None:
        if not self.registered:
            return None

        def change(entry: AgentEntry) -> None:
            entry.handle = handle

        async with self._lock:
            entry = await self._write(change)
        return entry

    async def deregister(self, reason: str = "deregistered") -> AgentEntry | None:
        """Mark the entry offline and stop the heartbeat (the entry stays, as history)."""
        self.stop_heartbeat()
        if not self.registered:
            return None
        self.registered = False
        self._count_due.set()  # a pending task-count write ends now, unwritten

        def change(entry: AgentEntry) -> None:
            entry.status = AgentStatus.OFFLINE
            entry.current_tasks = len(self.held)
            entry.last_activity = datetime.fromtimestamp(self._last_activity, UTC)
            entry.metadata["offline_reason"] = reason

        async with self._lock:
            entry = await self._write(change)
        return entry

    # -- tasks --------------------------------------------------------------------
    def about(self) -> tuple[str, str | None] | None:
        """The item this agent's messages are about: the one it holds (its id and trace),
        None when it holds none or several."""
        if len(self.held) != 1:
            return None
        (work_id,) = self.held
        return work_id, self.held_traces.get(work_id)

    def tasks_changed(
        self, *, claimed: str | None = None, released: str | None = None, traceparent: str | None = None
    ) -> None:
        """Record a claim or release; the new task count is written in the background.

        A claim or completion must not wait for (or fail because of) the registry
        write; readers that need the count call :meth:`flush` first, and the next
        heartbeat writes it anyway if this write fails.
        """
        if claimed:
            self.held.add(claimed)
            if traceparent:
                self.held_traces[claimed] = traceparent
        if released:
            self.held.discard(released)
            self.held_traces.pop(released, None)
        if not self.registered:
            return
        self._counts_dirty = True
        if self._count_writer is None or self._count_writer.done():
            self._count_writer = asyncio.create_task(self._write_counts(), name="warp-task-count")

    async def _write_counts(self) -> None:
        def change(entry: AgentEntry) -> None:
            entry.current_tasks = len(self.held)
            entry.status = self._status()
            entry.last_activity = utcnow()

        with contextlib.suppress(TimeoutError):  # a claim and its completion in one write, or none
            await asyncio.wait_for(self._count_due.wait(), COUNT_SETTLE_S)
        self._count_due.clear()
        while self._counts_dirty and self.registered:
            self._counts_dirty = False
            if self._count_written():
                break
            try:
                async with self._lock:
                    await self._write(change)
            except Exception as exc:
                log.warning("task count not written (the next heartbeat will): %s", exc)
                return

    def _count_written(self) -> bool:
        """The registry already says what a count write would (the count came back)."""
        entry = self.entry
        return entry is not None and entry.current_tasks == len(self.held) and entry.status is self._status()

    async def flush(self) -> None:
        """Wait until the latest task count is in the registry (or its write failed)."""
        writer = self._count_writer
        if writer is not None and not writer.done():
            self._count_due.set()
            await asyncio.wait([writer])

    # -- heartbeat ------------------------------------------------------------------
    async def beat(self) -> AgentEntry:
        def change(entry: AgentEntry) -> None:
            entry.last_heartbeat = utcnow()
            entry.last_activity = datetime.fromtimestamp(self._last_activity, UTC)
            entry.current_tasks = len(self.held)
            entry.status = self._status()

        async with self._lock:
            return await self._write(change)

    def start_heartbeat(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._heartbeat_loop(), name="warp-heartbeat")

    def stop_heartbeat(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _heartbeat_loop(self) -> None:
        interval = self.settings.heartbeat_s
        while self.registered:
            await tick(interval)
            if not self.registered:
                return
            try:
                await asyncio.wait_for(self.beat(), timeout=max(interval, 2.0))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # NATS away: keep beating; the entry goes stale meanwhile
                log.warning("heartbeat failed: %s", exc)
