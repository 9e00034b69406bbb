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
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from shared.errors import Conflict, LoomError, NotFound
from shared.events import ensure_events_stream, publish_event
from shared.models import (
    MAX_ANSWER,
    NO_ANSWER,
    Diagnosis,
    Escalation,
    Priority,
    Question,
    QuestionMode,
    QuestionStatus,
    WorkItem,
    WorkStatus,
    new_id,
    utcnow,
)
from shared.names import ProjectNames, validate_token
from shared.nats.cas import cas_update
from shared.nats.jetstream import create_if_absent, delete_unchanged, ensure_kv, get_or_none, snapshot
from shared.paging import CursorError, Page, decode_cursor, encode_cursor
from shared.work.autonomy import AutonomyStore, decide
from shared.work.escalation import ASKER as ESCALATION_ASKER
from shared.work.escalation import CATEGORY as ESCALATION
from shared.work.escalation import is_escalation, needs_carrying_out, parse_decision, question_text
from shared.work.lifecycle import WorkMove
from shared.work.moves import holder_move
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


MAX_DEFER = timedelta(days=30)
POLICY = "policy"
"""``answered_by`` of an answer the autonomy policy gave (the agent's default, bypass mode)."""
Order = Literal["urgency", "newest"]


def check_default(default_answer: str | None, choices: list[str]) -> None:
    if default_answer is None:
        return
    if not default_answer.strip():
        raise QuestionError("default_answer: must say something", field="default_answer")
    if choices and default_answer not in choices:
        raise QuestionError("default_answer: must be one of the question's choices", field="default_answer")


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


def is_decidable(question: Question, now: datetime) -> bool:
    """A bypass question whose window passed with no answer: its default answers it."""
    return (
        question.status is QuestionStatus.OPEN
        and question.decide_at is not None
        and question.decide_at <= now
        and not is_due(question, now)
    )


def check_open(question: Question, now: datetime) -> None:
    if question.status is not QuestionStatus.OPEN or is_due(question, now):
        state = "expired" if question.status is QuestionStatus.OPEN else question.status.value
        raise QuestionClosed(f"question_id: {question.id} was {state} already", field="question_id")


def answer_rule(question: Question, answer: str, by: str, now: datetime) -> Question:
    """The operator's answer to an open question (one of its choices, when it offers some).
    A question past its deadline has no answer to give any more."""
    check_answer(answer)
    check_open(question, now)
    if is_escalation(question):
        parse_decision(answer)  # one of its decisions, or refused before it is recorded
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


def bypass_rule(question: Question, now: datetime) -> Question | None:
    """The bypass window passed with no answer: the agent's default answers it, recorded
    as the policy's answer; None: left as it is."""
    if not is_decidable(question, now) or question.default_answer is None:
        return None
    return question.model_copy(
        update={
            "status": QuestionStatus.ANSWERED,
            "answer": question.default_answer,
            "answered_by": POLICY,
            "resolution": f"nobody answered within the bypass window: your default applies "
            f"(autonomy policy, {question.priority.value})",
            "updated_at": now,
            "resolved_at": now,
        }
    )


def defer_rule(question: Question, until: datetime, by: str, now: datetime) -> Question:
    """A person puts an open question off until ``until``: it stays open (its item keeps
    waiting), listed after the others until then; a bypass question's default waits too."""
    check_open(question, now)
    if until <= now:
        raise QuestionError("until: must be in the future", field="until")
    if until > now + MAX_DEFER:
        raise QuestionError(f"until: must be within {MAX_DEFER.days} days", field="until")
    if question.deadline is not None and until >= question.deadline:
        raise QuestionError("until: must be before the question's deadline", field="until")
    decide_at = question.decide_at
    if decide_at is not None and decide_at < until:
        decide_at = until
    return question.model_copy(
        update={"deferred_until": until, "deferred_by": by, "decide_at": decide_at, "updated_at": now}
    )


def remind_rule(question: Question, every_s: float, now: datetime) -> Question | None:
    """An open ``sync`` question nobody answered: people are reminded every ``every_s``, and
    as soon as a deferral ends; None: not due (answered, put off, or reminded lately)."""
    if question.status is not QuestionStatus.OPEN or question.mode is not QuestionMode.SYNC:
        return None
    if is_due(question, now):
        return None
    last = question.reminded_at or question.created_at
    deferred = question.deferred_until
    if deferred is not None and deferred > now:
        return None
    if not (deferred is not None and deferred > last) and last + timedelta(seconds=every_s) > now:
        return None
    return question.model_copy(update={"reminded_at": now, "updated_at": now})


def urgency(question: Question, now: datetime) -> tuple[int, int, str, str]:
    """Open questions first (those put off until later after the others), then by
    priority, then the oldest first."""
    if question.status is not QuestionStatus.OPEN:
        rank = 2
    elif question.deferred_until is not None and question.deferred_until > now:
        rank = 1
    else:
        rank = 0
    return (rank, int(question.priority.value[1]), question.created_at.isoformat(), question.id)


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


def withdraw_rule(question: Question, why: str, now: datetime) -> Question | None:
    """An open question nobody needs to answer any more (an escalated item someone retried
    or cancelled by hand): resolved with no answer, saying why; None: left as it is."""
    if question.status is not QuestionStatus.OPEN:
        return None
    return question.model_copy(
        update={
            "status": QuestionStatus.EXPIRED,
            "resolution": f"withdrawn: {why}",
            "updated_at": now,
            "resolved_at": now,
        }
    )


@dataclass(frozen=True)
class QuestionFilter:
    status: QuestionStatus | None = None
    asked_by: str | None = None
    work_id: str | None = None
    priority: Priority | None = None
    category: str | None = None

    def matches(self, question: Question) -> bool:
        return (
            (self.status is None or question.status is self.status)
            and (self.asked_by is None or question.asked_by == self.asked_by)
            and (self.work_id is None or question.work_id == self.work_id)
            and (self.priority is None or question.priority is self.priority)
            and (self.category is None or question.category == self.category)
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
        self.autonomy = AutonomyStore(self._js, names)
        """The project's autonomy policy, read at every question (docs/operator.md)."""
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
        priority: Priority | None = None,
        category: str | None = None,
        default_answer: str | None = None,
    ) -> Question:
        """Store the question as the project's autonomy policy decides (docs/operator.md):
        ``sync`` and ``bypass`` questions about a work item make it (the agent must hold it)
        wait on the operator; ``async`` ones leave it in progress; ``log`` ones are recorded
        and resolved at once. Refused as a whole: a question about work the agent does not
        hold is not kept."""
        now = utcnow()
        check_question(text, choices or [], deadline, now)
        check_default(default_answer, choices or [])
        if category is not None:
            validate_token(category, "category")
        decision = decide(await self.autonomy.current(), priority, category, default_answer, now)
        logged = decision.mode is QuestionMode.LOG
        question = Question(
            project_id=self.names.project_id,
            asked_by=agent_id,
            asked_by_handle=handle,
            question=text,
            choices=choices or [],
            work_id=work_id,
            deadline=deadline,
            priority=decision.priority,
            category=category,
            default_answer=default_answer,
            mode=decision.mode,
            decide_at=decision.decide_at,
            created_at=now,
            updated_at=now,
        )
        if logged:
            question = question.model_copy(
                update={
                    "status": QuestionStatus.LOGGED,
                    "answer": default_answer,
                    "resolution": "recorded only (autonomy policy: log): "
                    + ("go on with your default" if default_answer is not None else "decide yourself"),
                    "resolved_at": now,
                }
            )
        waits = work_id is not None and decision.mode in (QuestionMode.SYNC, QuestionMode.BYPASS)
        if work_id is not None and not waits:
            holder_move(await self.work.get_record(work_id), agent_id, WorkMove.ASK, "ask about", now)
        kv = await self.bucket()
        revision = await kv.create(question.id, question.to_json_bytes())
        if waits and work_id is not None:
            try:
                await self.work.wait_on_operator(work_id, agent_id, question.id, question=text)
            except Exception:
                await delete_unchanged(kv, question.id, revision)
                raise
        await self._announce("logged" if logged else "asked", question)
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
        now = utcnow()
        if is_due(question, now):
            return await self.expire(question_id) or question
        if is_decidable(question, now):
            return await self.decide_by_default(question_id) or question
        return question

    async def answer(self, question_id: str, answer: str, *, by: str = "operator") -> Question:
        check_answer(answer)  # before any I/O, whatever the question
        now = utcnow()
        question, _ = await self._mutate(question_id, lambda q: answer_rule(q, answer, by, now))
        await self._settle(question, answered=True)
        await self._announce("answered", question)
        return question

    async def defer(self, question_id: str, until: datetime, *, by: str = "operator") -> Question:
        """Put an open question off until ``until`` (it stays open; see :func:`defer_rule`)."""
        now = utcnow()
        question, _ = await self._mutate(question_id, lambda q: defer_rule(q, until, by, now))
        await self._announce("deferred", question)
        return question

    async def decide_by_default(self, question_id: str, now: datetime | None = None) -> Question | None:
        """A bypass question whose window passed (by ``now``): its default answers it; None
        when not due."""
        now = now or utcnow()
        question, changed = await self._mutate(question_id, lambda q: bypass_rule(q, now))
        if not changed:
            return None
        await self._settle(question, answered=True)
        await self._announce("answered", question)
        return question

    async def remind_due(
        self, now: datetime | None = None, *, questions: list[Question] | None = None
    ) -> list[Question]:
        """Mark every open ``sync`` question due for a reminder (:func:`remind_rule`) and
        announce it (``question.reminded``: notification sinks send it again); one replica
        wins each, compare-and-set. ``questions``: the sweep's one read of them all."""
        moment = now or utcnow()
        read = questions if questions is not None else await self.all()
        questions = [q for q in read if q.status is QuestionStatus.OPEN and q.mode is QuestionMode.SYNC]
        if not questions:
            return []
        every_s = (await self.autonomy.current()).renotify_s
        reminded = []
        for question in questions:
            if remind_rule(question, every_s, moment) is None:
                continue
            try:
                done, changed = await self._mutate(question.id, lambda q: remind_rule(q, every_s, moment))
            except (QuestionNotFound, QuestionClosed):
                continue
            if changed:
                await self._announce("reminded", done)
                reminded.append(done)
        return reminded

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
        """The work the question was about goes on (resumed in progress, or its landing
        decided; an escalated item's decision carried out)."""
        if is_escalation(question):
            if answered:
                await self._carry_out(question)
            return
        if question.work_id is not None:
            await self.work.resume(
                question.work_id,
                question.id,
                answered=answered,
                answer=told(question),
                by=question.answered_by,
            )

    # -- escalation (shared/work/escalation.py) ----------------------------------------------
    async def escalate(self, item: WorkItem, report: Diagnosis, priority: Priority) -> Question | None:
        """Put a dead letter to a person: the report and the question's id on the item first
        (compare-and-set, so one replica wins), then the question (:meth:`_question_of`).
        None when another process escalated it first."""
        assert item.finished_at is not None
        escalation = Escalation(
            failed_at=item.finished_at, question_id=new_id(), priority=priority, report=report
        )
        question = await self._question_of(item, escalation)
        if await self.work.escalate(item.id, escalation) is None:
            return None
        await self._store_escalation(question)
        return question

    async def _store_escalation(self, question: Question) -> None:
        if await create_if_absent(await self.bucket(), question.id, question.to_json_bytes()):
            await self._announce("asked", question)

    async def _carry_out(self, question: Question) -> None:
        """The answer is on record: a failure carrying it out is logged, and a sweep
        carries it out again (:meth:`repair_escalations`)."""
        assert question.work_id is not None and question.answer is not None
        try:
            await self.work.decide_escalation(
                question.work_id, question.id, question.answer, question.answered_by or "operator"
            )
        except Exception as exc:
            log.warning("escalation %s answered, not carried out yet: %s", question.id, exc)

    async def repair_escalations(self, items: Iterable[WorkItem], questions: list[Question]) -> int:
        """A sweep's repair of what a stopped process left: an escalation whose question was
        never stored (stored now), one answered but not decided, one decided but not
        carried out. The number of items repaired."""
        by_id = {q.id: q for q in questions}
        repaired = 0
        for item in items:
            escalation = item.escalation
            if escalation is None:
                continue
            question = by_id.get(escalation.question_id)
            if item.status is not WorkStatus.DEAD_LETTERED or escalation.failed_at != item.finished_at:
                if escalation.decision is None and question is not None:
                    repaired += await self._withdraw(question, f"the item is {item.status.value} now")
                continue
            if needs_carrying_out(item):
                repaired += await self.work.carry_out_escalation(item.id) is not None
                continue
            if escalation.decision is not None:
                continue
            if question is None:
                await self._store_escalation(await self._question_of(item, escalation))
                repaired += 1
            elif question.status is QuestionStatus.ANSWERED and question.answer is not None:
                by = question.answered_by or "operator"
                decided = await self.work.decide_escalation(item.id, question.id, question.answer, by)
                repaired += decided is not None
        return repaired

    async def _withdraw(self, question: Question, why: str) -> bool:
        """An escalation overtaken by someone's retry or cancel by hand: its question closed."""
        if question.status is not QuestionStatus.OPEN:
            return False
        now = utcnow()
        closed, changed = await self._mutate(question.id, lambda q: withdraw_rule(q, why, now))
        if changed:
            await self._announce("expired", closed)
        return changed

    async def _question_of(self, item: WorkItem, escalation: Escalation) -> Question:
        """The escalation's question (its id is on the item): its mode as the autonomy
        policy says for its priority and category, but never only logged or decided by
        default, as there is no default to decide with."""
        now = utcnow()
        decision = decide(await self.autonomy.current(), escalation.priority, ESCALATION, None, now)
        return Question(
            id=escalation.question_id,
            project_id=self.names.project_id,
            asked_by=ESCALATION_ASKER,
            asked_by_handle="escalation",
            question=question_text(item, escalation.report),
            work_id=item.id,
            priority=decision.priority,
            category=ESCALATION,
            mode=decision.mode if decision.mode is QuestionMode.SYNC else QuestionMode.ASYNC,
            created_at=now,
            updated_at=now,
        )

    async def all(self) -> list[Question]:
        values = await snapshot(await self.bucket())
        return [Question.model_validate_json(raw) for raw in values.values()]

    async def listing(
        self,
        filters: QuestionFilter | None = None,
        *,
        limit: int = 50,
        cursor: str | None = None,
        order: Order = "newest",
    ) -> Page[Question]:
        """Newest first, or by :func:`urgency` (open first, then priority, then age), paged
        with an opaque cursor (a question put off until a time that passes between two pages
        can move)."""
        if not 1 <= limit <= 1000:
            raise QuestionError("limit: must be between 1 and 1000", field="limit")
        wanted = filters or QuestionFilter()
        after = decode_cursor(cursor)
        now = utcnow()

        def key(q: Question) -> list[str]:
            if order == "urgency":
                rank, priority, created, id_ = urgency(q, now)
                return [f"{rank}{priority}", created, id_]
            return [q.created_at.isoformat(), q.id]

        newest = order == "newest"
        found = sorted((q for q in await self.all() if wanted.matches(q)), key=key, reverse=newest)
        total = len(found)
        if after is not None:
            last = after.get("key")
            if not isinstance(last, list) or after.get("order") != order:
                raise CursorError("cursor")
            found = [q for q in found if (key(q) < last if newest else key(q) > last)]
        page = found[:limit]
        more = len(found) > limit
        next_cursor = encode_cursor({"order": order, "key": key(page[-1])}) if more else None
        return Page(items=page, next_cursor=next_cursor, total=total)

    async def expire_due(
        self, now: datetime | None = None, *, questions: list[Question] | None = None
    ) -> list[Question]:
        """Resolve every open question past its deadline, and answer every bypass question
        whose window passed with its default (a sweep; replicas resolve each once).
        ``questions``: the sweep's one read of them all."""
        moment = now or utcnow()
        resolved = []
        for question in questions if questions is not None else await self.all():
            done = None
            if is_due(question, moment):
                done = await self.expire(question.id)
            elif is_decidable(question, moment):
                done = await self.decide_by_default(question.id, moment)
            if done is not None:
                resolved.append(done)
        return resolved

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
