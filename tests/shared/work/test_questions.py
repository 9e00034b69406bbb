"""Questions for the operator (shared.work.questions and the waiting rules of shared.work): the
pure rules, then against a real nats-server: work waits on the operator without its claim
lapsing, an answer resumes it, a deadline resolves with no answer, and refusals."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from nats.aio.client import Client as NatsClient

from shared.models import Question, QuestionStatus, WorkItem, WorkStatus, WorkSubmission, utcnow
from shared.names import ProjectNames
from shared.work.questions import (
    QuestionBook,
    QuestionClosed,
    QuestionError,
    QuestionFilter,
    QuestionNotFound,
    answer_rule,
    expire_rule,
)
from shared.work.rules import (
    HOLDING,
    Ack,
    Change,
    Claimant,
    Delivery,
    NotClaimant,
    WorkConflict,
    WorkEvent,
    WorkRecord,
    keep_alive_subject,
    resume,
    take,
    wait_on,
)
from testsupport.events import work_actions
from testsupport.work import work_queue

S = WorkStatus
A = "a" * 32
B = "b" * 32
QID = "e" * 32
THEN = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
NOW = THEN + timedelta(minutes=5)
OLD = Delivery(ack_subject="$JS.ACK.old", stream_seq=7, delivered=1)


def held(status: WorkStatus = S.IN_PROGRESS, **fields: object) -> WorkRecord:
    item = WorkItem(
        id="c" * 32,
        task_id="t",
        description="d",
        capability="code",
        project_id="demo",
        status=status,
        assigned_to=A,
        attempts=1,
        created_at=THEN,
        updated_at=THEN,
        **fields,  # type: ignore[arg-type]
    )
    return WorkRecord(item=item, queue_seq=7, enqueues=1, delivery=OLD)


def question(**fields: object) -> Question:
    data: dict[str, object] = {
        "project_id": "demo",
        "asked_by": A,
        "question": "which db?",
        "created_at": THEN,
    }
    data.update(fields)
    return Question.model_validate(data)


# -- rules --------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [S.CLAIMED, S.IN_PROGRESS])
def test_wait_on_keeps_the_claim_and_announces_it(status: WorkStatus) -> None:
    change = wait_on(held(status), A, QID, NOW, "postgres or sqlite?")
    assert change.record is not None
    assert (change.record.item.status, change.record.item.question_id) == (S.WAITING_ON_OPERATOR, QID)
    assert change.record.delivery == OLD and change.record.item.assigned_to == A
    told = {"agent_id": A, "question_id": QID, "question": "postgres or sqlite?"}
    assert change.events == (WorkEvent("waiting-on-operator", told),)
    assert (change.ack, change.ack_subject) == (Ack.WORKING, OLD.ack_subject)
    with pytest.raises(NotClaimant):
        wait_on(held(status), B, QID, NOW)


@pytest.mark.parametrize("status", [S.QUEUED, S.COMPLETED, S.WAITING_ON_OPERATOR, S.REVIEWING])
def test_wait_on_needs_a_held_item(status: WorkStatus) -> None:
    with pytest.raises(WorkConflict):
        wait_on(held(status), A, QID, NOW)


def test_resume_only_for_its_own_question() -> None:
    waiting = held(S.WAITING_ON_OPERATOR, question_id=QID)
    change = resume(waiting, QID, True, NOW, "sqlite", by="dana")
    assert change.record is not None and change.record.item.status is S.IN_PROGRESS
    assert change.record.item.question_id is None
    told = {"question_id": QID, "answered": True, "answer": "sqlite", "by": "dana"}
    assert change.events == (WorkEvent("resumed", told),)
    assert (change.ack, change.ack_subject) == (Ack.WORKING, OLD.ack_subject)  # the ack deadline restarts
    assert resume(waiting, "f" * 32, True, NOW) == Change()
    assert resume(held(S.COMPLETED, question_id=QID), QID, True, NOW) == Change()


def test_a_waiting_claim_never_lapses_a_redelivery_is_adopted() -> None:
    waiting = held(S.WAITING_ON_OPERATOR, question_id=QID)
    newer = Delivery(ack_subject="$JS.ACK.new", stream_seq=7, delivered=2)
    change = take(waiting, B, newer, NOW)
    assert change.record is not None and change.events == () and change.ack is None
    assert (change.record.item.status, change.record.item.assigned_to) == (S.WAITING_ON_OPERATOR, A)
    assert change.record.delivery == newer and change.record.item.updated_at == THEN
    assert take(waiting, B, OLD, NOW) == Change()


def test_keep_alive_subject_only_for_the_waiting_holder() -> None:
    assert keep_alive_subject(held(S.WAITING_ON_OPERATOR), A) == OLD.ack_subject
    assert keep_alive_subject(held(S.WAITING_ON_OPERATOR), B) is None
    assert keep_alive_subject(held(S.IN_PROGRESS), A) is None
    assert S.WAITING_ON_OPERATOR in HOLDING


def test_answer_rule_and_its_refusals() -> None:
    answered = answer_rule(question(choices=["postgres", "sqlite"]), "sqlite", "ops", NOW)
    assert (answered.status, answered.answer, answered.answered_by, answered.resolved_at) == (
        QuestionStatus.ANSWERED,
        "sqlite",
        "ops",
        NOW,
    )
    with pytest.raises(QuestionError) as not_a_choice:
        answer_rule(question(choices=["postgres", "sqlite"]), "oracle-secret", "ops", NOW)
    assert not_a_choice.value.field == "answer" and "oracle-secret" not in not_a_choice.value.message
    assert not_a_choice.value.message == "answer: must be one of the question's choices (postgres, sqlite)"
    with pytest.raises(QuestionClosed):
        answer_rule(answered, "again", "ops", NOW)
    with pytest.raises(QuestionClosed):  # past its deadline: no answer to give any more
        answer_rule(question(deadline=THEN), "late", "ops", NOW)
    with pytest.raises(QuestionError) as empty:
        answer_rule(question(), "  ", "ops", NOW)
    assert empty.value.field == "answer"


def test_expire_rule_resolves_with_a_clear_no_answer() -> None:
    gone = expire_rule(question(deadline=THEN), NOW)
    assert gone is not None and gone.status is QuestionStatus.EXPIRED and gone.answer is None
    assert gone.resolution is not None and gone.resolution.startswith("no answer before the deadline")
    assert expire_rule(question(deadline=NOW + timedelta(seconds=1)), NOW) is None
    assert expire_rule(question(), NOW) is None


@pytest.mark.parametrize(
    ("choices", "message"), [(["a", "a"], "must not repeat a choice"), ([" "], "each choice must be 1-200")]
)
def test_choices_are_checked(choices: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        question(choices=choices)


# -- against NATS --------------------------------------------------------------------------


def coder(agent_id: str) -> Claimant:
    return Claimant(agent_id=agent_id, agent_type="generic", capabilities=("code",))


async def test_a_question_about_work_holds_it_until_the_answer_resumes_it(
    nc: NatsClient, project_id: str
) -> None:
    names = ProjectNames(project_id)
    work = work_queue(nc, names, ack_wait_s=0.6)
    book = QuestionBook(nc, names, work)
    item = await work.submit(WorkSubmission(task_id="t", description="d", capability="code"))
    assert (await work.claim(coder(A))) is not None
    asked = await book.ask(A, "postgres or sqlite?", choices=["postgres", "sqlite"], work_id=item.id)
    waiting = await work.get(item.id)
    assert (waiting.status, waiting.question_id, waiting.assigned_to) == (S.WAITING_ON_OPERATOR, asked.id, A)

    # Nobody keeps it alive here (Warp would): the ack deadline passes, another agent pulls,
    # and the claim still stays with A.
    await asyncio.sleep(1.0)
    for _ in range(5):
        assert await work.claim(coder(B)) is None
        await asyncio.sleep(0.2)
    assert (await work.get(item.id)).assigned_to == A

    answered = await book.answer(asked.id, "sqlite", by="alice")
    assert (answered.status, answered.answer, answered.resolution) == (
        QuestionStatus.ANSWERED,
        "sqlite",
        "answered by alice",
    )
    resumed = await work.get(item.id)
    assert (resumed.status, resumed.question_id) == (S.IN_PROGRESS, None)
    done = await work.complete(item.id, A, {"db": answered.answer})
    assert done.status is S.COMPLETED and done.result == {"db": "sqlite"}
    assert "waiting-on-operator" in await work_actions(nc, names, item.id)
    with pytest.raises(QuestionClosed):
        await book.answer(asked.id, "postgres")


async def test_an_unanswered_question_resolves_at_its_deadline_and_the_work_goes_on(
    nc: NatsClient, project_id: str
) -> None:
    names = ProjectNames(project_id)
    work = work_queue(nc, names)
    book = QuestionBook(nc, names, work)
    item = await work.submit(WorkSubmission(task_id="t", description="d", capability="code"))
    await work.claim(coder(A))
    asked = await book.ask(A, "ship it?", work_id=item.id, deadline=utcnow() + timedelta(milliseconds=300))
    assert (await book.get(asked.id)).status is QuestionStatus.OPEN
    await asyncio.sleep(0.4)
    read = await book.get(asked.id)  # reading it resolves it: no Weft needed
    assert read.status is QuestionStatus.EXPIRED and read.answer is None
    assert read.resolution is not None and "no answer before the deadline" in read.resolution
    assert (await work.get(item.id)).status is S.IN_PROGRESS
    assert await book.expire_due() == []  # once
    with pytest.raises(QuestionClosed):
        await book.answer(asked.id, "yes")


async def test_questions_are_refused_clearly_and_a_refused_one_is_not_kept(
    nc: NatsClient, project_id: str
) -> None:
    names = ProjectNames(project_id)
    work = work_queue(nc, names)
    book = QuestionBook(nc, names, work)
    item = await work.submit(WorkSubmission(task_id="t", description="d", capability="code"))
    with pytest.raises(WorkConflict):  # not claimed by anyone
        await book.ask(A, "may I?", work_id=item.id)
    await work.claim(coder(A))
    with pytest.raises(NotClaimant):
        await book.ask(B, "may I?", work_id=item.id)
    with pytest.raises(QuestionError) as past:
        await book.ask(A, "may I?", deadline=utcnow() - timedelta(seconds=1))
    assert past.value.field == "deadline"
    assert (await book.listing()).items == []  # nothing was kept
    with pytest.raises(QuestionNotFound) as missing:
        await book.get("0" * 32)
    assert missing.value.message == "question_id: no question with this id in this project"
    free = await book.ask(B, "lunch?")  # a question need not be about work
    other = QuestionBook(nc, ProjectNames(f"{project_id}-x"), work_queue(nc, ProjectNames(f"{project_id}-x")))
    with pytest.raises(QuestionNotFound):
        await other.get(free.id)
    assert [q.id for q in (await book.listing(QuestionFilter(asked_by=B))).items] == [free.id]
    assert (await book.listing(QuestionFilter(status=QuestionStatus.ANSWERED))).items == []


async def test_operators_answering_at_once_make_one_answer(nc: NatsClient, project_id: str) -> None:
    names = ProjectNames(project_id)
    work = work_queue(nc, names)
    books = [QuestionBook(nc, names, work) for _ in range(3)]  # as if from three Weft replicas
    item = await work.submit(WorkSubmission(task_id="t", description="d", capability="code"))
    await work.claim(coder(A))
    asked = await books[0].ask(A, "which?", work_id=item.id)
    outcomes = await asyncio.gather(
        *(books[n % 3].answer(asked.id, f"answer {n}", by=f"op{n}") for n in range(6)), return_exceptions=True
    )
    won = [o for o in outcomes if isinstance(o, Question)]
    assert len(won) == 1 and all(isinstance(o, QuestionClosed) for o in outcomes if o not in won)
    stored = await books[1].get(asked.id)
    assert stored.answer == won[0].answer
    assert (await work.get(item.id)).status is S.IN_PROGRESS
    assert (await work_actions(nc, names, item.id)).count("resumed") == 1
