"""The console from the keyboard alone: sign in, move between views, act on an item; a
live redraw in between keeps the focus (and an armed confirmation) where it was."""

from __future__ import annotations

import pytest
from console_helpers import ADMIN_TOKEN, ConsoleWeft, Tab, claimant, eventually, register
from nats.aio.client import Client as NatsClient
from playwright.async_api import expect

from shared.names import ProjectNames
from testsupport.work import work_queue

pytestmark = pytest.mark.timeout(60)


async def test_sign_in_navigate_and_cancel_with_the_keyboard(
    console_weft: ConsoleWeft, tab: Tab, project: str, nc: NatsClient
) -> None:
    page = tab.page
    async with console_weft.api(project) as api:
        created = await api.post(
            "/api/work", json={"task_id": "by-keys", "description": "d", "capability": "code"}
        )
        work_id = created.json()["id"]
        await page.goto(console_weft.console(project))
        await expect(page.get_by_label("API token")).to_be_focused()
        await page.keyboard.type(ADMIN_TOKEN)
        await page.keyboard.press("Enter")
        await expect(page.locator("#live")).to_have_text("live", timeout=10_000)

        await expect(page.get_by_role("heading", name="Fleet")).to_be_focused()  # signed in: the view
        work_link = page.get_by_role("navigation", name="Views").get_by_role("link", name="Work", exact=True)
        for _ in range(10):  # back up into the navigation
            if await work_link.evaluate("el => el === document.activeElement"):
                break
            await page.keyboard.press("Shift+Tab")
        await expect(work_link).to_be_focused()
        await page.keyboard.press("Enter")
        heading = page.get_by_role("heading", name="Work", exact=True)
        await expect(heading).to_be_focused()
        # focused for screen readers, but no control: no thick focus ring on every move
        assert await heading.evaluate("el => getComputedStyle(el).outlineStyle") == "none"
        await expect(work_link).to_have_attribute("aria-current", "page")

        item_link = page.locator("#work-items").get_by_role("link", name="by-keys")
        await item_link.focus()
        await page.keyboard.press("Enter")
        await expect(page.locator("#work-status")).to_have_text("queued")
        cancel = page.get_by_role("button", name="Cancel")
        await cancel.focus()
        await page.keyboard.press("Enter")
        confirm = page.get_by_role("button", name="Confirm cancel")
        await expect(confirm).to_be_focused()
        # an agent claims the item meanwhile: the page redraws it, the confirmation stays
        coder = await register(nc, project, "coder", "claude-code", capabilities=["code"])
        claimed = await work_queue(nc, ProjectNames(project)).claim(claimant(coder))
        assert claimed is not None and claimed.id == work_id
        await expect(page.locator("#work-status")).to_have_text("claimed")
        await expect(confirm).to_be_focused()
        await page.keyboard.press("Enter")

        async def cancelled() -> bool:
            return (await api.get(f"/api/work/{work_id}")).json()["status"] == "cancelled"

        await eventually(cancelled, what="the item cancelled from the keyboard")
        await expect(page.locator("#work-status")).to_have_text("cancelled")

        # a fresh load (the token kept for the tab): the skip link comes first
        await page.reload()
        await expect(page.locator("#live")).to_have_text("live", timeout=10_000)
        await page.keyboard.press("Tab")
        await expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
        await page.keyboard.press("Enter")
        await expect(page.locator("#main")).to_be_focused()
