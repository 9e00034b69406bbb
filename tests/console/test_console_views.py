"""Every view of the console on a project with something in each: agents (one a real Warp,
one spun up by a target), work in every state with history, a plan's graph, a dead letter,
an open question; the actions of each view carried out and checked over REST. With
LOOM_CONSOLE_SCREENSHOTS=1 it writes the screenshots in docs/console/."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from console_helpers import ConsoleWeft, Tab, claimant, eventually, register, sign_in, snap, warp_agent
from nats.aio.client import Client as NatsClient
from playwright.async_api import expect
from synadia_ai.agent_service import AgentService, PromptStream
from synadia_ai.agents import Envelope

from shared.leases.book import LeaseBook
from shared.models import AgentStatus, Priority, SpinupOperation, SpinupState, Target
from shared.names import ProjectNames
from shared.work.questions import QuestionBook
from testsupport.work import work_queue
from weft.spinup.store import SpinupRecord, SpinupStore
from weft.targets.store import TargetStore

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
async def foreign_agent(nc: NatsClient, project: str) -> AsyncIterator[AgentService]:
    """An agent of Synadia's Agent Protocol that is not Loom's (docs/interop.md)."""

    async def echo(envelope: Envelope, stream: PromptStream) -> None:
        await stream.send(envelope.prompt)

    service = AgentService(
        agent="claude-code",
        owner="dana",
        session_name=f"console-{project}",
        nc=nc,
        description="Claude Code in dana's checkout",
        heartbeat_interval_s=1,
    )
    service.on_prompt(echo)
    await service.start()
    yield service
    await service.stop()


async def test_every_view_shows_the_project_and_acts_on_it(
    console_weft: ConsoleWeft,
    tab: Tab,
    project: str,
    nc: NatsClient,
    warp_home: Path,
    foreign_agent: AgentService,
) -> None:
    page = tab.page
    queue = work_queue(nc, ProjectNames(project))
    book = QuestionBook(nc, ProjectNames(project), queue)
    async with console_weft.api(project) as api, warp_agent(console_weft.nats_url, project, warp_home):
        target = await api.post(
            "/api/targets",
            json={
                "name": "laptop",
                "agent_type": "claude-code",
                "capabilities": ["code"],
                "mechanism": "local",
                "config": {"command": ["/usr/bin/env", "true"]},
            },
        )
        assert target.status_code == 201, target.text
        coder = await register(
            nc, project, "laptop-coder", "claude-code", capabilities=["code"], target_id=target.json()["id"]
        )
        spinup = SpinupOperation(
            project_id=project,
            target_id=target.json()["id"],
            target_name="laptop",
            agent_id=coder.agent_id,
            state=SpinupState.REGISTERED,
        )
        spinups = SpinupStore(nc.jetstream(), ProjectNames(project))
        assert await spinups.admit(Target.model_validate(target.json()), SpinupRecord(op=spinup)) is None
        asker = await register(nc, project, "design-bot", "copilot", capabilities=["design"])
        await register(nc, project, "docs-writer", "copilot", capabilities=["docs"])
        stopped = await register(nc, project, "idle-stopped", "generic", status=AgentStatus.OFFLINE)

        plan = await api.post(
            "/api/work/plan",
            json={
                "items": [
                    {
                        "name": "schema",
                        "task_id": "schema",
                        "description": "the schema",
                        "capability": "code",
                    },
                    {
                        "task_id": "api",
                        "description": "the API on the schema",
                        "capability": "code",
                        "priority": 8,
                        "after": ["schema"],
                    },
                ]
            },
        )
        assert plan.status_code == 201, plan.text
        schema_id = plan.json()["names"]["schema"]
        claimed = await queue.claim(claimant(coder))
        assert claimed is not None and claimed.id == schema_id
        await queue.progress(schema_id, coder.agent_id, 60, "tables written")
        await queue.complete(schema_id, coder.agent_id, {"tables": ["users", "orders"]})

        doomed = await api.post(
            "/api/work",
            json={"task_id": "flaky", "description": "always fails", "capability": "code", "max_attempts": 1},
        )
        doomed_id = doomed.json()["id"]
        while (item := await queue.claim(claimant(coder))) is not None and item.id != doomed_id:
            pass
        await queue.fail(doomed_id, coder.agent_id, "compiler exploded")

        design = await api.post(
            "/api/work", json={"task_id": "logo", "description": "draw a logo", "capability": "design"}
        )
        assert await queue.claim(claimant(asker)) is not None
        question = await book.ask(
            asker.agent_id,
            "round or square?",
            choices=["round", "square"],
            work_id=design.json()["id"],
            handle="design-bot",
        )
        # P1 is "async" under the default autonomy policy: the agent goes on, no item waits
        advisory = await book.ask(
            asker.agent_id,
            "rotate the signing key?",
            handle="design-bot",
            priority=Priority.P1,
            category="security",
            default_answer="next week",
        )

        # fleet: every agent, what it holds, who started it
        await sign_in(page, console_weft.console(project))
        agents = page.locator("#agents")
        await expect(agents.locator("tbody tr")).to_have_count(5, timeout=15_000)
        coder_row = agents.locator(f'tr[data-agent-id="{coder.agent_id}"]')
        await expect(coder_row).to_contain_text("laptop")  # spun up by that target
        await expect(agents.locator(f'tr[data-agent-id="{asker.agent_id}"]')).to_contain_text("logo")
        # "Queued" counts what waits in the queue (none here: api is claimed), as Shuttle does
        stats = (await api.get("/api/stats")).json()
        queued = stats["work"]["by_status"]["queued"]
        assert sum(stats["queue_depths"].values()) > queued  # the stream still holds claimed items
        queued_card = page.locator("dt", has_text="Queued").locator("xpath=following-sibling::dd")
        await expect(queued_card).to_have_text(str(queued))
        # the protocol's other agents on the account, below the project's own (Loom's are not there)
        others = page.locator("#protocol-agents")
        foreign_row = others.locator(f'tr[data-instance-id="{foreign_agent.instance_id}"]')
        await expect(foreign_row).to_contain_text(f"console-{project}")
        await expect(foreign_row).to_contain_text("claude-code")
        await expect(foreign_row).to_contain_text("Claude Code in dana's checkout")
        owners = others.locator("tbody tr td:nth-child(3)")  # the Owner column: Loom's own are the project
        await expect(owners.filter(has_text=re.compile(f"^{project}$"))).to_have_count(0)
        await expect(owners.filter(has_text=re.compile("^dana$"))).not_to_have_count(0)
        # an agent stopped normally (idle shutdown deregisters it) is quiet, not in alarm red
        stopped_status = agents.locator(f'tr[data-agent-id="{stopped.agent_id}"] td.agent-status .status')
        await expect(stopped_status).to_have_text("offline")
        await expect(stopped_status).to_have_class("status s-stopped")
        # what its current work is, not only its task id
        await expect(agents.locator(f'tr[data-agent-id="{asker.agent_id}"] .work-desc')).to_have_text(
            "draw a logo"
        )
        await page.get_by_label("Type").select_option("copilot")
        await expect(agents.locator("tbody tr")).to_have_count(2)
        await page.get_by_label("Type").select_option("")
        await expect(
            page.get_by_role("img", name="1 completed in the last hour", exact=False)
        ).to_be_attached()

        # work: filters and search
        await page.get_by_role("link", name="Work", exact=True).click()
        items = page.locator("#work-items tbody tr")
        await expect(items).to_have_count(4)
        # each row says what the work is (a column, not only a tooltip)
        await expect(page.get_by_role("columnheader", name="Description")).to_be_visible()
        described = page.locator(f'#work-items tr[data-work-id="{schema_id}"] td.work-desc')
        await expect(described).to_have_text("the schema")
        await page.get_by_label("Status").select_option("dead-lettered")
        await expect(items).to_have_count(1)
        await expect(items).to_contain_text("flaky")
        await page.get_by_label("Status").select_option("")
        await page.get_by_label("Priority").select_option("8")
        await expect(items).to_have_count(1)
        await page.get_by_label("Priority").select_option("")
        await page.get_by_label("Search").fill("logo")
        await expect(items).to_have_count(1)
        await page.get_by_label("Search").fill("")
        await expect(items).to_have_count(4)
        await snap(page, "work")

        # an item: progress, result, history (its context tree), graph
        await page.locator("#work-items").get_by_role("link", name="schema").click()
        await expect(page.locator("#work-status")).to_have_text("completed")
        await expect(page.locator("#view")).to_contain_text('"orders"')
        await expect(page.locator("#view")).to_contain_text("tables written")
        await expect(page.get_by_role("list", name="History, in tree order")).to_contain_text("submission")
        await expect(page.get_by_role("table", name="Work graph")).to_contain_text("api")
        # its trace: Weft's submission and this test's agent's claim and completion, one waterfall
        waterfall = page.locator("#trace-waterfall")
        for span in ("work.submit", "weft.route", "work.claim", "work.complete"):
            await expect(waterfall.locator(f"tr[data-span='{span}']")).to_have_count(1)
        await expect(waterfall.locator("tr[data-event='submission']")).to_have_count(1)
        for phase in ("queued", "working"):  # what it was doing between transitions, as bars
            await expect(waterfall.locator(f"tr[data-phase='{phase}'] .bar")).to_have_count(1)
        await expect(waterfall.locator("tr[data-span='work.claim'] th")).to_have_class("depth-1")
        assert await waterfall.locator(".bar").count() == await waterfall.locator("tbody tr").count()
        trace_id = (await api.get(f"/api/work/{schema_id}")).json()["traceparent"].split("-")[1]
        await expect(waterfall.locator("caption")).to_have_text(f"Trace {trace_id}")
        await snap(page, "work-item", full_page=True)

        # queues and the DLQ: retry puts the item back in the queue
        await page.get_by_role("link", name="Queues and DLQ").click()
        letters = page.locator("#dead-letters")
        await expect(letters).to_contain_text("compiler exploded")
        await snap(page, "queues")
        await letters.get_by_role("button", name="Retry flaky").click()
        await expect(letters).to_contain_text("The dead-letter queue is empty.")
        assert (await api.get(f"/api/work/{doomed_id}")).json()["status"] == "queued"
        await expect(page.locator('#queue-depths tr[data-capability="code"]')).to_be_visible()

        # targets: one whose circuit breaker disabled it says so, and why
        broken = await api.post(
            "/api/targets",
            json={
                "name": "broken",
                "agent_type": "generic",
                "capabilities": ["code"],
                "mechanism": "local",
                "config": {"command": ["/nonexistent/agent"]},
            },
        )
        assert broken.status_code == 201, broken.text
        targets = TargetStore(nc, nc.jetstream(), ProjectNames(project))
        await targets.start()
        try:
            assert await targets.trip("broken", "3 starts failed or timed out within 10 minutes") is not None
        finally:
            await targets.stop()
        await page.get_by_role("link", name="Targets and spin-ups").click()
        await expect(page.locator("#targets")).to_contain_text("laptop")
        tripped = page.locator(f'#targets tr[data-target-id="{broken.json()["id"]}"] td.failing')
        await expect(tripped).to_contain_text("disabled by its circuit breaker")
        await expect(tripped).to_contain_text("3 starts failed or timed out within 10 minutes")
        spun = page.locator(f'#spinups tr[data-spinup-id="{spinup.id}"]')
        await expect(spun).to_contain_text("registered")
        await expect(spun).to_contain_text("laptop-coder")
        await snap(page, "targets")

        # notification sinks (admin): one that cannot be reached (port 9 refuses), one off
        for name, sink in (
            ("pager", {"url": "json://127.0.0.1:9/dead"}),
            ("spare", {"url": "json://127.0.0.1:9/other", "enabled": False}),
        ):
            stored = await api.put(f"/api/notify/sinks/{name}", json=sink)
            assert stored.status_code == 200, stored.text
        tried = await api.post("/api/notify/sinks/pager/test")
        assert tried.status_code == 200, tried.text
        assert tried.json()["delivered"] is False

        # questions: the most urgent first; answered or put off from here, the work goes on
        await page.get_by_role("link", name="Questions").click()
        # where else a person hears of them: the sinks, a failing one said so, never a URL
        sinks = page.locator("#notify-sinks")
        await expect(sinks.locator("tbody tr")).to_have_count(2)
        await expect(sinks).to_contain_text("pager")
        await expect(sinks).to_contain_text("spare")
        dead = sinks.locator("tbody tr").nth(0)  # by name
        await expect(dead).to_have_attribute("data-sink-name", "pager")
        await expect(dead).to_contain_text("apprise (json)")
        await expect(dead.locator("td.failing")).to_contain_text("failing since")
        await expect(dead).to_contain_text("could not be reached")
        await expect(sinks.locator('tr[data-sink-name="spare"]')).to_contain_text("nothing sent yet")
        shown = await page.locator("body").inner_text()
        assert "127.0.0.1:9/" not in shown and "json://" not in shown
        waiting = page.locator("#open-questions article")
        await expect(waiting).to_have_count(2)
        await expect(waiting.nth(0)).to_have_attribute("data-question-id", question.id)  # P0 before P1
        urgent = waiting.filter(has_text="round or square?")
        put_off = page.locator(f'#open-questions article[data-question-id="{advisory.id}"]')
        await expect(put_off.locator(".priority")).to_have_text("P1 · security")
        await expect(put_off).to_contain_text("agent's default: next week")
        await snap(page, "questions")
        await urgent.get_by_label("Answer", exact=True).select_option("square")
        await urgent.get_by_role("button", name="Send answer").click()
        await expect(urgent).to_have_count(0)
        await expect(page.locator(f'tr[data-question-id="{question.id}"]')).to_contain_text("P0")
        answered = (await api.get(f"/api/questions/{question.id}")).json()
        assert (answered["status"], answered["answer"]) == ("answered", "square")
        await put_off.get_by_role("button", name="Put off").click()
        await expect(put_off).to_contain_text("put off until")
        deferred = (await api.get(f"/api/questions/{advisory.id}")).json()
        assert deferred["status"] == "open" and deferred["deferred_until"] is not None

        async def resumed() -> bool:
            return (await api.get(f"/api/work/{design.json()['id']}")).json()["status"] == "in-progress"

        await eventually(resumed, what="the work going on after the answer")

        # leases: who holds which files, live, and ending one
        api_id = plan.json()["names"].get("api") or plan.json()["items"][1]["id"]
        book = LeaseBook(nc, ProjectNames(project))
        await book.start()
        try:
            held = await book.acquire(
                coder.agent_id, ["src/api/"], reason="the API", work_id=api_id, handle="laptop-coder"
            )
            await page.get_by_role("link", name="Leases").click()
            row = page.locator(f'#lease-list tr[data-lease-id="{held.id}"]')
            await expect(row).to_contain_text("src/api/")
            await expect(row).to_contain_text("laptop-coder")
            await expect(row.get_by_role("link", name="api")).to_be_visible()
            later = await book.acquire(
                asker.agent_id, ["docs/logo.svg"], reason="the logo", handle="design-bot"
            )
            await expect(page.locator(f'#lease-list tr[data-lease-id="{later.id}"]')).to_contain_text(
                "the logo"
            )
            await snap(page, "leases")
            await row.get_by_role("button", name="End lease").click()
            await row.get_by_role("button", name="Confirm end lease").click()
            await expect(row).to_have_count(0)
            assert (await api.get(f"/api/leases/{held.id}")).status_code == 404
        finally:
            await book.stop()

        await page.get_by_role("link", name="Fleet").click()
        await expect(agents.locator("tbody tr")).to_have_count(5)
        await snap(page, "fleet")
        await page.emulate_media(color_scheme="dark")
        await expect(agents.locator("tbody tr")).to_have_count(5)
        await snap(page, "fleet-dark")
