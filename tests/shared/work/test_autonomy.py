"""The autonomy policy (shared.work.autonomy) and what it makes of questions
(shared.work.questions): the pure rules first, then against a real nats-server: each mode
at ask time, the bypass default, putting a question off, the urgency order, the stored
policy's compare-and-set and the file Weft adopts, per project."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from nats.aio.client import Client as NatsClient

from shared.errors import Conflict
from shared.models import Priority, Question, QuestionMode, QuestionStatus, WorkStatus, WorkSubmission, utcnow
from shared.names import InvalidNameError, ProjectNames
from shared.paging import CursorError
from shared.work.autonomy import (
    DEFAULT_MODES,
    FILE_AUTHOR,
    AutonomyError,
    AutonomyRule,
    AutonomySettings,
    AutonomyStore,
    decide,
    parse_autonomy,
)
from shared.work.questions import (
    POLICY,
    QuestionBook,
    QuestionClosed,
    QuestionError,
    QuestionFilter,
    bypass_rule,
    defer_rule,
    remind_rule,
    urgency,
)
from shared.work.rules import Claimant, NotClaimant
from testsupport.work import work_queue

A = "a" * 32
B = "b" * 32
NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
P = Priority
M = QuestionMode


def question(**fields: object) -> Question:
    data: dict[str, object] = {"project_id": "demo", "asked_by": A, "question": "which?", "created_at": NOW}
    data.update(fields)
    return Question.model_validate(data)


# -- rules --------------------------------------------------------------------------------


def test_the_default_policy_follows_the_interruption_model() -> None:
    policy = AutonomySettings()
    assert [policy.mode_for(p, None) for p in P] == [M.SYNC, M.ASYNC, M.BYPASS, M.LOG]
    unranked = decide(policy, None, None, None, NOW)
    assert (unranked.priority, unranked.mode) == (P.P0, M.SYNC)  # a person decides


def test_rules_come_first_in_order_and_modes_keep_their_defaults() -> None:
    policy = AutonomySettings(
        modes={P.P1: M.SYNC},
        rules=[
            AutonomyRule(category="security", mode=M.SYNC),
            AutonomyRule(category="style", priority=P.P2, mode=M.LOG),
            AutonomyRule(priority=P.P3, mode=M.ASYNC),
        ],
    )
    assert policy.modes == {**DEFAULT_MODES, P.P1: M.SYNC}
    assert policy.mode_for(P.P3, "security") is M.SYNC  # the first rule that matches
    assert policy.mode_for(P.P2, "style") is M.LOG
    assert policy.mode_for(P.P1, "style") is M.SYNC  # rule 2 needs P2: the priority's mode
    assert policy.mode_for(P.P3, None) is M.ASYNC
    assert policy.mode_for(P.P2, None) is M.BYPASS


def test_bypass_needs_a_default_to_answer_with() -> None:
    policy = AutonomySettings(bypass_after_s=90)
    with_default = decide(policy, P.P2, None, "sqlite", NOW)
    assert (with_default.mode, with_default.decide_at) == (M.BYPASS, NOW + timedelta(seconds=90))
    without = decide(policy, P.P2, None, None, NOW)
    assert (without.mode, without.decide_at) == (M.ASYNC, None)  # nobody decides for the agent


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('{"modes": {"P9": "sync"}}', "modes"),
        ('{"modes": {"P0": "maybe"}}', "modes"),
        ('{"rules": [{"mode": "sync"}]}', "rules"),
        ('{"rules": [{"category": "Not A Token!", "mode": "sync"}]}', "category"),
        ('{"bypass_after_s": 0}', "bypass_after_s"),
        ('{"default_priority": "urgent"}', "default_priority"),
        ('{"surprise": 1}', "surprise"),
        ("[1, 2]", "top level"),
        ("{not json", "not valid"),
    ],
)
def test_a_bad_policy_names_the_field_and_never_the_value(text: str, field: str) -> None:
    with pytest.raises(AutonomyError) as bad:
        parse_autonomy(text, "policy.json")
    assert field in bad.value.message and "policy.json" in bad.value.message
    assert "Not A Token!" not in bad.value.message and "maybe" not in bad.value.message


def test_a_yaml_policy_reads_like_the_json_one() -> None:
    text = "modes:\n  P1: sync\nrules:\n  - category: security\n    mode: sync\nbypass_after_s: 60\n"
    policy = parse_autonomy(text)
    assert policy.modes[P.P1] is M.SYNC and policy.rules[0].category == "security"
    assert parse_autonomy("") == AutonomySettings()


def test_the_default_answers_a_bypass_question_only_once_its_window_passed() -> None:
    asked = question(mode=M.BYPASS, priority=P.P2, default_answer="sqlite", decide_at=NOW)
    assert bypass_rule(asked, NOW - timedelta(seconds=1)) is None
    done = bypass_rule(asked, NOW)
    assert done is not None and (done.status, done.answer, done.answered_by) == (
        QuestionStatus.ANSWERED,
        "sqlite",
        POLICY,
    )
    assert done.resolution is not None and "default" in done.resolution
    assert bypass_rule(done, NOW) is None  # answered: left alone
    past_deadline = asked.model_copy(update={"deadline": NOW - timedelta(seconds=1)})
    assert bypass_rule(past_deadline, NOW) is None  # it expires instead


def test_putting_off_keeps_it_open_and_moves_the_bypass_default_with_it() -> None:
    asked = question(mode=M.BYPASS, priority=P.P2, default_answer="x", decide_at=NOW + timedelta(minutes=5))
    later = NOW + timedelta(hours=2)
    put_off = defer_rule(asked, later, "alice", NOW)
    assert (put_off.status, put_off.deferred_until, put_off.deferred_by, put_off.decide_at) == (
        QuestionStatus.OPEN,
        later,
        "alice",
        later,
    )
    for until, why in [
        (NOW, "in the future"),
        (NOW + timedelta(days=31), "within 30 days"),
    ]:
        with pytest.raises(QuestionError) as bad:
            defer_rule(asked, until, "alice", NOW)
        assert bad.value.field == "until" and why in bad.value.message
    with pytest.raises(QuestionError, match="before the question's deadline"):
        defer_rule(asked.model_copy(update={"deadline": NOW + timedelta(hours=1)}), later, "a", NOW)
    with pytest.raises(QuestionClosed):
        defer_rule(asked.model_copy(update={"status": QuestionStatus.LOGGED}), later, "a", NOW)


def test_an_unanswered_sync_question_is_due_a_reminder_every_period_and_when_put_off_ends() -> None:
    asked = question(mode=M.SYNC)
    assert remind_rule(asked, 60, NOW + timedelta(seconds=59)) is None
    first = remind_rule(asked, 60, NOW + timedelta(seconds=60))
    assert first is not None and first.reminded_at == NOW + timedelta(seconds=60)
    assert remind_rule(first, 60, NOW + timedelta(seconds=90)) is None  # reminded lately
    put_off = first.model_copy(update={"deferred_until": NOW + timedelta(seconds=75)})
    assert remind_rule(put_off, 60, NOW + timedelta(seconds=70)) is None  # still put off
    assert remind_rule(put_off, 60, NOW + timedelta(seconds=76)) is not None  # its deferral ended
    for other in (
        asked.model_copy(update={"mode": M.ASYNC}),
        asked.model_copy(update={"status": QuestionStatus.ANSWERED}),
        asked.model_copy(update={"deadline": NOW + timedelta(seconds=30)}),  # expired by then
    ):
        assert remind_rule(other, 60, NOW + timedelta(seconds=61)) is None


def test_urgency_puts_open_then_priority_then_the_oldest_first() -> None:
    def q(n: int, **fields: object) -> Question:
        return question(id=f"{n:032x}", created_at=NOW + timedelta(minutes=n), **fields)

    questions = [
        q(1, priority=P.P2),
        q(2, priority=P.P0, status=QuestionStatus.ANSWERED),
        q(3, priority=P.P0, deferred_until=NOW + timedelta(hours=1)),
        q(4, priority=P.P1),
        q(5, priority=P.P1, deferred_until=NOW - timedelta(hours=1)),  # its time came
        q(6, priority=P.P0),
    ]
    ranked = [int(x.id, 16) for x in sorted(questions, key=lambda x: urgency(x, NOW))]
    assert ranked == [6, 4, 5, 1, 3, 2]


# -- against NATS -------------------------------------------------------------------------


def coder(agent_id: str) -> Claimant:
    return Claimant(agent_id=agent_id, agent_type="generic", capabilities=("code",))


async def test_each_mode_at_ask_time(nc: NatsClient, project_id: str) -> None:
    names = ProjectNames(project_id)
    work = work_queue(nc, names)
    book = QuestionBook(nc, names, work)
    await book.autonomy.put(AutonomySettings(rules=[AutonomyRule(category="security", mode=M.SYNC)]), by="op")
    item = await work.submit(WorkSubmission(task_id="t", description="d", capability="code"))
    await work.claim(coder(A))

    # async (P1): noted about the item, which goes on
    noted = await book.ask(A, "tabs or spaces?", work_id=item.id, priority=P.P1)
    assert (noted.mode, noted.status) == (M.ASYNC, QuestionStatus.OPEN)
    assert (await work.get(item.id)).status is WorkStatus.CLAIMED  # untouched
    with pytest.raises(NotClaimant):  # still only about work the agent holds
        await book.ask(B, "may I?", work_id=item.id, priority=P.P1)
    answered = await book.answer(noted.id, "spaces")
    assert answered.answer == "spaces" and (await work.get(item.id)).status is WorkStatus.CLAIMED

    # log (P3): recorded, resolved at once, with the agent's default
    logged = await book.ask(A, "rename helper?", work_id=item.id, priority=P.P3, default_answer="yes")
    assert (logged.mode, logged.status, logged.answer) == (M.LOG, QuestionStatus.LOGGED, "yes")
    with pytest.raises(QuestionClosed) as closed:
        await book.answer(logged.id, "no")
    assert "logged" in closed.value.message

    # a rule by category: a P3 security question still makes the item wait
    urgent = await book.ask(A, "store the key in git?", work_id=item.id, priority=P.P3, category="security")
    assert urgent.mode is M.SYNC and (await work.get(item.id)).status is WorkStatus.WAITING_ON_OPERATOR
    await book.answer(urgent.id, "no")
    assert (await work.get(item.id)).status is WorkStatus.IN_PROGRESS

    with pytest.raises(QuestionError) as bad:
        await book.ask(A, "which?", choices=["a", "b"], default_answer="c")
    assert bad.value.field == "default_answer"
    with pytest.raises(InvalidNameError) as bad_category:
        await book.ask(A, "which?", category="Not A Token!")
    assert bad_category.value.field == "category" and "Not A Token" not in bad_category.value.message
    kept = {q.id for q in await book.all()}
    assert kept == {noted.id, logged.id, urgent.id}  # the refused ones were not kept


async def test_a_bypass_question_is_answered_by_its_default_unless_a_person_is_first(
    nc: NatsClient, project_id: str
) -> None:
    names = ProjectNames(project_id)
    work = work_queue(nc, names)
    book = QuestionBook(nc, names, work)
    await book.autonomy.put(AutonomySettings(bypass_after_s=1), by="op")
    item = await work.submit(WorkSubmission(task_id="t", description="d", capability="code"))
    await work.claim(coder(A))
    asked = await book.ask(A, "retry flaky test?", work_id=item.id, priority=P.P2, default_answer="retry")
    assert asked.mode is M.BYPASS and asked.decide_at is not None
    assert (await work.get(item.id)).status is WorkStatus.WAITING_ON_OPERATOR  # for its short window
    first = await book.ask(A, "and this one?", priority=P.P2, default_answer="skip")
    await book.answer(first.id, "fix it", by="alice")  # a person was first
    assert await book.expire_due(asked.decide_at - timedelta(milliseconds=1)) == []
    done = await book.expire_due(asked.decide_at)  # the sweep, as Weft runs it
    assert [(q.id, q.answer, q.answered_by) for q in done] == [(asked.id, "retry", POLICY)]
    resumed = await work.get(item.id)
    assert (resumed.status, resumed.question_id) == (WorkStatus.IN_PROGRESS, None)
    assert (await book.get(first.id)).answer == "fix it"


async def test_listing_by_urgency_pages_and_filters(nc: NatsClient, project_id: str) -> None:
    names = ProjectNames(project_id)
    book = QuestionBook(nc, names, work_queue(nc, names))
    await book.autonomy.put(AutonomySettings(modes={p: M.ASYNC for p in P}), by="op")
    asked = [
        await book.ask(A, f"q{n}", priority=priority, category="scope" if n % 2 else None)
        for n, priority in enumerate([P.P3, P.P0, P.P2, P.P0, P.P1])
    ]
    await book.defer(asked[1].id, utcnow() + timedelta(hours=1), by="alice")
    expected = [asked[3].id, asked[4].id, asked[2].id, asked[0].id, asked[1].id]
    seen, cursor = [], None
    while True:
        page = await book.listing(limit=2, cursor=cursor, order="urgency")
        seen += [q.id for q in page.items]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == expected
    newest = await book.listing(limit=2)
    assert [q.id for q in newest.items] == [asked[4].id, asked[3].id]
    with pytest.raises(CursorError):  # a newest-first cursor is not an urgency one
        await book.listing(cursor=newest.next_cursor, order="urgency")
    only = await book.listing(QuestionFilter(priority=P.P1, category="scope"), order="urgency")
    assert [q.id for q in only.items] == []
    only = await book.listing(QuestionFilter(priority=P.P0, category="scope"), order="urgency")
    assert [q.id for q in only.items] == [asked[3].id, asked[1].id]


async def test_the_policy_is_stored_per_project_compare_and_set(nc: NatsClient, project_id: str) -> None:
    js = nc.jetstream()
    one, two = AutonomyStore(js, ProjectNames(project_id)), AutonomyStore(js, ProjectNames(f"{project_id}-b"))
    assert (await one.current()).updated_by == "default" and await one.get() is None
    stored = await one.put(AutonomySettings(modes={P.P1: M.SYNC}), by="op", expected_revision=0)
    assert stored.revision > 0 and (await one.current()).modes[P.P1] is M.SYNC
    assert await two.get() is None  # another project keeps the default
    with pytest.raises(Conflict) as stale:
        await one.put(AutonomySettings(), by="op", expected_revision=0)
    assert stale.value.field == "revision"
    edits = await asyncio.gather(
        *(
            one.put(AutonomySettings(bypass_after_s=10 + n), by=f"op{n}", expected_revision=stored.revision)
            for n in range(4)
        ),
        return_exceptions=True,
    )
    assert sum(not isinstance(e, BaseException) for e in edits) == 1
    # The file Weft loads: adopted by a project with no policy, or one from the file; an
    # operator's own policy stands.
    assert await one.adopt_file(AutonomySettings(bypass_after_s=5)) is False
    assert await two.adopt_file(AutonomySettings(bypass_after_s=5)) is True
    assert await two.adopt_file(AutonomySettings(bypass_after_s=5)) is False  # unchanged
    assert await two.adopt_file(AutonomySettings(bypass_after_s=7)) is True  # an edited file
    adopted = await two.get()
    assert adopted is not None and (adopted.updated_by, adopted.bypass_after_s) == (FILE_AUTHOR, 7)
    assert await one.delete() is True and await one.delete() is False
