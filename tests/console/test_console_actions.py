"""The console's other actions, each checked over REST: retry from an item's page (its failed
attempts and their errors shown first), discard from the dead-letter queue."""

from __future__ import annotations

import pytest
from console_helpers import ConsoleWeft, Tab, claimant, register, sign_in
from nats.aio.client import Client as NatsClient
from playwright.async_api import expect

from shared.models import WorkSubmission
from shared.names import ProjectNames
from shared.work.queue import WorkQueue
from testsupport.work import work_queue

pytestmark = pytest.mark.timeout(60)


async def dead_letter(queue: WorkQueue, nc: NatsClient, project: str, task_id: str, error: str) -> str:
    item = await queue.submit(
        WorkSubmission(task_id=task_id, description="d", capability="code", max_attempts=1)
    )
    agent = await register(nc, project, f"agent-{task_id}", "generic", capabilities=["code"])
    claimed = await queue.claim(claimant(agent))
    assert claimed is not None and claimed.id == item.id
    await queue.fail(item.id, agent.agent_id, error)
    return item.id


async def test_retry_from_the_item_and_discard_from_the_dlq(
    console_weft: ConsoleWeft, tab: Tab, project: str, nc: NatsClient
) -> None:
    page = tab.page
    queue = work_queue(nc, ProjectNames(project))
    retried = await dead_letter(queue, nc, project, "retry-me", "disk full on attempt 1")
    dropped = await dead_letter(queue, nc, project, "drop-me", "not worth it")
    async with console_weft.api(project) as api:
        await sign_in(page, console_weft.console(project, f"work/{retried}"))
        await expect(page.locator("#work-status")).to_have_text("dead-lettered")
        attempts = page.get_by_role("table", name="Attempts that failed")
        await expect(attempts).to_contain_text("disk full on attempt 1")
        await expect(attempts).to_contain_text("agent-retry-me")
        await expect(page.get_by_role("button", name="Cancel")).to_have_count(0)  # nothing to cancel
        await page.get_by_role("button", name="Retry").click()
        await expect(page.locator("#work-status")).to_have_text("queued")
        item = (await api.get(f"/api/work/{retried}")).json()
        assert (item["status"], item["attempts"]) == ("queued", 0)

        await page.get_by_role("link", name="Queues and DLQ").click()
        letters = page.locator("#dead-letters")
        await expect(letters.locator("tbody tr")).to_have_count(1)
        await letters.get_by_role("button", name="Discard drop-me", exact=True).click()
        confirm = letters.get_by_role("button", name="Confirm discard drop-me", exact=True)
        await expect(confirm).to_be_focused()
        await confirm.click()  # the second press confirms
        await expect(letters).to_contain_text("The dead-letter queue is empty.")
        assert (await api.get("/api/dlq")).json()["items"] == []
        assert (await api.get(f"/api/work/{dropped}")).json()["status"] == "dead-lettered"  # the record stays


async def test_a_weft_without_leases_says_it_has_none(
    console_weft: ConsoleWeft, tab: Tab, project: str
) -> None:
    """A Weft from before leases answers /api/leases with 404 (played here by the browser's
    own request routing: this Weft has leases)."""
    page = tab.page
    await page.route(
        "**/api/leases",
        lambda route: route.fulfill(
            status=404, json={"error": "not_found", "message": "no such route", "details": None}
        ),
    )
    await sign_in(page, console_weft.console(project, "leases"))
    await expect(page.locator("#leases")).to_contain_text("Leases aren't available in this Weft")


async def test_the_operator_pauses_and_resumes_the_project_from_the_queues_view(
    console_weft: ConsoleWeft, tab: Tab, project: str
) -> None:
    page = tab.page
    async with console_weft.api(project) as api:
        await sign_in(page, console_weft.console(project, "queues"))
        state = page.locator("#pause-state")
        await expect(state).to_have_text("Claims and spin-ups are admitted.")
        await page.locator("#pause-reason").fill("release freeze")
        # a pause from elsewhere (seen through the next stats frame, every 5 s) and a resume
        # redraw the panel; what the operator had typed is still there
        assert (await api.put("/api/pause", json={"reason": "elsewhere"})).status_code == 200
        await expect(state).to_contain_text("elsewhere", timeout=20_000)
        await page.get_by_role("button", name="Resume").click()
        await expect(state).to_have_text("Claims and spin-ups are admitted.")
        await expect(page.locator("#pause-reason")).to_have_value("release freeze")
        await page.get_by_role("button", name="Pause the project").click()
        await page.get_by_role("button", name="Confirm pause").click()  # the second press confirms
        await expect(state).to_contain_text("Paused by operator")
        await expect(state).to_contain_text("release freeze")
        paused = (await api.get("/api/pause")).json()["paused"]
        assert (paused["by"], paused["reason"]) == ("operator", "release freeze")
        assert paused["stop_running"] is False
        await expect(state).to_contain_text("held items go on")
        await page.get_by_role("button", name="Resume").click()
        await expect(state).to_have_text("Claims and spin-ups are admitted.")
        assert (await api.get("/api/pause")).json()["paused"] is None
        # a pause that stops the held items too, at their next checkpoint
        await page.get_by_label("Stop held items at their next checkpoint").check()
        await page.get_by_role("button", name="Pause the project").click()
        await page.get_by_role("button", name="Confirm pause").click()
        await expect(state).to_contain_text("held items stop at their next checkpoint")
        assert (await api.get("/api/pause")).json()["paused"]["stop_running"] is True


async def test_a_live_update_leaves_unchanged_dead_letters_as_they_are(
    console_weft: ConsoleWeft, tab: Tab, project: str, nc: NatsClient
) -> None:
    """The view draws again on every update; dead-letter rows drawn again from the same letters
    replaced their buttons, and a press spanning the redraw (down on the old button, up on the
    new) was lost (a CI run's discard never armed). Rows drawn the same are kept (``patch``)."""
    page = tab.page
    await dead_letter(work_queue(nc, ProjectNames(project)), nc, project, "keep-me", "no")
    async with console_weft.api(project) as api:
        await sign_in(page, console_weft.console(project, "queues"))
        letters = page.locator("#dead-letters")
        discard = await letters.get_by_role("button", name="Discard keep-me", exact=True).element_handle()
        # an update the view draws: work queued for a capability nothing else uses
        body = {"task_id": "other", "description": "d", "capability": "elsewhere"}
        assert (await api.post("/api/work", json=body)).status_code == 201
        # stats are read again on a timer (main.js), so this may take a few seconds
        depth = page.locator('#queue-depths tr[data-capability="elsewhere"]')
        await expect(depth).to_be_visible(timeout=20_000)
        assert await discard.evaluate("button => button.isConnected")  # the same button, not a copy
        await discard.click()
        confirm = letters.get_by_role("button", name="Confirm discard keep-me", exact=True)
        await expect(confirm).to_be_focused()
