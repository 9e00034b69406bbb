"""Routing: is an eligible agent online for this item, and if not, which target could provide one?

Weft does not push work to agents: agents claim from the queue, and the claim
itself enforces capability, boundary, required type and the boundary policy
(:mod:`shared.work`). Routing's job is to notice when no agent that could
claim an item is online and to ask the spin-up seam for one, highest priority
first.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from shared.models import AgentEntry, AgentStatus, Target, TargetHealth, WorkItem, utcnow
from shared.policy import BoundaryPolicy
from shared.work import CLAIMABLE
from weft.spinup.base import SpinupRequester
from weft.tasks import raise_if_cancelling
from weft.workview import set_waiting_reason

if TYPE_CHECKING:
    from weft.project import ProjectContext

log = logging.getLogger("loom.weft.routing")

NO_AGENT_NO_TARGET = "no eligible agent online and no matching target"

Outcome = Literal["agent-available", "spin-up", "waiting", "not-waiting"]


@dataclass
class RoutingDecision:
    outcome: Outcome
    agents: list[str] = field(default_factory=list)
    """Eligible agent ids, preferred agent type first."""
    target: Target | None = None
    reason: str | None = None


def agent_can_take(entry: AgentEntry, item: WorkItem, policy: BoundaryPolicy, now: datetime) -> bool:
    """Online (or busy with free capacity) and allowed to claim the item.

    Cheapest checks first: routing runs on every submit over every agent of the project."""
    if item.capability not in entry.capabilities or item.boundary not in entry.boundaries:
        return False
    if item.required_agent_type is not None and entry.agent_type != item.required_agent_type:
        return False
    if entry.current_tasks >= entry.max_concurrent_tasks:
        return False
    if entry.effective_status(now) not in (AgentStatus.ONLINE, AgentStatus.BUSY):
        return False
    return policy.allows_agent(item.boundary, entry.agent_type)


def target_can_serve(target: Target, item: WorkItem, policy: BoundaryPolicy) -> bool:
    if not target.enabled or target.health is TargetHealth.UNHEALTHY:
        return False
    if item.capability not in target.capabilities or item.boundary not in target.boundaries:
        return False
    if item.required_agent_type is not None and target.agent_type != item.required_agent_type:
        return False
    return policy.allows_target(item.boundary, target.name, target.agent_type)


def eligible_agents(
    item: WorkItem, agents: Iterable[AgentEntry], policy: BoundaryPolicy, now: datetime | None = None
) -> list[AgentEntry]:
    moment = now or utcnow()
    found = [a for a in agents if agent_can_take(a, item, policy, moment)]
    preferred = item.preferred_agent_type
    found.sort(
        key=lambda a: (
            a.agent_type != preferred,
            a.current_tasks / a.max_concurrent_tasks,
            a.handle,
            a.agent_id,
        )
    )
    return found


def matching_targets(item: WorkItem, targets: Iterable[Target], policy: BoundaryPolicy) -> list[Target]:
    """Targets that could serve the item: preferred agent type first, known-healthy before unknown."""
    found = [t for t in targets if target_can_serve(t, item, policy)]
    preferred = item.preferred_agent_type
    found.sort(key=lambda t: (t.agent_type != preferred, t.health is not TargetHealth.HEALTHY, t.name))
    return found


class Router:
    def __init__(self, requester: SpinupRequester) -> None:
        self.requester = requester

    async def route(self, project: ProjectContext, item: WorkItem) -> RoutingDecision:
        if item.status not in CLAIMABLE:
            return RoutingDecision("not-waiting")
        policy = await project.queue.policy()
        agents = eligible_agents(item, project.agents.mirror.values(), policy)
        if agents:
            if item.waiting_reason is not None:
                await set_waiting_reason(project.js, project.queue, item.id, None)
            return RoutingDecision("agent-available", agents=[a.agent_id for a in agents])
        targets = matching_targets(item, project.targets.all(), policy)
        if targets:
            await self.requester.request_spinup(project, item, targets[0])
            return RoutingDecision("spin-up", target=targets[0])
        await set_waiting_reason(project.js, project.queue, item.id, NO_AGENT_NO_TARGET)
        return RoutingDecision("waiting", reason=NO_AGENT_NO_TARGET)

    async def route_waiting(self, project: ProjectContext, limit: int = 500) -> dict[str, int]:
        """Re-route items still in the queue, highest priority first."""
        outcomes: dict[str, int] = {}
        for item in project.work.waiting()[:limit]:
            try:
                decision = await self.route(project, item)
            except Exception as exc:
                raise_if_cancelling()
                log.warning("routing %s in %s failed: %s", item.id, project.names.project_id, exc)
                continue
            outcomes[decision.outcome] = outcomes.get(decision.outcome, 0) + 1
        return outcomes
