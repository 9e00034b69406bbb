"""The dependency rules of shared/work/rules.py and the plan and graph functions of
shared/work/graph.py, without NATS: every move, every refusal, every idempotent repeat."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from shared.errors import INVALID
from shared.models import WorkItem, WorkStatus, WorkSubmission
from shared.work.graph import (
    DEAD_ENDS,
    DependencyFinished,
    DependencyRefused,
    NamedStep,
    PlanError,
    PlanStep,
    check_dependencies,
    dead_end,
    plan_order,
    repairs,
    resolve_names,
    work_graph,
)
from shared.work.lifecycle import WORK_LIFECYCLE, WorkMove
from shared.work.rules import (
    Change,
    Then,
    WorkConflict,
    WorkEvent,
    WorkRecord,
    abandon,
    admit,
    link,
    needs_message,
    reconcile,
    reset,
    revive,
    satisfy,
)

S = WorkStatus
X = "1" * 32
Y = "2" * 32
Z = "3" * 32
WORK_ID = "c" * 32
THEN = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
NOW = THEN + timedelta(minutes=5)


def item(work_id: str = WORK_ID, status: WorkStatus = S.QUEUED, **fields: Any) -> WorkItem:
    fields.setdefault("updated_at", THEN)
    return WorkItem(
        id=work_id,
        task_id=f"t-{work_id[:4]}",
        description="do it",
        capability="code",
        project_id="demo",
        status=status,
        created_at=THEN,
        **fields,
    )


def blocked(*on: str, depends_on: list[str] | None = None, **fields: Any) -> WorkRecord:
    deps = depends_on if depends_on is not None else list(on)
    return WorkRecord(item=item(status=S.BLOCKED, depends_on=deps, blocked_on=list(on), **fields))


def run(rule: Callable[..., Change], given: WorkRecord, *args: Any) -> Change:
    before = given.model_dump(mode="json")
    try:
        return rule(given, *args)
    finally:
        assert given.model_dump(mode="json") == before, "the rule changed its input record"


def stored(change: Change) -> WorkRecord:
    assert change.record is not None, "the rule left the record alone"
    return change.record


def sub(**kw: Any) -> WorkSubmission:
    return WorkSubmission.model_validate({"task_id": "t", "description": "d", "capability": "code", **kw})


# -- the table ----------------------------------------------------------------------


def test_the_dependency_moves_are_rows_of_the_table() -> None:
    assert WORK_LIFECYCLE[WorkMove.UNBLOCK].sources == {S.BLOCKED}
    assert WORK_LIFECYCLE[WorkMove.UNBLOCK].target is S.QUEUED
    assert WORK_LIFECYCLE[WorkMove.ABANDON].target is S.FAILED  # then the DLQ, like any failure for good
    assert WORK_LIFECYCLE[WorkMove.REVIVE].target is S.BLOCKED
    assert S.BLOCKED not in WORK_LIFECYCLE[WorkMove.CLAIM].sources  # never claimable
    assert S.BLOCKED in WORK_LIFECYCLE[WorkMove.CANCEL].sources
    assert S.BLOCKED in WORK_LIFECYCLE[WorkMove.EXPIRE].sources
    assert {S.CANCELLED, S.EXPIRED, S.DEAD_LETTERED} == DEAD_ENDS


# -- admit and link -------------------------------------------------------------------


def test_admit_blocks_an_item_with_dependencies_and_takes_a_plan_id() -> None:
    created = admit(sub(depends_on=[X, Y]), project_id="demo", submitted_by=None, now=THEN, work_id=Z)
    assert (created.item.id, created.item.status, created.item.blocked_on) == (Z, S.BLOCKED, [X, Y])
    plain = admit(sub(), project_id="demo", submitted_by=None, now=THEN, dependents=[X])
    assert (plain.item.status, plain.item.blocked_on, plain.item.dependents) == (S.QUEUED, [], [X])


@pytest.mark.parametrize(
    ("deps", "field", "message"),
    [
        (["nothex"], "depends_on.0", "must be exactly 32 lowercase hex characters (a work item id)"),
        ([X, X], "depends_on", "must not name the same item twice"),
        (
            [f"{i:032x}" for i in range(101)],
            "depends_on",
            "List should have at most 100 items after validation, not 101",
        ),
    ],
)
def test_depends_on_is_validated_naming_the_field(deps: list[str], field: str, message: str) -> None:
    from pydantic import ValidationError

    from shared.errors import validation_problems

    with pytest.raises(ValidationError) as info:
        sub(depends_on=deps)
    problems = validation_problems(info.value.errors())
    assert [(p.field, p.message) for p in problems][:1] == [(field, message)]
    assert "nothex" not in str(problems)


@pytest.mark.parametrize("status", list(WorkStatus))
def test_link_records_dependents_once_whatever_the_status(status: WorkStatus) -> None:
    given = WorkRecord(item=item(status=status, dependents=[X]))
    new = stored(run(link, given, [Y, X, Y]))
    assert new.item.dependents == [X, Y]
    assert new.item.updated_at == THEN  # bookkeeping, not the holder's activity
    assert run(link, new, [X, Y]) == Change()


# -- satisfy, abandon, reconcile, revive -------------------------------------------


def test_satisfy_drops_one_dependency_then_unblocks_on_the_last() -> None:
    half = stored(run(satisfy, blocked(X, Y), X, NOW))
    assert (half.item.status, half.item.blocked_on, half.item.updated_at) == (S.BLOCKED, [Y], NOW)
    change = run(satisfy, half, Y, NOW)
    done = stored(change)
    assert (done.item.status, done.item.blocked_on, done.queue_seq) == (S.QUEUED, [], None)
    assert change.events == (WorkEvent("unblocked", {"dependency": Y}), WorkEvent("queued"))
    assert change.then is Then.ENQUEUE


@pytest.mark.parametrize("status", [s for s in WorkStatus if s is not S.BLOCKED])
def test_satisfy_and_abandon_leave_an_item_that_is_not_blocked_alone(status: WorkStatus) -> None:
    given = WorkRecord(item=item(status=status, depends_on=[X], blocked_on=[X]))
    assert run(satisfy, given, X, NOW) == Change()
    assert run(abandon, given, X, "was cancelled", NOW) == Change()


def test_satisfy_is_idempotent_and_ignores_other_items() -> None:
    assert run(satisfy, blocked(Y, depends_on=[X, Y]), X, NOW) == Change()  # already told
    assert run(satisfy, blocked(X), Z, NOW) == Change()  # not one of its dependencies


def test_abandon_fails_the_item_for_good_naming_the_dependency() -> None:
    change = run(abandon, blocked(X, Y), Y, "was dead-lettered", NOW)
    new = stored(change)
    assert (new.item.status, new.item.failed_dependency, new.item.blocked_on) == (S.FAILED, Y, [])
    assert new.item.error == f"dependency {Y} was dead-lettered"
    assert [e.error for e in new.item.errors] == [new.item.error]
    assert change.events == (WorkEvent("failed", {"dependency": Y, "error": new.item.error}),)
    assert change.then is Then.DEAD_LETTER
    assert run(abandon, blocked(X), Z, "was cancelled", NOW) == Change()


@pytest.mark.parametrize("status", sorted(DEAD_ENDS))
def test_reconcile_fails_on_a_dependency_that_cannot_complete(status: WorkStatus) -> None:
    found = {X: item(X, S.COMPLETED), Y: item(Y, status)}
    new = stored(run(reconcile, blocked(X, Y), found, NOW))
    assert (new.item.status, new.item.failed_dependency) == (S.FAILED, Y)


def test_reconcile_fails_on_a_dependency_that_is_gone() -> None:
    new = stored(run(reconcile, blocked(X), {X: None}, NOW))
    assert new.item.error == f"dependency {X} no longer exists"


def test_reconcile_unblocks_when_everything_completed_and_waits_otherwise() -> None:
    done = {X: item(X, S.COMPLETED), Y: item(Y, S.COMPLETED)}
    assert stored(run(reconcile, blocked(X, Y), done, NOW)).item.status is S.QUEUED
    some = {X: item(X, S.COMPLETED), Y: item(Y, S.IN_PROGRESS)}
    assert stored(run(reconcile, blocked(X, Y), some, NOW)).item.blocked_on == [Y]
    assert run(reconcile, blocked(X), {X: item(X, S.FAILED)}, NOW) == Change()  # failed may be retried
    assert run(reconcile, blocked(X), {}, NOW) == Change()  # nothing read: nothing decided
    assert run(reconcile, WorkRecord(item=item(status=S.QUEUED)), done, NOW) == Change()


@pytest.mark.parametrize("status", [S.DEAD_LETTERED, S.FAILED])
def test_revive_blocks_again_on_every_dependency_and_leaves_the_dlq(status: WorkStatus) -> None:
    given = WorkRecord(
        item=item(status=status, depends_on=[X, Y], failed_dependency=Y, finished_at=THEN),
        dlq_seq=9 if status is S.DEAD_LETTERED else None,
        queue_seq=4,
    )
    change = run(revive, given, Y, NOW)
    new = stored(change)
    assert (new.item.status, new.item.blocked_on, new.item.failed_dependency) == (S.BLOCKED, [X, Y], None)
    assert (new.item.finished_at, new.dlq_seq, new.queue_seq) == (None, None, None)
    assert change.events == (WorkEvent("revived", {"dependency": Y}), WorkEvent("blocked"))
    assert change.drop_dlq_seq == given.dlq_seq


def test_revive_only_follows_the_dependency_that_failed_it() -> None:
    given = WorkRecord(item=item(status=S.DEAD_LETTERED, depends_on=[X, Y], failed_dependency=Y))
    assert run(revive, given, X, NOW) == Change()
    assert run(revive, WorkRecord(item=item(status=S.DEAD_LETTERED)), X, NOW) == Change()


def test_reset_of_an_item_failed_by_its_dependency_waits_for_it_or_is_refused() -> None:
    given = WorkRecord(
        item=item(status=S.DEAD_LETTERED, depends_on=[X], failed_dependency=X, attempts=0), dlq_seq=3
    )
    with pytest.raises(WorkConflict) as refused:
        run(reset, given, NOW, {X: item(X, S.DEAD_LETTERED)})
    assert refused.value.field == "work_id"
    assert refused.value.message == (
        f"work_id: {WORK_ID} failed because its dependency {X} was dead-lettered; retry that one first"
    )
    change = run(reset, given, NOW, {X: item(X, S.QUEUED)})
    assert stored(change).item.status is S.BLOCKED
    assert change.events == (WorkEvent("retried"), WorkEvent("blocked"))
    assert (change.then, change.drop_dlq_seq) == (None, 3)


@pytest.mark.parametrize(
    ("status", "queue_seq", "needed"),
    [(S.QUEUED, None, True), (S.QUEUED, 4, False), (S.BLOCKED, None, False), (S.CLAIMED, None, False)],
)
def test_needs_message(status: WorkStatus, queue_seq: int | None, needed: bool) -> None:
    assert needs_message(WorkRecord(item=item(status=status), queue_seq=queue_seq)) is needed


def test_dead_end_names_the_cause_one_level_down() -> None:
    assert dead_end(item(X, S.QUEUED)) is None
    assert dead_end(item(X, S.EXPIRED)) == "expired"
    assert dead_end(item(X, S.DEAD_LETTERED, failed_dependency=Y)) == (
        f"was dead-lettered (its dependency {Y} failed)"
    )


# -- plans --------------------------------------------------------------------------


def named(name: str | None, *after: str) -> NamedStep:
    return NamedStep(sub(), name=name, after=after)


def test_resolve_names_maps_local_names_to_positions() -> None:
    steps = resolve_names([named("docs", "api"), named("api", "migration"), named("migration"), named(None)])
    assert [s.after for s in steps] == [(1,), (2,), (), ()]
    assert plan_order(steps) == [2, 3, 1, 0]


@pytest.mark.parametrize(
    ("entries", "field", "message"),
    [
        ([named("api"), named("api")], "items.1.name", "'api' is already the name of items.0"),
        ([named("a1"), named("a1")], "items.1.name", "'*' is already the name of items.0"),
        ([named("api", "nope")], "items.0.after.0", "names no item of this plan"),
        ([named("api", "api")], "items.0.after.0", "an item cannot come after itself"),
        ([named("a"), named("b", "a", "a")], "items.1.after.1", "names the same item twice"),
        ([named("Bad Name")], "items.0.name", "must be lowercase letters"),
        ([], "items", "must hold 1 to 1000 items"),
    ],
)
def test_resolve_names_refuses_naming_the_field(entries: list[NamedStep], field: str, message: str) -> None:
    with pytest.raises(PlanError if entries and field != "items.0.name" else Exception) as info:
        resolve_names(entries)
    error = info.value
    assert getattr(error, "field", None) == field
    assert message in str(error) and "Bad Name" not in str(error)


def test_plan_order_finds_a_cycle_and_names_its_path() -> None:
    steps = [
        PlanStep(sub()),
        PlanStep(sub(), after=(3,)),
        PlanStep(sub(), after=(1,)),
        PlanStep(sub(), after=(2,)),
    ]
    with pytest.raises(PlanError) as info:
        plan_order(steps)
    assert info.value.field == "items.1.after"
    assert (
        info.value.message == "items.1.after: the plan has a cycle (items.1 -> items.3 -> items.2 -> items.1)"
    )
    assert info.value.code == INVALID


def test_plan_order_of_a_wide_plan_is_linear_and_stable() -> None:
    steps = [PlanStep(sub())] + [PlanStep(sub(), after=(i - 1,)) for i in range(1, 1000)]
    assert plan_order(steps) == list(range(1000))


def test_check_dependencies_names_the_entry_without_its_id() -> None:
    steps = [PlanStep(sub()), PlanStep(sub(depends_on=[X, Y]))]
    with pytest.raises(DependencyRefused) as missing:
        check_dependencies(steps, {X: item(X), Y: None})
    assert (missing.value.field, missing.value.message) == (
        "items.1.depends_on.1",
        "items.1.depends_on.1: no work item with this id in this project",
    )
    with pytest.raises(DependencyFinished) as finished:
        check_dependencies([PlanStep(sub(depends_on=[X]))], {X: item(X, S.EXPIRED)}, None)
    assert (
        finished.value.field == "depends_on.0" and "expired and will not complete" in finished.value.message
    )
    check_dependencies(steps, {X: item(X, S.FAILED), Y: item(Y, S.COMPLETED)})


# -- the graph and repairs -------------------------------------------------------------


def test_work_graph_walks_both_ways_once_per_node() -> None:
    items = {
        X: item(X, S.COMPLETED, dependents=[Y, Z]),
        Y: item(Y, S.QUEUED, depends_on=[X], dependents=[Z]),
        Z: item(Z, S.BLOCKED, depends_on=[X, Y], blocked_on=[Y]),
    }
    graph = work_graph(items[Y], items.get)
    assert [(n.id, n.relation, n.depth) for n in graph.nodes] == [
        (Y, "root", 0),
        (X, "ancestor", 1),
        (Z, "descendant", 1),
    ]
    assert graph.edges == sorted([(X, Y), (Y, Z)])
    whole = work_graph(items[X], items.get)
    assert [n.id for n in whole.nodes] == [X, Y, Z] and whole.edges == sorted([(X, Y), (X, Z), (Y, Z)])
    cut = work_graph(items[X], items.get, limit=2)
    assert cut.truncated and len(cut.nodes) == 2


def test_work_graph_shows_a_missing_record() -> None:
    graph = work_graph(item(Y, depends_on=[X]), lambda _: None)
    assert [(n.id, n.item) for n in graph.nodes[1:]] == [(X, None)]


def test_repairs_find_what_a_stopped_process_left_undone() -> None:
    grace = timedelta(seconds=5)
    old = THEN
    items = {
        X: item(X, S.COMPLETED, updated_at=old),
        Y: item(Y, S.BLOCKED, depends_on=[X], blocked_on=[X], updated_at=old),  # never told
        Z: item(Z, S.BLOCKED, depends_on=[WORK_ID], blocked_on=[WORK_ID], updated_at=old),
        WORK_ID: item(WORK_ID, S.IN_PROGRESS, updated_at=old),
        "4" * 32: item("4" * 32, S.DEAD_LETTERED, failed_dependency=WORK_ID, updated_at=old),  # retried since
        "5" * 32: item("5" * 32, S.DEAD_LETTERED, failed_dependency="6" * 32, updated_at=old),
        "6" * 32: item("6" * 32, S.DEAD_LETTERED, updated_at=old),
    }
    found = repairs(items, NOW, grace=grace)
    assert found.settle == [Y] and found.revive == [("4" * 32, WORK_ID)]
    fresh = {**items, X: item(X, S.COMPLETED, updated_at=NOW)}  # still being done by its process
    assert repairs(fresh, NOW, grace=grace).settle == []


# -- bottlenecks (docs/operator.md) ----------------------------------------------------------


def test_an_item_holds_up_every_open_item_downstream_of_it_counted_once() -> None:
    from shared.work.graph import HELD_UP_COUNTED, bottlenecks, held_up

    def node(work_id: str, dependents: list[str], status: WorkStatus = WorkStatus.QUEUED) -> WorkItem:
        return WorkItem(
            id=work_id * 32, task_id=work_id, description="d", capability="code", project_id="p",
            status=status, dependents=[d * 32 for d in dependents],
        )  # fmt: skip

    # a -> b, c; b -> d; c -> d (a diamond); d -> e (done); f alone
    items = {
        i.id: i
        for i in (
            node("a", ["b", "c"]),
            node("b", ["d"], WorkStatus.BLOCKED),
            node("c", ["d"], WorkStatus.BLOCKED),
            node("d", ["e"], WorkStatus.BLOCKED),
            node("e", [], WorkStatus.COMPLETED),
            node("f", []),
        )
    }
    counts = held_up(items)
    assert counts == {"a" * 32: 3, "b" * 32: 1, "c" * 32: 1}  # d once; e is done; f holds up nothing
    assert bottlenecks(counts) == {"a" * 32: 3}
    assert bottlenecks(counts, threshold=4) == {}
    done_a = {**items, "a" * 32: items["a" * 32].model_copy(update={"status": WorkStatus.COMPLETED})}
    assert "a" * 32 not in held_up(done_a)  # a finished item holds up nothing
    ids = [f"{n:032x}" for n in range(HELD_UP_COUNTED + 20)]
    chain = {
        work_id: WorkItem(
            id=work_id,
            task_id="t",
            description="d",
            capability="code",
            project_id="p",
            status=WorkStatus.BLOCKED,
            dependents=[ids[n + 1]] if n + 1 < len(ids) else [],
        )
        for n, work_id in enumerate(ids)
    }
    assert held_up(chain)[ids[0]] == HELD_UP_COUNTED  # counting stops there on a long chain
