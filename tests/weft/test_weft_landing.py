"""The landing queue over Weft's REST API (docs/landing.md): items queued for landing in
the order landers take them, who lands now, a repository that is not set, and isolation
by project."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nats.aio.client import Client as NatsClient
from weft_helpers import claimant, eventually, register

from shared.git.landlock import LandingLocks
from shared.models import LandingAttempt, utcnow
from shared.names import ProjectNames
from shared.work.questions import QuestionBook, answer_rule
from shared.work.rules import Claimant
from testsupport.git import make_origin
from testsupport.work import hand_in, work_queue


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
        landing = await hand_in(queue, taken.id, agent.agent_id, f"loom/{task}")
        assert landing.status.value == "landing"
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
            splits=0 if outcome == "landed" else 2,
        )
        await queue.settle_landing(taken.id, lander.agent_id, attempt, max_failures=3)
    wanted = [
        f'weft_landings_total{{outcome="landed",project="{project_id}"}} 1.0',
        f'weft_landings_total{{outcome="conflict",project="{project_id}"}} 1.0',
        f'weft_landing_batch_size_count{{project="{project_id}"}} 2.0',
        f'weft_landing_gate_seconds_sum{{outcome="landed",project="{project_id}"}} 1.5',
        f'weft_landing_splits_sum{{outcome="conflict",project="{project_id}"}} 2.0',
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
        await hand_in(queue, work_id, author.agent_id, f"loom/{capability}")
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


async def test_the_sweeper_settles_a_land_this_a_stopped_process_left_half_done(
    api: Any, nc: NatsClient, project_id: str, monkeypatch: Any, tmp_path: Path
) -> None:
    """A lander that died between parking the item and storing its question leaves an item
    waiting on nothing: back in the landers' queue (to be asked again). An answer whose
    process stopped before deciding: decided. A plan's veto reaches every item of it that
    sets none of its own."""
    import weft.project.repair

    monkeypatch.setattr(weft.project.repair, "GRACE", weft.project.repair.timedelta(0))
    assert (await api.put("/api/repository", json={"url": str(make_origin(tmp_path))})).status_code == 200
    names = ProjectNames(project_id)
    queue = work_queue(nc, names)
    book = QuestionBook(nc, names, queue)
    author = await register(nc, project_id, capabilities=("veto-code",))
    lander = Claimant(agent_id="e" * 32, agent_type="lander", capabilities=("land",))
    plan = {
        "veto": True,
        "items": [
            {"task_id": t, "description": "d", "capability": "veto-code", **extra}
            for t, extra in (("orphaned", {}), ("answered", {}), ("own-say", {"veto": False}))
        ],
    }
    posted = await api.post("/api/work/plan", json=plan)
    assert posted.status_code == 201, posted.text
    assert [i["veto"] for i in posted.json()["items"]] == [True, True, False]
    ids = []
    for _ in range(2):
        taken = await queue.claim(claimant(author))
        assert taken is not None
        await hand_in(queue, taken.id, author.agent_id, f"loom/{taken.task_id}")
        assert (await queue.claim(lander)) is not None
        ids.append(taken.id)
    orphaned, answered = ids
    await queue.await_approval(orphaned, lander.agent_id, "f" * 32)  # its question never stored
    asked = await book.ask_to_land(lander.agent_id, answered, "Land this?")
    kv = await book.bucket()  # answered, but the process stopped before deciding
    await kv.put(asked.id, answer_rule(asked, "land", "alice", utcnow()).to_json_bytes())

    async def settled() -> list[dict[str, Any]] | None:
        items = [(await api.get(f"/api/work/{i}")).json() for i in ids]
        return items if all(i["question_id"] is None for i in items) else None

    again, approved = await eventually(settled, what="the sweep to settle both")
    assert again["status"] == "landing" and again["landing"]["approved_by"] is None  # to be asked again
    assert approved["status"] == "landing" and approved["landing"]["approved_by"] == "alice"

    async def both_queued() -> bool | None:
        # the record changes first, the queue message follows it (Then.ENQUEUE): wait for both
        return await queue.queue_depths() == {"land": 2, "veto-code": 1} or None

    await eventually(both_queued, what="both items back in the landers' queue")
    body = (await api.get("/api/landing")).json()
    assert {e["work_id"]: e["approved_by"] for e in body["queue"]} == {orphaned: None, answered: "alice"}
