"""The operator's moments in the console (docs/operator.md), in headless Chromium: an
escalation (the dead letter's diagnostic report on its page, its question answered from the
questions view with new instructions, the decision shown) and a bottleneck marked in the
work graph."""

from __future__ import annotations

import pytest
from console_helpers import ConsoleWeft, Tab, claimant, eventually, register, sign_in
from nats.aio.client import Client as NatsClient
from playwright.async_api import expect

from shared.names import ProjectNames
from testsupport.work import bottleneck_plan, work_queue

pytestmark = pytest.mark.timeout(90)


async def test_a_dead_letters_report_is_shown_and_its_question_answered_from_the_console(
    console_weft: ConsoleWeft, tab: Tab, project: str, nc: NatsClient
) -> None:
    async with console_weft.api(project) as api:
        work_id = (
            await api.post(
                "/api/work",
                json={
                    "task_id": "flaky-build",
                    "description": "fix it",
                    "capability": "code",
                    "max_attempts": 1,
                },
            )
        ).json()["id"]
        agent = await register(nc, project, "ana", "claude-code", capabilities=["code"])
        queue = work_queue(nc, ProjectNames(project))
        assert await queue.claim(claimant(agent)) is not None
        await queue.fail(work_id, agent.agent_id, "the linker ran out of memory")

        async def escalated() -> bool:
            return bool((await api.get(f"/api/work/{work_id}")).json().get("escalation"))

        await eventually(escalated, what="the sweep to escalate the dead letter")
        question_id = (await api.get(f"/api/work/{work_id}")).json()["escalation"]["question_id"]

        page = tab.page
        await sign_in(page, console_weft.console(project, f"work/{work_id}"))
        report = page.locator("#work-escalation")
        await expect(report).to_contain_text("P1 · waiting for your answer")
        await expect(report.locator("tbody tr")).to_have_count(1)
        await expect(report).to_contain_text("the linker ran out of memory")

        await page.evaluate("() => { location.hash = '#questions'; }")
        asked = page.locator(f'#open-questions article[data-question-id="{question_id}"]')
        await expect(asked).to_contain_text("failed all 1 attempts")
        await asked.get_by_label("Answer", exact=True).fill("retry: build with -j1")
        await asked.get_by_role("button", name="Send answer").click()
        await expect(asked).to_have_count(0)

        item = (await api.get(f"/api/work/{work_id}")).json()
        assert item["status"] == "queued" and item["description"].endswith("build with -j1")
        await page.evaluate(f"() => {{ location.hash = '#work/{work_id}'; }}")
        await expect(report).to_contain_text("decided: instructions by")


async def test_a_bottleneck_is_marked_in_the_work_graph(
    console_weft: ConsoleWeft, tab: Tab, project: str
) -> None:
    async with console_weft.api(project) as api:
        names = (await api.post("/api/work/plan", json=bottleneck_plan())).json()["names"]
    page = tab.page
    await sign_in(page, console_weft.console(project, f"work/{names['use0']}"))
    graph = page.get_by_role("table", name="Work graph")
    marked = graph.locator('tr[data-bottleneck="yes"]')
    await expect(marked).to_have_count(1)
    await expect(marked).to_have_attribute("data-work-id", names["schema"])
    await expect(marked).to_contain_text("holds up 3 open items")
