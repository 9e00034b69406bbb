"""Work with dependencies over REST: depends_on on submit, plans with local names, the graph
route, the sweeper's repair of a stopped process's half-done steps, and project isolation."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from nats.aio.client import Client as NatsClient
from weft_helpers import WsClient, actions, eventually, ws_connect

from shared.models import WorkStatus
from shared.names import ProjectNames
from shared.work.queue import WorkQueue
from shared.work.rules import Claimant, WorkRecord
from testsupport.work import work_queue

A = "a" * 32


def entry(task: str, name: str | None = None, *after: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"task_id": task, "description": f"do {task}", "capability": "code", **extra}
    if name is not None:
        body["name"] = name
    if after:
        body["after"] = list(after)
    return body


async def complete_next(queue: WorkQueue) -> str:
    claimed = await queue.claim(Claimant(agent_id=A, agent_type="generic", capabilities=("code",)))
    assert claimed is not None
    await queue.complete(claimed.id, A)
    return claimed.task_id


async def test_a_plan_runs_in_dependency_order_and_its_graph_shows_states(
    weft: Any, api: httpx.AsyncClient, nc: NatsClient, project_id: str
) -> None:
    queue = work_queue(nc, ProjectNames(project_id))
    plan = {
        "items": [
            entry("docs", "docs", "api"),
            entry("api", "api", "migration"),
            entry("migration", "migration"),
            entry("tests", None, "api"),
        ]
    }
    async with ws_connect(f"{weft.ws_url}/api/ws?topics=work") as conn:
        ws = WsClient(conn)
        await ws.next_of("welcome")
        created = await api.post("/api/work/plan", json=plan)
        assert created.status_code == 201, created.text
        body = created.json()
        ids = [i["id"] for i in body["items"]]
        assert body["names"] == {"docs": ids[0], "api": ids[1], "migration": ids[2]}
        assert [i["status"] for i in body["items"]] == ["blocked", "blocked", "queued", "blocked"]
        assert body["items"][1]["depends_on"] == [ids[2]]
        assert sorted(body["items"][1]["dependents"]) == sorted([ids[0], ids[3]])

        graph = (await api.get(f"/api/work/{ids[1]}/graph")).json()
        assert graph["root"] == ids[1] and graph["truncated"] is False
        shown = {n["id"]: (n["relation"], n["depth"], n["item"]["status"]) for n in graph["nodes"]}
        assert shown == {
            ids[1]: ("root", 0, "blocked"),
            ids[2]: ("ancestor", 1, "queued"),
            ids[0]: ("descendant", 1, "blocked"),
            ids[3]: ("descendant", 1, "blocked"),
        }
        edges = {(e["dependency"], e["dependent"]) for e in graph["edges"]}
        assert edges == {(ids[2], ids[1]), (ids[1], ids[0]), (ids[1], ids[3])}

        order = [await complete_next(queue), await complete_next(queue)]
        order += sorted([await complete_next(queue), await complete_next(queue)])
        assert order == ["migration", "api", "docs", "tests"]
        events = await ws.events_until(lambda evs: "work.completed" in actions(evs, ids[0]))
    seen = [a for a in actions(events, ids[0]) if a != "work.waiting"]  # no agent is registered
    assert seen == [
        "work.submitted",
        "work.blocked",
        "work.unblocked",
        "work.queued",
        "work.claimed",
        "work.completed",
    ]
    final = (await api.get(f"/api/work/{ids[0]}/graph")).json()
    assert {n["item"]["status"] for n in final["nodes"]} == {"completed"}


async def test_bad_plans_and_dependencies_are_refused_naming_the_field(
    api: httpx.AsyncClient, nc: NatsClient, project_id: str
) -> None:
    secret = "f" * 32
    cases = [
        ({"items": [entry("a", "a", "b"), entry("b", "b", "a")]}, 400, "items.0.after"),
        ({"items": [entry("a", "a", "nope")]}, 400, "items.0.after.0"),
        ({"items": [entry("a", "a"), entry("b", "a")]}, 400, "items.1.name"),
        ({"items": [entry("a", depends_on=[secret])]}, 400, "items.0.depends_on.0"),
        ({"items": [entry("a", "Bad Name")]}, 422, "items.0.name"),
        ({"items": [entry("a", None, "UPPER")]}, 422, "items.0.after.0"),
        ({"items": []}, 422, "items"),
    ]
    for plan, status, field in cases:
        response = await api.post("/api/work/plan", json=plan)
        assert response.status_code == status, (field, response.text)
        body = response.json()
        fields = (
            [e["field"] for e in body["details"]["errors"]] if status == 422 else [body["details"]["field"]]
        )
        assert field in fields, (field, body)
        assert secret not in response.text and "Bad Name" not in response.text
    single = await api.post("/api/work", json=entry("one", depends_on=[secret]))
    assert single.status_code == 400 and single.json()["details"]["field"] == "depends_on.0"
    assert secret not in single.text
    bad = await api.post("/api/work", json=entry("one", depends_on=["nothex"]))
    assert bad.status_code == 422 and bad.json()["details"]["errors"][0]["field"] == "depends_on.0"
    assert (await api.get("/api/work")).json()["total"] == 0  # nothing was created
    missing = await api.get(f"/api/work/{secret}/graph")
    assert missing.status_code == 404 and secret not in missing.text


async def test_graphs_and_dependencies_stay_inside_their_project(
    weft: Any, nc: NatsClient, project_id: str
) -> None:
    other = f"{project_id}-x"
    async with weft.client(project=project_id) as mine, weft.client(project=other) as theirs:
        root = (await mine.post("/api/work", json=entry("root"))).json()
        refused = await theirs.post("/api/work", json=entry("leech", depends_on=[root["id"]]))
        assert refused.status_code == 400 and refused.json()["details"]["field"] == "depends_on.0"
        assert (await theirs.get(f"/api/work/{root['id']}/graph")).status_code == 404
        child = (await mine.post("/api/work", json=entry("child", depends_on=[root["id"]]))).json()
        assert child["status"] == "blocked"
        graph = (await mine.get(f"/api/work/{child['id']}/graph")).json()
        assert {n["id"] for n in graph["nodes"]} == {root["id"], child["id"]}


async def test_the_sweeper_repairs_a_dependent_nobody_told(
    api: httpx.AsyncClient, nc: NatsClient, project_id: str, monkeypatch: Any
) -> None:
    import weft.project.repair

    monkeypatch.setattr(weft.project.repair, "GRACE", weft.project.repair.timedelta(0))
    root = (await api.post("/api/work", json=entry("root"))).json()
    child = (await api.post("/api/work", json=entry("child", depends_on=[root["id"]]))).json()
    queue = work_queue(nc, ProjectNames(project_id))
    claimed = await queue.claim(Claimant(agent_id=A, agent_type="generic", capabilities=("code",)))
    assert claimed is not None and claimed.id == root["id"]
    # The root completes, but the process stops before telling its dependent.
    kv = await queue.records_bucket()
    stored = await kv.get(root["id"])
    record = WorkRecord.model_validate_json(stored.value or b"")
    record.item.status = WorkStatus.COMPLETED
    await kv.update(root["id"], record.to_json_bytes(), last=stored.revision)

    async def queued() -> bool:
        return bool((await api.get(f"/api/work/{child['id']}")).json()["status"] == "queued")

    await eventually(queued, timeout=10)
    assert await complete_next(queue) == "child"


async def test_the_sweeper_queues_again_an_item_whose_message_was_lost_after_it_checked_it(
    api: httpx.AsyncClient, nc: NatsClient, project_id: str, monkeypatch: Any
) -> None:
    """A queued item is checked once it is quiet, and again while it stays unchanged: a
    message lost after the first check is found by a later one."""
    import weft.project.repair

    monkeypatch.setattr(weft.project.repair, "GRACE", weft.project.repair.timedelta(0))
    names = ProjectNames(project_id)
    item = (await api.post("/api/work", json=entry("lost-later"))).json()
    queue = work_queue(nc, names)
    first = await queue.get_record(item["id"])
    assert first.queue_seq is not None
    await asyncio.sleep(1.0)  # sweeps find it queued with its message, and leave it
    assert (await queue.get_record(item["id"])).queue_seq == first.queue_seq
    await nc.jetstream().delete_msg(names.work_stream, first.queue_seq)

    async def queued_again() -> bool:
        seq = (await queue.get_record(item["id"])).queue_seq
        return seq is not None and seq != first.queue_seq

    await eventually(queued_again, timeout=10)
    assert await complete_next(queue) == "lost-later"


async def test_the_sweeper_lapses_a_claim_whose_message_was_lost_and_queues_the_item_again(
    api: httpx.AsyncClient, nc: NatsClient, project_id: str, monkeypatch: Any
) -> None:
    """A claimed item's message stays in the stream while the claim holds it; one gone
    leaves a claim nothing can keep alive or redeliver. The sweep lapses it and queues the
    item again, and the work is done by the next claim."""
    import weft.project.repair

    monkeypatch.setattr(weft.project.repair, "GRACE", weft.project.repair.timedelta(0))
    names = ProjectNames(project_id)
    item = (await api.post("/api/work", json=entry("held-lost"))).json()
    queue = work_queue(nc, names)
    holder = Claimant(agent_id="b" * 32, agent_type="generic", capabilities=("code",))
    claimed = await queue.claim(holder)
    assert claimed is not None and claimed.id == item["id"]
    first = await queue.get_record(item["id"])
    assert first.queue_seq is not None
    await asyncio.sleep(1.0)  # sweeps find it claimed with its message, and leave it
    assert (await queue.get_record(item["id"])).item.status is WorkStatus.CLAIMED
    await nc.jetstream().delete_msg(names.work_stream, first.queue_seq)

    async def queued_again() -> bool:
        record = await queue.get_record(item["id"])
        return record.item.status is WorkStatus.QUEUED and record.queue_seq not in (None, first.queue_seq)

    await eventually(queued_again, timeout=10)
    assert (await api.get(f"/api/work/{item['id']}")).json()["errors"][0]["agent_id"] == "b" * 32
    assert await complete_next(queue) == "held-lost"
