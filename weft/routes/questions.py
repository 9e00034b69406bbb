"""``/api/questions``: what agents asked the operator, and answering it
(docs/architecture.md, Work: questions; docs/weft.md, Routes)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query
from pydantic import BaseModel, ConfigDict, Field

from shared.models import MAX_ANSWER, Question, QuestionStatus
from shared.names import HANDLE_PATTERN, anchored, validate_agent_id, validate_work_id
from shared.work.questions import QuestionFilter
from weft.deps import OPERATE, Cursor, Limit, ProjectDep, require_token
from weft.errors import ERROR_RESPONSES
from weft.routes.common import HEX32
from weft.schemas import PageOut

router = APIRouter(
    prefix="/api/questions",
    tags=["questions"],
    dependencies=[Depends(require_token)],
    responses=ERROR_RESPONSES,
)

QuestionId = Annotated[str, Path(pattern=HEX32, description="Question id: 32 lowercase hex")]


class AnswerRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    answer: str = Field(
        min_length=1, max_length=MAX_ANSWER, description="One of the choices, when there are some"
    )
    by: str = Field(
        default="operator", pattern=anchored(HANDLE_PATTERN), description="Who answers (shown to the agent)"
    )


@router.get("", response_model=PageOut[Question], summary="List questions, newest first")
async def list_questions(
    project: ProjectDep,
    limit: Limit = 50,
    cursor: Cursor = None,
    status_: Annotated[QuestionStatus | None, Query(alias="status")] = None,
    work_id: str | None = None,
    asked_by: str | None = None,
) -> PageOut[Question]:
    filters = QuestionFilter(
        status=status_,
        work_id=None if work_id is None else validate_work_id(work_id),
        asked_by=None if asked_by is None else validate_agent_id(asked_by, "asked_by"),
    )
    page = await project.questions.listing(filters, limit=limit, cursor=cursor)
    return PageOut[Question](items=page.items, next_cursor=page.next_cursor, total=page.total)


@router.get("/{question_id}", response_model=Question, summary="Show one question")
async def get_question(question_id: QuestionId, project: ProjectDep) -> Question:
    return await project.questions.get(question_id)


@router.post(
    "/{question_id}/answer", response_model=Question, dependencies=OPERATE, summary="Answer a question"
)
async def answer_question(question_id: QuestionId, body: AnswerRequest, project: ProjectDep) -> Question:
    """The answer waits for the asking agent in the questions bucket; the work the question
    was about (if any) goes back in progress. An answered or expired question is ``409``."""
    return await project.questions.answer(question_id, body.answer, by=body.by)
