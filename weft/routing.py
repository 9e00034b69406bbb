"""Routing: is an eligible agent online for this item, and if not, which target could provide one?

Weft does not push work to agents: agents claim from the queue, and the claim
itself enforces capability, boundary, required type and the boundary policy
(:mod:`shared.work`); the rules of who may take what are in :mod:`weft.eligibility`.
Routing's job is to notice when no agent that could claim an item is online and to
ask the spin-up service for one, highest priority first.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from shared.models import AgentStatus, Target, WorkItem
from shared.tasks import raise_if_cancelling
from shared.work.landing import parked
from shared.work.rules import WAITING
from weft.eligibility import Eligibility, Need, matching_targets
from weft.spinup.base import SpinupRequester

if TYPE_CHECKING:
    from weft.project.hub import ProjectContext

log = logging.getLogger("loom.weft.routing")

NO_AGENT_NO_TARGET = "no eligible agent online and no matching target"
AUTHOR_GONE = "its author is offline"

Outcome = Literal["agent-available", "spin-up", "waiting", "not-waiting", "reserved"]


@dataclass
class RoutingDecision:
    outcome: Outcome
    agents: list[str] = field(default_factory=list)
    """Eligible agent ids, preferred agent type first."""
    target: Target | None = None
    reason: str | None = None


class Router:
    def __init__(self, requester: SpinupRequester) -> None:
        self.requester = requester

    async def route(self, project: ProjectContext, item: WorkItem) -> RoutingDecision:
        """Route a new (or retried) item: the decision is a span of its trace."""
        with project.traces.span("weft.route", work_id=item.id, traceparent=item.traceparent) as span:
            decision = await self._decide(project, item)
            span.set_attribute("loom.routing.outcome", decision.outcome)
            if decision.agents:
                span.set_attribute("loom.routing.agents", len(decision.agents))
            if decision.target is not None:
                span.set_attribute("loom.routing.target", decision.target.name)
            return decision

    async def _decide(
        self, project: ProjectContext, item: WorkItem, known: Eligibility | None = None
    ) -> RoutingDecision:
        """``known``: a sweep's answers so far, for the items after this one."""
        if item.status not in WAITING or parked(item):  # parked: on its pull request or the operator
            return RoutingDecision("not-waiting")
        if item.reserved_for is not None:  # sent back to its author by a landing
            author = project.agents.mirror.get(item.reserved_for)
            if author is not None and author.effective_status() is not AgentStatus.OFFLINE:
                return RoutingDecision("reserved", agents=[item.reserved_for])
            item = await project.queue.unreserve(item.id, AUTHOR_GONE) or item
            if item.reserved_for is not None or item.status not in WAITING:
                return RoutingDecision("not-waiting")
        policy = await project.queue.policy()
        mirror = project.agents.mirror
        known = known or Eligibility()
        known.see(mirror.values, (mirror.revision, len(mirror)), policy)
        agents = known.agents_for(item)
        if not agents and known.may_hide(item):
            # a spin-up is a new process: first make sure the copy holds every heartbeat NATS has
            await mirror.sync()
            known.synced = True
            known.see(mirror.values, (mirror.revision, len(mirror)), policy)
            agents = known.agents_for(item)
        if agents:
            if item.waiting_reason is not None:
                await project.queue.set_waiting_reason(item.id, None)
            return RoutingDecision("agent-available", agents=[a.agent_id for a in agents])
        targets = matching_targets(Need.of(item), project.targets.all(), policy)
        if targets:
            await self.requester.request_spinup(project, item)
            return RoutingDecision("spin-up", target=targets[0])
        await project.queue.set_waiting_reason(item.id, NO_AGENT_NO_TARGET)
        return RoutingDecision("waiting", reason=NO_AGENT_NO_TARGET)

    async def route_waiting(self, project: ProjectContext, limit: int = 500) -> dict[str, int]:
        """Re-route items still in the queue, highest priority first."""
        outcomes: dict[str, int] = {}
        known = Eligibility()  # one answer per need, not one per item (hundreds x every agent)
        for item in project.work.waiting()[:limit]:
            try:
                decision = await self._decide(project, item, known)  # a sweep: not a span per item
            except Exception as exc:
                raise_if_cancelling()
                log.warning("routing %s in %s failed: %s", item.id, project.names.project_id, exc)
                continue
            outcomes[decision.outcome] = outcomes.get(decision.outcome, 0) + 1
        return outcomes
