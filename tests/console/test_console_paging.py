"""Large lists are drawn a page at a time: 150 agents and 250 items show 100 rows each,
with pages to move through and filters over all of them."""

from __future__ import annotations

import asyncio

import pytest
from console_helpers import ConsoleWeft, Tab, register, sign_in
from nats.aio.client import Client as NatsClient
from playwright.async_api import expect

from shared.models import WorkSubmission
from shared.names import ProjectNames
from testsupport.work import work_queue

pytestmark = pytest.mark.timeout(90)


async def test_agents_and_work_are_paged(
    console_weft: ConsoleWeft, tab: Tab, project: str, nc: NatsClient
) -> None:
    page = tab.page
    await asyncio.gather(
        *(
            register(
                nc, project, f"agent-{i:03d}", "copilot" if i % 3 else "claude-code", capabilities=["code"]
            )
            for i in range(150)
        )
    )
    queue = work_queue(nc, ProjectNames(project))
    for start in range(0, 250, 50):
        await asyncio.gather(
            *(
                queue.submit(WorkSubmission(task_id=f"task-{i:03d}", description="d", capability="code"))
                for i in range(start, start + 50)
            )
        )

    await sign_in(page, console_weft.console(project))
    agents = page.locator("#agents tbody tr")
    pages = page.get_by_role("group", name="Agents pages")
    await expect(agents).to_have_count(100)
    await expect(pages).to_contain_text("1\u2013100 of 150 agents")
    await expect(agents.first).to_contain_text("agent-000")
    await pages.get_by_role("button", name="Next page").click()
    await expect(agents).to_have_count(50)
    await expect(agents.first).to_contain_text("agent-100")
    await expect(pages.get_by_role("button", name="Next page")).to_be_disabled()
    await page.get_by_label("Type").select_option("claude-code")  # a filter starts at page 1
    await expect(pages).to_contain_text("1\u201350 of 50 agents")

    await page.get_by_role("link", name="Work", exact=True).click()
    items = page.locator("#work-items tbody tr")
    work_pages = page.get_by_role("group", name="Work pages")
    await expect(work_pages).to_contain_text("1\u2013100 of 250 items")
    await expect(items).to_have_count(100)
    await work_pages.get_by_role("button", name="Next page").click()
    await work_pages.get_by_role("button", name="Next page").click()
    await expect(items).to_have_count(50)
    await page.get_by_label("Search").fill("task-24")
    await expect(items).to_have_count(10)
