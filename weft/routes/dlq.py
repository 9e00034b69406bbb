"""``/api/dlq``: dead letters (work that used up its attempts)."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from shared.models import WorkItem
from shared.names import validate_capability
from weft.deps import OPERATE, Cursor, Limit, ProjectDep, StateDep, require_token
from weft.errors import ERROR_RESPONSES
from weft.routes.common import WorkId
from weft.schemas import PageOut
from weft.strictquery import STRICT_QUERY

router = APIRouter(
    prefix="/api/dlq",
    tags=["dead letters"],
    dependencies=[STRICT_QUERY, Depends(require_token)],
    responses=ERROR_RESPONSES,
)


class DeadLetterOut(BaseModel):
    item: WorkItem
    dlq_seq: int
    dead_lettered_at: datetime


@router.get("", response_model=PageOut[DeadLetterOut], summary="List dead letters, oldest first")
async def list_dead_letters(
    project: ProjectDep, limit: Limit = 50, cursor: Cursor = None, capability: str | None = None
) -> PageOut[DeadLetterOut]:
    page = await project.queue.dlq_list(
        capability=None if capability is None else validate_capability(capability), limit=limit, cursor=cursor
    )
    items = [
        DeadLetterOut(item=d.item, dlq_seq=d.dlq_seq, dead_lettered_at=d.dead_lettered_at) for d in page.items
    ]
    return PageOut[DeadLetterOut](items=items, next_cursor=page.next_cursor)


@router.post(
    "/{work_id}/retry",
    response_model=WorkItem,
    dependencies=OPERATE,
    summary="Put a dead letter back in the queue",
)
async def retry_dead_letter(work_id: WorkId, project: ProjectDep, state: StateDep) -> WorkItem:
    item = await project.queue.dlq_retry(work_id)
    state.spawn(state.router.route(project, item), name=f"route:{item.id}")
    return item


@router.delete("/{work_id}", response_model=WorkItem, dependencies=OPERATE, summary="Discard a dead letter")
async def discard_dead_letter(work_id: WorkId, project: ProjectDep) -> WorkItem:
    """The record stays (dead-lettered, with a note); only the DLQ entry goes."""
    return await project.queue.dlq_discard(work_id)
