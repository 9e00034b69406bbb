"""``/api/work``: submit, list, show, cancel, retry (docs/architecture.md, Work; docs/weft.md, Routes)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, status
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from shared.models import FINAL_WORK_STATES, Token, WorkItem, WorkStatus, WorkSubmission, utcnow
from shared.names import TOKEN_RULE, is_token, validate_agent_id, validate_boundary, validate_capability
from shared.trace.timeline import Phase, SpanRecord, phase_kind, phases
from shared.trace.tracing import read_timeline, trace_id_of
from shared.work.graph import MAX_PLAN_ITEMS, NamedStep, resolve_names
from shared.work.rules import WorkError, WorkFilter
from weft.deps import OPERATE, Cursor, Limit, ProjectDep, StateDep, require_token
from weft.errors import ERROR_RESPONSES, error_body
from weft.routes.common import HEX32, WorkId
from weft.schemas import BatchOut, BatchResult, PageOut, RefQuery, ResolvedOut
from weft.strictquery import STRICT_QUERY

router = APIRouter(
    prefix="/api/work",
    tags=["work"],
    dependencies=[STRICT_QUERY, Depends(require_token)],
    responses=ERROR_RESPONSES,
)

SUBMITTED_BY = "weft-api"


class CancelRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str = Field(default="", max_length=2000, description="Shown to the claiming agent and in events")


class CancelBatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    work_ids: list[Annotated[str, Field(pattern=HEX32)]] = Field(min_length=1, max_length=1000)
    reason: str = Field(default="", max_length=2000)


def _local_name(value: str) -> str:
    if not is_token(value):
        raise ValueError(f"must be {TOKEN_RULE}")
    return value


LocalName = Annotated[Token, AfterValidator(_local_name)]


class PlanEntry(WorkSubmission):
    """One item of a plan: a submission plus a local ``name`` and the names it comes ``after``."""

    name: LocalName | None = Field(default=None, description="A name the plan's other items use in after")
    after: list[LocalName] = Field(
        default_factory=list,
        max_length=100,
        description="Names of items of this plan that must complete first",
    )


class PlanRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    items: list[PlanEntry] = Field(min_length=1, max_length=MAX_PLAN_ITEMS)
    veto: bool | None = Field(
        default=None,
        description="The coordinator's veto for every item of the plan that sets none of its own "
        "(docs/landing.md); null: as the project's repository says",
    )


class PlanOut(BaseModel):
    items: list[WorkItem] = Field(description="The submitted items, in the plan's order")
    names: dict[str, str] = Field(description="Each local name and the id its item got")


class GraphNodeOut(BaseModel):
    id: str
    relation: Literal["root", "ancestor", "descendant"]
    depth: int = Field(description="Steps from the root (up through depends_on, down through dependents)")
    item: WorkItem | None = Field(description="Null when the record is gone (deleted after its retention)")


class GraphEdgeOut(BaseModel):
    dependency: str
    dependent: str


class WorkGraphOut(BaseModel):
    root: str
    nodes: list[GraphNodeOut]
    edges: list[GraphEdgeOut]
    truncated: bool = Field(description="True when the graph had more nodes than one answer holds (2000)")


class TimelineEventOut(BaseModel):
    at: datetime
    kind: str = Field(description="The transition: submission, attempt, progress, result, failure, ...")
    author: str


class WorkTraceOut(BaseModel):
    work_id: str
    trace_id: str | None = Field(description="The item's trace (null when it was submitted untraced)")
    spans: list[SpanRecord] = Field(description="What each process recorded for the item, oldest first")
    events: list[TimelineEventOut] = Field(description="The item's transitions, from its context tree")
    phases: list[Phase] = Field(
        description="What the item was doing between its transitions (queued, working, waiting on the "
        "operator, in review), oldest first; an open item's last phase runs to now"
    )
    truncated: bool = Field(description="True when the item has more spans than one answer holds")


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=WorkItem,
    dependencies=OPERATE,
    summary="Submit work",
)
async def submit_work(body: WorkSubmission, project: ProjectDep, state: StateDep) -> WorkItem:
    """Queue an item in the same queue Warp agents claim from; routing runs right after."""
    item = await project.queue.submit(body, submitted_by=SUBMITTED_BY)
    state.spawn(state.router.route(project, item), name=f"route:{item.id}")
    return item


@router.post(
    "/plan",
    status_code=status.HTTP_201_CREATED,
    response_model=PlanOut,
    dependencies=OPERATE,
    summary="Submit a plan",
)
async def submit_plan(body: PlanRequest, project: ProjectDep, state: StateDep) -> PlanOut:
    """Several items that wait for each other (``after``, by local ``name``) and for existing
    items (``depends_on``). The whole plan is checked first (names, cycles, dependencies):
    a refused plan creates nothing."""
    plan_wide = {} if body.veto is None else {"veto": body.veto}
    entries = [
        NamedStep(
            WorkSubmission.model_validate(
                {**plan_wide, **entry.model_dump(exclude={"name", "after"}, exclude_none=True)}
            ),
            name=entry.name,
            after=tuple(entry.after),
        )
        for entry in body.items
    ]
    items = await project.queue.submit_plan(resolve_names(entries), submitted_by=SUBMITTED_BY)
    for item in items:
        state.spawn(state.router.route(project, item), name=f"route:{item.id}")
    names = {entry.name: item.id for entry, item in zip(body.items, items, strict=True) if entry.name}
    return PlanOut(items=items, names=names)


@router.get("", response_model=PageOut[WorkItem], summary="List work, newest first")
async def list_work(
    project: ProjectDep,
    limit: Limit = 50,
    cursor: Cursor = None,
    status_: Annotated[WorkStatus | None, Query(alias="status")] = None,
    boundary: str | None = None,
    capability: str | None = None,
    assigned_to: str | None = None,
) -> PageOut[WorkItem]:
    filters = WorkFilter(
        status=status_,
        boundary=None if boundary is None else validate_boundary(boundary),
        capability=None if capability is None else validate_capability(capability),
        assigned_to=None if assigned_to is None else validate_agent_id(assigned_to, "assigned_to"),
    )
    page = await project.work.list_page(filters, limit=limit, cursor=cursor)
    return PageOut[WorkItem](items=page.items, next_cursor=page.next_cursor, total=page.total)


class BottleneckOut(BaseModel):
    item: WorkItem
    held_up: int = Field(
        description="Open items waiting on it, directly or through others (counted up to 100)"
    )


class BottlenecksOut(BaseModel):
    threshold: int = Field(description="The project's autonomy policy's bottleneck_dependents")
    items: list[BottleneckOut] = Field(description="The most held up first")


@router.get(
    "/bottlenecks", response_model=BottlenecksOut, summary="Open items holding up many others (bottlenecks)"
)
async def list_bottlenecks(project: ProjectDep) -> BottlenecksOut:
    """Open items that at least ``threshold`` open items wait on (docs/operator.md, Bottlenecks)."""
    threshold = (await project.questions.autonomy.current()).bottleneck_dependents
    await project.work.mirror.sync()
    found = project.work.bottlenecks(threshold)
    items = project.work.by_id()
    ranked = sorted(found.items(), key=lambda pair: (-pair[1], items[pair[0]].created_at))
    return BottlenecksOut(
        threshold=threshold, items=[BottleneckOut(item=items[work_id], held_up=n) for work_id, n in ranked]
    )


@router.post("/cancel-batch", response_model=BatchOut, dependencies=OPERATE, summary="Cancel several items")
async def cancel_batch(body: CancelBatchRequest, project: ProjectDep) -> BatchOut:
    results: list[BatchResult] = []
    for work_id in dict.fromkeys(body.work_ids):
        try:
            item = await project.queue.cancel(work_id, reason=body.reason, by=SUBMITTED_BY)
        except WorkError as exc:
            results.append(BatchResult(id=work_id, ok=False, error=error_body(exc)))
        else:
            results.append(BatchResult(id=work_id, ok=True, status=item.status.value))
    return BatchOut.of(results)


@router.get("/resolve", response_model=ResolvedOut, summary="The item an id, a task id or an id prefix names")
async def resolve_work(ref: RefQuery, project: ProjectDep) -> ResolvedOut:
    """What a person typed for an item (shared.refs): its id, its task id, or the start of its
    id; several matches are refused with their ids."""
    return await ResolvedOut.from_copy(ref, project.work.mirror, project.work.refs, "work item")


@router.get("/{work_id}", response_model=WorkItem, summary="Show one item")
async def get_work(work_id: WorkId, project: ProjectDep) -> WorkItem:
    return await project.queue.get(work_id)


@router.get("/{work_id}/graph", response_model=WorkGraphOut, summary="The item's dependencies and dependents")
async def get_graph(work_id: WorkId, project: ProjectDep) -> WorkGraphOut:
    """Everything the item depends on (ancestors) and everything that depends on it
    (descendants), transitively, each with its state."""
    graph = await project.work.graph(await project.queue.get(work_id))
    return WorkGraphOut(
        root=graph.root,
        nodes=[GraphNodeOut(id=n.id, relation=n.relation, depth=n.depth, item=n.item) for n in graph.nodes],
        edges=[GraphEdgeOut(dependency=a, dependent=b) for a, b in graph.edges],
        truncated=graph.truncated,
    )


@router.get("/{work_id}/trace", response_model=WorkTraceOut, summary="The item's spans and transitions")
async def get_trace(work_id: WorkId, project: ProjectDep) -> WorkTraceOut:
    """The item's timeline as Weft recorded it (docs/operations.md, Traces): every process's
    spans for it and its transitions, without a collector."""
    item = await project.queue.get(work_id)
    await project.traces.flush(stored=True)  # this replica's own spans, not yet published
    spans, truncated = await read_timeline(project.nc, project.names, work_id)
    trace_id = trace_id_of(item.traceparent)
    tree = await project.contexts.store.tree(work_id)
    nodes = sorted(tree.nodes.values(), key=lambda n: n.at)
    events = [TimelineEventOut(at=node.at, kind=node.kind, author=node.author) for node in nodes]
    until = None if item.status in FINAL_WORK_STATES else utcnow()
    stretches = phases([(n.at, phase_kind(n.kind, n.meta)) for n in nodes], until=until)
    return WorkTraceOut(
        work_id=work_id, trace_id=trace_id, spans=spans, events=events, phases=stretches, truncated=truncated
    )


@router.post("/{work_id}/cancel", response_model=WorkItem, dependencies=OPERATE, summary="Cancel an item")
async def cancel_work(work_id: WorkId, project: ProjectDep, body: CancelRequest | None = None) -> WorkItem:
    """Queued work leaves the queue; claimed work is taken back and its agent told to stop."""
    reason = body.reason if body else ""
    return await project.queue.cancel(work_id, reason=reason, by=SUBMITTED_BY)


@router.post(
    "/{work_id}/retry",
    response_model=WorkItem,
    dependencies=OPERATE,
    summary="Retry failed or dead-lettered work",
)
async def retry_work(work_id: WorkId, project: ProjectDep, state: StateDep) -> WorkItem:
    item = await project.queue.retry(work_id)
    state.spawn(state.router.route(project, item), name=f"route:{item.id}")
    return item
