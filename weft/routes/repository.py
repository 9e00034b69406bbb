"""``/api/repository`` (a project's repository, for workstreams) and an item's
checkpoints (``/api/work/{id}/checkpoints``, ``/api/work/{id}/restore``); see
docs/workstreams.md. Thin adapters over :mod:`shared.git.repository` and the work queue."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from shared.errors import Conflict
from shared.git.repository import Reach, Repository, RepositoryNotSet, RepositorySettings, probe
from shared.git.workstream import RepositoryCache
from shared.models import Checkpoint, WorkItem, Workstream
from weft.deps import ADMIN, OPERATE, ProjectDep, StateDep, require_token
from weft.errors import ERROR_RESPONSES
from weft.routes.common import WorkId
from weft.strictquery import STRICT_QUERY

router = APIRouter(
    tags=["workstreams"], dependencies=[STRICT_QUERY, Depends(require_token)], responses=ERROR_RESPONSES
)

Revision = Annotated[
    int | None,
    Query(ge=0, description="Change only if the stored settings are still at this revision (0: none set)"),
]


class NoWorkstream(Conflict):
    def __init__(self) -> None:
        super().__init__("this item has no workstream (no branch was made for it)", field="work_id")


class RepositoryOut(BaseModel):
    project_id: str
    repository: Repository
    reach: Reach | None = Field(
        None, description="Whether the repository answered Weft just now (PUT, or GET with check=true)"
    )


class CheckpointsOut(BaseModel):
    work_id: str
    branch: str | None
    resume_from: str | None = Field(description="The checkpoint the next attempt starts from")
    checkpoints: list[Checkpoint] = Field(description="The newest first")


class RestoreIn(BaseModel):
    checkpoint: str = Field(
        pattern="^[0-9a-f]{4,40}$",
        description="A checkpoint's SHA, or a unique prefix of one (4+ hex digits)",
    )


@router.get("/api/repository", response_model=RepositoryOut, summary="The project's repository")
async def get_repository(
    project: ProjectDep,
    check: Annotated[bool, Query(description="Also ask the repository whether it answers")] = False,
) -> RepositoryOut:
    found = await project.repository.get()
    if found is None:
        raise RepositoryNotSet()
    reach = await probe(found) if check else None
    return RepositoryOut(project_id=project.project_id, repository=found, reach=reach)


@router.put(
    "/api/repository",
    response_model=RepositoryOut,
    dependencies=ADMIN,
    summary="Set the project's repository (workstreams on for its items)",
)
async def put_repository(
    settings: RepositorySettings, project: ProjectDep, revision: Revision = None
) -> RepositoryOut:
    stored = await project.repository.put(settings, by="operator", expected_revision=revision)
    return RepositoryOut(project_id=project.project_id, repository=stored, reach=await probe(stored))


@router.delete(
    "/api/repository",
    status_code=204,
    dependencies=ADMIN,
    summary="Forget the project's repository (workstreams off; recorded branches stay)",
)
async def delete_repository(project: ProjectDep, revision: Revision = None) -> None:
    if not await project.repository.delete(expected_revision=revision):
        raise RepositoryNotSet()


def _checkpoints_out(item: WorkItem) -> CheckpointsOut:
    ws: Workstream | None = item.workstream
    return CheckpointsOut(
        work_id=item.id,
        branch=ws.branch if ws else None,
        resume_from=ws.resume_from if ws else None,
        checkpoints=ws.checkpoints if ws else [],
    )


@router.get(
    "/api/work/{work_id}/checkpoints",
    response_model=CheckpointsOut,
    summary="A work item's checkpoints, newest first, and the one its next attempt starts from",
)
async def list_checkpoints(work_id: WorkId, project: ProjectDep) -> CheckpointsOut:
    return _checkpoints_out(await project.queue.get(work_id))


@router.post(
    "/api/work/{work_id}/restore",
    response_model=CheckpointsOut,
    dependencies=OPERATE,
    summary="Start the item's next attempt from this checkpoint (its files, uncommitted)",
)
async def restore_checkpoint(work_id: WorkId, body: RestoreIn, project: ProjectDep) -> CheckpointsOut:
    item = await project.queue.get(work_id)
    chosen = body.checkpoint
    matches = {
        c.sha for c in (item.workstream.checkpoints if item.workstream else []) if c.sha.startswith(chosen)
    }
    sha = matches.pop() if len(matches) == 1 else chosen  # a unique prefix names one; else the rule refuses
    return _checkpoints_out(await project.queue.choose_checkpoint(work_id, sha))


class FileChangeOut(BaseModel):
    path: str
    status: str = Field(description="git's letter: A added, M modified, D deleted, R renamed")
    insertions: int | None = Field(description="None for a binary file")
    deletions: int | None


class DiffOut(BaseModel):
    work_id: str
    branch: str
    base_ref: str
    base_sha: str
    head_sha: str = Field(
        description="What the diff shows: the checkpoint asked for, the handed-in head, ..."
    )
    files: list[FileChangeOut]
    diff: str = Field(description="The unified diff, cut at 1 MB")
    truncated: bool


@router.get(
    "/api/work/{work_id}/diff",
    response_model=DiffOut,
    summary="What the item's code changed from its base: its handed-in head, newest checkpoint or branch",
)
async def item_diff(
    work_id: WorkId,
    project: ProjectDep,
    state: StateDep,
    checkpoint: Annotated[
        str | None, Query(pattern="^[0-9a-f]{4,40}$", description="One of its checkpoints instead")
    ] = None,
) -> DiffOut:
    item = await project.queue.get(work_id)
    if item.workstream is None:
        raise NoWorkstream()
    repository = await project.repository.get()
    if repository is None:
        raise RepositoryNotSet()
    folder = state.settings.loom.data_home / "repositories" / project.project_id
    found = await RepositoryCache(folder, repository).item_diff(
        work_id, item.workstream, checkpoint=checkpoint
    )
    return DiffOut(
        work_id=work_id,
        branch=item.workstream.branch,
        base_ref=item.workstream.base_ref,
        base_sha=found.base_sha,
        head_sha=found.head_sha,
        files=[FileChangeOut(**vars(f)) for f in found.files],
        diff=found.diff,
        truncated=found.truncated,
    )
