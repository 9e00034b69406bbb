"""Work that depends on other work: plans, their order, the graph around an item, and
what a sweep repairs (pure functions, no I/O; docs/architecture.md, Work: dependencies).

A **plan** is several submissions sent together, each naming the items of the same plan
it comes after (by position here; Weft's route and Shuttle map local names onto
positions) and, like any submission, ids of existing items in ``depends_on``. It is
checked as a whole before anything is created: every reference resolves, there is no
cycle, and every existing dependency may still complete. :class:`shared.work.queue.WorkQueue`
then creates its items in an order where each item's dependencies exist first.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final, Literal

from shared.errors import Conflict, Invalid, shown_name
from shared.models import FINAL_WORK_STATES, WorkItem, WorkStatus, WorkSubmission
from shared.names import validate_token

MAX_PLAN_ITEMS = 1000
MAX_GRAPH_NODES = 2000
DEAD_ENDS = frozenset({WorkStatus.CANCELLED, WorkStatus.EXPIRED, WorkStatus.DEAD_LETTERED})
"""A dependency in one of these will not complete (short of a retry from the DLQ), so
the items blocked on it fail for good."""


def dead_end(dependency: WorkItem | None) -> str | None:
    """Why an item blocked on ``dependency`` can never run (None: it still may)."""
    if dependency is None:
        return "no longer exists"
    if dependency.status not in DEAD_ENDS:
        return None
    why = "expired" if dependency.status is WorkStatus.EXPIRED else f"was {dependency.status.value}"
    if dependency.failed_dependency is not None:
        why += f" (its dependency {dependency.failed_dependency} failed)"
    return why


class PlanError(Invalid):
    """A plan that cannot be submitted as given; the field says where."""


class DependencyRefused(Invalid):
    """A ``depends_on`` id that names no item of this project."""


class DependencyFinished(Conflict):
    """A ``depends_on`` id naming an item that will never complete."""


@dataclass(frozen=True)
class PlanStep:
    """One submission of a plan; ``after``: positions of the plan's items it waits for."""

    submission: WorkSubmission
    after: tuple[int, ...] = ()


@dataclass(frozen=True)
class NamedStep:
    """A plan entry as people write it: an optional local ``name`` and the names it comes ``after``."""

    submission: WorkSubmission
    name: str | None = None
    after: tuple[str, ...] = ()


def _where(prefix: str, index: int | None) -> str:
    return f"{prefix}.{index}" if index is not None else prefix


def resolve_names(entries: Sequence[NamedStep], prefix: str = "items") -> list[PlanStep]:
    """Local names to positions. Every name is a token used once; every ``after`` names
    another entry of the plan. Errors name the field by position (``items.3.after.0``),
    and the value only when it is name-shaped."""
    if not 1 <= len(entries) <= MAX_PLAN_ITEMS:
        raise PlanError(f"must hold 1 to {MAX_PLAN_ITEMS} items", field=prefix)
    positions: dict[str, int] = {}
    for index, entry in enumerate(entries):
        if entry.name is None:
            continue
        where = f"{prefix}.{index}.name"
        validate_token(entry.name, where)
        if entry.name in positions:
            raise PlanError(
                f"{shown_name(entry.name)!r} is already the name of {prefix}.{positions[entry.name]}; "
                "names must be unique in a plan",
                field=where,
            )
        positions[entry.name] = index
    steps: list[PlanStep] = []
    for index, entry in enumerate(entries):
        after: list[int] = []
        for n, name in enumerate(entry.after):
            where = f"{prefix}.{index}.after.{n}"
            found = positions.get(name)
            if found is None:
                raise PlanError("names no item of this plan (give that item a matching name)", field=where)
            if found == index:
                raise PlanError("an item cannot come after itself", field=where)
            if found in after:
                raise PlanError("names the same item twice", field=where)
            after.append(found)
        steps.append(PlanStep(entry.submission, tuple(after)))
    return steps


def plan_order(steps: Sequence[PlanStep], prefix: str = "items") -> list[int]:
    """Positions in an order where every step comes after the steps it waits for.

    A cycle is refused naming one of its steps and the path around it."""
    for index, step in enumerate(steps):
        for n, before in enumerate(step.after):
            if not 0 <= before < len(steps) or before == index:
                raise PlanError("names no other item of this plan", field=f"{prefix}.{index}.after.{n}")
    waiting = [len(set(step.after)) for step in steps]
    unlocks: list[list[int]] = [[] for _ in steps]
    for index, step in enumerate(steps):
        for before in set(step.after):
            unlocks[before].append(index)
    ready = deque(i for i, count in enumerate(waiting) if count == 0)
    order: list[int] = []
    while ready:
        index = ready.popleft()
        order.append(index)
        for after in unlocks[index]:
            waiting[after] -= 1
            if waiting[after] == 0:
                ready.append(after)
    if len(order) == len(steps):
        return order
    cycle = _a_cycle(steps, {i for i, count in enumerate(waiting) if count > 0})
    path = " -> ".join(f"{prefix}.{i}" for i in [*cycle, cycle[0]])
    raise PlanError(f"the plan has a cycle ({path})", field=f"{prefix}.{cycle[0]}.after")


def _a_cycle(steps: Sequence[PlanStep], stuck: set[int]) -> list[int]:
    """One cycle among ``stuck`` (steps that never became ready): walk back along ``after``
    until a step repeats. Every stuck step waits for at least one other stuck step."""
    path: list[int] = []
    seen: dict[int, int] = {}
    current = min(stuck)
    while current not in seen:
        seen[current] = len(path)
        path.append(current)
        current = next(b for b in steps[current].after if b in stuck)
    return path[seen[current] :]


def check_dependencies(
    steps: Sequence[PlanStep], found: Mapping[str, WorkItem | None], prefix: str | None = "items"
) -> None:
    """Every ``depends_on`` id names an existing item of this project (``found``: what was
    read for each, None when there is none) that may still complete. ``prefix`` None: a
    single submission, whose fields have no ``items.N.`` in front."""
    for index, step in enumerate(steps):
        base = f"{prefix}.{index}.depends_on" if prefix is not None else "depends_on"
        for n, dependency_id in enumerate(step.submission.depends_on):
            item = found.get(dependency_id)
            where = f"{base}.{n}"
            if item is None:
                raise DependencyRefused("no work item with this id in this project", field=where)
            if item.status in DEAD_ENDS:
                raise DependencyFinished(
                    f"that item {dead_end(item)} and will not complete; retry it first or leave it out",
                    field=where,
                )


# -- the graph around one item ---------------------------------------------------------

Relation = Literal["root", "ancestor", "descendant"]


@dataclass(frozen=True)
class GraphNode:
    id: str
    relation: Relation
    depth: int
    """Steps from the root: along ``depends_on`` for ancestors, ``dependents`` for descendants."""
    item: WorkItem | None
    """None: the record is gone (deleted by retention)."""


@dataclass
class WorkGraph:
    root: str
    nodes: list[GraphNode] = field(default_factory=list)
    edges: list[tuple[str, str]] = field(default_factory=list)
    """(dependency, dependent) pairs among the nodes."""
    truncated: bool = False


def work_graph(
    root: WorkItem, lookup: Callable[[str], WorkItem | None], *, limit: int = MAX_GRAPH_NODES
) -> WorkGraph:
    """The root, everything it depends on (ancestors, transitively) and everything that
    depends on it (descendants), breadth first, at most ``limit`` nodes."""
    graph = WorkGraph(root=root.id, nodes=[GraphNode(root.id, "root", 0, root)])
    seen = {root.id}
    edges: set[tuple[str, str]] = set()
    directions: tuple[tuple[Relation, Callable[[WorkItem], list[str]]], ...] = (
        ("ancestor", lambda i: i.depends_on),
        ("descendant", lambda i: i.dependents),
    )
    for relation, onward in directions:
        frontier: deque[tuple[WorkItem, int]] = deque([(root, 0)])
        while frontier:
            item, depth = frontier.popleft()
            for other_id in onward(item):
                edges.add((other_id, item.id) if relation == "ancestor" else (item.id, other_id))
                if other_id in seen:
                    continue
                if len(graph.nodes) >= limit:
                    graph.truncated = True
                    continue
                seen.add(other_id)
                other = lookup(other_id)
                graph.nodes.append(GraphNode(other_id, relation, depth + 1, other))
                if other is not None:
                    frontier.append((other, depth + 1))
    graph.edges = sorted(e for e in edges if e[0] in seen and e[1] in seen)
    return graph


# -- bottlenecks ----------------------------------------------------------------------------

BOTTLENECK_DEPENDENTS: Final = 3
"""An open item that holds up at least this many open items is a bottleneck (docs/operator.md)."""


HELD_UP_COUNTED: Final = 100
"""Counting stops here (a sweep's cost stays bounded on long chains): "100 or more"."""


def held_up(items: Mapping[str, WorkItem]) -> dict[str, int]:
    """For each open item, how many open items wait on it, directly or through others
    (everything downstream along ``dependents`` that has not finished), up to
    :data:`HELD_UP_COUNTED`."""
    open_ids = {i for i, item in items.items() if item.status not in FINAL_WORK_STATES}
    counts: dict[str, int] = {}
    for work_id in open_ids:
        if not items[work_id].dependents:
            continue
        seen: set[str] = set()
        frontier = deque(items[work_id].dependents)
        while frontier and len(seen) < HELD_UP_COUNTED:
            other = frontier.popleft()
            if other in seen or other not in open_ids:
                continue
            seen.add(other)
            frontier.extend(items[other].dependents)
        if seen:
            counts[work_id] = len(seen)
    return counts


def bottlenecks(held: Mapping[str, int], threshold: int = BOTTLENECK_DEPENDENTS) -> dict[str, int]:
    """The open items holding up at least ``threshold`` open items (``held``: :func:`held_up`)."""
    return {work_id: n for work_id, n in held.items() if n >= threshold}


# -- what a sweep repairs ------------------------------------------------------------


@dataclass
class Repairs:
    settle: list[str] = field(default_factory=list)
    """Blocked items whose dependencies moved on without them being told."""
    revive: list[tuple[str, str]] = field(default_factory=list)
    """(item, dependency): dead-lettered because of a dependency that was retried since."""


def repairs(items: Mapping[str, WorkItem], now: datetime, *, grace: timedelta) -> Repairs:
    """What the normal path should have done and did not (a process stopped between two
    steps), judged from a copy of the records. Only changes older than ``grace`` count,
    so a sweep does not race the process still doing them."""
    found = Repairs()
    settled = now - grace

    def quiet(item: WorkItem | None) -> bool:
        return item is None or item.updated_at <= settled

    for item in items.values():
        if item.status is WorkStatus.BLOCKED and quiet(item):
            for dependency_id in item.blocked_on:
                dependency = items.get(dependency_id)
                if quiet(dependency) and (
                    dependency is None or dependency.status is WorkStatus.COMPLETED or dead_end(dependency)
                ):
                    found.settle.append(item.id)
                    break
        elif item.status is WorkStatus.DEAD_LETTERED and item.failed_dependency is not None and quiet(item):
            dependency = items.get(item.failed_dependency)
            if dependency is not None and quiet(dependency) and dependency.status not in DEAD_ENDS:
                found.revive.append((item.id, dependency.id))
    return found
