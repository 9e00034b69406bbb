"""The public client (loom.client, docs/client.md) against a real Weft (served in a
thread, so the synchronous client can block while it answers) and the real work queue as
the agent: submit, a plan, watch an item to its end, questions and answers, the fleet,
leases, usage, errors; the synchronous client and the asyncio one."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest
from nats.aio.client import Client as NatsClient

from loom import AsyncLoomClient, LoomClient, Refused, Unreachable
from shared.agents.registry import Registry
from shared.leases.book import LeaseBook
from shared.models import AgentEntry, AgentStatus, WorkStatus, utcnow
from shared.names import ProjectNames
from shared.nats.server import EmbeddedNatsServer
from shared.work.rules import Claimant
from testsupport.serving import OUTLIVING_SWEEP_S, SERVED_AT_ONCE, serve_in_thread
from testsupport.work import work_queue

TOKEN = "client-test-token"
T = TypeVar("T")


@dataclass(frozen=True)
class Weft:
    url: str
    token: str


@pytest.fixture(scope="module")  # only this file's: it stops when the file is done
def weft(nats_server: EmbeddedNatsServer) -> Iterator[Weft]:
    from shared.settings import NatsSettings
    from weft.app import create_app
    from weft.settings import WeftSettings
    from weft.spinup.managed import ManagedSpinup
    from weft.spinup.settings import SpinupSettings

    settings = WeftSettings(
        nats=NatsSettings(url=nats_server.url),
        project_id="client-default",
        api_tokens=[TOKEN],
        sweep_interval_s=OUTLIVING_SWEEP_S,
        stale_check_interval_s=OUTLIVING_SWEEP_S,
        max_projects=SERVED_AT_ONCE,
    )
    app = create_app(settings, spinup=ManagedSpinup(SpinupSettings(health_checks=False)))
    with serve_in_thread(app, name="weft-client-tests") as served:
        yield Weft(served.url, TOKEN)


AGENT = Claimant(agent_id="a" * 32, agent_type="generic", capabilities=("code",))


def client(weft: Weft, project_id: str) -> LoomClient:
    return LoomClient(weft.url, token=weft.token, project=project_id)


async def test_submit_watch_and_wait_for_an_item_an_agent_completes(
    weft: Weft, nc: NatsClient, project_id: str
) -> None:
    queue = work_queue(nc, ProjectNames(project_id))
    with client(weft, project_id) as loom:
        item = await asyncio.to_thread(loom.submit, "Fix the flaky test", capability="code", priority=7)
        assert (item.description, item.priority, item.status) == ("Fix the flaky test", 7, WorkStatus.QUEUED)
        seen: list[str] = []
        ready = threading.Event()

        def follow() -> None:
            for event in loom.watch(item.id, timeout=60):
                seen.append(event.type)
                ready.set()

        watcher = asyncio.create_task(asyncio.to_thread(follow))
        await asyncio.to_thread(ready.wait, 30)
        claimed = await queue.claim(AGENT)
        assert claimed is not None and claimed.id == item.id
        await queue.complete(item.id, AGENT.agent_id, {"commit": "abc123"})
        await asyncio.wait_for(watcher, 60)
        done = await asyncio.to_thread(loom.wait, item.id, timeout=30)
    assert seen[0] == "snapshot" and seen[-1] == "work.completed"  # by its event or a recheck of it
    assert done.status is WorkStatus.COMPLETED and done.result == {"commit": "abc123"}


def test_a_plan_in_one_request_and_the_listing(weft: Weft, project_id: str) -> None:
    plan = {
        "items": [
            {"name": "parser", "task_id": "parser", "description": "Parse it", "capability": "code"},
            {
                "name": "docs",
                "task_id": "docs",
                "description": "Say it",
                "capability": "code",
                "after": ["parser"],
            },
        ]
    }
    with client(weft, project_id) as loom:
        parser, docs = loom.submit_plan(plan)
        assert (parser.status, docs.status) == (WorkStatus.QUEUED, WorkStatus.BLOCKED)
        assert docs.depends_on == [parser.id]
        assert {i.id for i in loom.work_list()} == {parser.id, docs.id}
        assert [i.id for i in loom.work_list(status="blocked")] == [docs.id]
        assert len(loom.work_list(limit=1)) == 1
        cancelled = loom.cancel(docs.id, "not needed")
        assert cancelled.status is WorkStatus.CANCELLED and loom.work(docs.id).status is WorkStatus.CANCELLED


async def test_questions_answers_fleet_leases_and_usage(weft: Weft, nc: NatsClient, project_id: str) -> None:
    from shared.work.questions import QuestionBook

    names = ProjectNames(project_id)
    asked = await QuestionBook(nc, names, work_queue(nc, names)).ask(
        AGENT.agent_id, "Drop the old API?", choices=["yes", "no"]
    )
    # The holder is a registered agent, online: Weft ends the leases of holders it does not
    # see online (its lease sweep), so an unregistered holder's lease may be gone by the listing.
    await Registry(nc.jetstream(), names).put(
        AgentEntry(
            agent_id=AGENT.agent_id,
            handle="alpha",
            agent_type=AGENT.agent_type,
            project_id=project_id,
            user_id="0123456789abcdef",
            hostname="host-1",
            capabilities=list(AGENT.capabilities),
            status=AgentStatus.ONLINE,
            last_heartbeat=utcnow(),
        )
    )
    book = LeaseBook(nc, names)
    await book.acquire(AGENT.agent_id, ["src/api/**"], handle="alpha", reason="split")
    await book.stop()
    with client(weft, project_id) as loom:
        (question,) = await listed_once_seen(loom.questions)
        assert question.id == asked.id and question.question == "Drop the old API?"
        answered = await asyncio.to_thread(loom.answer, asked.id, "no", by="alice")
        assert (answered.answer, answered.answered_by) == ("no", "alice")
        assert await asyncio.to_thread(loom.questions) == []
        (lease,) = await listed_once_seen(lambda: loom.leases(path=["src/api/users.py"]))
        assert lease.holder == AGENT.agent_id and lease.patterns == ["src/api/**"]
        fleet = await asyncio.to_thread(loom.fleet)
        assert fleet.targets == [] and fleet.stats.project_id == project_id
        assert [agent.agent_id for agent in fleet.agents] == [AGENT.agent_id]
        assert fleet.stats.work.total == 0
        usage = await asyncio.to_thread(loom.usage, by="agent")
        assert (usage.project_id, usage.by, usage.rows) == (project_id, "agent", [])


async def listed_once_seen(fetch: Callable[[], list[T]], timeout: float = 30.0) -> list[T]:
    """``fetch()`` once it lists something: Weft's copy follows a bucket a moment behind a
    write made beside it (a question asked, a lease taken by the agent side)."""
    deadline = time.monotonic() + timeout
    listed = await asyncio.to_thread(fetch)
    for _ in range(10_000):
        if listed or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.05)
        listed = await asyncio.to_thread(fetch)
    return listed


def test_errors_are_weft_s_answer_or_unreachable(weft: Weft, project_id: str, tmp_path: Path) -> None:
    with client(weft, project_id) as loom:
        with pytest.raises(Refused) as refused:
            loom.submit("x", capability="Not A Capability")
        assert refused.value.status == 422 and "capability" in refused.value.message
        assert "Not A Capability" not in refused.value.message
        with pytest.raises(Refused) as missing:
            loom.work("f" * 32)
        assert missing.value.status == 404
    with (
        LoomClient(weft.url, token="wrong", project=project_id) as stranger,
        pytest.raises(Refused) as denied,
    ):
        stranger.work_list()
    assert denied.value.status == 401 and "wrong" not in denied.value.message
    with LoomClient("http://127.0.0.1:9", project=project_id) as nowhere, pytest.raises(Unreachable):
        nowhere.work_list()


async def test_the_asyncio_client_does_the_same(weft: Weft, nc: NatsClient, project_id: str) -> None:
    queue = work_queue(nc, ProjectNames(project_id))
    async with AsyncLoomClient(weft.url, token=weft.token, project=project_id) as loom:
        item = await loom.submit("Count the errors", capability="code")
        (listed,) = await loom.work_list()
        assert listed.id == item.id and (await loom.work(item.id)).status is WorkStatus.QUEUED

        async def agent() -> None:
            claimed = await queue.claim(AGENT)
            assert claimed is not None
            await queue.complete(item.id, AGENT.agent_id, {"errors": 3})

        seen = []
        worker: asyncio.Task[None] | None = None
        async for event in loom.watch(item.id, poll_s=0.05, timeout=30):
            seen.append(event.item.status)
            if worker is None:  # the agent works once the watch has shown the item queued
                worker = asyncio.create_task(agent())
        assert worker is not None
        await worker
        assert seen[0] is WorkStatus.QUEUED and seen[-1] is WorkStatus.COMPLETED
        assert (await loom.wait(item.id)).result == {"errors": 3}
        assert await loom.questions() == [] and (await loom.fleet()).stats.work.total == 1
        assert (await loom.usage()).total.reports == 0
        with pytest.raises(Refused) as missing:
            await loom.work("f" * 32)
        assert missing.value.status == 404
    async with AsyncLoomClient("http://127.0.0.1:9") as nowhere:
        with pytest.raises(Unreachable):
            await nowhere.work_list()


async def test_items_and_holders_are_named_as_the_tables_show_them(
    weft: Weft, nc: NatsClient, project_id: str
) -> None:
    """A task id, the start of an id or an agent's handle, resolved by Weft's ``/resolve``
    routes as Shuttle's are; a reference that names several is refused by the parameter's
    name with the ids it matched, never the reference."""
    from shared.agents.registry import Registry
    from shared.models import AgentEntry

    names = ProjectNames(project_id)
    await Registry(nc.jetstream(), names).put(
        AgentEntry(
            agent_id=AGENT.agent_id,
            handle="alpha",
            agent_type="generic",
            project_id=project_id,
            user_id="0123456789abcdef",
            capabilities=["code"],
        )
    )
    book = LeaseBook(nc, names)
    await book.acquire(AGENT.agent_id, ["src/db/**"], handle="alpha", reason="migrate")
    await book.stop()
    with client(weft, project_id) as loom:
        first = await asyncio.to_thread(loom.submit, "Migrate", capability="code", task_id="migrate-db")
        assert (await asyncio.to_thread(loom.work, "migrate-db")).id == first.id
        assert (await asyncio.to_thread(loom.work, first.id[:8])).id == first.id
        (lease,) = await listed_once_seen(lambda: loom.leases(holder="alpha"))
        assert lease.holder == AGENT.agent_id
        second = await asyncio.to_thread(loom.submit, "Again", capability="code", task_id="migrate-db")
        with pytest.raises(Refused) as twice:
            await asyncio.to_thread(loom.cancel, "migrate-db")
        refused = twice.value
        assert refused.status == 400 and refused.message.startswith("work_id: names 2 work items")
        assert first.id in refused.message and second.id in refused.message
        assert "migrate-db" not in refused.message
        with pytest.raises(Refused) as nobody:
            await asyncio.to_thread(loom.leases, holder="s3cr3t-nobody")
        assert nobody.value.status == 404 and nobody.value.details["field"] == "holder"
        assert "s3cr3t" not in nobody.value.message
    async with AsyncLoomClient(weft.url, token=weft.token, project=project_id) as aloom:
        assert (await aloom.work(first.id[:10])).id == first.id
        assert [lease.holder for lease in await aloom.leases(holder="alpha")] == [AGENT.agent_id]
        assert (await aloom.cancel(second.id[:8], "duplicate")).status is WorkStatus.CANCELLED
        with pytest.raises(Refused) as still_two:  # a cancelled item keeps its task id
            await aloom.work("migrate-db")
        assert still_two.value.details["field"] == "work_id" and "migrate-db" not in still_two.value.message
