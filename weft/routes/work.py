"""``/api/work``: submit, list, show, cancel, retry (docs/architecture.md, Work; docs/weft.md, Routes)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, status
from pydantic import BaseModel, ConfigDict, Field

from shared.models import WorkItem, WorkStatus, WorkSubmission
from shared.names import validate_agent_id, validate_boundary, validate_capability
from shared.work import WorkError, WorkFilter
from weft.deps import OPERATE, Cursor, Limit, ProjectDep, StateDep, require_token
from weft.errors import ERROR_RESPONSES, error_body
from weft.routes.common import HEX32, WorkId
from weft.schemas import BatchOut, BatchResult, PageOut

router = APIRouter(
    prefix="/api/work", tags=["work"], dependencies=[Depends(require_token)], responses=ERROR_RESPONSES
)

SUBMITTED_BY = "weft-api"


class CancelRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str = Field(default="", max_length=2000, description="Shown to the claiming agent and in events")


class CancelBatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    work_ids: list[Annotated[str, Field(pattern=HEX32)]] = Field(min_length=1, max_length=1000)
    reason: str = Field(default="", max_length=2000)


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=WorkItem,
    dependencies=OPERATE,
    summary="Submit work",
)
async def submit_work(body: WorkSubmission, project: ProjectDep, state: StateDep) -> WorkItem:
    """Queue an item in the same queue Warp agents claim from; routing runs right after."""
    item = await project.queue.submit(body, submitted_by=SUBMITTED_BY)
    state.spawn(state.router.route(project, item), name=f"route:{item.id}")
    return item


@router.get("", response_model=PageOut[WorkItem], summary="List work, newest first")
async def list_work(
    project: ProjectDep,
    limit: Limit = 50,
    cursor: Cursor = None,
    status_: Annotated[WorkStatus | None, Query(alias="status")] = None,
    boundary: str | None = None,
    capability: str | None = None,
    assigned_to: str | None = None,
) -> PageOut[WorkItem]:
    filters = WorkFilter(
        status=status_,
        boundary=None if boundary is None else validate_boundary(boundary),
        capability=None if capability is None else validate_capability(capability),
        assigned_to=None if assigned_to is None else validate_agent_id(assigned_to, "assigned_to"),
    )
    page = await project.work.list_page(filters, limit=limit, cursor=cursor)
    return PageOut[WorkItem](items=page.items, next_cursor=page.next_cursor, total=page.total)


@router.post("/cancel-batch", response_model=BatchOut, dependencies=OPERATE, summary="Cancel several items")
async def cancel_batch(body: CancelBatchRequest, project: ProjectDep) -> BatchOut:
    results: list[BatchResult] = []
    for work_id in dict.fromkeys(body.work_ids):
        try:
            item = await project.queue.cancel(work_id, reason=body.reason, by=SUBMITTED_BY)
        except WorkError as exc:
            results.append(BatchResult(id=work_id, ok=False, error=error_body(exc)))
        else:
            results.append(BatchResult(id=work_id, ok=True, status=item.status.value))
    return BatchOut.of(results)


@router.get("/{work_id}", response_model=WorkItem, summary="Show one item")
async def get_work(work_id: WorkId, project: ProjectDep) -> WorkItem:
    return await project.queue.get(work_id)


@router.post("/{work_id}/cancel", response_model=WorkItem, dependencies=OPERATE, summary="Cancel an item")
async def cancel_work(work_id: WorkId, project: ProjectDep, body: CancelRequest | None = None) -> WorkItem:
    """Queued work leaves the queue; claimed work is taken back and its agent told to stop."""
    reason = body.reason if body else ""
    return await project.queue.cancel(work_id, reason=reason, by=SUBMITTED_BY)


@router.post(
    "/{work_id}/retry",
    response_model=WorkItem,
    dependencies=OPERATE,
    summary="Retry failed or dead-lettered work",
)
async def retry_work(work_id: WorkId, project: ProjectDep, state: StateDep) -> WorkItem:
    item = await project.queue.retry(work_id)
    state.spawn(state.router.route(project, item), name=f"route:{item.id}")
    return item
