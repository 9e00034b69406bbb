"""The landing queue over Weft's REST API (docs/landing.md): items queued for landing in
the order landers take them, who lands now, a repository that is not set, and isolation
by project."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nats.aio.client import Client as NatsClient
from weft_helpers import claimant, eventually, register

from shared.git.landlock import LandingLocks
from shared.models import LandingAttempt, Workstream
from shared.names import ProjectNames
from shared.work.rules import Claimant
from testsupport.git import make_origin
from testsupport.work import work_queue


async def test_the_landing_queue_lists_items_in_landing_order_and_who_lands(
    weft: Any, api: Any, nc: NatsClient, project_id: str, tmp_path: Path
) -> None:
    none = await api.get("/api/landing")
    assert none.status_code == 404 and none.json()["details"]["field"] == "repository"
    assert (await api.put("/api/repository", json={"url": str(make_origin(tmp_path))})).status_code == 200
    assert (await api.get("/api/landing")).json() == {
        "project_id": project_id,
        "target": "main",
        "lock": None,
        "queue": [],
    }

    agent = await register(nc, project_id)
    queue = work_queue(nc, ProjectNames(project_id))
    ids = []
    for task, priority in (("low", 3), ("high", 8)):
        posted = await api.post(
            "/api/work",
            json={"task_id": task, "description": f"do {task}", "capability": "code", "priority": priority},
        )
        work_id = posted.json()["id"]
        taken = await queue.claim(claimant(agent))
        assert taken is not None
        ws = Workstream(
            branch=f"loom/{task}", base_ref="main", base_sha="c" * 40, head_sha="d" * 40, commits=1
        )
        await queue.record_workstream(taken.id, agent.agent_id, ws, step="handed-in")
        assert (await queue.complete(taken.id, agent.agent_id)).status.value == "landing"
        ids.append(work_id)

    body = (await api.get("/api/landing")).json()
    assert [e["task_id"] for e in body["queue"]] == ["high", "low"]  # priority first
    first = body["queue"][0]
    assert (first["status"], first["branch"], first["author"], first["failures"], first["lander"]) == (
        "landing",
        "loom/high",
        agent.agent_id,
        0,
        None,
    )
    work = (await api.get("/api/work", params={"status": "landing"})).json()
    assert {i["id"] for i in work["items"]} == set(ids)

    lock = await LandingLocks(nc.jetstream(), ProjectNames(project_id)).acquire("main", "e" * 32)
    assert lock is not None
    held = (await api.get("/api/landing")).json()["lock"]
    assert held["holder"] == "e" * 32 and held["target"] == "main"

    async with weft.client(project="other-project") as other:
        assert (await other.get("/api/landing")).status_code == 404  # its own project: no repository

    # a lander's outcomes reach the metrics: landings by outcome, batch size, gate time
    lander = Claimant(agent_id="e" * 32, agent_type="lander", capabilities=("land",))
    for outcome in ("landed", "conflict"):
        taken = await queue.claim(lander)
        assert taken is not None and taken.status.value == "merging"
        attempt = LandingAttempt(
            lander=lander.agent_id,
            outcome=outcome,
            batch=2,
            gate_s=1.5 if outcome == "landed" else None,
            sha="f" * 40 if outcome == "landed" else None,
            files=[] if outcome == "landed" else ["a.py"],
        )
        await queue.settle_landing(taken.id, lander.agent_id, attempt, max_failures=3)
    wanted = [
        f'weft_landings_total{{outcome="landed",project="{project_id}"}} 1.0',
        f'weft_landings_total{{outcome="conflict",project="{project_id}"}} 1.0',
        f'weft_landing_batch_size_count{{project="{project_id}"}} 2.0',
        f'weft_landing_gate_seconds_sum{{outcome="landed",project="{project_id}"}} 1.5',
    ]

    async def counted() -> bool | None:
        text = (await api.get("/metrics")).text
        return all(w in text for w in wanted) or None

    await eventually(counted, what="the landing outcomes in /metrics")


async def test_work_sent_back_to_an_offline_author_is_offered_to_everyone(
    api: Any, nc: NatsClient, project_id: str
) -> None:
    """Weft's sweep lifts the reservation of an item whose author is offline and leaves
    that of an online author's item alone (both are routed in the same sweeps)."""
    queue = work_queue(nc, ProjectNames(project_id))
    lander = Claimant(agent_id="e" * 32, agent_type="lander", capabilities=("land",))
    online = await register(nc, project_id, capabilities=("online-only",))
    gone = await register(nc, project_id, capabilities=("gone-only",))
    sent_back = {}
    for author, capability in ((online, "online-only"), (gone, "gone-only")):
        posted = await api.post(
            "/api/work", json={"task_id": capability, "description": "d", "capability": capability}
        )
        work_id = posted.json()["id"]
        taken = await queue.claim(claimant(author))
        assert taken is not None and taken.id == work_id
        ws = Workstream(
            branch=f"loom/{capability}", base_ref="main", base_sha="c" * 40, head_sha="d" * 40, commits=1
        )
        await queue.record_workstream(work_id, author.agent_id, ws, step="handed-in")
        await queue.complete(work_id, author.agent_id)
        assert (await queue.claim(lander)) is not None
        attempt = LandingAttempt(lander=lander.agent_id, outcome="conflict", files=["x.py"])
        back = await queue.settle_landing(work_id, lander.agent_id, attempt, max_failures=3)
        assert back.reserved_for == author.agent_id
        sent_back[capability] = work_id
    await register(nc, project_id, aid=gone.agent_id, capabilities=("gone-only",), stale=True)

    async def freed() -> dict[str, Any] | None:
        item: dict[str, Any] = (await api.get(f"/api/work/{sent_back['gone-only']}")).json()
        return item if item["reserved_for"] is None else None

    await eventually(freed, what="the offline author's item offered to everyone")
    kept = (await api.get(f"/api/work/{sent_back['online-only']}")).json()
    assert kept["reserved_for"] == online.agent_id and kept["status"] == "queued"
