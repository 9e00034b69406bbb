"""Counts for ``GET /api/stats`` and the WebSocket ``stats`` topic, and project discovery."""

from __future__ import annotations

from collections import Counter

from nats.js.errors import NotFoundError
from pydantic import BaseModel

from shared.models import AgentStatus, TargetHealth, utcnow
from shared.names import project_resource
from shared.nats.jsapi import stream_names
from shared.views import AgentCounts, SpinupCounts, Stats, TargetCounts, WorkCounts
from shared.work.rules import WAITING
from weft.project.hub import ProjectContext, ProjectHub
from weft.spinup.base import SpinupService


async def project_stats(context: ProjectContext, spinup: SpinupService) -> Stats:
    await context.agents.mirror.sync()
    await context.work.mirror.sync()
    states = context.agents.states()
    by_status = Counter(s.status.value for s in states)
    by_type: dict[str, dict[str, int]] = {}
    for s in states:
        bucket = by_type.setdefault(s.entry.agent_type, {})
        bucket[s.status.value] = bucket.get(s.status.value, 0) + 1
    items = context.work.mirror.values()
    targets = context.targets.all()
    operations = await spinup.operations(context)
    try:
        dlq = await context.js.stream_info(context.names.dlq_stream)
        dead_letters = int(dlq.state.messages or 0)
    except NotFoundError:
        dead_letters = 0
    hold = await context.ledger.hold(utcnow())
    return Stats(
        project_id=context.project_id,
        agents=AgentCounts(
            total=len(states),
            by_status={status.value: by_status.get(status.value, 0) for status in AgentStatus},
            by_type=by_type,
        ),
        work=WorkCounts(
            total=len(items),
            by_status=context.work.counts_by_status(),
            waiting_for_agent=sum(1 for i in items if i.waiting_reason and i.status in WAITING),
        ),
        queue_depths=await context.queue.queue_depths(),
        dead_letters=dead_letters,
        targets=TargetCounts(
            total=len(targets),
            enabled=sum(1 for t in targets if t.enabled),
            by_health={h.value: sum(1 for t in targets if t.health is h) for h in TargetHealth},
            by_mechanism=dict(Counter(t.mechanism for t in targets)),
        ),
        spinups=SpinupCounts(
            total=len(operations),
            by_state=dict(Counter(op.state.value for op in operations)),
            mechanism=spinup.name,
        ),
        budget_hold=None if hold is None else hold.message,
    )


class ProjectSummary(BaseModel):
    project_id: str
    served: bool
    """Weft has this project's services running (it was named by a request)."""
    default: bool
    streams: list[str]
    buckets: list[str]


async def known_projects(hub: ProjectHub) -> list[ProjectSummary]:
    """Every project with data on this NATS account (found by the names its resources carry)."""
    found: dict[str, ProjectSummary] = {}
    served = {c.project_id for c in hub.served()}
    for stream in await stream_names(hub.nc):
        owner = project_resource(stream)
        if owner is None:
            continue
        project_id = owner.project_id
        summary = found.setdefault(
            project_id,
            ProjectSummary(
                project_id=project_id,
                served=project_id in served,
                default=project_id == hub.default_project,
                streams=[],
                buckets=[],
            ),
        )
        (summary.buckets if owner.bucket else summary.streams).append(owner.name)
    for summary in found.values():
        summary.streams.sort()
        summary.buckets.sort()
    return sorted(found.values(), key=lambda s: (not s.default, s.project_id))
