"""Without WEFT_API_TOKENS (a loopback-only Weft, as `make run` starts it) the console asks
for nothing and shows the project at once, live."""

from __future__ import annotations

import pytest
from console_helpers import ConsoleWeft, Tab
from playwright.async_api import Route, expect

pytestmark = pytest.mark.timeout(60)


async def test_an_open_weft_shows_the_console_without_a_token(open_weft: ConsoleWeft, tab: Tab) -> None:
    page = tab.page
    await page.goto(f"{open_weft.url}/")
    await expect(page.locator("#live")).to_have_text("live", timeout=10_000)
    await expect(page.get_by_label("API token")).to_be_hidden()
    await expect(page.locator("#project")).to_have_text(f"project {open_weft.settings.project_id}")
    await expect(page.get_by_role("button", name="Forget token")).to_be_hidden()
    async with open_weft.api(open_weft.settings.project_id) as api:
        created = await api.post(
            "/api/work", json={"task_id": "open", "description": "d", "capability": "code"}
        )
    await page.get_by_role("link", name="Work", exact=True).click()
    await expect(page.locator(f'#work-items tr[data-work-id="{created.json()["id"]}"]')).to_be_visible()


async def test_the_api_docs_render_without_internet(open_weft: ConsoleWeft, tab: Tab) -> None:
    """/docs loads Swagger UI from Weft itself: with every request that leaves this machine's
    Weft refused (as on a machine offline), the page still renders the API."""
    page = tab.page
    left: list[str] = []

    async def offline(route: Route) -> None:
        if route.request.url.startswith(open_weft.url):
            await route.continue_()
        else:
            left.append(route.request.url)
            await route.abort("internetdisconnected")

    await page.route("**/*", offline)
    await page.goto(f"{open_weft.url}/docs")
    await expect(page.locator(".swagger-ui .info .title")).to_contain_text("Weft", timeout=15_000)
    await expect(page.locator(".opblock-tag-section").first).to_be_visible()
    await expect(page.get_by_text("/api/work/resolve").first).to_be_attached()
    assert left == [], left
