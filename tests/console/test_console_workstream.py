"""An item's code in the console (docs/workstreams.md): its branch, base, checkpoints and
the diff of its newest checkpoint, read from a real repository, in headless Chromium."""

from __future__ import annotations

from pathlib import Path

import pytest
from console_helpers import ConsoleWeft, Tab, claimant, register, sign_in
from nats.aio.client import Client as NatsClient
from playwright.async_api import expect

from shared.git.repository import Repository
from shared.git.workstream import HostWorkstreams
from shared.names import ProjectNames
from testsupport.git import clone, make_origin
from testsupport.work import work_queue

pytestmark = pytest.mark.timeout(90)


async def test_an_items_branch_checkpoints_and_diff_are_shown(
    console_weft: ConsoleWeft, tab: Tab, project: str, nc: NatsClient, tmp_path: Path
) -> None:
    origin = make_origin(tmp_path, {"README.md": "hello\n", "old.txt": "old\n"})
    async with console_weft.api(project) as api:
        assert (await api.put("/api/repository", json={"url": str(origin)})).status_code == 200
        work_id = (
            await api.post(
                "/api/work", json={"task_id": "fix-readme", "description": "d", "capability": "code"}
            )
        ).json()["id"]
    agent = await register(nc, project, "ana", "claude-code", capabilities=["code"])
    queue = work_queue(nc, ProjectNames(project))
    item = await queue.claim(claimant(agent))
    assert item is not None and item.id == work_id
    host = HostWorkstreams(
        clone(origin, tmp_path / "host"), Repository(url=str(origin)), author=("ana", "a@x")
    )
    place, record = await host.open(item)
    (place.directory / "README.md").write_text("hello\nworld\n")
    (place.directory / "old.txt").unlink()
    cp = await host.checkpoint(place, work_id, attempt=1, agent_id=agent.agent_id, previous=None)
    assert cp is not None
    await queue.record_workstream(
        work_id,
        agent.agent_id,
        record.model_copy(update={"checkpoints": [cp], "resume_from": cp.sha}),
        step="checkpoint",
    )

    page = tab.page
    await sign_in(page, console_weft.console(project, f"work/{work_id}"))
    await expect(page.locator("#work-branch")).to_contain_text(record.branch)
    await expect(page.locator("#work-branch")).to_contain_text(f"main @ {record.base_sha[:8]}")
    await expect(page.locator("#work-code")).to_contain_text(cp.sha[:8])
    diff = page.locator("#work-diff")
    await expect(diff).to_contain_text("+world")
    await expect(diff.locator(".diff-add")).to_have_text(["+world\n"])
    await expect(diff.locator(".diff-del")).to_have_text(["-old\n"])
    await expect(diff.locator(".diff-file").first).to_contain_text("--- a/README.md")
    files = page.locator("#work-code table").last
    await expect(files).to_contain_text("README.md")
    await expect(files).to_contain_text("old.txt")


async def test_the_repository_is_shown_checked_and_set_from_the_targets_view(
    console_weft: ConsoleWeft, tab: Tab, project: str, tmp_path: Path
) -> None:
    origin = make_origin(tmp_path)
    page = tab.page
    await sign_in(page, console_weft.console(project, "targets"))
    panel = page.locator("#repository")
    await expect(panel).to_contain_text("No repository")
    await page.get_by_label("URL").fill(str(tmp_path / "nowhere.git"))
    await page.get_by_role("button", name="Set").click()
    await expect(page.locator("#repository-reach")).to_contain_text("does not answer")
    await page.get_by_label("URL").fill("https://bot:ghp_s3cretT0ken@example.com/app.git")
    await page.get_by_role("button", name="Change").click()
    await expect(page.locator("#view .view-error")).to_contain_text("url: must not carry credentials")
    await expect(page.locator("#view")).not_to_contain_text("ghp_s3cretT0ken")
    await page.get_by_label("URL").fill(str(origin))
    await page.get_by_role("button", name="Change").click()
    await expect(page.locator("#repository-reach")).to_have_text("answers; the target branch is there")
    async with console_weft.api(project) as api:
        assert (await api.get("/api/repository")).json()["repository"]["url"] == str(origin)
