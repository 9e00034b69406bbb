"""``/api/autonomy``: a project's autonomy policy, what each question's priority and
category make of it (docs/operator.md, Autonomy policy). Thin adapters over
:mod:`shared.work.autonomy`; changing it takes the admin scope."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from shared.work.autonomy import AutonomyNotSet, AutonomyPolicy, AutonomySettings
from weft.deps import ADMIN, ProjectDep, require_token
from weft.errors import ERROR_RESPONSES
from weft.strictquery import STRICT_QUERY

router = APIRouter(
    prefix="/api/autonomy",
    tags=["autonomy"],
    dependencies=[STRICT_QUERY, Depends(require_token)],
    responses=ERROR_RESPONSES,
)

Revision = Annotated[
    int | None,
    Query(ge=0, description="Change only if the stored policy is still at this revision (0: none set)"),
]


class AutonomyOut(BaseModel):
    project_id: str
    policy: AutonomyPolicy
    stored: bool = Field(description="false: the project has set none, this is the default")


@router.get("", response_model=AutonomyOut, summary="The project's autonomy policy (or the default)")
async def get_autonomy(project: ProjectDep) -> AutonomyOut:
    found = await project.questions.autonomy.get()
    return AutonomyOut(
        project_id=project.project_id,
        policy=found or await project.questions.autonomy.current(),
        stored=found is not None,
    )


@router.put("", response_model=AutonomyOut, dependencies=ADMIN, summary="Set the project's autonomy policy")
async def put_autonomy(
    settings: AutonomySettings, project: ProjectDep, revision: Revision = None
) -> AutonomyOut:
    """Questions asked from now on follow it (those already asked keep their mode). With
    ``revision``: ``409`` naming ``revision`` when someone changed it since."""
    stored = await project.questions.autonomy.put(settings, by="operator", expected_revision=revision)
    return AutonomyOut(project_id=project.project_id, policy=stored, stored=True)


@router.delete(
    "", status_code=204, dependencies=ADMIN, summary="Forget the project's policy (the default applies)"
)
async def delete_autonomy(project: ProjectDep, revision: Revision = None) -> None:
    """``404`` naming ``autonomy`` when the project has none of its own."""
    if not await project.questions.autonomy.delete(expected_revision=revision):
        raise AutonomyNotSet()
