"""Who may take a piece of work, and which targets may start an agent for it (pure, no I/O).

One copy of each rule, used by routing (is an eligible agent online?) and by
the spin-up manager (which target should start one?). Kept free of NATS so a
decision costs microseconds and the rules can be tested exhaustively. The
claim itself enforces the agent rule again in :mod:`shared.work`, so work
broadcast by agents obeys it too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from shared.models import AgentEntry, AgentStatus, Target, TargetHealth, WorkItem, WorkStatus, utcnow
from shared.names import LAND_CAPABILITY
from shared.work.policy import BoundaryPolicy


@dataclass(frozen=True)
class Need:
    """What a piece of work requires of an agent (and so of the target that starts one)."""

    capability: str
    boundary: str = "default"
    required_agent_type: str | None = None
    preferred_agent_type: str | None = None
    not_for: str | None = None
    """An agent that may not take it: for a review task, the agent whose work it is."""

    @classmethod
    def of(cls, item: WorkItem) -> Need:
        """A worker for a waiting item; a reviewer (anyone with the review capability but
        the author) for an item handed in for review; a lander for one queued for landing."""
        if item.status is WorkStatus.LANDING:
            return cls(capability=LAND_CAPABILITY, boundary=item.boundary)
        if item.status is WorkStatus.IN_REVIEW and item.review is not None:
            return cls(capability=item.review.capability, boundary=item.boundary, not_for=item.author)
        return cls(
            capability=item.capability,
            boundary=item.boundary,
            required_agent_type=item.required_agent_type,
            preferred_agent_type=item.preferred_agent_type,
        )


# -- agents ----------------------------------------------------------------------------


def agent_can_take(entry: AgentEntry, need: Need, policy: BoundaryPolicy, now: datetime) -> bool:
    """Online (or busy with free capacity) and allowed to claim what the work needs.

    Cheapest checks first: routing runs on every submit over every agent of the project."""
    if need.capability not in entry.capabilities or need.boundary not in entry.boundaries:
        return False
    if need.required_agent_type is not None and entry.agent_type != need.required_agent_type:
        return False
    if entry.agent_id == need.not_for:
        return False
    if entry.current_tasks >= entry.max_concurrent_tasks:
        return False
    if entry.effective_status(now) not in (AgentStatus.ONLINE, AgentStatus.BUSY):
        return False
    return policy.allows_agent(need.boundary, entry.agent_type)


def eligible_agents(
    item: WorkItem, agents: Iterable[AgentEntry], policy: BoundaryPolicy, now: datetime | None = None
) -> list[AgentEntry]:
    """Agents that could claim ``item`` now (as its worker, or as its reviewer when it is
    handed in for review): preferred type first, then the least loaded."""
    moment = now or utcnow()
    need = Need.of(item)
    found = [a for a in agents if agent_can_take(a, need, policy, moment)]
    preferred = need.preferred_agent_type
    found.sort(
        key=lambda a: (
            a.agent_type != preferred,
            a.current_tasks / a.max_concurrent_tasks,
            a.handle,
            a.agent_id,
        )
    )
    return found


def stale_but_eligible(
    item: WorkItem, agents: Iterable[AgentEntry], policy: BoundaryPolicy, now: datetime | None = None
) -> bool:
    """Whether an agent that looks stale now could have taken ``item`` when it last beat: an
    agent whose newer heartbeats a lagging copy of the registry may not hold yet."""
    moment = now or utcnow()
    need = Need.of(item)
    return any(a.is_stale(moment) and agent_can_take(a, need, policy, a.last_heartbeat) for a in agents)


class Eligibility:
    """:func:`eligible_agents` for many items at once, worked out once per need: a sweep
    routes up to hundreds of waiting items over every agent of the project, and the items
    that need the same (capability, boundary, agent types, author) get the same answer as
    long as the registry copy and the policy it was worked out from are unchanged."""

    def __init__(self) -> None:
        self.synced = False
        """Whether the registry copy was made to catch up already (once per sweep is enough)."""
        self._agents: Sequence[AgentEntry] = ()
        self._policy: BoundaryPolicy = BoundaryPolicy()
        self._version: tuple[int, int] | None = None
        self._now = utcnow()
        self._found: dict[Need, list[AgentEntry]] = {}

    def see(
        self, agents: Callable[[], Sequence[AgentEntry]], version: tuple[int, int], policy: BoundaryPolicy
    ) -> None:
        """The registry copy as it is now (read through ``agents`` only when its ``version``,
        e.g. its revision and size, moved) and the policy: answers worked out from another
        copy or policy are dropped."""
        if version != self._version or policy is not self._policy:
            self._agents, self._version, self._policy, self._now = agents(), version, policy, utcnow()
            self._found.clear()

    def agents_for(self, item: WorkItem) -> list[AgentEntry]:
        need = Need.of(item)
        found = self._found.get(need)
        if found is None:
            found = self._found[need] = eligible_agents(item, self._agents, self._policy, self._now)
        return found

    def may_hide(self, item: WorkItem) -> bool:
        """:func:`stale_but_eligible`, until the copy was made to catch up."""
        return not self.synced and stale_but_eligible(item, self._agents, self._policy, self._now)


# -- targets ---------------------------------------------------------------------------


def why_not(target: Target, need: Need, policy: BoundaryPolicy, *, automatic: bool = True) -> str | None:
    """None when ``target`` may start an agent for ``need``; otherwise the reason it may not.

    ``automatic``: the start is routing's own idea, so a target whose last health check
    failed is skipped (an operator may still start one by hand)."""
    if not target.enabled:
        return "disabled"
    if automatic and target.health is TargetHealth.UNHEALTHY:
        return f"unhealthy ({target.health_detail or 'last health check failed'})"
    if need.capability not in target.capabilities:
        return f"lacks capability {need.capability}"
    if need.boundary not in target.boundaries:
        return f"does not serve boundary {need.boundary}"
    if need.required_agent_type is not None and target.agent_type != need.required_agent_type:
        return f"starts {target.agent_type} agents, not {need.required_agent_type}"
    if not policy.allows_target(need.boundary, target.name, target.agent_type):
        return f"the boundary policy does not allow it for boundary {need.boundary}"
    return None


def matching_targets(need: Need, targets: Iterable[Target], policy: BoundaryPolicy) -> list[Target]:
    """Targets that may start an agent for ``need``, best first: preferred agent type,
    then known-healthy before unknown, then by name."""
    found = [t for t in targets if why_not(t, need, policy) is None]
    preferred = need.preferred_agent_type
    found.sort(
        key=lambda t: (
            preferred is None or t.agent_type != preferred,
            t.health is not TargetHealth.HEALTHY,
            t.name,
        )
    )
    return found
