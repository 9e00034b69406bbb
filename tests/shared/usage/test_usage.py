"""Usage and budgets on a real nats-server: items stopped by their budget, daily budgets
holding claims, counters and budgets compare-and-set, isolation between projects."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from nats.aio.client import Client as NatsClient
from nats.js.kv import KeyValue

from shared.errors import Conflict
from shared.models import WorkStatus, WorkSubmission, utcnow
from shared.names import ProjectNames
from shared.usage.ledger import UsageLedger
from shared.usage.rules import (
    Budget,
    BudgetsDoc,
    Pause,
    Usage,
    day_of,
    paused,
    resumed,
    stopped_by_budget,
    totals_of,
    with_project_budget,
    with_target_budget,
)
from shared.work.rules import BudgetReached, Claimant, WorkConflict
from testsupport.work import work_queue

A = "a" * 32
B = "b" * 32
T1 = "t1-target"


def claimant(agent_id: str = A, target_id: str | None = None) -> Claimant:
    return Claimant(agent_id=agent_id, agent_type="generic", capabilities=("code",), target_id=target_id)


def sub(task: str = "t", **kw: object) -> WorkSubmission:
    data: dict[str, object] = {"task_id": task, "description": "do it", "capability": "code"}
    data.update(kw)
    return WorkSubmission.model_validate(data)


async def test_usage_is_recorded_on_the_item_and_counted_for_the_day(nc: NatsClient, project_id: str) -> None:
    q = work_queue(nc, ProjectNames(project_id))
    item = await q.submit(sub())
    assert await q.claim(claimant(target_id=T1)) is not None
    await q.progress(
        item.id, A, 30, usage=Usage(input_tokens=100, output_tokens=10, cost=0.5, model="m1"), target_id=T1
    )
    await q.progress(item.id, A, 60)  # no usage: nothing added
    done = await q.complete(
        item.id, A, "ok", usage=Usage(output_tokens=40, cost=0.25, model="m1"), target_id=T1
    )
    assert done.status is WorkStatus.COMPLETED
    (row,) = done.usage
    assert (row.agent_id, row.target_id, row.model, row.reports) == (A, T1, "m1", 2)
    assert (row.input_tokens, row.output_tokens, row.cost) == (100, 50, 0.75)
    day = day_of(utcnow())
    ledger = UsageLedger(nc.jetstream(), ProjectNames(project_id))
    project_day, target_day = await ledger.day_totals(day), await ledger.day_totals(day, T1)
    assert (project_day.tokens, project_day.cost, project_day.reports) == (150, 0.75, 2)
    assert target_day == project_day
    assert (await ledger.day_totals("2001-01-01")).reports == 0


async def test_an_item_over_its_budget_is_stopped_and_fails_for_good(nc: NatsClient, project_id: str) -> None:
    names = ProjectNames(project_id)
    q = work_queue(nc, names)
    item = await q.submit(sub(budget={"cost": 1.0}, max_attempts=5))
    assert item.budget == Budget(cost=1.0)
    assert await q.claim(claimant()) is not None
    within = await q.progress(item.id, A, 50, usage=Usage(cost=1.0))
    assert within.status is WorkStatus.IN_PROGRESS  # at the budget is not over it
    stopped = await q.progress(item.id, A, 80, usage=Usage(cost=0.5, input_tokens=7))
    assert stopped.status is WorkStatus.DEAD_LETTERED and stopped_by_budget(stopped)
    assert stopped.error is not None and "cost 1.5 over its budget of 1" in stopped.error
    assert totals_of(stopped.usage).cost == 1.5 and totals_of(stopped.usage).input_tokens == 7
    # the agent's next call on it says so, whichever it is
    for call in (
        q.progress(item.id, A, 90, usage=Usage(cost=0.1)),
        q.complete(item.id, A, "late"),
        q.fail(item.id, A, "giving up"),
    ):
        with pytest.raises(WorkConflict) as caught:
            await call
        assert "was stopped: budget exceeded" in caught.value.message
    dead = await q.dlq_get(item.id)
    assert dead.item.id == item.id and stopped_by_budget(dead.item)
    assert await q.claim(claimant(B)) is None  # not redelivered: attempts were left, but it is stopped
    assert (await q.get(item.id)).attempts == 1


async def test_a_completion_over_the_budget_keeps_its_result(nc: NatsClient, project_id: str) -> None:
    q = work_queue(nc, ProjectNames(project_id))
    item = await q.submit(sub(budget={"tokens": 10}))
    await q.claim(claimant())
    done = await q.complete(item.id, A, {"answer": 42}, usage=Usage(input_tokens=8, output_tokens=3))
    assert done.status is WorkStatus.DEAD_LETTERED and stopped_by_budget(done)
    assert done.result == {"answer": 42} and "11 tokens over its budget of 10" in (done.error or "")


async def test_raising_an_items_budget_at_run_time_lets_it_go_on(nc: NatsClient, project_id: str) -> None:
    q = work_queue(nc, ProjectNames(project_id))
    item = await q.submit(sub(budget={"cost": 1.0}))
    await q.claim(claimant())
    await q.progress(item.id, A, 10, usage=Usage(cost=0.9))
    raised = await q.set_budget(item.id, Budget(cost=5.0))
    assert raised.budget == Budget(cost=5.0)
    assert (await q.progress(item.id, A, 20, usage=Usage(cost=2.0))).status is WorkStatus.IN_PROGRESS
    assert (await q.complete(item.id, A, "ok")).status is WorkStatus.COMPLETED
    with pytest.raises(WorkConflict):
        await q.set_budget(item.id, Budget(cost=9.0))


async def test_a_reached_daily_budget_holds_claims_until_it_is_raised(
    nc: NatsClient, project_id: str
) -> None:
    names = ProjectNames(project_id)
    q = work_queue(nc, names)
    first, second = await q.submit(sub("one")), await q.submit(sub("two"))
    await q.ledger.change_budgets(lambda d: with_project_budget(d, Budget(cost=1.0)))
    assert (await q.claim(claimant())) is not None
    held = first if (await q.get(first.id)).status is WorkStatus.CLAIMED else second
    await q.complete(held.id, A, "ok", usage=Usage(cost=1.0))
    # another agent's process: its own queue, no cached budgets
    other = work_queue(nc, names)
    with pytest.raises(BudgetReached) as caught:
        await other.claim(claimant(B))
    assert caught.value.code == "conflict" and caught.value.field == "budget"
    assert "reached its daily budget (cost 1 of a daily budget of 1)" in caught.value.message
    assert caught.value.hold.until is not None and caught.value.hold.until.hour == 0
    waiting = second if held is first else first
    assert (await q.get(waiting.id)).status is WorkStatus.QUEUED  # nothing lost: it waits
    await q.ledger.change_budgets(lambda d: with_project_budget(d, Budget(cost=2.0)))
    resumed = await work_queue(nc, names).claim(claimant(B))
    assert resumed is not None and resumed.id == waiting.id


async def test_a_targets_daily_budget_holds_its_agents_only(nc: NatsClient, project_id: str) -> None:
    q = work_queue(nc, ProjectNames(project_id))
    item = await q.submit(sub("one"))
    await q.submit(sub("two"))
    await q.ledger.change_budgets(lambda d: with_target_budget(d, T1, Budget(tokens=100)))
    assert await q.claim(claimant(target_id=T1)) is not None
    await q.complete(item.id, A, "ok", usage=Usage(input_tokens=100), target_id=T1)
    fresh = work_queue(nc, ProjectNames(project_id))
    with pytest.raises(BudgetReached) as caught:
        await fresh.claim(claimant(A, target_id=T1))
    assert "this target reached its daily budget" in caught.value.message
    assert await fresh.claim(claimant(B, target_id=None)) is not None


async def test_counters_and_budgets_are_compare_and_set_across_writers(
    nc: NatsClient, project_id: str
) -> None:
    names = ProjectNames(project_id)
    ledgers = [UsageLedger(nc.jetstream(), names) for _ in range(3)]
    now = utcnow()
    await asyncio.gather(
        *(ledgers[i % 3].add(Usage(input_tokens=1, cost=0.5), target_id=T1, now=now) for i in range(30))
    )
    total = await ledgers[0].day_totals(day_of(now))
    assert (total.input_tokens, total.cost, total.reports) == (30, 15.0, 30)
    assert (await ledgers[1].day_totals(day_of(now), T1)).reports == 30
    targets = [uuid.uuid4().hex for _ in range(6)]
    await asyncio.gather(
        ledgers[0].change_budgets(lambda d: with_project_budget(d, Budget(cost=9.0))),
        *(
            ledgers[i % 3].change_budgets(lambda d, t=t: with_target_budget(d, t, Budget(tokens=5)))
            for i, t in enumerate(targets)
        ),
    )
    doc, revision = await ledgers[2].read_budgets()
    assert doc.project_daily == Budget(cost=9.0) and sorted(doc.target_daily) == sorted(targets)
    assert revision > 0


async def test_another_projects_usage_and_budgets_neither_show_nor_apply(nc: NatsClient) -> None:
    mine, theirs = (ProjectNames(f"usage-{uuid.uuid4().hex[:10]}") for _ in range(2))
    q_mine, q_theirs = work_queue(nc, mine), work_queue(nc, theirs)
    await q_theirs.ledger.change_budgets(lambda d: with_project_budget(d, Budget(cost=0.5)))
    theirs_item = await q_theirs.submit(sub())
    await q_theirs.claim(claimant())
    await q_theirs.complete(theirs_item.id, A, "ok", usage=Usage(cost=3.0))
    with pytest.raises(BudgetReached):
        await work_queue(nc, theirs).claim(claimant())
    item = await q_mine.submit(sub())
    assert (await q_mine.claim(claimant())) is not None  # their hold does not apply here
    day = day_of(utcnow())
    assert (await q_mine.ledger.day_totals(day)).reports == 0
    assert (await q_mine.ledger.read_budgets())[1] == 0
    assert (await q_mine.get(item.id)).usage == []


async def test_a_daily_hold_ends_when_the_next_utc_day_begins(nc: NatsClient, project_id: str) -> None:
    from datetime import UTC, datetime, timedelta

    ledger = UsageLedger(nc.jetstream(), ProjectNames(project_id))
    late = datetime(2026, 3, 31, 23, 59, 59, tzinfo=UTC)
    await ledger.change_budgets(lambda d: with_project_budget(d, Budget(tokens=10)))
    await ledger.add(Usage(output_tokens=10), target_id=None, now=late)
    hold = await ledger.hold(late)
    assert hold is not None and hold.until == datetime(2026, 4, 1, tzinfo=UTC)
    assert await ledger.hold(late + timedelta(seconds=1)) is None  # a new day, a new counter
    assert (await ledger.day_totals("2026-03-31")).tokens == 10


class _Outrun(UsageLedger):
    """A ledger whose every compare-and-set loses: it always reads one revision behind."""

    async def read_budgets(self) -> tuple[BudgetsDoc, int]:
        doc, revision = await super().read_budgets()
        return doc, max(revision - 1, 1)

    async def _entry(self, kv: KeyValue, key: str) -> KeyValue.Entry | None:
        entry = await super()._entry(kv, key)
        assert entry is not None and entry.revision is not None
        entry.revision -= 1
        return entry


async def test_writers_that_always_lose_get_a_conflict_naming_what(nc: NatsClient, project_id: str) -> None:
    names = ProjectNames(project_id)
    ledger = UsageLedger(nc.jetstream(), names)
    now = utcnow()
    await ledger.change_budgets(lambda d: with_project_budget(d, Budget(cost=1.0)))
    await ledger.change_budgets(lambda d: with_project_budget(d, Budget(cost=2.0)))
    await ledger.add(Usage(cost=1.0), target_id=None, now=now)
    await ledger.add(Usage(cost=1.0), target_id=None, now=now)
    loser = _Outrun(nc.jetstream(), names)
    with pytest.raises(Conflict) as budgets:
        await loser.change_budgets(lambda d: with_project_budget(d, Budget(cost=3.0)))
    assert budgets.value.field == "budgets" and "try again" in budgets.value.message
    with pytest.raises(Conflict) as counter:
        await loser.add(Usage(cost=1.0), target_id=None, now=now)
    assert counter.value.field == "usage"
    assert (await ledger.read_budgets())[0].project_daily == Budget(cost=2.0)  # nothing overwritten
    assert (await ledger.day_totals(day_of(now))).cost == 2.0


async def test_a_paused_project_admits_no_claim_while_held_work_goes_on_until_resumed(
    nc: NatsClient, project_id: str
) -> None:
    names = ProjectNames(project_id)
    q = work_queue(nc, names)
    first, second = await q.submit(sub("one")), await q.submit(sub("two"))
    held = await q.claim(claimant())
    assert held is not None
    pause = Pause(by="ana", reason="release freeze", at=utcnow())
    await q.ledger.change_budgets(lambda d: paused(d, pause))
    with pytest.raises(Conflict) as again:  # one operator's pause is never overwritten
        await q.ledger.change_budgets(lambda d: paused(d, pause.model_copy(update={"by": "bo"})))
    assert again.value.field == "paused" and "by ana" in again.value.message
    other = work_queue(nc, names)  # another agent's process: no cached document
    with pytest.raises(BudgetReached) as caught:
        await other.claim(claimant(B))
    assert (caught.value.code, caught.value.field, caught.value.rule) == (
        "conflict",
        "project",
        "project paused",
    )
    assert caught.value.message.startswith("project: paused by ana: release freeze; no new claims")
    assert caught.value.hold.kind == "pause" and caught.value.hold.until is None
    assert (await q.progress(held.id, A, 50)).status is WorkStatus.IN_PROGRESS  # held work goes on
    assert (await q.complete(held.id, A, "ok")).status is WorkStatus.COMPLETED
    waiting = second if held.id == first.id else first
    assert (await q.get(waiting.id)).status is WorkStatus.QUEUED  # nothing lost: it waits

    elsewhere = work_queue(nc, ProjectNames(f"{project_id}-b"))  # another project is not paused
    await elsewhere.submit(sub("three"))
    assert await elsewhere.claim(claimant(B)) is not None

    await q.ledger.change_budgets(resumed)
    with pytest.raises(Conflict):
        await q.ledger.change_budgets(resumed)
    taken = await work_queue(nc, names).claim(claimant(B))
    assert taken is not None and taken.id == waiting.id
