"""Landing in the console (docs/landing.md): the queues view's landing panel (who lands
now, what waits to land) and an item's landing attempts, in headless Chromium."""

from __future__ import annotations

from pathlib import Path

import pytest
from console_helpers import ConsoleWeft, Tab, claimant, register, sign_in
from nats.aio.client import Client as NatsClient
from playwright.async_api import expect

from shared.git.landlock import LandingLocks
from shared.models import LandingAttempt
from shared.names import ProjectNames
from shared.work.questions import QuestionBook
from shared.work.rules import Claimant
from testsupport.git import make_origin
from testsupport.work import hand_in, work_queue

pytestmark = pytest.mark.timeout(90)


async def test_the_landing_queue_and_an_items_landing_attempts_are_shown(
    console_weft: ConsoleWeft, tab: Tab, project: str, nc: NatsClient, tmp_path: Path
) -> None:
    page = tab.page
    await sign_in(page, console_weft.console(project, "queues"))
    await expect(page.locator("#landing-now")).to_contain_text("No repository is set")

    async with console_weft.api(project) as api:
        assert (await api.put("/api/repository", json={"url": str(make_origin(tmp_path))})).status_code == 200
        ids = [
            (
                await api.post(
                    "/api/work", json={"task_id": t, "description": f"do {t}", "capability": "code"}
                )
            ).json()["id"]
            for t in ("fix-login", "add-logout")
        ]
    author = await register(nc, project, "ana", "claude-code", capabilities=["code"])
    lander = Claimant(agent_id="e" * 32, agent_type="lander", capabilities=("land",))
    queue = work_queue(nc, ProjectNames(project))
    for work_id in ids:
        taken = await queue.claim(claimant(author))
        assert taken is not None and taken.id == work_id
        await hand_in(queue, taken.id, author.agent_id, f"loom/{taken.task_id}")
    merging = await queue.claim(lander)
    assert merging is not None and merging.id == ids[0]
    conflict = LandingAttempt(
        lander=lander.agent_id,
        outcome="conflict",
        files=["src/login.py"],
        detail="conflicts with main in: src/login.py",
    )
    await queue.settle_landing(ids[0], lander.agent_id, conflict, max_failures=3)
    assert (
        await LandingLocks(nc.jetstream(), ProjectNames(project)).acquire("main", lander.agent_id) is not None
    )

    # the queues view: the lock's holder and the item waiting to land
    await page.evaluate("() => { location.hash = '#work'; }")
    await page.evaluate("() => { location.hash = '#queues'; }")
    await expect(page.locator("#landing-now")).to_contain_text("Landing on main now")
    row = page.locator(f'#landing-queue tr[data-work-id="{ids[1]}"]')
    await expect(row).to_contain_text("add-logout")
    await expect(row).to_contain_text("loom/add-logout")
    await expect(row).to_contain_text("ana")

    # the item sent back: its attempt, the file, and who it is reserved for
    await page.evaluate(f"() => {{ location.hash = '#work/{ids[0]}'; }}")
    landing = page.locator("#work-landing")
    await expect(landing).to_contain_text("Reserved for")
    await expect(landing.locator('tr[data-outcome="conflict"]')).to_contain_text("src/login.py")
    await expect(landing.locator(".landing-detail")).to_contain_text("conflicts with main in: src/login.py")

    # the coordinator's veto: the other item waits on the operator's "land this?"
    asking = await queue.claim(lander)
    assert asking is not None and asking.id == ids[1]
    book = QuestionBook(nc, ProjectNames(project), queue)
    await book.ask_to_land(lander.agent_id, ids[1], "Land this? add-logout: do add-logout")
    await page.evaluate("() => { location.hash = '#queues'; }")
    await expect(row.locator("a.asks-operator")).to_have_text("asks you: land this?")
    await page.evaluate(f"() => {{ location.hash = '#work/{ids[1]}'; }}")
    await expect(page.locator("#work-approval")).to_contain_text("waiting for the operator's answer")
