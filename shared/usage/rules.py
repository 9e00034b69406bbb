"""Usage and budgets: the rules (pure, no NATS), see docs/operations.md.

Agents report what their work used (tokens in and out, a cost in the project's currency
unit, the model) with progress and completion. Each report is *added*: it is the usage
since the agent's previous report. The rules here decide how a report is validated, how
it is merged into a work item's record, how totals are aggregated (per item, agent,
target, model, project and UTC day), and what a budget allows:

* a **work item's budget** (set at submit) is *exceeded* when its usage goes over it;
  the item is then stopped and fails for good (``shared.work``);
* a **project's** or **target's daily budget** is *reached* when the day's usage is at
  or over it; then the project (or the target's agents) admit no new claims and no
  spin-ups until the next UTC day or until an operator raises it.

Storage is in :mod:`shared.usage.ledger` (the day counters and the budgets document);
the work item's own usage lives in its record.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Annotated, Final, Literal, Protocol

from pydantic import Field, field_validator

from shared.base import LoomModel
from shared.errors import Conflict, Invalid

MAX_TOKENS: Final = 10**12
"""Tokens one report (and one budget) may name: far beyond any real use, small enough to add."""
MAX_COST: Final = 10**9
MODEL_PATTERN: Final = r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}"
MODEL_RULE: Final = "1-128 letters, digits and . _ : / @ + -, starting with a letter or digit"
TOKENS_RULE: Final = f"a whole number from 0 to {MAX_TOKENS}"
COST_RULE: Final = f"a finite number from 0 to {MAX_COST}"
LIMIT_COST_RULE: Final = f"a finite number above 0 and at most {MAX_COST}"
LIMIT_TOKENS_RULE: Final = f"a whole number from 1 to {MAX_TOKENS}"
DAY_RULE: Final = "a UTC day as YYYY-MM-DD"
BUDGET_EXCEEDED: Final = "budget exceeded"
"""How the error of an item stopped by its budget starts (and how it is recognised)."""
MAX_ENTRIES: Final = 200
"""Usage rows one item keeps (one per agent, target, model and day); further rows fold into
the last one so a record cannot grow without bound."""

_MODEL = re.compile(MODEL_PATTERN)
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


class UsageInvalid(Invalid):
    """A usage report, budget or usage query that breaks a rule (never repeats the value)."""


def _tokens(value: object, *, limit: bool = False) -> int | None:
    """None, or a token count: from 0 in a report, from 1 in a budget (``limit``)."""
    if value is None:
        return None
    rule, low = (LIMIT_TOKENS_RULE, 1) if limit else (TOKENS_RULE, 0)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= MAX_TOKENS:
        raise ValueError(f"must be {rule}")
    return value


def _cost(value: object, *, limit: bool = False) -> float | None:
    """None, or a cost: from 0 in a report, above 0 in a budget (``limit``)."""
    if value is None:
        return None
    rule = LIMIT_COST_RULE if limit else COST_RULE
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"must be {rule}")
    number = float(value)
    low_ok = number > 0 if limit else number >= 0
    if not math.isfinite(number) or not low_ok or number > MAX_COST:
        raise ValueError(f"must be {rule}")
    return number


class Usage(LoomModel):
    """One report: what the work used since the agent's previous report. Every field is
    optional; an empty report changes nothing."""

    input_tokens: Annotated[int | None, Field(description="Tokens read (prompt), " + TOKENS_RULE)] = None
    output_tokens: Annotated[int | None, Field(description="Tokens written, " + TOKENS_RULE)] = None
    cost: Annotated[float | None, Field(description="Cost in the project's currency unit, " + COST_RULE)] = (
        None
    )
    model: Annotated[str | None, Field(description="The model that did the work, " + MODEL_RULE)] = None

    @field_validator("input_tokens", "output_tokens", mode="before")
    @classmethod
    def _tok(cls, v: object) -> int | None:
        return _tokens(v)

    @field_validator("cost", mode="before")
    @classmethod
    def _c(cls, v: object) -> float | None:
        return _cost(v)

    @field_validator("model", mode="before")
    @classmethod
    def _m(cls, v: object) -> str | None:
        if v is None:
            return None
        if not isinstance(v, str) or _MODEL.fullmatch(v) is None:
            raise ValueError(f"must be {MODEL_RULE}")
        return v

    @property
    def empty(self) -> bool:
        return self.input_tokens is None and self.output_tokens is None and self.cost is None


class Budget(LoomModel):
    """A limit on cost, on tokens (input plus output), or both; a missing one is no limit."""

    cost: Annotated[float | None, Field(description="Cost limit, " + LIMIT_COST_RULE)] = None
    tokens: Annotated[
        int | None, Field(description="Token limit (input plus output), " + LIMIT_TOKENS_RULE)
    ] = None

    @field_validator("cost", mode="before")
    @classmethod
    def _c(cls, v: object) -> float | None:
        return _cost(v, limit=True)

    @field_validator("tokens", mode="before")
    @classmethod
    def _t(cls, v: object) -> int | None:
        return _tokens(v, limit=True)

    @property
    def unlimited(self) -> bool:
        return self.cost is None and self.tokens is None


class Totals(LoomModel):
    """Usage added up."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    reports: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def plus(self, usage: Usage | Totals) -> Totals:
        if isinstance(usage, Totals):
            return Totals(
                input_tokens=self.input_tokens + usage.input_tokens,
                output_tokens=self.output_tokens + usage.output_tokens,
                cost=self.cost + usage.cost,
                reports=self.reports + usage.reports,
            )
        return Totals(
            input_tokens=self.input_tokens + (usage.input_tokens or 0),
            output_tokens=self.output_tokens + (usage.output_tokens or 0),
            cost=self.cost + (usage.cost or 0.0),
            reports=self.reports + 1,
        )


class UsageEntry(Totals):
    """One row of a work item's usage: who used it, through which target and model, on
    which UTC day."""

    day: str
    agent_id: str
    target_id: str | None = None
    model: str | None = None

    def key(self) -> tuple[str, str, str | None, str | None]:
        return (self.day, self.agent_id, self.target_id, self.model)


MAX_PAUSE_REASON: Final = 500


class Pause(LoomModel):
    """An operator paused the project: no new claims or spin-ups until it is resumed; the
    items already held go on."""

    by: str = Field(description="Who paused it (the operator's name, or weft-api)")
    reason: str = Field(default="", max_length=MAX_PAUSE_REASON)
    at: datetime
    stop_running: bool = Field(
        default=False,
        description="The items held stop too, at their next checkpoint: each agent's next progress "
        "report hands its item back to the queue (not a failed attempt)",
    )


class BudgetsDoc(LoomModel):
    """A project's run-time limits, one document (compare-and-set as a whole): its daily
    budgets and whether an operator paused it."""

    project_daily: Budget | None = None
    target_daily: dict[str, Budget] = Field(default_factory=dict)
    """Target id -> its daily budget."""
    paused: Pause | None = None


# -- days ----------------------------------------------------------------------------


def day_of(moment: datetime) -> str:
    """The UTC day of ``moment``, ``YYYY-MM-DD`` (the key usage is counted under)."""
    return moment.astimezone(UTC).date().isoformat()


def parse_day(value: str, field: str = "day") -> str:
    if not _DAY.fullmatch(value):
        raise UsageInvalid(f"must be {DAY_RULE}", field=field, rule=DAY_RULE)
    try:
        return date.fromisoformat(value).isoformat()
    except ValueError:
        raise UsageInvalid(f"must be {DAY_RULE}", field=field, rule=DAY_RULE) from None


def next_day_start(day: str) -> datetime:
    """When the UTC day after ``day`` begins: when a daily budget applies afresh."""
    return datetime.combine(date.fromisoformat(day) + timedelta(days=1), time(0), tzinfo=UTC)


# -- a work item's usage -----------------------------------------------------------------


class UsageHolder(Protocol):
    """What these rules read of a work item (:class:`shared.models.WorkItem`, whose records
    include this module's, so the rules name the fields they read instead of importing it)."""

    @property
    def id(self) -> str: ...

    @property
    def project_id(self) -> str: ...

    @property
    def error(self) -> str | None: ...

    @property
    def usage(self) -> Sequence[UsageEntry]: ...


def add_usage(
    entries: Iterable[UsageEntry],
    usage: Usage,
    *,
    agent_id: str,
    target_id: str | None,
    now: datetime,
) -> list[UsageEntry]:
    """``entries`` with ``usage`` added to the row of (day, agent, target, model); a new
    list, the given rows untouched."""
    rows = list(entries)
    key = (day_of(now), agent_id, target_id, usage.model)
    for i, row in enumerate(rows):
        if row.key() == key:
            rows[i] = _merged(row, usage)
            return rows
    if len(rows) >= MAX_ENTRIES:
        rows[-1] = _merged(rows[-1], usage)
        return rows
    fresh = UsageEntry(day=key[0], agent_id=agent_id, target_id=target_id, model=usage.model)
    rows.append(_merged(fresh, usage))
    return rows


def _merged(row: UsageEntry, usage: Usage) -> UsageEntry:
    added = row.plus(usage)
    return row.model_copy(update=added.model_dump())


def totals_of(entries: Iterable[Totals]) -> Totals:
    total = Totals()
    for entry in entries:
        total = total.plus(entry)
    return total


def _fmt_cost(value: float) -> str:
    return f"{value:.4f}".rstrip("0").rstrip(".") or "0"


def exceeded(total: Totals, budget: Budget | None) -> str | None:
    """Why ``total`` is over ``budget`` (a work item's: over, not at), or None."""
    if budget is None:
        return None
    if budget.cost is not None and total.cost > budget.cost:
        return f"cost {_fmt_cost(total.cost)} over its budget of {_fmt_cost(budget.cost)}"
    if budget.tokens is not None and total.tokens > budget.tokens:
        return f"{total.tokens} tokens over its budget of {budget.tokens}"
    return None


def reached(total: Totals, budget: Budget | None) -> str | None:
    """Why ``total`` has used up ``budget`` (a daily one: at or over it), or None."""
    if budget is None:
        return None
    if budget.cost is not None and total.cost >= budget.cost:
        return f"cost {_fmt_cost(total.cost)} of a daily budget of {_fmt_cost(budget.cost)}"
    if budget.tokens is not None and total.tokens >= budget.tokens:
        return f"{total.tokens} tokens of a daily budget of {budget.tokens}"
    return None


def budget_error(why: str) -> str:
    """The error an item stopped by its budget fails with."""
    return f"{BUDGET_EXCEEDED}: {why}"


def stopped_by_budget(item: UsageHolder) -> bool:
    return item.error is not None and item.error.startswith(BUDGET_EXCEEDED)


# -- daily budgets: claims and spin-ups --------------------------------------------------


@dataclass(frozen=True)
class Hold:
    """Why new claims and spin-ups wait: a daily budget is reached (``budget``), or an
    operator paused the project (``pause``: ``by``, no ``until``)."""

    scope: Literal["project", "target"]
    reason: str
    until: datetime | None
    kind: Literal["budget", "pause"] = "budget"
    by: str | None = None

    @property
    def message(self) -> str:
        if self.kind == "pause":
            why = f": {self.reason}" if self.reason else ""
            return (
                f"project: paused by {self.by or 'an operator'}{why}; no new claims or spin-ups "
                "until an operator resumes it"
            )
        whose = "the project" if self.scope == "project" else "this target"
        assert self.until is not None  # a daily budget's hold ends with its UTC day
        return (
            f"budget: {whose} reached its daily budget ({self.reason}); no new claims or spin-ups "
            f"until {self.until:%Y-%m-%d %H:%M} UTC or until an operator raises it"
        )


def pause_hold(budgets: BudgetsDoc) -> Hold | None:
    """The project's pause as a hold, or None when it is not paused."""
    pause = budgets.paused
    return None if pause is None else Hold("project", pause.reason, None, kind="pause", by=pause.by)


def paused(doc: BudgetsDoc, pause: Pause) -> BudgetsDoc:
    """The project paused (its budgets kept); refused when it is paused already, so one
    operator's pause and reason are never overwritten by another's."""
    if doc.paused is not None:
        raise Conflict(
            f"paused: the project is paused already (by {doc.paused.by} at "
            f"{doc.paused.at:%Y-%m-%d %H:%M} UTC); resume it first",
            field="paused",
        )
    return doc.model_copy(update={"paused": pause})


def resumed(doc: BudgetsDoc) -> BudgetsDoc:
    """The project resumed: claims and spin-ups are admitted again (its budgets allowing)."""
    if doc.paused is None:
        raise Conflict("paused: the project is not paused", field="paused")
    return doc.model_copy(update={"paused": None})


def project_hold(budgets: BudgetsDoc, today: Totals, now: datetime) -> Hold | None:
    """The project's hold, or None: its daily budget against the UTC day's usage."""
    why = reached(today, budgets.project_daily)
    return None if why is None else Hold("project", why, next_day_start(day_of(now)))


def target_hold(budgets: BudgetsDoc, target_id: str | None, today: Totals, now: datetime) -> Hold | None:
    """A target's hold, or None: its daily budget against its agents' usage of the day."""
    if target_id is None:
        return None
    why = reached(today, budgets.target_daily.get(target_id))
    return None if why is None else Hold("target", why, next_day_start(day_of(now)))


# -- aggregation ---------------------------------------------------------------------------

GROUPS: Final = ("project", "item", "agent", "target", "model", "day")
GROUP_RULE: Final = "one of " + ", ".join(GROUPS)
Group = Literal["project", "item", "agent", "target", "model", "day"]


class UsageRow(Totals):
    """One row of an aggregation: the group's key and its totals."""

    key: str


def check_group(value: str) -> Group:
    if value not in GROUPS:
        raise UsageInvalid(f"must be {GROUP_RULE}", field="by", rule=GROUP_RULE)
    return value  # type: ignore[return-value]


def aggregate(
    items: Iterable[UsageHolder],
    by: Group,
    *,
    since: str | None = None,
    until: str | None = None,
    project_id: str = "",
) -> list[UsageRow]:
    """Usage of ``items`` added up per ``by`` (largest cost first), counting only the
    days from ``since`` to ``until`` (inclusive, ``YYYY-MM-DD``) when given."""
    sums: dict[str, Totals] = {}
    for item in items:
        for entry in item.usage:
            if (since is not None and entry.day < since) or (until is not None and entry.day > until):
                continue
            key = _group_key(by, item, entry, project_id)
            sums[key] = sums.get(key, Totals()).plus(entry)
    rows = [UsageRow(key=k, **v.model_dump()) for k, v in sums.items()]
    rows.sort(key=lambda r: (-r.cost, -r.tokens, r.key))
    return rows


def _group_key(by: Group, item: UsageHolder, entry: UsageEntry, project_id: str) -> str:
    if by == "item":
        return item.id
    if by == "agent":
        return entry.agent_id
    if by == "target":
        return entry.target_id or "-"
    if by == "model":
        return entry.model or "-"
    if by == "day":
        return entry.day
    return project_id or item.project_id


def with_target_budget(doc: BudgetsDoc, target_id: str, budget: Budget | None) -> BudgetsDoc:
    """``doc`` with ``target_id``'s daily budget set (or removed when None or unlimited)."""
    targets: Mapping[str, Budget] = doc.target_daily
    changed = {k: v for k, v in targets.items() if k != target_id}
    if budget is not None and not budget.unlimited:
        changed[target_id] = budget
    return doc.model_copy(update={"target_daily": changed})


def with_project_budget(doc: BudgetsDoc, budget: Budget | None) -> BudgetsDoc:
    kept = None if budget is None or budget.unlimited else budget
    return doc.model_copy(update={"project_daily": kept})


def by_agent_target_model(items: Iterable[UsageHolder]) -> dict[tuple[str, str, str], Totals]:
    """Usage per (agent, target, model) over every day: the label sets of Weft's metrics
    (``-`` for no target or no model)."""
    sums: dict[tuple[str, str, str], Totals] = {}
    for item in items:
        for entry in item.usage:
            key = (entry.agent_id, entry.target_id or "-", entry.model or "-")
            sums[key] = sums.get(key, Totals()).plus(entry)
    return sums
