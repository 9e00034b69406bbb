"""warp_dlq_list, warp_dlq_retry, warp_dlq_discard: the dead-letter queue, by work id."""

from __future__ import annotations

from typing import Annotated

from mcp_types import CallToolResult
from pydantic import Field

from shared.mcp.tools import tool
from warp.runtime import WarpRuntime
from warp.schemas import Capability, Cursor, DeadLetterOut, DlqListOut, WorkId, WorkOut
from warp.tools.base import result
from warp.tools.work import item_text


async def warp_dlq_list(
    rt: WarpRuntime,
    capability: Capability | None = None,
    limit: Annotated[int, Field(ge=1, le=200)] = 50,
    cursor: Cursor | None = None,
) -> Annotated[CallToolResult, DlqListOut]:
    """Work that failed all its attempts, oldest first, with each attempt's error."""
    svc = await rt.services()
    page = await svc.work.dlq_list(capability=capability, limit=limit, cursor=cursor)
    out = DlqListOut(
        items=[
            DeadLetterOut(item=d.item, dlq_seq=d.dlq_seq, dead_lettered_at=d.dead_lettered_at)
            for d in page.items
        ],
        next_cursor=page.next_cursor,
    )
    if not out.items:
        text = "The dead-letter queue is empty."
    else:
        text = "\n".join(item_text(d.item) for d in out.items)
        if page.next_cursor:
            text += "\nMore: pass next_cursor."
    return result(out, text)


async def warp_dlq_retry(rt: WarpRuntime, work_id: WorkId) -> Annotated[CallToolResult, WorkOut]:
    """Put a dead-lettered item back in its queue with its attempts reset."""
    svc = await rt.services()
    item = await svc.work.dlq_retry(work_id)
    return result(WorkOut(item=item), f"Back in the queue.\n{item_text(item)}")


async def warp_dlq_discard(rt: WarpRuntime, work_id: WorkId) -> Annotated[CallToolResult, WorkOut]:
    """Remove an item from the dead-letter queue for good (its record stays, dead-lettered)."""
    svc = await rt.services()
    item = await svc.work.dlq_discard(work_id)
    return result(WorkOut(item=item), f"Discarded from the dead-letter queue.\n{item_text(item)}")


TOOLS = (
    tool(warp_dlq_list, title="List dead letters", read_only=True, idempotent=True),
    tool(warp_dlq_retry, title="Retry a dead letter"),
    tool(warp_dlq_discard, title="Discard a dead letter", destructive=True),
)
