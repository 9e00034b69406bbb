"""Routing: eligibility of agents and targets, and the spin-up seam it calls."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from nats.aio.client import Client as NatsClient
from weft_helpers import WsClient, actions, agent_id, eventually, register, ws_connect

from shared.models import (
    AgentEntry,
    AgentStatus,
    SpinupOperation,
    Target,
    TargetHealth,
    TargetSpec,
    WorkItem,
    WorkStatus,
    utcnow,
)
from shared.policy import BoundaryPolicy, BoundaryRule
from weft.project import ProjectContext, ProjectHub
from weft.routing import NO_AGENT_NO_TARGET, eligible_agents, matching_targets
from weft.spinup import WAITING_FOR_AGENT, SpinupUnavailable, TargetTestResult

P = "proj-1"


def item(**kw: Any) -> WorkItem:
    data: dict[str, Any] = {
        "task_id": "t",
        "description": "d",
        "capability": "code",
        "project_id": P,
        "status": WorkStatus.QUEUED,
    }
    data.update(kw)
    return WorkItem.model_validate(data)


def agent(**kw: Any) -> AgentEntry:
    ident = kw.pop("agent_id", agent_id())
    data: dict[str, Any] = {
        "agent_id": ident,
        "handle": f"h-{ident[:6]}",
        "project_id": P,
        "user_id": "0123456789abcdef",
        "agent_type": "claude-code",
        "capabilities": ["code"],
    }
    data.update(kw)
    return AgentEntry.model_validate(data)


def target(name: str = "local-1", **kw: Any) -> Target:
    data: dict[str, Any] = {"name": name, "mechanism": "local", "project_id": P, "capabilities": ["code"]}
    data.update(kw)
    return Target.model_validate(data)


def test_eligible_agents_respect_status_capacity_capability_boundary_type_and_policy() -> None:
    policy = BoundaryPolicy(boundaries={"corporate": BoundaryRule(denied_agent_types=["claude-code"])})
    good = agent(handle="good")
    stale = agent(last_heartbeat=utcnow() - timedelta(minutes=5))
    offline = agent(status=AgentStatus.OFFLINE)
    full = agent(status=AgentStatus.BUSY, current_tasks=1, max_concurrent_tasks=1)
    busy_with_room = agent(status=AgentStatus.BUSY, current_tasks=1, max_concurrent_tasks=2, handle="roomy")
    docs_only = agent(capabilities=["docs"])
    pool = [good, stale, offline, full, busy_with_room, docs_only]
    assert {a.agent_id for a in eligible_agents(item(), pool, policy)} == {
        good.agent_id,
        busy_with_room.agent_id,
    }
    # boundary: agents must list it, and the policy must allow their type
    corp_claude = agent(boundaries=["corporate"])
    corp_copilot = agent(boundaries=["corporate"], agent_type="copilot")
    corporate = item(boundary="corporate")
    assert [a.agent_id for a in eligible_agents(corporate, [good, corp_claude, corp_copilot], policy)] == [
        corp_copilot.agent_id
    ]
    # required type is a must; preferred type only sorts first
    copilot = agent(agent_type="copilot", handle="zzz")
    assert [
        a.agent_id for a in eligible_agents(item(required_agent_type="copilot"), [good, copilot], policy)
    ] == [copilot.agent_id]
    preferred = eligible_agents(item(preferred_agent_type="copilot"), [good, copilot], policy)
    assert [a.agent_id for a in preferred] == [copilot.agent_id, good.agent_id]


def test_matching_targets_need_enabled_healthy_or_unknown_and_policy() -> None:
    policy = BoundaryPolicy(
        boundaries={"production": BoundaryRule(allowed_agent_types=["deployer"], allowed_targets=["prod"])}
    )
    ok = target("a-ok")
    healthy = target("b-healthy", health=TargetHealth.HEALTHY)
    sick = target("c-sick", health=TargetHealth.UNHEALTHY)
    off = target("d-off", enabled=False)
    docs = target("e-docs", capabilities=["docs"])
    found = matching_targets(item(), [ok, healthy, sick, off, docs], policy)
    assert [t.name for t in found] == ["b-healthy", "a-ok"]  # known-healthy first
    prod_item = item(boundary="production")
    prod = target("prod", agent_type="deployer", boundaries=["production"])
    other = target("other", agent_type="deployer", boundaries=["production"])
    wrong_type = target("prod", agent_type="claude-code", boundaries=["production"])
    assert [t.name for t in matching_targets(prod_item, [prod, other, wrong_type], policy)] == ["prod"]
    typed = item(required_agent_type="copilot")
    assert matching_targets(typed, [ok], policy) == []


class RecordingSpinup:
    """A spin-up service that records what routing asked for (our own seam, not a third party)."""

    name = "recording"

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, str]] = []

    async def start(self, hub: ProjectHub) -> None:
        self.hub = hub

    async def stop(self) -> None:
        return None

    def validate_target(self, spec: TargetSpec) -> None:
        return None

    async def request_spinup(self, project: ProjectContext, item: WorkItem, target: Target) -> None:
        self.requests.append((project.project_id, item.id, target.name))

    async def spin_up(
        self, project: ProjectContext, target: Target, *, work_id: str | None = None
    ) -> SpinupOperation:
        raise SpinupUnavailable()

    async def test_target(self, project: ProjectContext, target: Target) -> TargetTestResult:
        raise SpinupUnavailable()

    async def operations(self, project: ProjectContext) -> list[SpinupOperation]:
        return []


async def test_no_agent_and_a_matching_target_asks_the_spinup_seam(
    weft_factory: Any, nc: NatsClient, project_id: str
) -> None:
    spinup = RecordingSpinup()
    async with weft_factory(project_id=project_id, spinup=spinup) as weft, weft.client() as api:
        made = await api.post(
            "/api/targets", json={"name": "laptop", "mechanism": "local", "capabilities": ["code"]}
        )
        assert made.status_code == 201
        await api.post(
            "/api/targets", json={"name": "docs-box", "mechanism": "local", "capabilities": ["docs"]}
        )
        work = (
            await api.post("/api/work", json={"task_id": "t", "description": "d", "capability": "code"})
        ).json()

        async def asked() -> bool:
            return any(r == (project_id, work["id"], "laptop") for r in spinup.requests)

        await eventually(asked, what="a spin-up request for the item")
        # With an eligible agent online, no spin-up is requested for new work of its capability.
        await register(nc, project_id)
        later = (
            await api.post("/api/work", json={"task_id": "u", "description": "d", "capability": "code"})
        ).json()
        docs = (
            await api.post("/api/work", json={"task_id": "v", "description": "d", "capability": "docs"})
        ).json()

        async def swept_twice() -> bool:
            return sum(1 for r in spinup.requests if r[1] == docs["id"]) >= 2

        await eventually(swept_twice, what="two routing rounds after the submissions")
        assert all(r[1] != later["id"] for r in spinup.requests)
        assert (project_id, docs["id"], "docs-box") in spinup.requests


async def test_default_seam_records_waiting_then_routing_clears_it(
    weft: Any, api: Any, nc: NatsClient, project_id: str
) -> None:
    await api.post("/api/targets", json={"name": "laptop", "mechanism": "local", "capabilities": ["code"]})
    async with ws_connect(f"{weft.ws_url}/api/ws?topics=work&action=waiting") as conn:
        ws = WsClient(conn)
        await ws.next_of("welcome")
        work = (
            await api.post("/api/work", json={"task_id": "t", "description": "d", "capability": "code"})
        ).json()
        events = await ws.events_until(lambda evs: bool(actions(evs, work["id"])))
    assert events[0]["data"]["reason"] == WAITING_FOR_AGENT

    async def waiting() -> bool:
        return bool((await api.get(f"/api/work/{work['id']}")).json()["waiting_reason"] == WAITING_FOR_AGENT)

    await eventually(waiting)
    await register(nc, project_id)

    async def cleared() -> bool:
        return (await api.get(f"/api/work/{work['id']}")).json()["waiting_reason"] is None

    await eventually(cleared, what="the sweeper to clear the waiting reason once an agent is online")
    stats = (await api.get("/api/stats")).json()
    assert stats["work"]["waiting_for_agent"] == 0


async def test_no_target_records_why_the_item_waits(api: Any) -> None:
    work = (
        await api.post("/api/work", json={"task_id": "t", "description": "d", "capability": "rare"})
    ).json()

    async def reason() -> bool:
        return bool((await api.get(f"/api/work/{work['id']}")).json()["waiting_reason"] == NO_AGENT_NO_TARGET)

    await eventually(reason)
    assert (await api.get("/api/stats")).json()["work"]["waiting_for_agent"] == 1
