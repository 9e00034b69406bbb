"""Routing: eligibility of agents and targets (weft.eligibility), and what routing asks of spin-up."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from nats.aio.client import Client as NatsClient
from weft_helpers import WsClient, actions, agent_id, eventually, register, ws_connect

from shared.models import AgentEntry, AgentStatus, Target, TargetHealth, WorkItem, WorkStatus, utcnow
from shared.work.policy import BoundaryPolicy, BoundaryRule
from weft.eligibility import Eligibility, Need, eligible_agents, matching_targets, stale_but_eligible
from weft.routing import NO_AGENT_NO_TARGET
from weft.spinup import WAITING_FOR_AGENT

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
    data: dict[str, Any] = {
        "name": name,
        "mechanism": "local",
        "config": {"command": ["true"]},
        "project_id": P,
        "capabilities": ["code"],
    }
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


def test_stale_but_eligible_names_agents_a_lagging_copy_may_hide() -> None:
    """Routing asks the registry copy to catch up before a spin-up only when an agent that
    looks stale could have taken the item when it last beat."""
    policy, now = BoundaryPolicy(), utcnow()
    quiet = now - timedelta(minutes=5)
    assert stale_but_eligible(item(), [agent(last_heartbeat=quiet)], policy, now)
    assert not stale_but_eligible(item(), [agent()], policy, now)  # fresh: eligible_agents has it
    assert not stale_but_eligible(item(), [agent(last_heartbeat=quiet, capabilities=["docs"])], policy, now)
    left = agent(last_heartbeat=quiet, status=AgentStatus.OFFLINE)  # said goodbye: no heartbeat to wait for
    full = agent(last_heartbeat=quiet, status=AgentStatus.BUSY, current_tasks=1, max_concurrent_tasks=1)
    assert not stale_but_eligible(item(), [left, full], policy, now)


def test_a_sweeps_eligibility_answers_each_need_as_eligible_agents_does() -> None:
    """A sweep works an answer out once per need; each item still gets exactly the agents
    eligible_agents gives it, and a changed registry copy or policy is answered afresh."""
    from shared.models import ReviewRound, ReviewSpec

    author = agent(capabilities=["code", "review"], handle="author")
    pool = [
        author,
        agent(capabilities=["review"], handle="reviewer"),
        agent(agent_type="copilot", handle="co"),
        agent(boundaries=["corporate"], handle="corp"),
        agent(capabilities=["docs"], handle="docs"),
    ]
    items = [
        item(),
        item(),
        item(required_agent_type="copilot"),
        item(preferred_agent_type="copilot"),
        item(boundary="corporate"),
        item(capability="docs"),
        item(capability="rare"),
        item(
            status=WorkStatus.IN_REVIEW,
            review=ReviewSpec(capability="review"),
            reviews=[ReviewRound(round=1, author=author.agent_id)],
        ),
    ]
    policy = BoundaryPolicy()
    known = Eligibility()
    known.see(lambda: pool, (1, len(pool)), policy)
    for one in items:
        assert [a.agent_id for a in known.agents_for(one)] == [
            a.agent_id for a in eligible_agents(one, pool, policy)
        ], one
    assert known.agents_for(item(capability="rare")) == []

    newcomer = agent(capabilities=["rare"])
    grown = [*pool, newcomer]
    known.see(lambda: grown, (1, len(grown)), policy)  # a new agent: the size moved
    assert [a.agent_id for a in known.agents_for(item(capability="rare"))] == [newcomer.agent_id]
    denied = BoundaryPolicy(boundaries={"default": BoundaryRule(denied_agent_types=["claude-code"])})
    known.see(lambda: grown, (1, len(grown)), denied)  # another policy: answered again
    assert known.agents_for(item(capability="rare")) == []
    assert [a.agent_id for a in known.agents_for(item())] == [pool[2].agent_id]

    quiet = [agent(last_heartbeat=utcnow() - timedelta(minutes=5))]
    stale = Eligibility()
    stale.see(lambda: quiet, (2, 1), policy)
    assert stale.agents_for(item()) == [] and stale.may_hide(item())
    stale.synced = True  # the copy caught up once in this sweep: no second wait for it
    assert not stale.may_hide(item())


def test_a_review_task_needs_a_reviewer_other_than_its_author() -> None:
    from shared.models import ReviewRound, ReviewSpec

    author = agent(capabilities=["code", "review"], handle="author")
    reviewer = agent(capabilities=["review"], handle="reviewer")
    coder = agent(capabilities=["code"], handle="coder")
    handed = item(
        status=WorkStatus.IN_REVIEW,
        review=ReviewSpec(capability="review"),
        reviews=[ReviewRound(round=1, author=author.agent_id)],
        required_agent_type="claude-code",
    )
    need = Need.of(handed)
    assert (need.capability, need.not_for, need.required_agent_type) == ("review", author.agent_id, None)
    found = eligible_agents(handed, [author, reviewer, coder], BoundaryPolicy())
    assert [a.agent_id for a in found] == [reviewer.agent_id]
    assert Need.of(item(review=ReviewSpec(capability="review"))).capability == "code"  # before hand-in
    assert [
        t.name
        for t in matching_targets(need, [target("r", capabilities=["review"]), target()], BoundaryPolicy())
    ] == ["r"]


def test_matching_targets_need_enabled_healthy_or_unknown_and_policy() -> None:
    policy = BoundaryPolicy(
        boundaries={"production": BoundaryRule(allowed_agent_types=["deployer"], allowed_targets=["prod"])}
    )
    ok = target("a-ok")
    healthy = target("b-healthy", health=TargetHealth.HEALTHY)
    sick = target("c-sick", health=TargetHealth.UNHEALTHY)
    off = target("d-off", enabled=False)
    docs = target("e-docs", capabilities=["docs"])
    found = matching_targets(Need.of(item()), [ok, healthy, sick, off, docs], policy)
    assert [t.name for t in found] == ["b-healthy", "a-ok"]  # known-healthy first
    prod_item = item(boundary="production")
    prod = target("prod", agent_type="deployer", boundaries=["production"])
    other = target("other", agent_type="deployer", boundaries=["production"])
    wrong_type = target("prod", agent_type="claude-code", boundaries=["production"])
    assert [t.name for t in matching_targets(Need.of(prod_item), [prod, other, wrong_type], policy)] == [
        "prod"
    ]
    typed = item(required_agent_type="copilot")
    assert matching_targets(Need.of(typed), [ok], policy) == []


async def test_routing_asks_spin_up_only_while_no_eligible_agent_is_online(
    weft: Any, api: Any, nc: NatsClient, project_id: str
) -> None:
    """With a matching target and no eligible agent, routing hands the item to spin-up (here
    the service of a Weft that starts none, which says the item waits for an agent); with an
    eligible agent online it does not; with no matching target the item says so."""
    for name, capability in (("laptop", "code"), ("docs-box", "docs")):
        made = await api.post(
            "/api/targets",
            json={
                "name": name,
                "mechanism": "local",
                "config": {"command": ["true"]},
                "capabilities": [capability],
            },
        )
        assert made.status_code == 201, made.text

    async def submit(capability: str) -> str:
        body = {"task_id": "t", "description": "d", "capability": capability}
        return str((await api.post("/api/work", json=body)).json()["id"])

    async def reason(work_id: str) -> str | None:
        return (await api.get(f"/api/work/{work_id}")).json()["waiting_reason"]

    async def reason_is(work_id: str, wanted: str) -> bool:
        return await reason(work_id) == wanted

    async def cleared(work_id: str) -> bool:
        return await reason(work_id) is None

    async def agent_listed() -> bool:
        return bool((await api.get("/api/agents")).json()["items"])

    code = await submit("code")
    await eventually(lambda: reason_is(code, WAITING_FOR_AGENT), what="the code item handed to spin-up")
    await register(nc, project_id)  # an agent with capability code comes online
    await eventually(agent_listed, what="Weft to see the agent")
    later = await submit("code")
    docs = await submit("docs")
    review = await submit("review")
    await eventually(lambda: reason_is(docs, WAITING_FOR_AGENT), what="the docs item handed to spin-up")
    await eventually(lambda: reason_is(review, NO_AGENT_NO_TARGET), what="the review item without a target")
    await eventually(lambda: cleared(code), what="a sweep to clear the first item's reason")
    assert await reason(later) is None  # never handed to spin-up


async def test_default_seam_records_waiting_then_routing_clears_it(
    weft: Any, api: Any, nc: NatsClient, project_id: str
) -> None:
    await api.post(
        "/api/targets",
        json={
            "name": "laptop",
            "mechanism": "local",
            "config": {"command": ["true"]},
            "capabilities": ["code"],
        },
    )
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


async def test_blocked_work_is_never_routed_and_a_review_task_is(
    weft: Any, api: Any, nc: NatsClient, project_id: str
) -> None:
    """A blocked item waits for other work, not for an agent: no reason, no spin-up. An item
    handed in for review waits for a reviewer, and says so when none is online."""
    from shared.names import ProjectNames
    from shared.work.rules import Claimant
    from testsupport.work import work_queue

    made = await api.post(
        "/api/targets",
        json={
            "name": "coders",
            "mechanism": "local",
            "config": {"command": ["true"]},
            "capabilities": ["code"],
        },
    )
    assert made.status_code == 201, made.text
    first = (
        await api.post("/api/work", json={"task_id": "a", "description": "d", "capability": "rare"})
    ).json()
    blocked = (
        await api.post(
            "/api/work",
            json={"task_id": "b", "description": "d", "capability": "code", "depends_on": [first["id"]]},
        )
    ).json()
    reviewed = (
        await api.post(
            "/api/work",
            json={
                "task_id": "r",
                "description": "d",
                "capability": "rare",
                "review": {"capability": "review"},
            },
        )
    ).json()
    queue = work_queue(nc, ProjectNames(project_id))
    worker = "e" * 32
    assert (await queue.claim(Claimant(agent_id=worker, agent_type="x", capabilities=("rare",)))) is not None
    claimed_second = await queue.claim(Claimant(agent_id=worker, agent_type="x", capabilities=("rare",)))
    assert claimed_second is not None
    await queue.complete(reviewed["id"], worker, "done")

    async def reason(work_id: str) -> str | None:
        return (await api.get(f"/api/work/{work_id}")).json()["waiting_reason"]

    async def review_waits() -> bool:
        return await reason(reviewed["id"]) == NO_AGENT_NO_TARGET

    await eventually(review_waits, what="the review task to wait for a reviewer")
    # Several sweeps later the blocked item was never routed: with a matching target, routing
    # would have handed it to spin-up (which, in this Weft, records that it waits for an agent).
    assert await reason(blocked["id"]) is None
