"""``/api/landing``: the landing queue of a project (docs/landing.md). A thin adapter over
the work index and the landing lock; landing itself is done by landers, never by Weft."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from shared.git.landlock import LandingLock
from shared.git.repository import RepositoryNotSet
from shared.models import LandingAttempt, WorkItem, WorkStatus, utcnow
from weft.deps import ProjectDep, require_token
from weft.errors import ERROR_RESPONSES
from weft.strictquery import STRICT_QUERY

router = APIRouter(
    tags=["landing"], dependencies=[STRICT_QUERY, Depends(require_token)], responses=ERROR_RESPONSES
)


class LandingEntry(BaseModel):
    work_id: str
    task_id: str
    description: str
    status: WorkStatus = Field(description="merging: a lander holds it; landing: it waits for one")
    priority: int
    branch: str | None
    author: str | None = Field(description="The agent whose work it is")
    lander: str | None = Field(description="The lander landing it now")
    queued_at: datetime | None
    failures: int = Field(description="Conflicts and gate failures so far")
    last_attempt: LandingAttempt | None = Field(description="The latest try: outcome, files, gate output")
    pull_request: str | None = Field(None, description="Forge mode: the pull request it waits on (its URL)")
    question_id: str | None = Field(
        None, description="The coordinator's veto: the operator's \"land this?\" it waits on"
    )
    approved_by: str | None = Field(None, description='Who answered "land this?" with land')


class LandingOut(BaseModel):
    project_id: str
    target: str
    lock: LandingLock | None = Field(description="The lander landing on the target now (none: nobody)")
    queue: list[LandingEntry] = Field(description="Being landed first, then in the order landers take them")


def _entry(item: WorkItem) -> LandingEntry:
    landing = item.landing
    return LandingEntry(
        work_id=item.id,
        task_id=item.task_id,
        description=item.description,
        status=item.status,
        priority=item.priority,
        branch=item.workstream.branch if item.workstream is not None else None,
        author=landing.author if landing is not None else None,
        lander=item.assigned_to if item.status is WorkStatus.MERGING else None,
        queued_at=landing.queued_at if landing is not None else None,
        failures=landing.failures if landing is not None else 0,
        last_attempt=landing.attempts[-1] if landing is not None and landing.attempts else None,
        pull_request=landing.pull_request_url if landing is not None and landing.pull_request else None,
        question_id=item.question_id if item.status is WorkStatus.LANDING else None,
        approved_by=landing.approved_by if landing is not None else None,
    )


@router.get("/api/landing", response_model=LandingOut, summary="The landing queue and who lands now")
async def get_landing(project: ProjectDep) -> LandingOut:
    repository = await project.repository.get()
    if repository is None:
        raise RepositoryNotSet()
    lock = await project.landing_locks.current(repository.target_branch)
    if lock is not None and lock.expired(utcnow()):
        lock = None  # its lander stopped renewing it: the next lander takes it
    queue = [_entry(i) for i in await project.work.landing()]
    return LandingOut(project_id=project.project_id, target=repository.target_branch, lock=lock, queue=queue)
