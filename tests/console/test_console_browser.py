"""The console in a real browser (Debian's chromium) against a real Weft, nats-server, Warp
agents and the Shuttle CLI: sign-in, live work and agents, cancel, every view."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from console_helpers import (
    ADMIN_TOKEN,
    READ_TOKEN,
    ConsoleWeft,
    Tab,
    eventually,
    shuttle,
    sign_in,
    warp_agent,
)
from playwright.async_api import expect

pytestmark = pytest.mark.timeout(90)


async def test_a_wrong_token_shows_an_error_and_no_data(
    console_weft: ConsoleWeft, tab: Tab, project: str
) -> None:
    page = tab.page
    async with console_weft.api(project) as api:
        secret_task = "do-not-show-this-task"
        assert (
            await api.post(
                "/api/work", json={"task_id": secret_task, "description": "x", "capability": "code"}
            )
        ).status_code == 201
    await page.goto(console_weft.console(project))
    await expect(page.get_by_label("API token")).to_be_visible()
    wrong = "wrong-token-5f3a9c"
    await page.get_by_label("API token").fill(wrong)
    await page.get_by_role("button", name="Open the console").click()
    await expect(page.get_by_role("alert").filter(has_text="not accepted")).to_be_visible()
    await expect(page.get_by_role("navigation", name="Views")).to_be_hidden()
    content = await page.content()
    for hidden in (wrong, secret_task, project, ADMIN_TOKEN):
        assert hidden not in content
    assert await page.locator("#view").inner_html() == ""
    assert await page.evaluate("sessionStorage.length + localStorage.length") == 0

    # the right token opens it; kept for the tab (session storage), never shown
    await page.get_by_label("API token").fill(ADMIN_TOKEN)
    await page.get_by_role("button", name="Open the console").click()
    await expect(page.locator("#live")).to_have_text("live", timeout=10_000)
    await page.goto(console_weft.console(project, "work"))
    await expect(page.locator("#work-items").get_by_role("link", name=secret_task)).to_be_visible()
    assert ADMIN_TOKEN not in await page.content()
    assert await page.evaluate("localStorage.length") == 0
    await page.get_by_role("button", name="Forget token").click()
    await expect(page.get_by_label("API token")).to_be_visible()
    assert await page.evaluate("sessionStorage.length") == 0


async def test_work_submitted_with_shuttle_appears_within_a_second(
    console_weft: ConsoleWeft, tab: Tab, project: str
) -> None:
    page = tab.page
    await sign_in(page, console_weft.console(project, "work"))
    await expect(page.locator("#work-items")).to_contain_text("No work in this project.")
    out = await shuttle(
        console_weft,
        project,
        "submit",
        "Fix the flaky parser test",
        "-c",
        "code",
        "--task-id",
        "issue-42",
        "--json",
    )
    work_id = json.loads(out)["id"]
    # no reload: the item arrives over the WebSocket
    row = page.locator(f'#work-items tr[data-work-id="{work_id}"]')
    await expect(row).to_be_visible(timeout=1000)
    await expect(row.locator(".work-status")).to_have_text("queued")
    await expect(row.get_by_role("link", name="issue-42")).to_be_visible()


async def test_agents_live_a_killed_one_turns_offline_and_one_is_shut_down(
    console_weft: ConsoleWeft, tab: Tab, project: str, warp_home: Path
) -> None:
    page = tab.page
    await sign_in(page, console_weft.console(project))
    async with (
        warp_agent(console_weft.nats_url, project, warp_home, agent_type="claude-code") as doomed,
        warp_agent(console_weft.nats_url, project, warp_home, capabilities="code,review") as stopped,
    ):
        for agent in (doomed, stopped):
            row = page.locator(f'#agents tr[data-agent-id="{agent.agent_id}"]')
            await expect(row.locator(".agent-status")).to_have_text("online", timeout=15_000)
        await expect(page.locator(f'#agents tr[data-agent-id="{stopped.agent_id}"]')).to_contain_text(
            "review"
        )

        doomed.kill()  # no goodbye: its heartbeats stop, so it was lost (red), not stopped
        lost = page.locator(f'#agents tr[data-agent-id="{doomed.agent_id}"] .agent-status .status')
        await expect(lost).to_have_text("offline (lost)", timeout=15_000)
        await expect(lost).to_have_class("status s-offline")

        row = page.locator(f'#agents tr[data-agent-id="{stopped.agent_id}"]')
        await row.get_by_role("button", name="Shut down").click()
        await row.get_by_role("button", name="Confirm shut down").click()  # the second press
        await expect(row.locator(".agent-status")).to_have_text("offline", timeout=15_000)
        await expect(row.locator(".agent-status .status")).to_have_class("status s-stopped")  # quiet
        assert await stopped.proc.wait() == 0  # Warp drained and exited


async def test_cancel_from_the_console_cancels_the_item(
    console_weft: ConsoleWeft, tab: Tab, project: str
) -> None:
    page = tab.page
    async with console_weft.api(project) as api:
        created = await api.post(
            "/api/work", json={"task_id": "not-needed", "description": "drop me", "capability": "code"}
        )
        work_id = created.json()["id"]
        await sign_in(page, console_weft.console(project, f"work/{work_id}"))
        await expect(page.locator("#work-status")).to_have_text("queued")
        await page.get_by_role("button", name="Cancel").click()
        await page.get_by_role("button", name="Confirm cancel").click()

        async def cancelled() -> bool:
            return (await api.get(f"/api/work/{work_id}")).json()["status"] == "cancelled"

        await eventually(cancelled, what="the item cancelled over REST")
        await expect(page.locator("#work-status")).to_have_text("cancelled")
        await expect(page.get_by_role("button", name="Cancel")).to_have_count(0)


async def test_a_read_token_sees_everything_and_is_told_it_cannot_cancel(
    console_weft: ConsoleWeft, tab: Tab, project: str
) -> None:
    page = tab.page
    async with console_weft.api(project) as api:
        work_id = (
            await api.post("/api/work", json={"task_id": "t", "description": "d", "capability": "code"})
        ).json()["id"]
        await sign_in(page, console_weft.console(project, f"work/{work_id}"), READ_TOKEN)
        await page.get_by_role("button", name="Cancel").click()
        await page.get_by_role("button", name="Confirm cancel").click()
        await expect(page.locator(".view-error")).to_contain_text("needs a token with the operate scope")
        assert (await api.get(f"/api/work/{work_id}")).json()["status"] == "queued"


async def test_another_project_is_chosen_in_the_header(
    console_weft: ConsoleWeft, tab: Tab, project: str
) -> None:
    page = tab.page
    other = f"{project}-b"
    async with console_weft.api(other) as api:
        created = await api.post(
            "/api/work", json={"task_id": "over-there", "description": "d", "capability": "code"}
        )
        assert created.status_code == 201
    await sign_in(page, console_weft.console(project, "work"))
    chooser = page.get_by_label("Project", exact=True)
    await expect(chooser).to_have_value(project)
    await chooser.select_option(other)
    await expect(page).to_have_url(re.compile(rf"\?project={other}#work$"))
    await expect(page.locator(f'#work-items tr[data-work-id="{created.json()["id"]}"]')).to_be_visible()
    await expect(chooser).to_have_value(other)
