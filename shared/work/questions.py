"""Questions agents ask a person, and their answers (docs/architecture.md, Work: questions).

An agent asks through Warp (``warp_question_ask``); operators answer through Weft (REST,
``shuttle answer``). Each question is one record in the project's questions bucket (key:
question id), so an answer waits there for its agent, also across a restart of its Warp.
A question may be about a work item its agent holds: the item is then
``waiting-on-operator`` (its claim kept alive, see ``shared/work/queue.py``) until the answer,
or the question's deadline, resumes it.

Like the work rules, what each operation does to a record is a pure rule (``answer_rule``,
``expire_rule``); :class:`QuestionBook` stores it compare-and-set, then resumes the item
and publishes the ``question.*`` event.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from shared.errors import Conflict, LoomError, NotFound
from shared.events import ensure_events_stream, publish_event
from shared.models import (
    MAX_ANSWER,
    NO_ANSWER,
    Question,
    QuestionStatus,
    utcnow,
)
from shared.names import ProjectNames
from shared.nats.cas import cas_update
from shared.nats.jetstream import delete_unchanged, ensure_kv, get_or_none, snapshot
from shared.paging import Page, decode_cursor, encode_cursor
from shared.work.queue import WorkQueue

log = logging.getLogger("loom.questions")


class QuestionError(LoomError):
    """A refused question or answer; the field says which input (``invalid`` unless a kind says otherwise)."""


class QuestionNotFound(QuestionError, NotFound):
    def __init__(self) -> None:
        super().__init__("no question with this id in this project", field="question_id")


class QuestionClosed(QuestionError, Conflict):
    """Answered or expired already."""


# -- rules ---------------------------------------------------------------------------------


def check_question(text: str, choices: list[str], deadline: datetime | None, now: datetime) -> None:
    if not text.strip():
        raise QuestionError("question: must ask something", field="question")
    if deadline is not None and deadline <= now:
        raise QuestionError("deadline: must be in the future", field="deadline")


def check_answer(answer: str) -> None:
    if not answer.strip():
        raise QuestionError("answer: must say something", field="answer")
    if len(answer) > MAX_ANSWER:
        raise QuestionError(f"answer: must be at most {MAX_ANSWER} characters", field="answer")


def told(question: Question | None) -> str:
    """What the agent waiting on ``question`` is told when it goes on: the answer, or why
    there is none (the question's resolution)."""
    if question is None:
        return ""
    return question.answer or question.resolution or ""


def is_due(question: Question, now: datetime) -> bool:
    return (
        question.status is QuestionStatus.OPEN and question.deadline is not None and question.deadline <= now
    )


def answer_rule(question: Question, answer: str, by: str, now: datetime) -> Question:
    """The operator's answer to an open question (one of its choices, when it offers some).
    A question past its deadline has no answer to give any more."""
    check_answer(answer)
    if question.status is not QuestionStatus.OPEN or is_due(question, now):
        state = "expired" if question.status is not QuestionStatus.ANSWERED else "answered"
        raise QuestionClosed(f"question_id: {question.id} was {state} already", field="question_id")
    if question.choices and answer not in question.choices:
        raise QuestionError(
            f"answer: must be one of the question's choices ({', '.join(question.choices)})", field="answer"
        )
    return question.model_copy(
        update={
            "status": QuestionStatus.ANSWERED,
            "answer": answer,
            "answered_by": by,
            "resolution": f"answered by {by}",
            "updated_at": now,
            "resolved_at": now,
        }
    )


def expire_rule(question: Question, now: datetime) -> Question | None:
    """An open question past its deadline resolves with no answer; None: left as it is."""
    if not is_due(question, now):
        return None
    return question.model_copy(
        update={
            "status": QuestionStatus.EXPIRED,
            "resolution": f"{NO_ANSWER} ({question.deadline.isoformat() if question.deadline else ''}); "
            "decide without it or ask again",
            "updated_at": now,
            "resolved_at": now,
        }
    )


@dataclass(frozen=True)
class QuestionFilter:
    status: QuestionStatus | None = None
    asked_by: str | None = None
    work_id: str | None = None

    def matches(self, question: Question) -> bool:
        return (
            (self.status is None or question.status is self.status)
            and (self.asked_by is None or question.asked_by == self.asked_by)
            and (self.work_id is None or question.work_id == self.work_id)
        )


# -- I/O ------------------------------------------------------------------------------------


class QuestionBook:
    """All question operations for one project; answers resume the work they are about."""

    def __init__(
        self, nc: NatsClient, names: ProjectNames, work: WorkQueue, *, js: JetStreamContext | None = None
    ):
        self._nc = nc
        self._js = js or nc.jetstream()
        self.names = names
        self.work = work
        self._kv: KeyValue | None = None
        self._lock = asyncio.Lock()

    async def bucket(self) -> KeyValue:
        if self._kv is None:
            async with self._lock:
                if self._kv is None:
                    await ensure_events_stream(self._js, self.names)
                    self._kv = await ensure_kv(
                        self._js, self.names.questions_bucket, description="Loom questions"
                    )
        return self._kv

    async def _load(self, question_id: str) -> tuple[Question, int]:
        entry = await get_or_none(await self.bucket(), question_id)
        if entry is None or entry.value is None:
            raise QuestionNotFound()
        return Question.model_validate_json(entry.value), int(entry.revision or 0)

    async def _mutate(
        self, question_id: str, rule: Callable[[Question], Question | None]
    ) -> tuple[Question, bool]:
        """Compare-and-set what ``rule`` decides (None: no change); the question as it now
        stands and whether this call changed it."""
        swap = await cas_update(
            await self.bucket(),
            question_id,
            rule,
            parse=Question.model_validate_json,
            dump=Question.to_json_bytes,
            absent=QuestionNotFound,
            conflict=lambda: QuestionClosed(
                "question_id: being changed concurrently; try again", field="question_id"
            ),
        )
        assert swap.after is not None
        return swap.after, swap.changed

    async def _announce(self, action: str, question: Question, **extra: Any) -> None:
        """Events announce what the record already says: a failed publish is logged only."""
        try:
            await publish_event(
                self._js,
                self.names,
                "question",
                action,
                question.id,
                {"question": question.model_dump(mode="json"), **extra},
            )
        except Exception as exc:
            log.warning("question %s: %s, but its event was not published: %s", question.id, action, exc)

    async def ask(
        self,
        agent_id: str,
        text: str,
        *,
        choices: list[str] | None = None,
        work_id: str | None = None,
        deadline: datetime | None = None,
        handle: str = "",
    ) -> Question:
        """Store the question; when it is about a work item, that item (which the agent must
        hold) waits on the operator. Refused as a whole: a question about work the agent does
        not hold is not kept."""
        now = utcnow()
        check_question(text, choices or [], deadline, now)
        question = Question(
            project_id=self.names.project_id,
            asked_by=agent_id,
            asked_by_handle=handle,
            question=text,
            choices=choices or [],
            work_id=work_id,
            deadline=deadline,
            created_at=now,
            updated_at=now,
        )
        kv = await self.bucket()
        revision = await kv.create(question.id, question.to_json_bytes())
        if work_id is not None:
            try:
                await self.work.wait_on_operator(work_id, agent_id, question.id, question=text)
            except Exception:
                await delete_unchanged(kv, question.id, revision)
                raise
        await self._announce("asked", question)
        return question

    async def ask_to_land(self, agent_id: str, work_id: str, text: str, *, handle: str = "") -> Question:
        """A lander's "land this?" (docs/landing.md, The coordinator's veto): the item, which
        the lander holds, waits for the answer first (so a lander that dies between the two
        steps leaves an item whose question is missing, which the sweep puts back in the
        landers' queue, never a question about nothing), then the question is stored."""
        now = utcnow()
        check_question(text, [], None, now)
        question = Question(
            project_id=self.names.project_id,
            asked_by=agent_id,
            asked_by_handle=handle,
            question=text,
            work_id=work_id,
            created_at=now,
            updated_at=now,
        )
        await self.work.await_approval(work_id, agent_id, question.id)
        await (await self.bucket()).create(question.id, question.to_json_bytes())
        await self._announce("asked", question)
        return question

    async def get(self, question_id: str) -> Question:
        """The question, resolved first when its deadline has passed (so an agent reading it
        learns there will be no answer, with or without Weft running)."""
        question, _ = await self._load(question_id)
        if is_due(question, utcnow()):
            return await self.expire(question_id) or question
        return question

    async def answer(self, question_id: str, answer: str, *, by: str = "operator") -> Question:
        check_answer(answer)  # before any I/O, whatever the question
        now = utcnow()
        question, _ = await self._mutate(question_id, lambda q: answer_rule(q, answer, by, now))
        await self._settle(question, answered=True)
        await self._announce("answered", question)
        return question

    async def expire(self, question_id: str) -> Question | None:
        """Resolve a question past its deadline with no answer; None when it is not due."""
        now = utcnow()
        question, changed = await self._mutate(question_id, lambda q: expire_rule(q, now))
        if not changed:
            return None
        await self._settle(question, answered=False)
        await self._announce("expired", question)
        return question

    async def _settle(self, question: Question, *, answered: bool) -> None:
        """The work the question was about goes on (resumed in progress, or its landing decided)."""
        if question.work_id is not None:
            await self.work.resume(
                question.work_id,
                question.id,
                answered=answered,
                answer=told(question),
                by=question.answered_by,
            )

    async def all(self) -> list[Question]:
        values = await snapshot(await self.bucket())
        return [Question.model_validate_json(raw) for raw in values.values()]

    async def listing(
        self, filters: QuestionFilter | None = None, *, limit: int = 50, cursor: str | None = None
    ) -> Page[Question]:
        """Newest first, paged with an opaque cursor."""
        if not 1 <= limit <= 1000:
            raise QuestionError("limit: must be between 1 and 1000", field="limit")
        wanted = filters or QuestionFilter()
        after = decode_cursor(cursor)
        found = sorted(
            (q for q in await self.all() if wanted.matches(q)),
            key=lambda q: (q.created_at, q.id),
            reverse=True,
        )
        total = len(found)
        if after is not None:
            last = (str(after.get("created_at", "")), str(after.get("id", "")))
            found = [q for q in found if (q.created_at.isoformat(), q.id) < last]
        page = found[:limit]
        more = len(found) > limit
        next_cursor = (
            encode_cursor({"created_at": page[-1].created_at.isoformat(), "id": page[-1].id})
            if more
            else None
        )
        return Page(items=page, next_cursor=next_cursor, total=total)

    async def expire_due(self, now: datetime | None = None) -> list[Question]:
        """Resolve every open question past its deadline (a sweep; replicas expire each once)."""
        moment = now or utcnow()
        expired = []
        for question in await self.all():
            if is_due(question, moment):
                done = await self.expire(question.id)
                if done is not None:
                    expired.append(done)
        return expired

    async def resume_settled(self, waiting: dict[str, str]) -> int:
        """A sweep's repair: items (work id -> question id) still waiting on a question that was
        answered or expired (the process stopped before resuming them) go on."""
        resumed = 0
        for work_id, question_id in waiting.items():
            try:
                question, _ = await self._load(question_id)
            except QuestionNotFound:
                question = None
            if question is None or question.status is not QuestionStatus.OPEN:
                answered = question is not None and question.status is QuestionStatus.ANSWERED
                by = question.answered_by if question is not None else None
                settled = await self.work.resume(
                    work_id, question_id, answered=answered, answer=told(question), by=by
                )
                if settled is not None:
                    resumed += 1
        return resumed
