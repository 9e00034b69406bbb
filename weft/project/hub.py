"""Per-project services, started lazily the first time a request names a project.

A :class:`ProjectContext` bundles everything Weft does for one project over the
one NATS connection: the work queue and what it is built with (context trees, trace
log, usage ledger: the layer's own, which routes use directly), and one copy of each
of the project's buckets (agent registry, work records, targets), which routing,
listings, the sweeper and spin-up all read. Services above this layer plug into it by
name when the context starts (``ProjectContext.extensions``) and it imports none of
them: spin-up adds its part (:meth:`~weft.spinup.base.SpinupService.attach`), which
reads the same copies instead of keeping its own, and so do A2A push notifications
(``weft.a2a.push``).

The :class:`ProjectHub` creates contexts on demand, publishes the boundary
policy to each, and drops the least recently used beyond a cap (never one
whose spin-up part still has agents to look after, nor one whose events a client
follows).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Generic, Protocol, TypeVar

from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext

from shared.agents.registry import Registry
from shared.context.store import ContextStore
from shared.git.landlock import LandingLocks
from shared.git.repository import RepositoryStore
from shared.leases.book import LeaseBook
from shared.names import ProjectNames
from shared.trace.tracing import TraceLog
from shared.usage.ledger import UsageLedger
from shared.work.autonomy import AutonomySettings
from shared.work.policy import BoundaryPolicy, config_bucket, publish_policy
from shared.work.questions import QuestionBook
from shared.work.queue import WorkQueue
from weft.credentials import CredentialAuthority
from weft.metrics import Metrics
from weft.project.agents import AgentDirectory
from weft.project.contexts import ContextIndex
from weft.project.forge import ForgeWatch
from weft.project.leases import LeaseWarden
from weft.project.relay import EventRelay
from weft.project.repair import WorkRepair
from weft.project.retention import Retention
from weft.project.work import WorkIndex
from weft.settings import WeftSettings
from weft.targets.store import TargetStore

log = logging.getLogger("loom.weft.project")


class Stoppable(Protocol):
    """A part the context stops when the project is no longer served."""

    async def stop(self) -> None: ...


class ProjectExtension(Stoppable, Protocol):
    """What a service runs for one project, stopped with it."""

    def busy(self) -> bool:
        """True while stopping the project would leave something unattended."""
        ...


class Startable(Stoppable, Protocol):
    async def start(self) -> None: ...


Service = TypeVar("Service", bound=Startable)


IN_USE_RECHECK_S = 2.0
"""How often a part that is not in use asks again (every sweep asks; a sweep may run every 0.2 s)."""


class StartedOnUse(Generic[Service]):
    """A project's part whose service starts on first use, or on the first sweep after any
    replica used it (``in_use``), so a project that never uses it runs none (A2A push,
    notifications). Its sends are best-effort, so stopping the project leaves nothing
    unattended (``busy`` is never true)."""

    def __init__(self) -> None:
        self.service: Service | None = None
        self._lock = asyncio.Lock()
        self._unused_at = float("-inf")
        """When ``in_use`` last said no (a request to NATS: not asked again for a while)."""

    async def in_use(self) -> bool:
        """Whether the project has what the service works on (set through any replica)."""
        raise NotImplementedError

    def make(self) -> Service:
        raise NotImplementedError

    async def started(self) -> Service:
        """The project's service, started on first use."""
        async with self._lock:
            if self.service is None:
                service = self.make()
                await service.start()
                self.service = service
        return self.service

    async def start_if_in_use(self) -> bool:
        """Start the service if the project uses it and it is not running yet (asking at most
        every :data:`IN_USE_RECHECK_S`); True when this call started it."""
        if self.service is not None or time.monotonic() - self._unused_at < IN_USE_RECHECK_S:
            return False
        if not await self.in_use():
            self._unused_at = time.monotonic()
            return False
        await self.started()
        return True

    def busy(self) -> bool:
        return False

    async def stop(self) -> None:
        if self.service is not None:
            await self.service.stop()


Attach = Callable[["ProjectContext"], Awaitable[ProjectExtension | None]]
"""A service's hook, called when a project starts being served: its part for the project."""

Part = TypeVar("Part")


class ProjectContext:
    def __init__(
        self,
        nc: NatsClient,
        js: JetStreamContext,
        names: ProjectNames,
        metrics: Metrics,
        *,
        ack_wait_s: float | None = None,
    ) -> None:
        self.nc = nc
        self.js = js
        self.names = names
        self.metrics = metrics
        self.traces = TraceLog(nc, names)
        """The spans this replica makes of the project's items (docs/operations.md, Traces)."""
        self.ledger = UsageLedger(js, names)
        """The day's usage counters and the budgets (docs/operations.md)."""
        store = ContextStore(nc, names, js=js)
        self.queue = WorkQueue(
            nc,
            names,
            js=js,
            contexts=store,
            traces=self.traces,
            ledger=self.ledger,
            ack_wait_s=ack_wait_s,
        )
        self.questions = QuestionBook(nc, names, self.queue, js=js)
        self.registry = Registry(js, names)
        self.agents = AgentDirectory(nc, js, names)
        self.work = WorkIndex(nc, js, self.queue)
        self.targets = TargetStore(nc, js, names)
        self.repository = RepositoryStore(js, names)
        """The project's repository settings (docs/workstreams.md)."""
        self.landing_locks = LandingLocks(js, names)
        """Who lands on the target branch now (docs/landing.md)."""
        self.forge = ForgeWatch()
        """Pull requests items wait on in forge mode (docs/landing.md)."""
        self.retention = Retention(js, self.queue, self.work, self.registry, self.agents)
        self.repair = WorkRepair(self.queue, self.work, self.questions)
        self.relay = EventRelay(js, names, metrics)
        self.contexts = ContextIndex(nc, js, store)
        self.leases = LeaseWarden(LeaseBook(nc, names, js=js), self.agents, self.work)
        self.extensions: dict[str, ProjectExtension] = {}
        """What services above this layer run for the project (spin-up, A2A push), by name, in
        the order they were attached; stopped in the reverse order, before the layer itself."""
        self.credentials: CredentialAuthority | None = None
        self.last_used = time.monotonic()
        self.bottlenecks_announced: set[str] = set()
        """The bottlenecks this replica announced (``work.bottleneck``), until they stop being ones."""
        self.silence_announced: set[tuple[str, str]] = set()
        """The stretches of silence (item, since) this replica announced (``work.silent``)."""
        self.holds_announced: set[str] = set()
        """The budget holds (scope, target, day) this replica announced (``project.budget-held``)."""

    @property
    def project_id(self) -> str:
        return self.names.project_id

    async def start(
        self,
        settings: WeftSettings,
        policy: BoundaryPolicy | None,
        extensions: Mapping[str, Attach],
        autonomy: AutonomySettings | None = None,
    ) -> None:
        await self.queue.ensure()
        if policy is not None:
            await publish_policy(await config_bucket(self.js, self.names), policy)
            self.queue.forget_policy_cache()
        if autonomy is not None:  # WEFT_AUTONOMY_FILE: a policy an operator set through the API wins
            await self.questions.autonomy.adopt_file(autonomy)
        await self.relay.start()
        await self.agents.start(settings.stale_check_interval_s)
        await self.work.start()
        await self.targets.start()
        await self.contexts.start()
        await self.leases.start(settings.stale_check_interval_s)
        for name, attach in extensions.items():
            part = await attach(self)
            if part is not None:
                self.extensions[name] = part

    def extension(self, name: str, kind: type[Part]) -> Part | None:
        """The part attached as ``name``, if there is one of that kind (typed for its owner)."""
        part = self.extensions.get(name)
        return part if isinstance(part, kind) else None

    def busy(self) -> bool:
        """Whether stopping the project now would leave someone unattended: a part with
        agents to look after, or a client following its events (a WebSocket, an A2A
        stream), whose stream would go silent with no error to say why."""
        return self.relay.listening > 0 or any(part.busy() for part in self.extensions.values())

    async def stop(self) -> None:
        parts: tuple[Stoppable, ...] = (
            *reversed(self.extensions.values()),
            self.leases,
            self.contexts,
            self.targets,
            self.work,
            self.agents,
            self.relay,
        )
        for part in parts:
            with contextlib.suppress(Exception):
                await part.stop()
        with contextlib.suppress(Exception):
            await self.traces.close()  # the spans still waiting to be published


class ProjectHub:
    def __init__(
        self,
        nc: NatsClient,
        settings: WeftSettings,
        metrics: Metrics,
        policy: BoundaryPolicy | None,
        *,
        extensions: Mapping[str, Attach] | None = None,
        credentials: CredentialAuthority | None = None,
        autonomy: AutonomySettings | None = None,
    ) -> None:
        self.nc = nc
        self.autonomy = autonomy
        """The autonomy policy of ``WEFT_AUTONOMY_FILE``, for projects without their own."""
        self.credentials = credentials
        """Scoped NATS auth: issues (and revokes) the credentials of agents Weft starts."""
        self.js = nc.jetstream()
        self.settings = settings
        self.metrics = metrics
        self.policy = policy
        self.default_project = settings.project_id
        self._extensions = dict(extensions or {})
        """Attached to every project served, in this order (``ProjectContext.extensions``)."""
        self._contexts: dict[str, ProjectContext] = {}
        self._starting: dict[str, asyncio.Task[ProjectContext]] = {}
        self._lock = asyncio.Lock()

    async def get(self, project_id: str) -> ProjectContext:
        context = self._contexts.get(project_id)
        if context is not None:
            context.last_used = time.monotonic()
            return context
        async with self._lock:
            task = self._starting.get(project_id)
            if task is None:
                task = asyncio.create_task(self._start(project_id), name=f"project:{project_id}")
                self._starting[project_id] = task
        try:
            return await asyncio.shield(task)
        finally:
            if task.done():
                self._starting.pop(project_id, None)

    async def _start(self, project_id: str) -> ProjectContext:
        context = ProjectContext(
            self.nc,
            self.js,
            ProjectNames(project_id),
            self.metrics,
            ack_wait_s=self.settings.loom.work_ack_wait_s,
        )
        context.credentials = self.credentials
        try:
            await context.start(self.settings, self.policy, self._extensions, self.autonomy)
        except BaseException:
            await context.stop()
            raise
        self._contexts[project_id] = context
        log.info("serving project %s", project_id)
        await self._evict(started=project_id)
        return context

    async def _evict(self, *, started: str) -> None:
        """Stop serving the least recently used projects beyond the cap; never the default
        one, a busy one, or the one just ``started`` for a caller about to use it (with
        every other project busy, it would otherwise be the only one to go, stopped before
        its first use)."""
        while len(self._contexts) > self.settings.max_projects:
            spared = (self.default_project, started)
            candidates = [c for c in self._contexts.values() if c.project_id not in spared and not c.busy()]
            if not candidates:
                return
            oldest = min(candidates, key=lambda c: c.last_used)
            self._contexts.pop(oldest.project_id, None)
            log.info("no longer serving project %s (least recently used)", oldest.project_id)
            await oldest.stop()

    def served(self) -> list[ProjectContext]:
        return list(self._contexts.values())

    async def close(self) -> None:
        for task in list(self._starting.values()):
            task.cancel()
        contexts, self._contexts = list(self._contexts.values()), {}
        for context in contexts:
            await context.stop()
