"""Spin-up for every project: one loop that keeps each project's operations moving.

Per project the :class:`SpinupEngine` keeps a :class:`SpinupManager`, a
:class:`HealthMonitor`, an :class:`IdleMonitor` and a live copy of the agent
registry that links each spawned agent to its operation the moment it
registers. Every ``WEFT_SPINUP_TICK_S`` it reconciles each project's
operations, shuts idle agents down and runs due health checks. Projects are
those it has been asked about, those Weft serves, and those whose spin-ups
bucket in JetStream holds live operations, so a restarted Weft carries them on
without being told.

Where targets and work records come from is pluggable: on its own the engine
reads the buckets itself (:class:`~weft.spinup.targets.KvTargets`, a work
copy); inside Weft it uses Weft's target store and work index
(:mod:`weft.spinup.weft_service`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext

from shared.jsutil import ensure_kv
from shared.models import AgentEntry, SpinupOperation, WorkItem, utcnow
from shared.names import ProjectNames, project_of_spinups_stream
from shared.redact import redact
from shared.work import WorkRecord
from weft.jsapi import stream_names
from weft.spinup.health import HealthMonitor, HealthReport
from weft.spinup.idle import IdleMonitor
from weft.spinup.kvmirror import KvMirror
from weft.spinup.manager import SpinupDecision, SpinupManager, SpinupRefused
from weft.spinup.mechanisms import default_mechanisms
from weft.spinup.mechanisms.base import Mechanism
from weft.spinup.settings import SpinupSettings
from weft.spinup.store import SpinupStore
from weft.spinup.targets import KvTargets, TargetMissing, TargetSource
from weft.tasks import raise_if_cancelling, stop_task

log = logging.getLogger("loom.weft.spinup")

WorkItems = Callable[[], Awaitable[list[WorkItem]]]


@dataclass
class ProjectSources:
    """Where one project's targets and work items come from."""

    targets: TargetSource
    work_items: WorkItems | None = None
    """None: the engine keeps its own copy of the work records bucket."""


SourcesFactory = Callable[[JetStreamContext, ProjectNames], ProjectSources]


def standalone_sources(js: JetStreamContext, names: ProjectNames) -> ProjectSources:
    return ProjectSources(targets=KvTargets(js, names))


@dataclass
class ProjectSpinup:
    manager: SpinupManager
    health: HealthMonitor
    idle: IdleMonitor
    sources: ProjectSources
    agents: KvMirror[AgentEntry] | None = None
    work: KvMirror[WorkRecord] | None = None
    health_task: asyncio.Task[Any] | None = None
    started: bool = False
    _linking: set[asyncio.Task[Any]] = field(default_factory=set)

    async def start(self, js: JetStreamContext) -> None:
        """Live copies (one watcher each) of the registry, this project's operations and,
        standalone, the work records; the registry copy links each spawned agent."""
        if self.started:
            return
        names = self.manager.names
        manager = self.manager

        async def on_agent(_key: str, entry: AgentEntry | None) -> None:
            if entry is not None and entry.spinup_id:
                task = asyncio.create_task(manager.link(entry))
                self._linking.add(task)
                task.add_done_callback(self._linking.discard)

        registry_kv = await ensure_kv(js, names.registry_bucket, description="Loom agents")
        self.agents = KvMirror(
            js, registry_kv, names.registry_bucket, AgentEntry.model_validate_json, on_update=on_agent
        )
        await self.agents.start()
        if self.sources.work_items is None:
            work_kv = await ensure_kv(js, names.work_records_bucket, description="Loom work")
            self.work = KvMirror(js, work_kv, names.work_records_bucket, WorkRecord.model_validate_json)
            await self.work.start()
        await manager.store.start_mirrors()
        start_mirror = getattr(self.sources.targets, "start_mirror", None)
        if callable(start_mirror):
            await start_mirror()
        self.started = True

    async def work_items(self) -> list[WorkItem]:
        if self.sources.work_items is not None:
            return await self.sources.work_items()
        if self.work is not None:
            return [r.item for r in self.work.values()]
        return [r.item for r in await self.idle.work.all_records()]

    async def stop(self) -> None:
        if self.health_task is not None:
            await stop_task(self.health_task)
            self.health_task = None
        for mirror in (self.agents, self.work):
            if mirror is not None:
                await mirror.stop()
        await self.manager.store.stop_mirrors()
        stop_mirror = getattr(self.sources.targets, "stop_mirror", None)
        if callable(stop_mirror):
            await stop_mirror()
        await self.manager.close()
        self.started = False


class SpinupEngine:
    def __init__(
        self,
        nc: NatsClient,
        *,
        agent_nats_url: str,
        settings: SpinupSettings | None = None,
        mechanisms: Mapping[str, Mechanism] | None = None,
        sources: SourcesFactory = standalone_sources,
        projects: Iterable[str] = (),
        also_tick: Callable[[], Iterable[str]] | None = None,
        discover: bool = True,
    ) -> None:
        self._nc = nc
        self._js = nc.jetstream()
        self.settings = settings or SpinupSettings()
        self.agent_nats_url = self.settings.agent_nats_url or agent_nats_url
        self.mechanisms = dict(mechanisms or default_mechanisms(self.settings.log_dir))
        self._sources = sources
        self._projects: dict[str, ProjectSpinup] = {}
        self._initial = list(projects)
        self._discover = discover
        self._extra_projects = also_tick or (lambda: ())
        """Projects to keep up to date besides those asked about (Weft: the ones it serves)."""
        self._loop: asyncio.Task[None] | None = None
        self._last_discovery: float | None = None
        self._lock = asyncio.Lock()

    # -- projects ---------------------------------------------------------------------
    async def project(self, project_id: str) -> ProjectSpinup:
        existing = self._projects.get(project_id)
        if existing is not None and (existing.started or self._loop is None):
            return existing
        async with self._lock:
            project = self._projects.get(project_id)
            if project is None:
                names = ProjectNames(project_id)
                sources = self._sources(self._js, names)
                manager = SpinupManager(
                    self._nc,
                    names,
                    sources.targets,
                    self.mechanisms,
                    agent_nats_url=self.agent_nats_url,
                    settings=self.settings,
                    js=self._js,
                )
                project = ProjectSpinup(
                    manager=manager, health=HealthMonitor(manager), idle=IdleMonitor(manager), sources=sources
                )
                self._projects[project_id] = project
            if self._loop is not None:
                await project.start(self._js)
            return project

    async def manager(self, project_id: str) -> SpinupManager:
        return (await self.project(project_id)).manager

    @property
    def project_ids(self) -> list[str]:
        return list(self._projects)

    async def discover_projects(self) -> list[str]:
        """Projects with live spin-up operations in JetStream, so a restarted Weft carries
        them on (time-outs, links, idle shutdown) without being asked about the project."""
        found: list[str] = []
        try:
            streams = await stream_names(self._nc)  # every page: one server holds many projects
        except Exception as exc:
            log.warning("cannot list streams to discover projects: %s", redact(exc))
            return found
        for name in streams:
            project_id = project_of_spinups_stream(name)
            if project_id is None or project_id in self._projects:
                continue
            store = SpinupStore(self._js, ProjectNames(project_id))
            try:
                live = any(slot.live or slot.in_flight for slot in await store.slots())
            except Exception as exc:
                log.debug("spin-ups of %s not readable: %s", project_id, redact(exc))
                continue
            if live:
                found.append(project_id)
                await self.project(project_id)
        return found

    # -- what routing and the target routes call --------------------------------------
    async def request_for_work(self, project_id: str, item: WorkItem) -> SpinupDecision:
        return await (await self.manager(project_id)).request_for_work(item)

    async def spin_up(
        self, project_id: str, target_id: str, *, work_id: str | None = None
    ) -> SpinupOperation:
        return await (await self.manager(project_id)).spin_up(target_id, work_id=work_id)

    async def test_target(self, project_id: str, target_id: str) -> HealthReport:
        project = await self.project(project_id)
        try:
            target = await project.manager.targets.get_target(target_id)
        except TargetMissing:
            raise SpinupRefused("not_found", f"target: no target {target_id!r} in this project") from None
        return await project.health.check(target)

    async def operations(self, project_id: str) -> list[SpinupOperation]:
        records = await (await self.manager(project_id)).store.all()
        return sorted((r.op for r in records), key=lambda op: op.created_at, reverse=True)

    # -- lifecycle ----------------------------------------------------------------------
    async def start(self) -> None:
        if self._loop is not None:
            return
        self._loop = asyncio.create_task(self._run(), name="spinup-loop")
        for project_id in [*self._initial, *self._projects]:
            await self.project(project_id)

    async def stop(self) -> None:
        if self._loop is not None:
            # Bounded: a shutdown must not hang on a task that a library kept from ending.
            await stop_task(self._loop)
            self._loop = None
        for project in self._projects.values():
            await project.stop()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = self._last_discovery is None or (
                loop.time() - self._last_discovery >= self.settings.discover_interval_s
            )
            if self._discover and due:
                self._last_discovery = loop.time()
                await self.discover_projects()
            for project_id in dict.fromkeys([*self._projects, *self._extra_projects()]):
                try:
                    await self.tick(project_id)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    raise_if_cancelling()  # a stop that nats-py turned into an error ends the loop
                    log.warning("spin-up tick for project %s failed: %s", project_id, redact(exc))
            await asyncio.sleep(self.settings.tick_s)

    async def tick(self, project_id: str, *, health: bool | None = None) -> None:
        """One pass for a project: reconcile operations, idle shutdown, due health checks."""
        project = await self.project(project_id)
        manager = project.manager
        if project.agents is not None:
            agents = {a.agent_id: a for a in project.agents.values()}
        else:
            agents = {a.agent_id: a for a in await manager.registry.list_project()}
        live = await manager.tick(agents)
        targets = {t.id: t for t in await manager.targets.list_targets()}
        if live:
            await project.idle.check(live, agents, targets, utcnow(), await project.work_items())
        if health if health is not None else self.settings.health_checks:
            running = project.health_task is not None and not project.health_task.done()
            if not running and project.health.due(targets.values()):
                project.health_task = asyncio.create_task(project.health.run_due(targets.values()))
