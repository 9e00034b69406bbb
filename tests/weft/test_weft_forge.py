"""Forge mode's watch (weft/project/forge.py) against a stand-in GitHub: an item waiting on
its pull request completes when GitHub reports it merged (its dependent unblocks), goes
back to its author when the pull request is closed without merging, and is never put back
on the landers' queue while it waits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nats.aio.client import Client as NatsClient
from weft_helpers import claimant, eventually, register

from shared.git.forge import GitHub
from shared.models import Workstream
from shared.names import ProjectNames
from shared.work.rules import Claimant
from testsupport.git import make_origin
from testsupport.github import github_stand_in
from testsupport.work import work_queue

TOKEN = "ghp_standin_token"
LANDER = Claimant(agent_id="e" * 32, agent_type="lander", capabilities=("land",))


async def test_a_merged_pull_request_completes_its_item_and_a_closed_one_sends_it_back(
    weft_factory: Any, nc: NatsClient, project_id: str, tmp_path: Path
) -> None:
    async with (
        github_stand_in("acme/app", TOKEN) as gh,
        weft_factory(project_id=project_id, github_token=TOKEN, forge_poll_s=0.1) as weft,
        weft.client() as api,
    ):
        repo: dict[str, Any] = {"url": str(make_origin(tmp_path)), "forge": "github"}
        repo |= {"github_repository": "acme/app", "github_api_url": gh.url, "land_failures": 3}
        assert (await api.put("/api/repository", json=repo)).status_code == 200
        author = await register(nc, project_id)
        queue = work_queue(nc, ProjectNames(project_id))
        github = GitHub(gh.url, "acme/app", TOKEN)
        parked = {}
        for task in ("merged-one", "closed-one"):
            work_id = (
                await api.post("/api/work", json={"task_id": task, "description": "d", "capability": "code"})
            ).json()["id"]
            assert (await queue.claim(claimant(author))) is not None
            ws = Workstream(
                branch=f"loom/{task}", base_ref="main", base_sha="c" * 40, head_sha="d" * 40, commits=1
            )
            await queue.record_workstream(work_id, author.agent_id, ws, step="handed-in")
            await queue.complete(work_id, author.agent_id)
            assert (await queue.claim(LANDER)) is not None
            pr = await github.open_pull_request(ws.branch, "main", task, "body")
            waiting = await queue.await_forge(work_id, LANDER.agent_id, pr.number, pr.url)
            assert waiting.status.value == "landing" and waiting.landing is not None
            parked[task] = (work_id, pr.number)
        dependent: dict[str, Any] = {"task_id": "after", "description": "d", "capability": "code"}
        dependent["depends_on"] = [parked["merged-one"][0]]
        after_id = (await api.post("/api/work", json=dependent)).json()["id"]

        async def asked() -> bool | None:
            return sum(c.startswith("GET /pulls/") for c in gh.calls) >= 4 or None

        await eventually(asked, what="Weft to ask GitHub about both pull requests twice")
        listed = (await api.get("/api/landing")).json()["queue"]
        assert {e["work_id"] for e in listed} == {w for w, _ in parked.values()}  # still waiting
        assert {e["pull_request"] for e in listed} == {gh.pulls[1]["html_url"], gh.pulls[2]["html_url"]}
        assert await queue.queue_depths() == {}  # and never put back on the landers' queue

        gh.merge(parked["merged-one"][1], "f" * 40)
        gh.close(parked["closed-one"][1])

        async def settled() -> dict[str, Any] | None:
            items = {t: (await api.get(f"/api/work/{w}")).json() for t, (w, _) in parked.items()}
            return items if all(i["status"] != "landing" for i in items.values()) else None

        items = await eventually(settled, what="both pull requests settled")
        merged, closed = items["merged-one"], items["closed-one"]
        assert merged["status"] == "completed" and merged["landing"]["landed_sha"] == "f" * 40
        assert merged["assigned_to"] == author.agent_id
        assert (await api.get(f"/api/work/{after_id}")).json()["status"] == "queued"  # unblocked
        assert closed["status"] == "queued" and closed["reserved_for"] == author.agent_id
        assert closed["landing"]["failures"] == 1 and closed["landing"]["pull_request"] is None
        assert "closed without merging" in closed["error"]
        assert TOKEN not in (await api.get("/api/repository")).text
