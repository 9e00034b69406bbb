"""Notifications over REST and through real stand-ins (testsupport/receivers.py): sinks set
and shown without their secrets, refusals naming the field; a question reaching a JSON
webhook, ntfy, Slack, e-mail (aiosmtpd) and Loom's signed webhook once each, through two
Weft replicas; priority floors and kinds; a dead sink recorded without holding up the
others; dedupe and the rate limit; reminders; the test send; per project."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from nats.aio.client import Client as NatsClient
from weft_helpers import eventually

from shared.models import Priority, WorkSubmission, utcnow
from shared.names import ProjectNames
from shared.signing import signed
from shared.usage.rules import Usage
from shared.work.questions import QuestionBook
from shared.work.rules import Claimant
from testsupport.events import work_actions
from testsupport.receivers import Receiver, black_hole, http_receiver, slack_to, smtp_server
from testsupport.work import bottleneck_plan, work_queue
from weft.notify.store import SinkStore

A = "a" * 32
HOOK_SECRET = "hook-secret-0123456789"
SLACK = "slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7/#ops"
PUBLIC = "https://loom.example.com"


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    async with http_receiver() as running:
        yield running


def book_of(nc: NatsClient, project_id: str) -> QuestionBook:
    return QuestionBook(nc, ProjectNames(project_id), work_queue(nc, ProjectNames(project_id)))


def json_sink(receiver: Receiver, path: str, **settings: Any) -> dict[str, Any]:
    host = receiver.url.removeprefix("http://")
    return {"url": f"json://{host}{path}", **settings}


async def test_sinks_are_shown_without_their_secrets_and_refused_naming_the_field(
    weft: Any, api: httpx.AsyncClient, receiver: Receiver, project_id: str
) -> None:
    assert (await api.get("/api/notify/sinks")).json()["items"] == []
    hook = {"url": f"{receiver.url}/hook?token=s3cr3t-in-url", "kind": "webhook", "secret": HOOK_SECRET}
    put = await api.put("/api/notify/sinks/pager", json=hook | {"min_priority": "P0", "events": ["question"]})
    assert put.status_code == 200, put.text
    assert (put.json()["kind"], put.json()["scheme"], put.json()["min_priority"]) == ("webhook", "http", "P0")
    listed = await api.get("/api/notify/sinks")
    assert [s["name"] for s in listed.json()["items"]] == ["pager"]
    for text in (put.text, listed.text):
        assert "s3cr3t-in-url" not in text and HOOK_SECRET not in text and receiver.url not in text

    secret = "ghp_Zq9TOKENsEcReT42xYwVb"
    for body, field in (
        ({"url": f"nothing-{secret}"}, "url"),
        ({"url": f"unknownscheme://{secret}"}, "url"),
        ({"url": f"{receiver.url}/hook/{secret}", "kind": "webhook"}, "secret"),
        ({"url": f"json://h/{secret}", "secret": "x" * 20}, "secret"),
        ({"url": f"json://h/{secret}", "events": ["gossip"]}, "events"),
        ({"url": f"json://h/{secret}", "min_priority": "P7"}, "min_priority"),
        ({"url": f"json://h/{secret}", "rate_per_minute": 0}, "rate_per_minute"),
        ({"url": f"ftp://h/{secret}", "kind": "webhook", "secret": HOOK_SECRET}, "url"),
    ):
        refused = await api.put("/api/notify/sinks/bad", json=body)
        assert refused.status_code in (400, 422), refused.text
        fields = {e["field"] for e in refused.json()["details"].get("errors", [])}
        fields.add(refused.json()["details"].get("field"))
        assert any(f == field or str(f).startswith(f"{field}.") for f in fields), (body, refused.text)
        assert secret not in refused.text
    assert (await api.put("/api/notify/sinks/Not_A_Name!", json={"url": "json://h/x"})).status_code == 422
    assert (await api.delete("/api/notify/sinks/nothing")).status_code == 404
    async with weft.client(project=f"{project_id}-x") as theirs:
        assert (await theirs.get("/api/notify/sinks")).json()["items"] == []
        assert (await theirs.delete("/api/notify/sinks/pager")).status_code == 404
    assert (await api.delete("/api/notify/sinks/pager")).status_code == 204
    assert (await api.get("/api/notify/sinks")).json()["items"] == []


async def test_a_question_reaches_each_sink_once_in_its_own_format_through_two_replicas(
    weft_factory: Any, receiver: Receiver, nc: NatsClient, project_id: str
) -> None:
    host = receiver.url.removeprefix("http://")
    with smtp_server() as mailbox, slack_to(receiver):
        async with (
            weft_factory(project_id=project_id, public_url=PUBLIC) as one,
            weft_factory(project_id=project_id, public_url=PUBLIC),  # a second replica
            one.client() as api,
        ):
            sinks = {
                "generic": {"url": f"json://{host}/json"},
                "phone": {"url": f"ntfy://{host}/ntfy-ops"},
                "chat": {"url": SLACK},
                "mail": {"url": mailbox.url()},
                "signed": {"url": f"{receiver.url}/hook", "kind": "webhook", "secret": HOOK_SECRET},
            }
            for name, sink in sinks.items():
                assert (await api.put(f"/api/notify/sinks/{name}", json=sink)).status_code == 200
            names = ProjectNames(project_id)

            async def both_pulling() -> bool:  # the second replica starts its share on its sweep
                info = await nc.jetstream().consumer_info(names.events_stream, names.notify_consumer)
                return (info.num_waiting or 0) >= 2

            await eventually(both_pulling, what="both replicas pulling the notification events")

            book = book_of(nc, project_id)
            queue = book.work
            item = await queue.submit(WorkSubmission(task_id="t", description="d", capability="code"))
            await queue.claim(Claimant(agent_id=A, agent_type="generic", capabilities=("code",)))
            asked = await book.ask(
                A, "store the API key in the repo?", choices=["no", "yes"], work_id=item.id,
                priority=Priority.P0, category="security", handle="bot",
            )  # fmt: skip
            await book.ask(A, "rename a helper?", priority=Priority.P3, default_answer="yes")  # log: none
            await book.ask(
                A, "retry the flaky test?", priority=Priority.P2, default_answer="retry"
            )  # floor P1

            generic = (await receiver.wait_for("/json"))[0].json()
            assert generic["title"] == "[P0] bot asks (security)"
            assert (
                "store the API key in the repo?" in generic["message"]
                and f"{PUBLIC}/#questions" in generic["message"]
            )
            ntfy = (await receiver.wait_for("/"))[0].json()  # ntfy's publish: JSON to the server's root
            assert ntfy["topic"] == "ntfy-ops" and "store the API key" in ntfy["message"]
            slack = (await receiver.wait_for("/slack"))[0].json()
            assert "store the API key" in json.dumps(slack)
            mail = (await mailbox.wait_for())[0]
            assert mail["Subject"] == "[P0] bot asks (security)" and mail["To"] == "ops@example.com"
            hook = (await receiver.wait_for("/hook"))[0]
            assert signed(HOOK_SECRET, hook.body, hook.headers.get("x-loom-signature-256"))
            payload = hook.json()
            assert (payload["kind"], payload["priority"], payload["subject_id"]) == (
                "question",
                "P0",
                asked.id,
            )
            assert payload["link"] == f"{PUBLIC}/#questions" and payload["project_id"] == project_id

            await asyncio.sleep(1.0)  # anything else would have arrived by now
            assert [len(receiver.at(p)) for p in ("/json", "/", "/slack", "/hook")] == [1, 1, 1, 1]
            assert len(mailbox.messages) == 1
            status = {s["name"]: s["status"] for s in (await api.get("/api/notify/sinks")).json()["items"]}
            assert all(s["sent"] == 1 and s["failed"] == 0 for s in status.values()), status


async def test_a_dead_sink_is_recorded_and_holds_up_nothing_and_the_rate_limit_holds(
    api: httpx.AsyncClient, receiver: Receiver, nc: NatsClient, project_id: str
) -> None:
    receiver.failing.add("/down")
    for name, path, rate in (("down", "/down", 30), ("up", "/up", 30), ("slow", "/limited", 2)):
        put = await api.put(f"/api/notify/sinks/{name}", json=json_sink(receiver, path, rate_per_minute=rate))
        assert put.status_code == 200, put.text
    book = book_of(nc, project_id)
    asked = [await book.ask(A, f"question {n}?", priority=Priority.P1) for n in range(4)]
    await receiver.wait_for("/up", 4)
    await receiver.wait_for("/limited", 2)

    async def recorded() -> dict[str, Any] | None:
        items = {s["name"]: s["status"] for s in (await api.get("/api/notify/sinks")).json()["items"]}
        return items if items["down"]["failed"] == 4 and items["slow"]["sent"] == 2 else None

    status = await eventually(recorded, what="every send recorded")
    assert status["down"]["failing_since"] is not None and status["down"]["last_error"] == (
        "the service answered HTTP 500"
    )
    assert status["up"]["failing_since"] is None and status["up"]["sent"] == 4
    metrics = (await api.get("/metrics")).text
    assert (
        f'weft_notifications_total{{outcome="rate_limited",project="{project_id}",sink="slow"}} 2.0'
        in metrics
    )
    assert f'weft_notifications_total{{outcome="failed",project="{project_id}",sink="down"}} 4.0' in metrics
    assert len((await api.get("/api/questions")).json()["items"]) == len(asked)  # the record keeps them all

    tried = await api.post("/api/notify/sinks/down/test")
    assert tried.json() == {"delivered": False, "error": "the service answered HTTP 500"}
    assert (await api.post("/api/notify/sinks/up/test")).json() == {"delivered": True, "error": None}
    assert (await api.post("/api/notify/sinks/none/test")).status_code == 404


async def test_a_hung_sink_delays_only_itself(
    api: httpx.AsyncClient, receiver: Receiver, nc: NatsClient, project_id: str
) -> None:
    async with black_hole() as hung:
        assert (await api.put("/api/notify/sinks/hung", json={"url": f"json://{hung}/x"})).status_code == 200
        assert (await api.put("/api/notify/sinks/fast", json=json_sink(receiver, "/fast"))).status_code == 200
        book = book_of(nc, project_id)
        started = asyncio.get_running_loop().time()
        for n in range(3):
            await book.ask(A, f"question {n}?", priority=Priority.P1)
        await receiver.wait_for("/fast", 3, timeout=5)  # the hung sink's first send holds it alone
        assert asyncio.get_running_loop().time() - started < 5


async def test_an_unanswered_sync_question_is_sent_again_as_a_reminder_once(
    api: httpx.AsyncClient, receiver: Receiver, nc: NatsClient, project_id: str
) -> None:
    assert (await api.put("/api/autonomy", json={"renotify_s": 60})).status_code == 200
    sink = json_sink(receiver, "/json", events=["reminder"], min_priority="P0")
    assert (await api.put("/api/notify/sinks/pager", json=sink)).status_code == 200
    books = [book_of(nc, project_id) for _ in range(3)]
    asked = await books[0].ask(A, "ship it?")  # unranked: P0, sync
    later = utcnow() + timedelta(seconds=61)
    reminded = await asyncio.gather(*(b.remind_due(later) for b in books))  # three replicas' sweeps
    assert sorted(len(r) for r in reminded) == [0, 0, 1]
    got = (await receiver.wait_for("/json"))[0].json()
    assert got["title"].startswith("Reminder: [P0]") and "ship it?" in got["message"]
    assert await books[1].remind_due(later + timedelta(seconds=30)) == []  # not due again yet
    await books[1].answer(asked.id, "yes")
    assert await books[1].remind_due(later + timedelta(hours=1)) == []  # answered: never again
    await asyncio.sleep(0.5)
    assert len(receiver.at("/json")) == 1


async def test_an_item_holding_up_three_is_a_bottleneck_announced_once_and_notified(
    api: httpx.AsyncClient, receiver: Receiver, nc: NatsClient, project_id: str
) -> None:
    sink = json_sink(receiver, "/json", events=["bottleneck"], min_priority="P2")
    assert (await api.put("/api/notify/sinks/lead", json=sink)).status_code == 200
    plan = bottleneck_plan()
    names = (await api.post("/api/work/plan", json=plan)).json()["names"]
    found = (await api.get("/api/work/bottlenecks")).json()
    assert found["threshold"] == 3
    assert [(b["item"]["id"], b["held_up"]) for b in found["items"]] == [(names["schema"], 3)]
    got = (await receiver.wait_for("/json"))[0].json()  # the sweep announced it
    assert got["title"] == "[P2] schema holds up 3 items"
    actions = await work_actions(nc, ProjectNames(project_id), names["schema"])
    assert actions.count("bottleneck") == 1
    assert f'weft_bottlenecks{{project="{project_id}"}} 1.0' in (await api.get("/metrics")).text

    assert (await api.post(f"/api/work/{names['use0']}/cancel", json={})).status_code == 200
    assert (await api.get("/api/work/bottlenecks")).json()["items"] == []  # two left: below the threshold

    async def cleared() -> bool:
        return f'weft_bottlenecks{{project="{project_id}"}} 0.0' in (await api.get("/metrics")).text

    await eventually(cleared, what="the gauge to follow")
    assert (await work_actions(nc, ProjectNames(project_id), names["schema"])).count("bottleneck") == 1


async def test_a_silent_worker_is_announced_once_per_stretch_and_notified(
    api: httpx.AsyncClient, receiver: Receiver, nc: NatsClient, project_id: str
) -> None:
    sink = json_sink(receiver, "/json", events=["silence"], min_priority="P2")
    assert (await api.put("/api/notify/sinks/lead", json=sink)).status_code == 200
    policy = {"work_silence_s": 1, "review_silence_s": None}
    assert (await api.put("/api/autonomy", json=policy)).status_code == 200
    queue = work_queue(nc, ProjectNames(project_id))
    item = await queue.submit(WorkSubmission(task_id="quiet", description="d", capability="code"))
    assert await queue.claim(Claimant(A, "generic", ("code",), ("default",))) is not None
    got = (await receiver.wait_for("/json"))[0].json()  # a second without progress: announced
    assert got["title"].startswith("[P2] quiet: its worker has been silent since")
    assert f"Held by {A[:8]} (claimed), no progress reported since" in got["message"]
    await queue.progress(item.id, A, 50, "half way")  # a new stretch, announced again
    second = (await receiver.wait_for("/json", 2))[1].json()
    assert "(in-progress)" in second["message"] and second["title"] != got["title"]
    await queue.complete(item.id, A, "done")
    await asyncio.sleep(1.2)  # several sweeps, finished: nothing more
    assert len(receiver.at("/json")) == 2
    assert (await work_actions(nc, ProjectNames(project_id), item.id)).count("silent") == 2


async def test_a_daily_budget_reached_is_announced_once_and_notified(
    api: httpx.AsyncClient, receiver: Receiver, nc: NatsClient, project_id: str
) -> None:
    sink = json_sink(receiver, "/json")  # no kinds listed: every kind, this newer one too
    stored = await api.put("/api/notify/sinks/lead", json=sink)
    assert stored.status_code == 200 and stored.json()["events"] is None
    assert (await api.put("/api/budgets/project", json={"cost": 1.0})).status_code == 200
    queue = work_queue(nc, ProjectNames(project_id))
    item = await queue.submit(WorkSubmission(task_id="spend", description="d", capability="code"))
    assert await queue.claim(Claimant(A, "generic", ("code",), ("default",))) is not None
    await queue.complete(item.id, A, "done", usage=Usage(cost=1.5, model="m"))
    got = (await receiver.wait_for("/json"))[0].json()
    assert got["title"] == "[P1] the project's daily budget is reached"
    assert "New claims wait until" in got["message"] and "shuttle budget set" in got["message"]
    await asyncio.sleep(1.0)  # several sweeps: still held, announced once
    assert len(receiver.at("/json")) == 1
    assert (await work_actions(nc, ProjectNames(project_id), project_id)).count("budget-held") == 1
    # a target's own budget, reached by its agents' usage: named in its own notice
    laptop = {"name": "laptop", "agent_type": "generic", "capabilities": ["code"], "mechanism": "local"}
    target = await api.post("/api/targets", json={**laptop, "config": {"command": ["/usr/bin/env", "true"]}})
    assert target.status_code == 201, target.text
    assert (await api.put("/api/budgets/targets/laptop", json={"cost": 1.0})).status_code == 200
    other = await queue.submit(WorkSubmission(task_id="spend-more", description="d", capability="code"))
    assert (await api.put("/api/budgets/project", json={"cost": 100.0})).status_code == 200  # raised
    queue.ledger.forget_cache()  # the claim reads the budgets just changed, not a cached copy
    assert await queue.claim(Claimant(A, "generic", ("code",), ("default",))) is not None
    await queue.complete(other.id, A, "done", usage=Usage(cost=2.0, model="m"), target_id=target.json()["id"])
    second = (await receiver.wait_for("/json", 2))[1].json()
    assert second["title"] == "[P1] spin-up target laptop's daily budget is reached"


async def test_a_boosted_bottleneck_is_raised_to_the_top_and_claimed_first(
    api: httpx.AsyncClient, nc: NatsClient, project_id: str
) -> None:
    assert (await api.put("/api/autonomy", json={"bottleneck_boost": True})).status_code == 200
    busy = await api.post(
        "/api/work", json={"task_id": "urgent", "description": "d", "capability": "code", "priority": 9}
    )
    plan = bottleneck_plan()
    schema = (await api.post("/api/work/plan", json=plan)).json()["names"]["schema"]

    async def raised() -> bool:
        return (await api.get(f"/api/work/{schema}")).json()["priority"] == 10

    await eventually(raised, what="the sweep to raise the bottleneck")
    queue = work_queue(nc, ProjectNames(project_id))
    first = await queue.claim(Claimant(A, "generic", ("code",), ("default",)))
    assert first is not None and first.id == schema  # ahead of the priority-9 item
    assert "prioritized" in await work_actions(nc, ProjectNames(project_id), schema)
    assert (await api.get(f"/api/work/{busy.json()['id']}")).json()["status"] == "queued"


async def test_the_rate_limit_holds_for_sends_raced_from_two_replicas(
    nc: NatsClient, project_id: str
) -> None:
    """Each replica has its own store over the same bucket: of 24 sends raced at once, as
    many are admitted as the sink's limit allows, and not one more."""
    names = ProjectNames(project_id)
    replicas = [SinkStore(nc.jetstream(), names), SinkStore(nc.jetstream(), names)]
    now = utcnow()
    taken = await asyncio.gather(*(replicas[n % 2].take_rate("ops", 5, now) for n in range(24)))
    assert sum(taken) == 5
    # a minute later the window has moved on and the sink may send again
    assert await replicas[0].take_rate("ops", 5, now + timedelta(seconds=61))
    assert not await replicas[1].take_rate("ops", 0, now + timedelta(seconds=61))
