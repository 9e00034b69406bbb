"""The spin-up service Weft installs (``weft.spinup.base.SpinupService``): the engine,
fed by Weft's own per-project target store and work index.

Routing calls :meth:`WeftSpinup.request_spinup` when no eligible agent is
online; the target routes call :meth:`validate_target`, :meth:`spin_up` and
:meth:`test_target`; stats call :meth:`operations`.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlunsplit

from nats.js import JetStreamContext
from nats.js.errors import BucketNotFoundError, NotFoundError

from shared.models import SpinupOperation, Target, TargetHealth, TargetSpec, WorkItem, utcnow
from shared.names import ProjectNames
from shared.redact import redact
from weft.spinup.base import NoSpinup, SpinupError, TargetConfigError, TargetTestResult
from weft.spinup.config import InvalidTargetConfig, parse_config
from weft.spinup.manager import SpinupDecision, SpinupRefused
from weft.spinup.mechanisms.base import Mechanism
from weft.spinup.service import ProjectSources, SpinupEngine
from weft.spinup.settings import SpinupSettings
from weft.spinup.store import SpinupStore
from weft.spinup.targets import TargetMissing
from weft.targets.store import TargetNotFound, TargetStore
from weft.workview import set_waiting_reason

if TYPE_CHECKING:
    from collections.abc import Mapping

    from weft.project import ProjectContext, ProjectHub

log = logging.getLogger("loom.weft.spinup")

_STATUS = {"not_found": 404, "conflict": 409, "invalid": 422}


class InvalidConfig(TargetConfigError):
    """Every field error of a target config; ``field`` is the first, the message names all."""

    def __init__(self, exc: InvalidTargetConfig) -> None:
        first = exc.errors[0]
        super().__init__(first.field, first.message)
        self.message = str(exc)
        self.args = (self.message,)
        self.errors = exc.details()


def check_target(spec: TargetSpec) -> None:
    """Refuse a target whose ``config`` does not fit its mechanism (every field error)."""
    try:
        parse_config(spec.mechanism, spec.config)
    except InvalidTargetConfig as exc:
        raise InvalidConfig(exc) from None


class ValidatingNoSpinup(NoSpinup):
    """``WEFT_SPINUP=none``: this Weft starts no agents, but checks targets like any other replica."""

    def validate_target(self, spec: TargetSpec) -> None:
        check_target(spec)

    async def operations(self, project: ProjectContext) -> list[SpinupOperation]:
        """Operations other replicas recorded (this one starts none)."""
        try:
            await project.js.key_value(project.names.spinups_bucket)
        except (BucketNotFoundError, NotFoundError):  # nothing was ever started in this project
            return []
        records = await SpinupStore(project.js, project.names).all()
        return sorted((r.op for r in records), key=lambda op: op.created_at, reverse=True)


class HubTargets:
    """The spin-up view of one project's targets, through Weft's target store."""

    def __init__(self, hub: ProjectHub, project_id: str) -> None:
        self._hub = hub
        self._project_id = project_id

    async def _store(self) -> TargetStore:
        return (await self._hub.get(self._project_id)).targets

    async def list_targets(self) -> list[Target]:
        return (await self._store()).all()

    async def get_target(self, target_id: str) -> Target:
        try:
            return await (await self._store()).resolve(target_id)
        except TargetNotFound:
            raise TargetMissing(target_id) from None

    async def _change(self, target_id: str, action: str, **fields: Any) -> Target:
        def apply(target: Target) -> Target:
            for name, value in fields.items():
                setattr(target, name, value)
            return target

        try:
            return await (await self._store()).update(target_id, apply, action=action)
        except TargetNotFound:
            raise TargetMissing(target_id) from None

    async def record_health(
        self, target_id: str, health: TargetHealth, detail: str | None, at: datetime
    ) -> Target:
        return await self._change(
            target_id, "health-checked", health=health, health_detail=detail, last_health_check=at
        )

    async def record_spinup(self, target_id: str, at: datetime) -> None:
        await self._change(target_id, "spun-up", last_spinup_at=at)


def agent_url_from(hub: ProjectHub) -> str:
    """The NATS URL agents get: Weft's configured ``NATS_URL``, else the server it is connected to."""
    if hub.settings.nats.url:
        return hub.settings.nats.url
    connected = hub.nc.connected_url
    if connected is None:
        return "nats://127.0.0.1:4222"
    host = connected.hostname or "127.0.0.1"
    return urlunsplit((connected.scheme or "nats", f"{host}:{connected.port or 4222}", "", "", ""))


def waiting_reason(decision: SpinupDecision) -> str:
    """Why the item waits, stable across sweeps (a changed reason is a ``work.waiting`` event)."""
    if decision.outcome == "started" or decision.outcome == "no-target":
        return f"waiting for an agent: {decision.detail}"
    codes = ", ".join(sorted({refusal.code for _, refusal in decision.refusals}))
    return f"waiting for an agent: matching targets cannot start one now ({codes})"


class WeftSpinup:
    name = "managed"

    def __init__(
        self,
        settings: SpinupSettings | None = None,
        *,
        mechanisms: Mapping[str, Mechanism] | None = None,
        discover: bool = True,
    ) -> None:
        self.settings = settings or SpinupSettings()
        self._mechanisms = mechanisms
        self._discover = discover
        self._hub: ProjectHub | None = None
        self._engine: SpinupEngine | None = None

    @property
    def engine(self) -> SpinupEngine:
        assert self._engine is not None, "WeftSpinup.start() was not awaited"
        return self._engine

    def _sources(self, js: JetStreamContext, names: ProjectNames) -> ProjectSources:
        hub = self._hub
        assert hub is not None
        project_id = names.project_id

        async def work_items() -> list[WorkItem]:
            return (await hub.get(project_id)).work.mirror.values()

        return ProjectSources(targets=HubTargets(hub, project_id), work_items=work_items)

    async def start(self, hub: ProjectHub) -> None:
        self._hub = hub
        self._engine = SpinupEngine(
            hub.nc,
            agent_nats_url=self.settings.agent_nats_url or agent_url_from(hub),
            settings=self.settings,
            mechanisms=self._mechanisms,
            sources=self._sources,
            projects=[hub.default_project],
            also_tick=lambda: [context.project_id for context in hub.served()],
            discover=self._discover,
        )
        await self._engine.start()

    async def stop(self) -> None:
        if self._engine is not None:
            await self._engine.stop()

    def validate_target(self, spec: TargetSpec) -> None:
        check_target(spec)

    async def request_spinup(self, project: ProjectContext, item: WorkItem, target: Target) -> None:
        decision = await self.engine.request_for_work(project.project_id, item)
        reason = waiting_reason(decision)
        try:
            await set_waiting_reason(project.js, project.queue, item.id, reason)
        except Exception as exc:
            log.debug("waiting reason for %s not recorded: %s", item.id, redact(exc))

    async def spin_up(
        self, project: ProjectContext, target: Target, *, work_id: str | None = None
    ) -> SpinupOperation:
        try:
            return await self.engine.spin_up(project.project_id, target.id, work_id=work_id)
        except SpinupRefused as exc:
            raise SpinupError(exc.message, status=_STATUS.get(exc.code, 409), code=exc.code) from None

    async def test_target(self, project: ProjectContext, target: Target) -> TargetTestResult:
        try:
            report = await self.engine.test_target(project.project_id, target.id)
        except SpinupRefused as exc:
            raise SpinupError(exc.message, status=_STATUS.get(exc.code, 409), code=exc.code) from None
        return TargetTestResult(
            target_id=target.id,
            ok=report.result.ok,
            health=report.target.health,
            detail=redact(report.result.detail),
            checked_at=report.target.last_health_check or utcnow(),
        )

    async def operations(self, project: ProjectContext) -> list[SpinupOperation]:
        return await self.engine.operations(project.project_id)
