"""The seam between Weft and spin-up (docs/spinup.md).

Weft calls a :class:`SpinupService` at five points: when a project starts
being served (:meth:`~SpinupService.attach`), validating a target's mechanism
``config``, routing (no eligible agent online, a matching target exists), the
manual ``POST /api/targets/{id}/spin-up`` and ``/test`` routes, and stats.

Two services implement it: :class:`~weft.spinup.managed.ManagedSpinup` starts
and stops agents; :class:`DisabledSpinup` (``WEFT_SPINUP=none``) starts none,
records on waiting work that it waits for an agent, answers the manual routes
with a clear 409, and still checks targets like any other replica.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Final, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from shared.errors import Conflict
from shared.models import SpinupOperation, Target, TargetHealth, TargetSpec, WorkItem, utcnow
from weft.spinup.config import InvalidTargetConfig

if TYPE_CHECKING:
    from weft.project.hub import ProjectContext, ProjectExtension, ProjectHub

WAITING_FOR_AGENT = "waiting for an agent"
SPINUP_EXTENSION: Final = "spinup"
"""The name a project's spin-up part is attached under (``ProjectContext.extensions``)."""


class SpinupError(Conflict):
    """A spin-up that cannot happen now (a ``conflict``, unless ``code`` says otherwise);
    ``retry_after_s`` when waiting would help (a target cooling down)."""

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        field: str | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message, field=field, code=code)
        self.retry_after_s = retry_after_s


class SpinupUnavailable(SpinupError):
    def __init__(self) -> None:
        super().__init__(
            "no spin-up mechanism installed: this Weft can register targets but not start agents from them",
            code="spinup_unavailable",
        )


class TargetConfigError(SpinupError):
    """A target's mechanism ``config`` is invalid; ``field`` is the first bad one
    (``config.command``), the message names every one."""

    def __init__(self, exc: InvalidTargetConfig) -> None:
        first = exc.errors[0]
        super().__init__(str(exc), code="validation_error", field=first.field)


def check_target(spec: TargetSpec) -> None:
    """Refuse a target whose ``config`` does not fit its mechanism (every field error)."""
    # imported here: the mechanisms bring asyncssh, httpx and nats-py, and every process that
    # imports this package (the demo agent, ``python -m weft.spinup.demo_agent``) would pay
    from weft.spinup.mechanisms import parse_config

    try:
        parse_config(spec.mechanism, spec.config)
    except InvalidTargetConfig as exc:
        raise TargetConfigError(exc) from None


class TargetTestResult(BaseModel):
    target_id: str
    ok: bool
    health: TargetHealth
    detail: str = ""
    checked_at: datetime = Field(default_factory=utcnow)


@runtime_checkable
class SpinupRequester(Protocol):
    async def request_spinup(self, project: ProjectContext, item: WorkItem) -> None:
        """No eligible agent is online for ``item`` and a matching target exists.

        Called on submit and again on every sweep while the item waits, possibly by
        several Weft replicas: implementations enforce "one in flight per target",
        the concurrency cap and the cool-down themselves (in KV, with CAS).
        """
        ...


@runtime_checkable
class SpinupService(SpinupRequester, Protocol):
    name: str

    async def start(self, hub: ProjectHub) -> None:
        """Called once, before the hub serves any project."""
        ...

    async def stop(self) -> None: ...

    async def attach(self, project: ProjectContext) -> ProjectExtension | None:
        """A project starts being served: what spin-up runs for it (stopped with the project)."""
        ...

    def validate_target(self, spec: TargetSpec) -> None:
        """Raise :class:`TargetConfigError` when ``spec.config`` is wrong for its mechanism."""
        ...

    async def spin_up(
        self, project: ProjectContext, target: Target, *, work_id: str | None = None
    ) -> SpinupOperation: ...

    async def test_target(self, project: ProjectContext, target: Target) -> TargetTestResult: ...

    async def operations(self, project: ProjectContext) -> list[SpinupOperation]: ...


class DisabledSpinup:
    """``WEFT_SPINUP=none``: this Weft starts no agents (waiting work says so), but checks
    targets and reports the operations other replicas recorded."""

    name = "none"

    async def start(self, hub: ProjectHub) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def attach(self, project: ProjectContext) -> ProjectExtension | None:
        return None

    def validate_target(self, spec: TargetSpec) -> None:
        check_target(spec)

    async def request_spinup(self, project: ProjectContext, item: WorkItem) -> None:

        await project.queue.set_waiting_reason(item.id, WAITING_FOR_AGENT)

    async def spin_up(
        self, project: ProjectContext, target: Target, *, work_id: str | None = None
    ) -> SpinupOperation:
        raise SpinupUnavailable()

    async def test_target(self, project: ProjectContext, target: Target) -> TargetTestResult:
        raise SpinupUnavailable()

    async def operations(self, project: ProjectContext) -> list[SpinupOperation]:
        from nats.js.errors import BucketNotFoundError, NotFoundError  # here: see check_target

        from weft.spinup.store import SpinupStore, newest_first

        try:
            await project.js.key_value(project.names.spinups_bucket)
        except (BucketNotFoundError, NotFoundError):  # nothing was ever started in this project
            return []
        return newest_first(await SpinupStore(project.js, project.names).all())
