"""The seam between Weft and its spin-up mechanisms (DESIGN §6).

Weft calls a :class:`SpinupService` at four points: validating a target's
mechanism ``config``, routing (no eligible agent online, a matching target
exists), the manual ``POST /api/targets/{id}/spin-up`` and ``/test`` routes,
and stats. Until a real manager is installed, :class:`NoSpinup` records on
the work item that it is waiting for an agent and answers the manual routes
with a clear 409.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from shared.errors import LoomError
from shared.models import SpinupOperation, Target, TargetHealth, TargetSpec, WorkItem, utcnow

if TYPE_CHECKING:
    from weft.project import ProjectContext, ProjectHub

WAITING_FOR_AGENT = "waiting for an agent"


class SpinupError(LoomError):
    """A refused spin-up request; ``status`` is the HTTP status to answer with (4xx)."""

    def __init__(self, message: str, *, status: int = 409, code: str = "conflict", field: str | None = None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.field = field


class SpinupUnavailable(SpinupError):
    def __init__(self) -> None:
        super().__init__(
            "no spin-up mechanism installed: this Weft can register targets but not start agents from them",
            status=409,
            code="spinup_unavailable",
        )


class TargetConfigError(SpinupError):
    """A target's mechanism ``config`` is invalid; ``field`` is e.g. ``config.command``."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}", status=422, code="validation_error", field=field)


class TargetTestResult(BaseModel):
    target_id: str
    ok: bool
    health: TargetHealth
    detail: str = ""
    checked_at: datetime = Field(default_factory=utcnow)


@runtime_checkable
class SpinupRequester(Protocol):
    async def request_spinup(self, project: ProjectContext, item: WorkItem, target: Target) -> None:
        """No eligible agent is online for ``item`` and ``target`` could provide one.

        Called on submit and again on every sweep while the item waits, possibly by
        several Weft replicas: implementations enforce "one in flight per target",
        the concurrency cap and the cool-down themselves (in KV, with CAS).
        """
        ...


@runtime_checkable
class SpinupService(SpinupRequester, Protocol):
    name: str

    async def start(self, hub: ProjectHub) -> None: ...

    async def stop(self) -> None: ...

    def validate_target(self, spec: TargetSpec) -> None:
        """Raise :class:`TargetConfigError` when ``spec.config`` is wrong for its mechanism."""
        ...

    async def spin_up(
        self, project: ProjectContext, target: Target, *, work_id: str | None = None
    ) -> SpinupOperation: ...

    async def test_target(self, project: ProjectContext, target: Target) -> TargetTestResult: ...

    async def operations(self, project: ProjectContext) -> list[SpinupOperation]: ...


class NoSpinup:
    """The default until a spin-up manager is installed: waiting work says so."""

    name = "none"

    async def start(self, hub: ProjectHub) -> None:
        return None

    async def stop(self) -> None:
        return None

    def validate_target(self, spec: TargetSpec) -> None:
        return None

    async def request_spinup(self, project: ProjectContext, item: WorkItem, target: Target) -> None:
        from weft.workview import set_waiting_reason

        await set_waiting_reason(project.js, project.queue, item.id, WAITING_FOR_AGENT)

    async def spin_up(
        self, project: ProjectContext, target: Target, *, work_id: str | None = None
    ) -> SpinupOperation:
        raise SpinupUnavailable()

    async def test_target(self, project: ProjectContext, target: Target) -> TargetTestResult:
        raise SpinupUnavailable()

    async def operations(self, project: ProjectContext) -> list[SpinupOperation]:
        from weft.spinup.records import read_operations

        return await read_operations(project.js, project.names)
