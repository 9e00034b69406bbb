"""A token that stops being accepted while the console is open (the operator rotated
WEFT_API_TOKENS) ends the session: the next read is refused, the page goes back to
sign-in, forgets the token and shows nothing of the project."""

from __future__ import annotations

import pytest
from console_helpers import Tab, serving_weft, sign_in
from playwright.async_api import expect

from shared.nats.server import EmbeddedNatsServer
from weft.tokens import parse_api_tokens

pytestmark = pytest.mark.timeout(60)


async def test_a_revoked_token_sends_the_console_back_to_sign_in(
    nats_server: EmbeddedNatsServer, tab: Tab, project: str
) -> None:
    page = tab.page
    async with serving_weft(nats_server.url, ["first-token-3b9d"]) as weft:
        await sign_in(page, weft.console(project), "first-token-3b9d")
        await expect(page.locator("#agents")).to_be_visible()
        # the running Weft now accepts another token only (its settings are what each request reads)
        weft.settings.api_tokens[:] = parse_api_tokens("second-token-8c2e")
        # The next read is refused: the queues view's (/api/dlq), asked for here, or one of the
        # page's own refreshes if it comes first (then the views are already hidden, so the
        # view is asked for through the address, not a click on its link).
        await page.evaluate("() => { location.hash = '#queues'; }")
        await expect(page.get_by_role("alert").filter(has_text="no longer accepted")).to_be_visible()
        await expect(page.get_by_label("API token")).to_be_visible()
        await expect(page.get_by_role("navigation", name="Views")).to_be_hidden()
        assert await page.locator("#view").inner_html() == ""
        assert await page.evaluate("sessionStorage.length") == 0
        await page.get_by_role("link", name="Skip to content").focus()  # nothing redraws the view
        await page.evaluate("window.dispatchEvent(new HashChangeEvent('hashchange'))")
        assert await page.locator("#view").inner_html() == ""

        await page.get_by_label("API token").fill("second-token-8c2e")
        await page.get_by_role("button", name="Open the console").click()
        await expect(page.locator("#live")).to_have_text("live", timeout=10_000)
        await expect(page.locator("#dead-letters")).to_be_visible()
