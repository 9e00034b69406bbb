"""Which targets may start an agent for a piece of work (pure, no I/O).

Kept free of NATS so the routing decision costs microseconds and is easy to
test exhaustively; the manager adds the durable admission check on top.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.models import Target, TargetHealth
from shared.policy import BoundaryPolicy


@dataclass(frozen=True)
class Need:
    """What the waiting work requires of an agent."""

    capability: str
    boundary: str = "default"
    required_agent_type: str | None = None
    preferred_agent_type: str | None = None


def why_not(target: Target, need: Need, policy: BoundaryPolicy, *, automatic: bool = True) -> str | None:
    """None when ``target`` can serve ``need``; otherwise the reason it cannot."""
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


def rank(targets: list[Target], need: Need, policy: BoundaryPolicy) -> list[Target]:
    """Eligible targets, best first: preferred agent type, then healthy before unknown, then name."""
    eligible = [t for t in targets if why_not(t, need, policy) is None]

    def key(t: Target) -> tuple[int, int, str]:
        preferred = 0 if need.preferred_agent_type and t.agent_type == need.preferred_agent_type else 1
        healthy = 0 if t.health is TargetHealth.HEALTHY else 1
        return preferred, healthy, t.name

    return sorted(eligible, key=key)
