"""``/api/questions``: what agents asked the operator, answering it (one or many at once)
and putting it off (docs/operator.md; docs/weft.md, Routes)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from shared.errors import LoomError
from shared.models import MAX_ANSWER, Priority, Question, QuestionStatus
from shared.names import HANDLE_PATTERN, anchored, validate_agent_id, validate_token, validate_work_id
from shared.work.questions import Order, QuestionFilter
from weft.deps import OPERATE, Cursor, Limit, ProjectDep, require_token
from weft.errors import ERROR_RESPONSES
from weft.routes.common import HEX32
from weft.schemas import PageOut
from weft.strictquery import STRICT_QUERY

router = APIRouter(
    prefix="/api/questions",
    tags=["questions"],
    dependencies=[STRICT_QUERY, Depends(require_token)],
    responses=ERROR_RESPONSES,
)

QuestionId = Annotated[str, Path(pattern=HEX32, description="Question id: 32 lowercase hex")]


class AnswerRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    answer: str = Field(
        min_length=1, max_length=MAX_ANSWER, description="One of the choices, when there are some"
    )
    by: By = "operator"


By = Annotated[
    str,
    Field(
        default="operator", pattern=anchored(HANDLE_PATTERN), description="Who answers (shown to the agent)"
    ),
]


class DeferRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    until: AwareDatetime = Field(
        description="ISO 8601 with a timezone: until then it is listed after the others"
    )
    by: By = "operator"


class BatchEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    question_id: str = Field(pattern=HEX32)
    answer: str | None = Field(None, min_length=1, max_length=MAX_ANSWER)
    defer_until: AwareDatetime | None = Field(None, description="Put it off instead of answering")

    @model_validator(mode="after")
    def _one(self) -> BatchEntry:
        if (self.answer is None) == (self.defer_until is None):
            raise ValueError("give answer or defer_until, not both or neither")
        return self


class BatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    answers: list[BatchEntry] = Field(min_length=1, max_length=100)
    by: By = "operator"


class BatchProblem(BaseModel):
    code: str
    field: str | None
    message: str


class BatchResult(BaseModel):
    question_id: str
    question: Question | None = Field(description="As it now stands; null when refused")
    error: BatchProblem | None = Field(description="Why this one was refused (the others still count)")


class BatchOut(BaseModel):
    results: list[BatchResult] = Field(description="One per entry, in the order given")
    answered: int
    deferred: int
    refused: int


@router.get(
    "",
    response_model=PageOut[Question],
    summary="List questions, the most urgent first (open, then P0-P3, then the oldest)",
)
async def list_questions(
    project: ProjectDep,
    limit: Limit = 50,
    cursor: Cursor = None,
    status_: Annotated[QuestionStatus | None, Query(alias="status")] = None,
    work_id: str | None = None,
    asked_by: str | None = None,
    priority: Priority | None = None,
    category: str | None = None,
    order: Annotated[Order, Query(description="urgency (default) or newest")] = "urgency",
) -> PageOut[Question]:
    filters = QuestionFilter(
        status=status_,
        work_id=None if work_id is None else validate_work_id(work_id),
        asked_by=None if asked_by is None else validate_agent_id(asked_by, "asked_by"),
        priority=priority,
        category=None if category is None else validate_token(category, "category"),
    )
    page = await project.questions.listing(filters, limit=limit, cursor=cursor, order=order)
    return PageOut[Question](items=page.items, next_cursor=page.next_cursor, total=page.total)


@router.post(
    "/answers",
    response_model=BatchOut,
    dependencies=OPERATE,
    summary="Answer or put off several questions in one call",
)
async def answer_many(body: BatchRequest, project: ProjectDep) -> BatchOut:
    """Each entry answers a question or defers it; each stands on its own (one refused,
    e.g. answered already, does not undo the others) and its result says which."""
    results: list[BatchResult] = []
    for entry in body.answers:
        try:
            if entry.answer is not None:
                done = await project.questions.answer(entry.question_id, entry.answer, by=body.by)
            else:
                assert entry.defer_until is not None
                done = await project.questions.defer(entry.question_id, entry.defer_until, by=body.by)
        except LoomError as exc:
            problem = BatchProblem(code=exc.code, field=exc.field, message=exc.message)
            results.append(BatchResult(question_id=entry.question_id, question=None, error=problem))
            continue
        results.append(BatchResult(question_id=entry.question_id, question=done, error=None))
    refused = sum(1 for r in results if r.error is not None)
    deferred = sum(
        1 for e, r in zip(body.answers, results, strict=True) if r.error is None and e.answer is None
    )
    return BatchOut(
        results=results, answered=len(results) - refused - deferred, deferred=deferred, refused=refused
    )


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


@router.post(
    "/{question_id}/defer", response_model=Question, dependencies=OPERATE, summary="Put a question off"
)
async def defer_question(question_id: QuestionId, body: DeferRequest, project: ProjectDep) -> Question:
    """It stays open (work waiting on it keeps waiting) and is listed after the other open
    questions until ``until``; a bypass question's default waits until then too. ``until``
    must be in the future, within 30 days and before the question's deadline."""
    return await project.questions.defer(question_id, body.until, by=body.by)
