"""Usage and budgets over Weft's REST API and /metrics: /api/usage, /api/budgets, an item's
budget, the hold in /api/stats, the usage gauges, every error path, isolation by project."""

from __future__ import annotations

import uuid
from typing import Any

from nats.aio.client import Client as NatsClient
from weft_helpers import claimant, eventually, register

from shared.models import WorkStatus
from shared.names import ProjectNames
from shared.usage.rules import Usage
from testsupport.work import work_queue

WORK = {"description": "d", "capability": "code"}
SECRET = "sk-live-Zx81Qa9"
T1 = "1" * 32


async def _work_with_usage(api: Any, nc: NatsClient, project_id: str) -> tuple[str, str, str]:
    one = await register(nc, project_id, target_id=T1)
    two = await register(nc, project_id)
    q = work_queue(nc, ProjectNames(project_id))
    first = (await api.post("/api/work", json={**WORK, "task_id": "a"})).json()["id"]
    second = (await api.post("/api/work", json={**WORK, "task_id": "b"})).json()["id"]
    taken = await q.claim(claimant(one))
    assert taken is not None
    await q.progress(
        taken.id, one.agent_id, 50, usage=Usage(input_tokens=100, cost=0.5, model="m1"), target_id=T1
    )
    await q.complete(
        taken.id, one.agent_id, "ok", usage=Usage(output_tokens=20, cost=0.25, model="m1"), target_id=T1
    )
    other = await q.claim(claimant(two))
    assert other is not None
    await q.complete(other.id, two.agent_id, "ok", usage=Usage(input_tokens=5, cost=2.0, model="m2"))
    assert {first, second} == {taken.id, other.id}
    return taken.id, one.agent_id, two.agent_id


async def test_usage_adds_up_per_project_item_agent_target_model_and_day(
    api: Any, nc: NatsClient, project_id: str
) -> None:
    first, one, two = await _work_with_usage(api, nc, project_id)
    body = (await api.get("/api/usage")).json()
    assert body["by"] == "project" and body["project_id"] == project_id
    (row,) = body["rows"]
    assert (row["key"], row["input_tokens"], row["output_tokens"], row["cost"], row["reports"]) == (
        project_id,
        105,
        20,
        2.75,
        3,
    )
    assert body["today"]["cost"] == 2.75 and body["total"]["reports"] == 3
    agents = (await api.get("/api/usage", params={"by": "agent"})).json()["rows"]
    assert [(r["key"], r["cost"]) for r in agents] == [(two, 2.0), (one, 0.75)]
    targets = (await api.get("/api/usage", params={"by": "target"})).json()["rows"]
    assert {r["key"]: r["cost"] for r in targets} == {"-": 2.0, T1: 0.75}
    models = (await api.get("/api/usage", params={"by": "model"})).json()["rows"]
    assert [r["key"] for r in models] == ["m2", "m1"]
    items = (await api.get("/api/usage", params={"by": "item"})).json()["rows"]
    assert first in {r["key"] for r in items} and len(items) == 2
    (day,) = (await api.get("/api/usage", params={"by": "day"})).json()["rows"]
    assert day["key"] == body["day"]
    none = (await api.get("/api/usage", params={"by": "day", "until": "2001-01-01"})).json()
    assert none["rows"] == [] and none["total"]["reports"] == 0
    item = (await api.get(f"/api/work/{first}")).json()
    assert item["usage"][0]["target_id"] == T1 and item["usage"][0]["reports"] == 2


async def test_bad_usage_queries_and_budgets_name_the_field_never_the_value(
    api: Any, project_id: str
) -> None:
    bad_by = await api.get("/api/usage", params={"by": SECRET})
    assert bad_by.status_code == 400 and bad_by.json()["details"]["field"] == "by"
    bad_day = await api.get("/api/usage", params={"since": SECRET})
    assert bad_day.status_code == 400 and bad_day.json()["details"]["field"] == "since"
    bad_budget = await api.put("/api/budgets/project", json={"cost": SECRET})
    assert bad_budget.status_code == 422
    bad_tokens = await api.put("/api/budgets/project", json={"tokens": -3})
    assert bad_tokens.status_code == 422 and "tokens" in bad_tokens.text
    unknown = await api.put("/api/budgets/project", json={"cents": 3})
    assert unknown.status_code == 422
    no_target = await api.put("/api/budgets/targets/nowhere", json={"cost": 1})
    assert no_target.status_code == 404
    no_work = await api.put(f"/api/work/{'0' * 32}/budget", json={"cost": 1})
    assert no_work.status_code == 404
    bad_submit = await api.post("/api/work", json={**WORK, "task_id": "x", "budget": {"cost": 0}})
    assert bad_submit.status_code == 422
    for response in (bad_by, bad_day, bad_budget, bad_submit):
        assert SECRET not in response.text


async def test_an_items_budget_is_set_at_submit_and_changed_at_run_time(
    api: Any, nc: NatsClient, project_id: str
) -> None:
    agent = await register(nc, project_id)
    made = (await api.post("/api/work", json={**WORK, "task_id": "a", "budget": {"cost": 1.0}})).json()
    assert made["budget"] == {"cost": 1.0, "tokens": None}
    raised = await api.put(f"/api/work/{made['id']}/budget", json={"cost": 3.0, "tokens": 500})
    assert raised.status_code == 200 and raised.json()["budget"] == {"cost": 3.0, "tokens": 500}
    q = work_queue(nc, ProjectNames(project_id))
    assert await q.claim(claimant(agent)) is not None
    stopped = await q.progress(made["id"], agent.agent_id, 10, usage=Usage(output_tokens=501))
    assert stopped.status is WorkStatus.DEAD_LETTERED
    dead = (await api.get("/api/dlq")).json()["items"]
    assert [d["item"]["error"].split(":")[0] for d in dead] == ["budget exceeded"]
    # raised before its retry, the dead letter runs to the end
    assert (await api.put(f"/api/work/{made['id']}/budget", json={"tokens": 5000})).status_code == 200
    assert (await api.post(f"/api/dlq/{made['id']}/retry")).status_code == 200
    again = await eventually(lambda: q.claim(claimant(agent)))
    assert again.id == made["id"]
    done = await q.complete(made["id"], agent.agent_id, "ok", usage=Usage(output_tokens=100))
    assert done.status is WorkStatus.COMPLETED
    final = await api.put(f"/api/work/{made['id']}/budget", json={"cost": 9.0})
    assert final.status_code == 409 and final.json()["error"] == "conflict"


async def test_a_reached_project_budget_shows_in_stats_budgets_and_metrics_until_raised(
    weft: Any, api: Any, nc: NatsClient, project_id: str
) -> None:
    await _work_with_usage(api, nc, project_id)
    set_low = await api.put("/api/budgets/project", json={"cost": 2.5})
    assert set_low.status_code == 200
    body = set_low.json()
    assert body["project_daily"] == {"cost": 2.5, "tokens": None} and body["revision"] > 0
    assert body["hold"] is not None and "reached its daily budget" in body["hold"]
    stats = (await api.get("/api/stats")).json()
    assert stats["budget_hold"] == body["hold"]
    metrics = (await api.get("/metrics")).text
    assert f'weft_budget_hold{{project="{project_id}"}} 1.0' in metrics
    assert f'weft_budget_daily_cost{{project="{project_id}"}} 2.5' in metrics
    assert f'weft_usage_today_cost{{project="{project_id}"}} 2.75' in metrics
    assert 'weft_usage_cost{agent="' in metrics and 'model="m1"' in metrics and f'target="{T1}"' in metrics
    raised = (await api.put("/api/budgets/project", json={"cost": 10})).json()
    assert raised["hold"] is None and raised["revision"] > body["revision"]
    assert (await api.get("/api/stats")).json()["budget_hold"] is None
    metrics = (await api.get("/metrics")).text
    assert f'weft_budget_hold{{project="{project_id}"}} 0.0' in metrics
    cleared = (await api.put("/api/budgets/project", json={"cost": None, "tokens": None})).json()
    assert cleared["project_daily"] is None
    assert f'weft_budget_daily_cost{{project="{project_id}"}}' not in (await api.get("/metrics")).text


async def test_target_budgets_are_set_by_name(api: Any, project_id: str) -> None:
    target = (
        await api.post(
            "/api/targets", json={"name": "box", "mechanism": "local", "config": {"command": ["true"]}}
        )
    ).json()
    body = (await api.put("/api/budgets/targets/box", json={"tokens": 1000})).json()
    assert body["target_daily"] == {target["id"]: {"cost": None, "tokens": 1000}}
    assert (await api.get("/api/budgets")).json()["target_daily"] == body["target_daily"]
    no_body = await api.put("/api/budgets/targets/box")
    assert no_body.status_code == 400 and no_body.json()["details"]["field"] == "body"
    gone = (await api.put(f"/api/budgets/targets/{target['id']}", json={})).json()
    assert gone["target_daily"] == {}


async def test_another_projects_usage_and_budgets_are_invisible(
    weft: Any, api: Any, nc: NatsClient, project_id: str
) -> None:
    await _work_with_usage(api, nc, project_id)
    await api.put("/api/budgets/project", json={"cost": 1.0})
    other = f"usage-{uuid.uuid4().hex[:10]}"
    async with weft.client(project=other) as theirs:
        usage = (await theirs.get("/api/usage", params={"by": "agent"})).json()
        assert usage["project_id"] == other and usage["rows"] == [] and usage["today"]["reports"] == 0
        budgets = (await theirs.get("/api/budgets")).json()
        assert budgets["project_daily"] is None and budgets["hold"] is None and budgets["revision"] == 0
        assert (await theirs.get("/api/stats")).json()["budget_hold"] is None
        agent = await register(nc, other)
        await theirs.post("/api/work", json={**WORK, "task_id": "x"})
        claimed = await eventually(lambda: work_queue(nc, ProjectNames(other)).claim(claimant(agent)))
        assert claimed.project_id == other
    assert (await api.get("/api/budgets")).json()["hold"] is not None
