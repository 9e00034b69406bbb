"""Fixtures for the console's browser tests (helpers in ``console_helpers``): one chromium
and one Weft per module, a tab and a project per test."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from console_helpers import ADMIN_TOKEN, READ_TOKEN, ConsoleWeft, Tab, serving_weft
from playwright.async_api import Browser, async_playwright

from shared.nats.server import EmbeddedNatsServer
from testsupport.browser import CHROMIUM_ARGS, chromium_path
from testsupport.env import strip_fabric


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's own NATS_URL, LOOM_* or WEFT_* must not leak into Weft, Warp or Shuttle."""
    strip_fabric(monkeypatch)


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    path = chromium_path()
    if path is None:
        pytest.fail(
            "the console's browser tests need Debian's chromium at /usr/bin/chromium "
            "(make install puts it there: apt-get install chromium) or LOOM_CHROMIUM set to one"
        )
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            await launched.close()


@pytest.fixture(scope="module")
async def console_weft(nats_server: EmbeddedNatsServer) -> AsyncIterator[ConsoleWeft]:
    """One Weft with API tokens for the module; tests keep apart by project."""
    async with serving_weft(nats_server.url, [ADMIN_TOKEN, f"read:{READ_TOKEN}"]) as weft:
        yield weft


@pytest.fixture(scope="module")
async def open_weft(nats_server: EmbeddedNatsServer) -> AsyncIterator[ConsoleWeft]:
    """A Weft without API tokens (loopback only), as `make run` starts one."""
    async with serving_weft(nats_server.url, []) as weft:
        yield weft


@pytest.fixture
async def tab(browser: Browser) -> AsyncIterator[Tab]:
    context = await browser.new_context(viewport={"width": 1400, "height": 900})
    page = await context.new_page()
    found = Tab(page, context, [])
    page.on("pageerror", lambda exc: found.errors.append(str(exc)))
    try:
        yield found
    finally:
        await context.close()
    assert found.errors == [], f"the console raised script errors: {found.errors}"


@pytest.fixture
def project() -> str:
    return f"c-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def warp_home(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "warps"
