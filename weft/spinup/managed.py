"""The spin-up service that starts and stops agents: :class:`ManagedSpinup`.

It runs on Weft's project layer. When the hub starts serving a project it
attaches a :class:`ProjectSpinup` to the project's context: a
:class:`~weft.spinup.manager.SpinupManager`, a health and an idle monitor, and
the one copy of the project's spin-ups bucket. Agents, work items and targets
are read from the context's own copies, and the context's registry copy tells
the manager the moment a started agent registers.

Every ``WEFT_SPINUP_TICK_S`` one loop reconciles each attached project's
operations, shuts idle agents down and runs due health checks. Projects whose
spin-ups bucket in JetStream holds live operations are served (and so
attached) even if no request named them, so a restarted Weft carries on what
an earlier one started.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlunsplit

from shared.models import AgentEntry, SpinupOperation, Target, TargetSpec, WorkItem, utcnow
from shared.names import ProjectNames, project_of_spinups_stream
from shared.nats.jsapi import stream_names
from shared.nats.mirror import Slot
from shared.redact import redact
from shared.tasks import Background, raise_if_cancelling, stop_task, tick
from weft.spinup.base import TargetTestResult, check_target
from weft.spinup.health import HealthMonitor, HealthReport
from weft.spinup.idle import IdleMonitor
from weft.spinup.manager import SpinupDecision, SpinupManager
from weft.spinup.mechanisms import default_mechanisms
from weft.spinup.mechanisms.base import Mechanism
from weft.spinup.settings import SpinupSettings
from weft.spinup.store import SpinupStore, newest_first

if TYPE_CHECKING:
    from weft.project.hub import ProjectContext, ProjectHub

log = logging.getLogger("loom.weft.spinup")


def agent_url_from(hub: ProjectHub) -> str:
    """The NATS URL agents get: Weft's configured ``NATS_URL``, else the server it is connected to."""
    if hub.settings.nats.url:
        return hub.settings.nats.url
    connected = hub.nc.connected_url
    if connected is None:
        return "nats://127.0.0.1:4222"
    host = connected.hostname or "127.0.0.1"
    return urlunsplit((connected.scheme or "nats", f"{host}:{connected.port or 4222}", "", "", ""))


WHY_NOT_NOW = {
    "in-flight": "its target is starting another agent",
    "max-concurrent": "its targets run as many agents as they may",
    "cooldown": "its target is cooling down after a failed start",
    "budget": "a daily spin-up budget is spent",
    "pause": "the project is paused",
}
"""A refusal's code (``weft.spinup.store.Refusal``) in the words a person waiting reads."""


def waiting_reason(decision: SpinupDecision) -> str:
    """Why the item waits, stable across sweeps (a changed reason is a ``work.waiting`` event),
    in words: ``submit --wait``, ``watch`` and the console show it as it is."""
    if decision.outcome == "started" or decision.outcome == "no-target":
        return f"waiting for an agent: {decision.detail}"
    codes = sorted({refusal.code for _, refusal in decision.refusals})
    if "work-in-flight" in codes:
        return "waiting for an agent: one is being started for it"
    why = "; ".join(WHY_NOT_NOW.get(code, code) for code in codes)
    return f"waiting for an agent: none can be started now ({why})"


class ProjectSpinup:
    """Spin-up for one served project, attached to (and stopped with) its context."""

    def __init__(self, owner: ManagedSpinup, context: ProjectContext) -> None:
        self.owner = owner
        self.context = context
        self.store = SpinupStore(context.js, context.names)
        self.manager = SpinupManager(
            context,
            self.store,
            owner.mechanisms,
            agent_nats_url=owner.agent_nats_url,
            settings=owner.settings,
        )
        self.health = HealthMonitor(self.manager)
        self.idle = IdleMonitor(self.manager)
        self._health_task: asyncio.Task[Any] | None = None
        self._linking = Background(log)

    @property
    def project_id(self) -> str:
        return self.context.project_id

    async def start(self) -> None:
        await self.store.start(self.context.nc)
        self.context.agents.mirror.listen(self._agent_changed)

    async def _agent_changed(
        self, key: str, _before: Slot[AgentEntry] | None, after: Slot[AgentEntry] | None, _initial: bool
    ) -> None:
        """A started agent registered: link it to its operation now, not at the next tick."""
        entry = None if after is None else self.context.agents.mirror.value_of(key, after)
        if entry is not None and entry.spinup_id:
            # a failure is logged; the next tick links the operation all the same
            self._linking.spawn(self.manager.link(entry), name=f"spinup-link-{entry.agent_id}")

    def busy(self) -> bool:
        """Agents started here still run (or are starting): keep the project served."""
        return any(slot.live or slot.in_flight for slot in self.store.known_slots())

    async def tick(self, *, health: bool) -> None:
        """One pass: reconcile operations, shut idle agents down, run due health checks."""
        agents = {a.agent_id: a for a in self.context.agents.mirror.values()}
        live = await self.manager.tick(agents)
        targets = {t.id: t for t in self.context.targets.all()}
        if live:
            await self.idle.check(live, agents, targets, utcnow(), self.context.work.mirror.values())
        if health:
            running = self._health_task is not None and not self._health_task.done()
            if not running and self.health.due(targets.values()):
                self._health_task = asyncio.create_task(
                    self.health.run_due(targets.values()), name=f"spinup-health-{self.project_id}"
                )

    async def stop(self) -> None:
        await stop_task(self._health_task)
        await self._linking.close()
        await self.manager.close()
        await self.store.stop()
        self.owner.detach(self)


class ManagedSpinup:
    """``WEFT_SPINUP=managed`` (the default): Weft starts agents from targets and stops them."""

    name = "managed"

    def __init__(
        self,
        settings: SpinupSettings | None = None,
        *,
        mechanisms: Mapping[str, Mechanism] | None = None,
        discover: bool = True,
    ) -> None:
        self.settings = settings or SpinupSettings()
        self.mechanisms = dict(mechanisms or default_mechanisms(self.settings.log_dir))
        self.agent_nats_url = self.settings.agent_nats_url or ""
        self._discover = discover
        self._hub: ProjectHub | None = None
        self._projects: dict[str, ProjectSpinup] = {}
        self._loop: asyncio.Task[None] | None = None
        self._last_discovery: float | None = None

    @property
    def hub(self) -> ProjectHub:
        assert self._hub is not None, "ManagedSpinup.start() was not awaited"
        return self._hub

    # -- life cycle -------------------------------------------------------------------
    async def start(self, hub: ProjectHub) -> None:
        self._hub = hub
        self.agent_nats_url = self.settings.agent_nats_url or agent_url_from(hub)
        if self._loop is None:
            self._loop = asyncio.create_task(self._run(), name="spinup-loop")

    async def stop(self) -> None:
        # Bounded: a shutdown must not hang on a task that a library kept from ending.
        await stop_task(self._loop)
        self._loop = None

    async def attach(self, project: ProjectContext) -> ProjectSpinup:
        part = ProjectSpinup(self, project)
        await part.start()
        self._projects[project.project_id] = part
        return part

    def detach(self, part: ProjectSpinup) -> None:
        if self._projects.get(part.project_id) is part:
            del self._projects[part.project_id]

    # -- projects ---------------------------------------------------------------------
    async def project(self, project_id: str) -> ProjectSpinup:
        """The spin-up part of a project, serving the project first if need be."""
        await self.hub.get(project_id)
        return self._projects[project_id]

    async def manager(self, project_id: str) -> SpinupManager:
        return (await self.project(project_id)).manager

    @property
    def project_ids(self) -> list[str]:
        return list(self._projects)

    async def discover_projects(self) -> list[str]:
        """Projects with live spin-up operations in JetStream that this Weft does not serve yet."""
        found: list[str] = []
        try:
            streams = await stream_names(self.hub.nc)  # every page: one server holds many projects
        except Exception as exc:
            raise_if_cancelling()
            log.warning("cannot list streams to discover projects: %s", redact(exc))
            return found
        for name in streams:
            project_id = project_of_spinups_stream(name)
            if project_id is None or project_id in self._projects:
                continue
            store = SpinupStore(self.hub.js, ProjectNames(project_id))
            try:
                live = any(slot.live or slot.in_flight for slot in await store.slots())
            except Exception as exc:
                raise_if_cancelling()
                log.debug("spin-ups of %s not readable: %s", project_id, redact(exc))
                continue
            if live:
                found.append(project_id)
                await self.hub.get(project_id)
        return found

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = self._last_discovery is None or (
                loop.time() - self._last_discovery >= self.settings.discover_interval_s
            )
            if self._discover and due:
                self._last_discovery = loop.time()
                await self.discover_projects()
            await tick(self.settings.tick_s)
            for part in list(self._projects.values()):
                try:
                    await part.tick(health=self.settings.health_checks)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    raise_if_cancelling()  # a stop that nats-py turned into an error ends the loop
                    log.warning("spin-up tick for project %s failed: %s", part.project_id, redact(exc))

    # -- what routing, the target routes and stats call --------------------------------
    def validate_target(self, spec: TargetSpec) -> None:
        check_target(spec)

    async def request_for_work(self, project_id: str, item: WorkItem) -> SpinupDecision:
        return await (await self.manager(project_id)).request_for_work(item)

    async def request_spinup(self, project: ProjectContext, item: WorkItem) -> None:
        decision = await self.request_for_work(project.project_id, item)
        try:
            await project.queue.set_waiting_reason(item.id, waiting_reason(decision))
        except Exception as exc:
            raise_if_cancelling()
            log.debug("waiting reason for %s not recorded: %s", item.id, redact(exc))

    async def spin_up(
        self, project: ProjectContext, target: Target, *, work_id: str | None = None
    ) -> SpinupOperation:
        return await (await self.manager(project.project_id)).spin_up(target.id, work_id=work_id)

    async def check_health(self, project_id: str, target_ref: str) -> HealthReport:
        part = await self.project(project_id)
        target = await part.context.targets.resolve(target_ref)
        return await part.health.check(target)

    async def test_target(self, project: ProjectContext, target: Target) -> TargetTestResult:
        report = await self.check_health(project.project_id, target.id)
        return TargetTestResult(
            target_id=target.id,
            ok=report.result.ok,
            health=report.target.health,
            detail=redact(report.result.detail),
            checked_at=report.target.last_health_check or utcnow(),
        )

    async def operations(self, project: ProjectContext) -> list[SpinupOperation]:
        part = await self.project(project.project_id)
        return newest_first(await part.store.all())
