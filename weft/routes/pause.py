"""``/api/pause``: an operator pauses and resumes a project (docs/operations.md, Pause).

While a project is paused no claim is admitted and no agent is started, wherever they
are asked for (Warp's claims, Weft's spin-ups); the items already held go on. The pause
is part of the project's run-time limits document (:mod:`shared.usage.ledger`), so every
agent and replica reads it where it reads the daily budgets, within a couple of seconds.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from shared.models import utcnow
from shared.names import HANDLE_PATTERN, anchored
from shared.usage.rules import MAX_PAUSE_REASON, Pause, paused, resumed
from weft.deps import OPERATE, ProjectDep, require_token
from weft.errors import ERROR_RESPONSES
from weft.strictquery import STRICT_QUERY

router = APIRouter(
    prefix="/api/pause",
    tags=["pause"],
    dependencies=[STRICT_QUERY, Depends(require_token)],
    responses=ERROR_RESPONSES,
)


class PauseRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str = Field(default="", max_length=MAX_PAUSE_REASON, description="Why (shown to agents)")
    by: str = Field(default="operator", pattern=anchored(HANDLE_PATTERN), description="Who pauses it")
    stop_running: bool = Field(
        default=False,
        description="Running items stop too, at their next checkpoint (handed back to the queue); "
        "by default they go on",
    )


class PauseOut(BaseModel):
    project_id: str
    paused: Pause | None = Field(description="Who paused it, why and when; null: it is not paused")
    revision: int = Field(description="The run-time limits document's revision (0: none stored yet)")


@router.get("", response_model=PauseOut, summary="Whether the project is paused")
async def get_pause(project: ProjectDep) -> PauseOut:
    doc, revision = await project.ledger.read_budgets()
    return PauseOut(project_id=project.project_id, paused=doc.paused, revision=revision)


@router.put("", response_model=PauseOut, dependencies=OPERATE, summary="Pause the project")
async def pause(body: PauseRequest, project: ProjectDep) -> PauseOut:
    """No new claims or spin-ups until it is resumed; held items go on. ``409`` naming
    ``paused`` when it is paused already (resume it first)."""
    pause = Pause(by=body.by, reason=body.reason.strip(), at=utcnow(), stop_running=body.stop_running)
    doc, revision = await project.ledger.change_budgets(lambda doc: paused(doc, pause))
    return PauseOut(project_id=project.project_id, paused=doc.paused, revision=revision)


@router.delete("", response_model=PauseOut, dependencies=OPERATE, summary="Resume the project")
async def resume(project: ProjectDep) -> PauseOut:
    """Claims and spin-ups are admitted again; ``409`` naming ``paused`` when it is not paused."""
    doc, revision = await project.ledger.change_budgets(resumed)
    return PauseOut(project_id=project.project_id, paused=doc.paused, revision=revision)
