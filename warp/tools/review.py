"""warp_work_review: a reviewer's verdict on work it claimed for review.

A review task is claimed like any work (``warp_work_claim``, by an agent with the review
capability the submission named, never the agent that did the work) and arrives as the
item itself, status ``reviewing``, with every round's result and feedback in ``reviews``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from mcp_types import CallToolResult
from pydantic import Field

from shared.limits import DESCRIPTION_MAX_LENGTH, MAX_FOLLOW_UPS
from shared.mcp.tools import tool
from shared.models import WorkStatus
from warp.runtime import WarpRuntime
from warp.schemas import WorkId, WorkOut
from warp.tools.base import result
from warp.tools.work import held_operation, item_text


async def warp_work_review(
    rt: WarpRuntime,
    work_id: WorkId,
    verdict: Annotated[
        Literal["approve", "conditional", "reject"],
        Field(
            description="approve: it counts; conditional: it counts, and what is left becomes "
            "follow-up items (give follow_ups); reject: back to the workers"
        ),
    ],
    feedback: Annotated[
        str,
        Field(max_length=8000, description="What is wrong and what to change (required to reject)"),
    ] = "",
    score: Annotated[
        float | None, Field(ge=0, le=100, description="Optional score, as in a QC rubric (0-100)")
    ] = None,
    follow_ups: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=DESCRIPTION_MAX_LENGTH)]] | None,
        Field(
            max_length=MAX_FOLLOW_UPS,
            description="A conditional pass only: what is left, one description per follow-up item "
            "(each becomes new work of the same kind, linked to this one)",
        ),
    ] = None,
) -> Annotated[CallToolResult, WorkOut]:
    """Give your verdict on work you claimed for review. Approve completes it; a conditional
    pass completes it too and records what is left as follow-up items; reject sends it back
    to the workers with your feedback (the next worker sees it), and after its last review
    round it fails for good into the dead-letter queue."""
    svc = await rt.services()
    item = await held_operation(
        rt,
        svc,
        work_id,
        lambda: svc.work.review(work_id, svc.agent_id, verdict, feedback, score, follow_ups or ()),
    )
    passed = "Passed on condition" if verdict == "conditional" else "Approved"
    if item.status is WorkStatus.COMPLETED:
        said = f"{passed}: the work is completed."
    elif item.status is WorkStatus.LANDING:
        said = f"{passed}: its branch is queued for landing; it completes once it is on the target branch."
    elif item.status is WorkStatus.QUEUED:
        said = "Rejected: the work is back in the queue with your feedback."
    else:
        said = "Rejected in its last round: the work is in the dead-letter queue."
    made = item.reviews[-1].follow_ups if item.reviews else []
    if made:
        said += f" Follow-up items created: {', '.join(made)}."
    return result(WorkOut(item=item), f"{said}\n{item_text(item)}")


TOOLS = (tool(warp_work_review, title="Review work"),)
