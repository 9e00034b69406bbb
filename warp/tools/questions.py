"""warp_question_ask, warp_question_get, warp_question_list: asking a person.

Thin adapters over :class:`shared.work.questions.QuestionBook`. A question about a work item the
agent holds makes that item ``waiting-on-operator``: its claim does not lapse while the
agent waits (Warp keeps it alive, see ``warp/runtime.py``), and the answer, or the
question's deadline passing, puts it back in progress. Answers wait in the project's
questions bucket, so the agent can read them after a restart too.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Annotated

from mcp_types import CallToolResult
from pydantic import AwareDatetime, Field

from shared.mcp.tools import tool
from shared.models import (
    MAX_ANSWER,
    MAX_CHOICE,
    MAX_CHOICES,
    MAX_QUESTION,
    Priority,
    Question,
    QuestionMode,
    QuestionStatus,
    WorkItem,
    utcnow,
)
from warp.errors import Conflict
from warp.runtime import WarpRuntime
from warp.schemas import Category, Cursor, QuestionId, QuestionListOut, QuestionOut, WorkId
from warp.tools.base import result
from warp.tools.work import held_operation

MAX_WAIT_S = 20.0
POLL_S = 0.25


MODE_SAYS = {
    QuestionMode.SYNC: "the work waits for a person's answer",
    QuestionMode.ASYNC: "a person is told; go on and read the answer later",
    QuestionMode.BYPASS: "your default answers it at {decide_at} unless a person answers first",
    QuestionMode.LOG: "recorded only",
}


def question_text(q: Question) -> str:
    kind = f"{q.priority.value}{' ' + q.category if q.category else ''}, {q.mode.value}"
    lines = [
        f"{q.id} [{q.status.value}] ({kind}) asked by {q.asked_by_handle or q.asked_by}: {q.question[:500]}"
    ]
    if q.choices:
        lines.append(f"  choices: {' | '.join(q.choices)}")
    if q.default_answer is not None:
        lines.append(f"  your default: {q.default_answer[:500]}")
    if q.work_id:
        lines.append(f"  about work {q.work_id}")
    if q.deadline:
        lines.append(f"  deadline {q.deadline.isoformat()}")
    if q.status is QuestionStatus.OPEN:
        decide_at = q.decide_at.isoformat() if q.decide_at else ""
        lines.append(f"  policy: {MODE_SAYS[q.mode].format(decide_at=decide_at)}")
    if q.status is QuestionStatus.ANSWERED:
        lines.append(f"  ANSWER ({q.resolution}): {q.answer}")
    elif q.status is QuestionStatus.EXPIRED:
        lines.append(f"  NO ANSWER: {q.resolution}")
    elif q.status is QuestionStatus.LOGGED:
        lines.append(f"  LOGGED: {q.resolution}")
    return "\n".join(lines)


async def warp_question_ask(
    rt: WarpRuntime,
    question: Annotated[str, Field(min_length=1, max_length=MAX_QUESTION, description="What to ask")],
    choices: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=MAX_CHOICE)]] | None,
        Field(max_length=MAX_CHOICES, description="Answers to choose from (the answer must be one)"),
    ] = None,
    work_id: Annotated[
        WorkId | None,
        Field(description="Work you hold that waits on the answer (its claim is kept meanwhile)"),
    ] = None,
    deadline: Annotated[
        AwareDatetime | None, Field(description="ISO 8601 with a timezone; after it: no answer")
    ] = None,
    expires_in_s: Annotated[
        float | None, Field(ge=1, le=604_800, description="Or: seconds from now until the deadline")
    ] = None,
    priority: Annotated[
        Priority | None,
        Field(description="P0 showstopper .. P3 minor; unranked: the project's default (P0 unless set)"),
    ] = None,
    category: Annotated[
        Category | None,
        Field(description="What it is about, e.g. security, architecture, test-failure, scope"),
    ] = None,
    default_answer: Annotated[
        str | None,
        Field(
            min_length=1,
            max_length=MAX_ANSWER,
            description="What you will do if nobody answers (one of the choices, if any)",
        ),
    ] = None,
) -> Annotated[CallToolResult, QuestionOut]:
    """Ask a person (the operator) a question only they can answer. The project's autonomy
    policy decides by priority and category: sync (tied to work you hold, that item waits
    and its claim does not lapse), async (go on; read the answer later), bypass (your
    default_answer applies after a short window unless a person answers first) or log
    (recorded only). Read the answer with warp_question_get (it waits up to 20 s); past the
    deadline it resolves with no answer."""
    if deadline is not None and expires_in_s is not None:
        raise Conflict("give deadline or expires_in_s, not both", field="expires_in_s")
    if expires_in_s is not None:
        deadline = utcnow() + timedelta(seconds=expires_in_s)
    svc = await rt.services()

    async def ask() -> Question:
        return await svc.questions.ask(
            svc.agent_id,
            question,
            choices=choices or [],
            work_id=work_id,
            deadline=deadline,
            handle=rt.handle,
            priority=priority,
            category=category,
            default_answer=default_answer,
        )

    if work_id is None:
        asked = await ask()
    else:  # refused first if Weft cancelled the item; it stays among this agent's tasks
        held, box = work_id, []

        async def about_work() -> WorkItem:
            box.append(await ask())
            return await svc.work.get(held)

        await held_operation(rt, svc, held, about_work)
        asked = box[0]
    said = (
        "Logged (nobody is asked)."
        if asked.status is QuestionStatus.LOGGED
        else "Asked. Read the answer with warp_question_get (question_id, wait_s up to 20)."
    )
    return result(QuestionOut(question=asked), f"{said}\n{question_text(asked)}")


async def warp_question_get(
    rt: WarpRuntime,
    question_id: QuestionId,
    wait_s: Annotated[
        float, Field(ge=0, le=MAX_WAIT_S, description="Wait up to this long for an answer (0: just look)")
    ] = 0,
) -> Annotated[CallToolResult, QuestionOut]:
    """A question and its answer: answered (the answer), expired (no answer before the
    deadline: decide without it or ask again), or still open."""
    svc = await rt.services()
    until = time.monotonic() + wait_s
    asked = await svc.questions.get(question_id)
    while asked.status is QuestionStatus.OPEN and time.monotonic() < until:
        await asyncio.sleep(POLL_S)
        asked = await svc.questions.get(question_id)
    return result(QuestionOut(question=asked), question_text(asked))


async def warp_question_list(
    rt: WarpRuntime,
    status: QuestionStatus | None = None,
    mine: Annotated[bool, Field(description="Only the questions you asked")] = True,
    limit: Annotated[int, Field(ge=1, le=200)] = 50,
    cursor: Cursor | None = None,
) -> Annotated[CallToolResult, QuestionListOut]:
    """Questions of this project (yours by default), newest first, with their answers."""
    from shared.work.questions import QuestionFilter

    svc = await rt.services()
    page = await svc.questions.listing(
        QuestionFilter(status=status, asked_by=svc.agent_id if mine else None), limit=limit, cursor=cursor
    )
    out = QuestionListOut(items=page.items, next_cursor=page.next_cursor, total=page.total)
    text = "\n".join(question_text(q) for q in page.items) if page.items else "No questions match."
    return result(out, f"{page.total} question(s)\n{text}")


TOOLS = (
    tool(warp_question_ask, title="Ask the operator"),
    tool(warp_question_get, title="Read a question's answer", read_only=True),
    tool(warp_question_list, title="List questions", read_only=True, idempotent=True),
)
