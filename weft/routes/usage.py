"""``/api/usage`` (usage added up) and ``/api/budgets`` (run-time limits); see
docs/operations.md. Thin adapters over :mod:`shared.usage` and :mod:`shared.usage.ledger`."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from shared.models import WorkItem, utcnow
from shared.usage.rules import (
    GROUP_RULE,
    Budget,
    BudgetsDoc,
    Totals,
    UsageInvalid,
    aggregate,
    check_group,
    day_of,
    parse_day,
    totals_of,
    with_project_budget,
    with_target_budget,
)
from shared.views import UsageOut
from weft.deps import ADMIN, OPERATE, ProjectDep, require_token
from weft.errors import ERROR_RESPONSES
from weft.project.hub import ProjectContext
from weft.routes.common import WorkId
from weft.strictquery import STRICT_QUERY

router = APIRouter(
    tags=["usage"], dependencies=[STRICT_QUERY, Depends(require_token)], responses=ERROR_RESPONSES
)


class BudgetsOut(BaseModel):
    project_id: str
    project_daily: Budget | None
    target_daily: dict[str, Budget]
    revision: int
    """The stored document's revision (0: none stored yet); every change is compare-and-set."""
    day: str
    today: Totals
    hold: str | None = Field(
        description="Why new claims and spin-ups wait (a daily budget reached), if they do"
    )


async def budgets_out(project: ProjectContext) -> BudgetsOut:
    ledger = project.ledger
    doc, revision = await ledger.read_budgets()
    now = utcnow()
    ledger.forget_cache()
    hold = await ledger.hold(now)
    return BudgetsOut(
        project_id=project.project_id,
        project_daily=doc.project_daily,
        target_daily=doc.target_daily,
        revision=revision,
        day=day_of(now),
        today=await ledger.day_totals(day_of(now)),
        hold=None if hold is None else hold.message,
    )


@router.get(
    "/api/usage",
    response_model=UsageOut,
    summary="Usage added up per project, item, agent, target, model or day",
)
async def usage(
    project: ProjectDep,
    by: Annotated[str, Query(description=GROUP_RULE)] = "project",
    since: Annotated[str | None, Query(description="First UTC day counted, YYYY-MM-DD")] = None,
    until: Annotated[str | None, Query(description="Last UTC day counted, YYYY-MM-DD")] = None,
) -> UsageOut:
    group = check_group(by)
    first = None if since is None else parse_day(since, "since")
    last = None if until is None else parse_day(until, "until")
    await project.work.mirror.sync()
    rows = aggregate(
        project.work.mirror.values(), group, since=first, until=last, project_id=project.project_id
    )
    day = day_of(utcnow())
    return UsageOut(
        project_id=project.project_id,
        by=group,
        since=first,
        until=last,
        rows=rows,
        total=totals_of(rows),
        today=await project.ledger.day_totals(day),
        day=day,
    )


@router.get("/api/budgets", response_model=BudgetsOut, summary="The project's and targets' daily budgets")
async def get_budgets(project: ProjectDep) -> BudgetsOut:
    return await budgets_out(project)


@router.put(
    "/api/budgets/project",
    response_model=BudgetsOut,
    dependencies=ADMIN,
    summary="Set the project's daily budget (both limits null: none)",
)
async def set_project_budget(budget: Budget, project: ProjectDep) -> BudgetsOut:
    await project.ledger.change_budgets(lambda doc: with_project_budget(doc, budget))
    return await budgets_out(project)


@router.put(
    "/api/budgets/targets/{target}",
    response_model=BudgetsOut,
    dependencies=ADMIN,
    summary="Set a target's daily budget, by id or name (both limits null: none)",
)
async def set_target_budget(target: str, project: ProjectDep, budget: Budget | None = None) -> BudgetsOut:
    found = await project.targets.resolve(target)  # an unknown target is named before the body
    if budget is None:
        raise UsageInvalid("must be a JSON object with cost and/or tokens", field="body", rule="a budget")

    def change(doc: BudgetsDoc) -> BudgetsDoc:
        return with_target_budget(doc, found.id, budget)

    await project.ledger.change_budgets(change)
    return await budgets_out(project)


@router.put(
    "/api/work/{work_id}/budget",
    response_model=WorkItem,
    dependencies=OPERATE,
    summary="Set an unfinished work item's budget (both limits null: none)",
)
async def set_work_budget(work_id: WorkId, budget: Budget, project: ProjectDep) -> WorkItem:
    return await project.queue.set_budget(work_id, budget)
