"""Weft's answers that clients read as models (docs/client.md): an agent as Weft lists it,
the project's counts, its usage. Weft's routes return them and ``loom.client`` validates
them, so both ends share one definition."""

from __future__ import annotations

from pydantic import Field

from shared.base import LoomModel
from shared.models import AgentEntry, AgentStatus
from shared.usage.rules import Totals, UsageRow


class AgentView(AgentEntry):
    """A registry entry; ``status`` is the effective one (offline once heartbeats stop)."""

    reported_status: AgentStatus = Field(description="The status the agent last wrote itself")
    stale: bool = Field(description="No heartbeat for 3 intervals: shown offline whatever it reported")
    revision: int = Field(
        default=0,
        description="The registry revision of this entry (agent events carry it too): the higher is newer",
    )


class AgentCounts(LoomModel):
    total: int
    by_status: dict[str, int]
    by_type: dict[str, dict[str, int]]
    """agent type -> effective status -> count"""


class WorkCounts(LoomModel):
    total: int
    by_status: dict[str, int]
    waiting_for_agent: int
    """Queued items that routing found no online agent for."""


class TargetCounts(LoomModel):
    total: int
    enabled: int
    by_health: dict[str, int]
    by_mechanism: dict[str, int]


class SpinupCounts(LoomModel):
    total: int
    by_state: dict[str, int]
    mechanism: str
    """Name of the installed spin-up service ("none" until one is installed)."""


class Stats(LoomModel):
    """``GET /api/stats``: a project's agents, work, queues, targets and spin-ups, counted."""

    project_id: str
    agents: AgentCounts
    work: WorkCounts
    queue_depths: dict[str, int]
    dead_letters: int
    targets: TargetCounts
    spinups: SpinupCounts
    budget_hold: str | None = None
    """Why new claims and spin-ups wait, while the project's daily budget is reached."""


class UsageOut(LoomModel):
    """``GET /api/usage``: what the project's work reported using, grouped."""

    project_id: str
    by: str
    since: str | None
    until: str | None
    rows: list[UsageRow]
    total: Totals
    """The rows added up (work records Weft still keeps; see docs/operations.md)."""
    today: Totals
    """The project's counter of the current UTC day (what its daily budget is checked against)."""
    day: str
