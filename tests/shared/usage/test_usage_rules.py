"""Usage and budget rules (shared.usage) and the work rule ``charge``: pure, no NATS."""

from __future__ import annotations

import ast
import math
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import ValidationError

from shared.base import LoomModel
from shared.errors import Invalid
from shared.models import WorkItem, WorkStatus
from shared.usage import rules as usage_rules
from shared.usage.rules import (
    BUDGET_EXCEEDED,
    Budget,
    BudgetsDoc,
    Totals,
    Usage,
    UsageEntry,
    UsageInvalid,
    add_usage,
    aggregate,
    budget_error,
    by_agent_target_model,
    check_group,
    day_of,
    exceeded,
    next_day_start,
    parse_day,
    project_hold,
    reached,
    stopped_by_budget,
    target_hold,
    totals_of,
    with_project_budget,
    with_target_budget,
)
from shared.work.rules import (
    Ack,
    Delivery,
    NotClaimant,
    Then,
    WorkConflict,
    WorkRecord,
    charge,
    finish,
    rebudget,
    report,
)
from testsupport.pysource import parse

A = "a" * 32
B = "b" * 32
T1 = "1" * 32
NOON = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
LATE = datetime(2026, 11, 27, 23, 59, 59, tzinfo=UTC)
NEXT = datetime(2026, 11, 28, 0, 0, 1, tzinfo=UTC)
SECRET = "sk-live-Zx81Qa9"


# -- validation ---------------------------------------------------------------------------


def test_usage_fields_are_optional_and_an_empty_report_is_empty() -> None:
    assert Usage().empty
    assert Usage(model="claude-sonnet-4.5").empty
    assert not Usage(cost=0.0).empty
    full = Usage(input_tokens=10, output_tokens=5, cost=0.25, model="gpt-4o-2024-08-06")
    assert (full.input_tokens, full.output_tokens, full.cost) == (10, 5, 0.25)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"input_tokens": -1}, "input_tokens"),
        ({"output_tokens": 10**13}, "output_tokens"),
        ({"input_tokens": 1.5}, "input_tokens"),
        ({"input_tokens": True}, "input_tokens"),
        ({"input_tokens": SECRET}, "input_tokens"),
        ({"cost": -0.01}, "cost"),
        ({"cost": math.inf}, "cost"),
        ({"cost": math.nan}, "cost"),
        ({"cost": SECRET}, "cost"),
        ({"model": ""}, "model"),
        ({"model": "has space"}, "model"),
        ({"model": SECRET + " x"}, "model"),
        ({"model": "m" * 129}, "model"),
        ({"tokens_in": 3}, "tokens_in"),
    ],
)
def test_bad_usage_names_the_field_and_rule_never_the_value(data: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Usage.model_validate(data)
    error = caught.value.errors()[0]
    assert error["loc"] == (field,)
    if field != "tokens_in":
        assert "must be" in error["msg"]
        assert SECRET not in error["msg"]


@pytest.mark.parametrize(
    ("data", "field"),
    [({"cost": 0}, "cost"), ({"cost": -1}, "cost"), ({"tokens": 0}, "tokens"), ({"tokens": 2.5}, "tokens")],
)
def test_budget_limits_must_be_positive(data: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Budget.model_validate(data)
    assert caught.value.errors()[0]["loc"] == (field,)


def test_days_and_groups_are_checked_without_echo() -> None:
    assert parse_day("2026-02-28") == "2026-02-28"
    for bad in ("2026-02-30", "27.11.2026", SECRET):
        with pytest.raises(UsageInvalid) as caught:
            parse_day(bad, "since")
        assert isinstance(caught.value, Invalid)
        assert caught.value.field == "since" and SECRET not in caught.value.message
    assert check_group("target") == "target"
    with pytest.raises(UsageInvalid) as bad_group:
        check_group(SECRET)
    assert bad_group.value.field == "by" and SECRET not in bad_group.value.message


# -- days ------------------------------------------------------------------------------------


def test_the_day_is_the_utc_day() -> None:
    from datetime import timedelta, timezone

    assert day_of(LATE) == "2026-11-27"
    assert day_of(NEXT) == "2026-11-28"
    tokyo = datetime(2026, 11, 28, 8, 0, tzinfo=timezone(timedelta(hours=9)))
    assert day_of(tokyo) == "2026-11-27"  # 23:00 UTC
    assert next_day_start("2026-12-31") == datetime(2027, 1, 1, tzinfo=UTC)


# -- an item's usage ---------------------------------------------------------------------


def test_reports_add_up_per_day_agent_target_and_model() -> None:
    rows = add_usage([], Usage(input_tokens=10, cost=0.1, model="m1"), agent_id=A, target_id=None, now=NOON)
    rows = add_usage(
        rows, Usage(input_tokens=5, output_tokens=2, model="m1"), agent_id=A, target_id=None, now=LATE
    )
    rows = add_usage(rows, Usage(cost=0.2, model="m2"), agent_id=A, target_id=None, now=LATE)
    rows = add_usage(rows, Usage(output_tokens=1, model="m1"), agent_id=B, target_id=T1, now=NEXT)
    assert [(r.day, r.agent_id, r.model, r.reports) for r in rows] == [
        ("2026-11-27", A, "m1", 2),
        ("2026-11-27", A, "m2", 1),
        ("2026-11-28", B, "m1", 1),
    ]
    assert (rows[0].input_tokens, rows[0].output_tokens, rows[0].cost) == (15, 2, 0.1)
    total = totals_of(rows)
    assert (total.input_tokens, total.output_tokens, total.tokens, total.reports) == (15, 3, 18, 4)
    assert total.cost == pytest.approx(0.3)


def test_adding_never_changes_the_given_rows() -> None:
    first = add_usage([], Usage(cost=1.0), agent_id=A, target_id=None, now=NOON)
    second = add_usage(first, Usage(cost=1.0), agent_id=A, target_id=None, now=NOON)
    assert first[0].cost == 1.0 and second[0].cost == 2.0


def test_rows_are_bounded() -> None:
    from shared.usage.rules import MAX_ENTRIES

    rows: list[UsageEntry] = []
    for i in range(MAX_ENTRIES + 5):
        rows = add_usage(rows, Usage(cost=1.0, model=f"m{i}"), agent_id=A, target_id=None, now=NOON)
    assert len(rows) == MAX_ENTRIES and totals_of(rows).cost == MAX_ENTRIES + 5


def test_an_item_budget_is_exceeded_only_over_it_a_daily_one_is_reached_at_it() -> None:
    budget = Budget(cost=1.0, tokens=100)
    assert exceeded(Totals(cost=1.0, input_tokens=100), budget) is None
    assert exceeded(Totals(cost=1.01), budget) == "cost 1.01 over its budget of 1"
    assert exceeded(Totals(input_tokens=60, output_tokens=41), budget) == "101 tokens over its budget of 100"
    assert exceeded(Totals(cost=99.0), None) is None
    assert reached(Totals(cost=0.99), budget) is None
    assert reached(Totals(cost=1.0), budget) == "cost 1 of a daily budget of 1"
    assert reached(Totals(output_tokens=100), Budget(tokens=100)) == "100 tokens of a daily budget of 100"


def test_holds_last_until_the_next_utc_day() -> None:
    doc = with_project_budget(BudgetsDoc(), Budget(cost=5.0))
    assert project_hold(doc, Totals(cost=4.0), NOON) is None
    hold = project_hold(doc, Totals(cost=5.0), LATE)
    assert hold is not None and hold.until == datetime(2026, 11, 28, tzinfo=UTC)
    assert "daily budget" in hold.message and "2026-11-28 00:00 UTC" in hold.message
    assert "raises it" in hold.message
    assert project_hold(with_project_budget(doc, None), Totals(cost=99.0), NOON) is None
    assert project_hold(with_project_budget(doc, Budget()), Totals(cost=99.0), NOON) is None


def test_target_budgets_apply_to_their_target_only() -> None:
    doc = with_target_budget(BudgetsDoc(), T1, Budget(tokens=10))
    assert target_hold(doc, T1, Totals(input_tokens=10), NOON) is not None
    assert target_hold(doc, B, Totals(input_tokens=10), NOON) is None
    assert target_hold(doc, None, Totals(input_tokens=10), NOON) is None
    assert with_target_budget(doc, T1, None).target_daily == {}


# -- aggregation ---------------------------------------------------------------------------


def _item(usage: list[UsageEntry], project: str = "p1") -> WorkItem:
    return WorkItem(task_id="t", description="d", capability="code", project_id=project, usage=usage)


def test_aggregation_groups_and_filters_days() -> None:
    one = add_usage([], Usage(cost=1.0, input_tokens=10, model="m1"), agent_id=A, target_id=T1, now=NOON)
    two = add_usage([], Usage(cost=3.0, output_tokens=5, model="m2"), agent_id=B, target_id=None, now=NEXT)
    items = [_item(one), _item(two), _item([])]
    assert [(r.key, r.cost) for r in aggregate(items, "agent")] == [(B, 3.0), (A, 1.0)]
    assert [r.key for r in aggregate(items, "target")] == ["-", T1]
    assert [r.key for r in aggregate(items, "day")] == ["2026-11-28", "2026-11-27"]
    assert [r.key for r in aggregate(items, "item")] == [items[1].id, items[0].id]
    (project,) = aggregate(items, "project", project_id="p1")
    assert (project.key, project.cost, project.tokens, project.reports) == ("p1", 4.0, 15, 2)
    assert [r.key for r in aggregate(items, "model", since="2026-11-28")] == ["m2"]
    assert [r.key for r in aggregate(items, "model", until="2026-11-27")] == ["m1"]
    labels = by_agent_target_model(items)
    assert labels[(A, T1, "m1")].cost == 1.0 and labels[(B, "-", "m2")].tokens == 5


# -- the work rules -----------------------------------------------------------------------


def _held(budget: Budget | None = None) -> WorkRecord:
    item = WorkItem(
        task_id="t",
        description="d",
        capability="code",
        project_id="p1",
        status=WorkStatus.IN_PROGRESS,
        assigned_to=A,
        attempts=1,
        budget=budget,
    )
    return WorkRecord(item=item, delivery=Delivery(ack_subject="$JS.ACK.x", stream_seq=1, delivered=1))


def test_charge_adds_usage_to_progress() -> None:
    record = _held(Budget(cost=1.0))
    change = charge(record, A, Usage(cost=0.5), None, NOON, lambda r: report(r, A, 50, "", NOON))
    assert change.record is not None and change.ack is Ack.WORKING and change.then is None
    assert totals_of(change.record.item.usage).cost == 0.5
    assert record.item.usage == []  # the given record is untouched


def test_charge_over_the_budget_stops_the_item_for_good_keeping_usage_and_result() -> None:
    record = _held(Budget(cost=1.0))
    record.item.usage = add_usage([], Usage(cost=0.9), agent_id=A, target_id=None, now=NOON)
    change = charge(record, A, Usage(cost=0.2), T1, NOON, lambda r: finish(r, A, {"done": 1}, NOON))
    assert change.record is not None
    item = change.record.item
    assert item.status is WorkStatus.FAILED and change.then is Then.DEAD_LETTER and change.ack is Ack.STOP
    assert item.error is not None and item.error.startswith(BUDGET_EXCEEDED) and stopped_by_budget(item)
    assert "cost 1.1 over its budget of 1" in item.error
    assert item.result == {"done": 1} and totals_of(item.usage).cost == pytest.approx(1.1)
    assert item.assigned_to is None and change.record.delivery is None
    assert change.events[0].action == "failed" and change.events[0].data["budget"] is True


def test_charge_without_usage_or_budget_is_the_plain_rule() -> None:
    record = _held()
    plain = charge(record, A, None, None, NOON, lambda r: report(r, A, 10, "", NOON))
    assert plain.record is not None and plain.record.item.usage == []
    unlimited = charge(record, A, Usage(cost=10**6), None, NOON, lambda r: report(r, A, 10, "", NOON))
    assert unlimited.record is not None and unlimited.record.item.status is WorkStatus.IN_PROGRESS


def test_charge_refuses_what_the_rule_refuses_and_says_why_a_stopped_item_is() -> None:
    record = _held(Budget(cost=1.0))
    with pytest.raises(NotClaimant):
        charge(record, B, Usage(cost=5.0), None, NOON, lambda r: report(r, B, 10, "", NOON))
    stopped = record.model_copy(deep=True)
    stopped.item.status = WorkStatus.DEAD_LETTERED
    stopped.item.error = budget_error("cost 2 over its budget of 1")
    with pytest.raises(WorkConflict) as caught:
        report(stopped, A, 10, "", NOON)
    assert (
        "was stopped: budget exceeded" in caught.value.message
        and "stop working on it" in caught.value.message
    )


def test_rebudget_changes_an_unfinished_item_only() -> None:
    record = _held(Budget(cost=1.0))
    change = rebudget(record, Budget(cost=3.0), NOON)
    assert change.record is not None and change.record.item.budget == Budget(cost=3.0)
    cleared = rebudget(record, Budget(), NOON)
    assert cleared.record is not None and cleared.record.item.budget is None
    done = record.model_copy(deep=True)
    done.item.status = WorkStatus.COMPLETED
    with pytest.raises(WorkConflict):
        rebudget(done, None, NOON)


def test_usage_records_share_the_one_base_and_never_import_the_work_item() -> None:
    """shared.models builds on these records (a work item holds its usage and budget), so
    they take the one base from shared.base and the rules never import shared.models back."""
    for record in (Usage, Budget, Totals, UsageEntry, BudgetsDoc):
        assert issubclass(record, LoomModel)
    source = Path(usage_rules.__file__).read_text(encoding="utf-8")
    imported = {n.module for n in ast.walk(parse(source)) if isinstance(n, ast.ImportFrom)}
    assert "shared.models" not in imported
