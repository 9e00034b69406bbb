"""``/api/stats``: counts for dashboards; ``/api/stats/projects``: every project on the account."""

from __future__ import annotations

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from shared.views import Stats
from weft.deps import ProjectDep, StateDep, require_token
from weft.errors import ERROR_RESPONSES
from weft.stats import ProjectSummary, known_projects, project_stats
from weft.strictquery import STRICT_QUERY

router = APIRouter(
    prefix="/api/stats",
    tags=["stats"],
    dependencies=[STRICT_QUERY, Depends(require_token)],
    responses=ERROR_RESPONSES,
)


class ProjectsOut(BaseModel):
    default_project: str
    projects: list[ProjectSummary]


@router.get("", response_model=Stats, summary="Agents, work, queues, targets and spin-ups of a project")
async def stats(project: ProjectDep, state: StateDep) -> Stats:
    return await project_stats(project, state.spinup)


@router.get("/projects", response_model=ProjectsOut, summary="Projects with data on this NATS account")
async def projects(state: StateDep) -> ProjectsOut:
    return ProjectsOut(default_project=state.hub.default_project, projects=await known_projects(state.hub))
