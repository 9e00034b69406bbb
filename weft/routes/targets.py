"""``/api/targets``: where Weft can start agents from (docs/spinup.md, Targets).

Secrets in ``config`` never leave."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, status
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shared.errors import LoomError, without_given
from shared.models import HealthCheck, SpinupOperation, Target, TargetSpec
from shared.names import validate_capability
from weft.deps import ADMIN, Cursor, Limit, ProjectDep, StateDep, require_token
from weft.errors import ERROR_RESPONSES, from_pydantic
from weft.routes.common import HEX32, TargetRef
from weft.schemas import PageOut
from weft.spinup.base import TargetTestResult
from weft.spinup.mechanisms import MechanismName
from weft.strictquery import STRICT_QUERY
from weft.targets.store import public_view

router = APIRouter(
    prefix="/api/targets",
    tags=["targets"],
    dependencies=[STRICT_QUERY, Depends(require_token)],
    responses=ERROR_RESPONSES,
)


class TargetIn(TargetSpec):
    """A target to register; ``mechanism`` is one Weft offers (``GET /api/mechanisms``)."""

    mechanism: MechanismName


class TargetPatch(BaseModel):
    """Fields to change; omitted ones stay. ``***`` inside ``config`` keeps the stored secret."""

    model_config = ConfigDict(extra="forbid")
    name: str | None = None
    agent_type: str | None = None
    capabilities: list[str] | None = None
    boundaries: list[str] | None = None
    mechanism: MechanismName | None = None
    config: dict[str, Any] | None = None
    max_concurrent: int | None = None
    cooldown_s: float | None = None
    idle_timeout_s: float | None = None
    health_check: HealthCheck | None = None
    enabled: bool | None = None
    tags: list[str] | None = None


class SpinupRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    work_id: Annotated[str | None, Field(pattern=HEX32, description="Work item the agent is for")] = None


def out(target: Target) -> Target:
    return Target.model_validate(public_view(target))


@router.get("", response_model=PageOut[Target], summary="List targets, by name")
async def list_targets(
    project: ProjectDep,
    limit: Limit = 50,
    cursor: Cursor = None,
    mechanism: MechanismName | None = None,
    enabled: bool | None = None,
    capability: Annotated[str | None, Query()] = None,
) -> PageOut[Target]:
    page = await project.targets.list_page(
        mechanism=mechanism,
        enabled=enabled,
        capability=None if capability is None else validate_capability(capability),
        limit=limit,
        cursor=cursor,
    )
    return PageOut[Target](items=[out(t) for t in page.items], next_cursor=page.next_cursor, total=page.total)


@router.post(
    "",
    response_model=Target,
    status_code=status.HTTP_201_CREATED,
    dependencies=ADMIN,
    summary="Register a target",
)
async def create_target(body: TargetIn, project: ProjectDep, state: StateDep) -> Target:
    try:
        state.spinup.validate_target(body)
    except LoomError as exc:  # the mechanism's own checks may quote the config: never echo it
        raise without_given(exc, body.config) from None
    return out(await project.targets.create(body))


@router.get("/{target}", response_model=Target, summary="Show a target (by id or name)")
async def get_target(target: TargetRef, project: ProjectDep) -> Target:
    return out(await project.targets.resolve(target))


@router.patch("/{target}", response_model=Target, dependencies=ADMIN, summary="Change a target")
async def patch_target(target: TargetRef, body: TargetPatch, project: ProjectDep, state: StateDep) -> Target:
    changes = body.model_dump(exclude_unset=True)
    if not changes:
        return out(await project.targets.resolve(target))
    try:
        return out(await project.targets.patch(target, changes, check=state.spinup.validate_target))
    except ValidationError as exc:  # the merged spec is invalid: name the field
        raise from_pydantic(exc) from None
    except LoomError as exc:  # the mechanism's own checks may quote the config: never echo it
        raise without_given(exc, changes.get("config")) from None


@router.delete("/{target}", response_model=Target, dependencies=ADMIN, summary="Remove a target")
async def delete_target(target: TargetRef, project: ProjectDep) -> Target:
    return out(await project.targets.delete(target))


@router.post(
    "/{target}/enable", response_model=Target, dependencies=ADMIN, summary="Enable a target for routing"
)
async def enable_target(target: TargetRef, project: ProjectDep) -> Target:
    return out(await project.targets.set_enabled(target, True))


@router.post(
    "/{target}/disable", response_model=Target, dependencies=ADMIN, summary="Stop routing to a target"
)
async def disable_target(target: TargetRef, project: ProjectDep) -> Target:
    return out(await project.targets.set_enabled(target, False))


@router.post(
    "/{target}/test",
    response_model=TargetTestResult,
    dependencies=ADMIN,
    summary="Check a target can start agents",
)
async def test_target(target: TargetRef, project: ProjectDep, state: StateDep) -> TargetTestResult:
    """Answered by the installed spin-up mechanism; 409 when none is installed."""
    found = await project.targets.resolve(target)
    return await state.spinup.test_target(project, found)


@router.post(
    "/{target}/spin-up",
    response_model=SpinupOperation,
    status_code=status.HTTP_202_ACCEPTED,
    dependencies=ADMIN,
    summary="Start an agent from a target now",
)
async def spin_up(
    target: TargetRef, project: ProjectDep, state: StateDep, body: SpinupRequest | None = None
) -> SpinupOperation:
    found = await project.targets.resolve(target)
    return await state.spinup.spin_up(project, found, work_id=body.work_id if body else None)
