"""Review rounds in the console's work item view: a conditional pass shows its verdict,
score and feedback with links to the follow-up items it made, and a follow-up links back
to the item that made it (headless Chromium, a real Weft and work queue)."""

from __future__ import annotations

import pytest
from console_helpers import ConsoleWeft, Tab, claimant, register, sign_in
from nats.aio.client import Client as NatsClient
from playwright.async_api import expect

from shared.names import ProjectNames
from testsupport.work import work_queue

pytestmark = pytest.mark.timeout(90)


async def test_a_conditional_pass_links_its_follow_ups_both_ways(
    console_weft: ConsoleWeft, tab: Tab, project: str, nc: NatsClient
) -> None:
    async with console_weft.api(project) as api:
        submission = {
            "task_id": "parser",
            "description": "Parse the config",
            "capability": "code",
            "review": {"capability": "review", "rounds": 2},
        }
        work_id = (await api.post("/api/work", json=submission)).json()["id"]
    worker = await register(nc, project, "ana", "claude-code", capabilities=["code"])
    reviewer = await register(nc, project, "rex", "claude-code", capabilities=["review"])
    queue = work_queue(nc, ProjectNames(project))
    assert (await queue.claim(claimant(worker))) is not None
    await queue.complete(work_id, worker.agent_id, {"tests": "12 passed"})
    assert (await queue.claim(claimant(reviewer))) is not None
    passed = await queue.review(
        work_id, reviewer.agent_id, "conditional", "checks pass; docs missing", 80, ["Document the errors"]
    )
    (follow_up,) = passed.reviews[-1].follow_ups

    page = tab.page
    await sign_in(page, console_weft.console(project, f"work/{work_id}"))
    rounds = page.locator("#work-reviews")
    await expect(rounds).to_contain_text("conditional pass")
    await expect(rounds).to_contain_text("checks pass; docs missing")
    await expect(rounds).to_contain_text("rex")
    link = rounds.locator(".follow-ups a")
    await expect(link).to_have_attribute("href", f"#work/{follow_up}")
    await link.click()
    back = page.locator("#work-follow-up-of")
    await expect(back).to_have_attribute("href", f"#work/{work_id}")
    await expect(page.locator("#view-title")).to_contain_text("parser-follow-up-1")
