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
from shared.names import ProjectNames
from shared.signing import signature_of
from shared.work.rules import Claimant
from testsupport.git import make_origin
from testsupport.github import github_stand_in
from testsupport.work import hand_in, work_queue

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
        for task in ("merged-one", "closed-one", "cancelled-one"):
            work_id = (
                await api.post("/api/work", json={"task_id": task, "description": "d", "capability": "code"})
            ).json()["id"]
            assert (await queue.claim(claimant(author))) is not None
            await hand_in(queue, work_id, author.agent_id, f"loom/{task}")
            assert (await queue.claim(LANDER)) is not None
            pr = await github.open_pull_request(f"loom/{task}", "main", task, "body")
            waiting = await queue.await_forge(work_id, LANDER.agent_id, pr.number, pr.url)
            assert waiting.status.value == "landing" and waiting.landing is not None
            parked[task] = (work_id, pr.number)
        dependent: dict[str, Any] = {"task_id": "after", "description": "d", "capability": "code"}
        dependent["depends_on"] = [parked["merged-one"][0]]
        after_id = (await api.post("/api/work", json=dependent)).json()["id"]

        async def asked() -> bool | None:
            return sum(c.startswith("GET /pulls/") for c in gh.calls) >= 6 or None

        await eventually(asked, what="Weft to ask GitHub about the pull requests twice")
        listed = (await api.get("/api/landing")).json()["queue"]
        assert {e["work_id"] for e in listed} == {w for w, _ in parked.values()}  # still waiting
        assert {e["pull_request"] for e in listed} == {pr["html_url"] for pr in gh.pulls.values()}
        assert await queue.queue_depths() == {}  # and never put back on the landers' queue

        cancelled_id, cancelled_pr = parked.pop("cancelled-one")
        assert (await api.post(f"/api/work/{cancelled_id}/cancel", json={})).status_code == 200

        async def closed_on_github() -> bool | None:
            return gh.pulls[cancelled_pr]["state"] == "closed" or None

        await eventually(closed_on_github, what="the cancelled item's pull request closed on GitHub")
        assert gh.pulls[cancelled_pr]["merged"] is False
        assert gh.calls.count(f"PATCH /pulls/{cancelled_pr}") == 1

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


async def test_githubs_webhook_settles_a_pull_request_at_once_and_unsigned_deliveries_are_refused(
    weft_factory: Any, nc: NatsClient, project_id: str, tmp_path: Path
) -> None:
    secret = "hook-secret-123"
    async with (
        github_stand_in("acme/app", TOKEN) as gh,
        weft_factory(
            project_id=project_id, github_token=TOKEN, github_webhook_secret=secret, forge_poll_s=3600
        ) as weft,
        weft.client() as api,
    ):
        repo: dict[str, Any] = {"url": str(make_origin(tmp_path)), "forge": "github"}
        repo |= {"github_repository": "acme/app", "github_api_url": gh.url}
        assert (await api.put("/api/repository", json=repo)).status_code == 200
        author = await register(nc, project_id)
        queue = work_queue(nc, ProjectNames(project_id))
        github = GitHub(gh.url, "acme/app", TOKEN)
        work_id = (
            await api.post("/api/work", json={"task_id": "hooked", "description": "d", "capability": "code"})
        ).json()["id"]
        assert (await queue.claim(claimant(author))) is not None
        await hand_in(queue, work_id, author.agent_id, "loom/hooked")
        assert (await queue.claim(LANDER)) is not None
        pr = await github.open_pull_request("loom/hooked", "main", "hooked", "body")
        await queue.await_forge(work_id, LANDER.agent_id, pr.number, pr.url)

        async def mirrored() -> bool | None:  # Weft's copy holds the item's pull request
            item = (await api.get(f"/api/work/{work_id}")).json()
            return (item["landing"] or {}).get("pull_request") == pr.number or None

        await eventually(mirrored, what="Weft's copy of the waiting item")

        async def polled() -> bool | None:  # the sweep's first ask, while it is open; then none for an hour
            return f"GET /pulls/{pr.number}" in gh.calls or None

        await eventually(polled, what="the first poll of the pull request")
        gh.hooks.append((f"{weft.base_url}/hooks/github?project={project_id}", secret))
        opened = await gh.deliver(pr.number)  # still open: heard, nothing to settle
        assert [(r.status_code, r.json()["settled"]) for r in opened] == [(202, 0)]

        gh.merge(pr.number, "f" * 40)
        forged = await gh.deliver(pr.number, secret="not-the-secret")
        assert forged[0].status_code == 401
        error = forged[0].json()
        assert error["details"]["field"] == "X-Hub-Signature-256" and secret not in forged[0].text
        assert (await api.get(f"/api/work/{work_id}")).json()["status"] == "landing"  # untouched

        heard = await gh.deliver(pr.number)
        assert [(r.status_code, r.json()) for r in heard] == [(202, {"event": "pull_request", "settled": 1})]
        done = (await api.get(f"/api/work/{work_id}")).json()
        assert done["status"] == "completed" and done["landing"]["landed_sha"] == "f" * 40
        assert gh.calls.count(f"GET /pulls/{pr.number}") == 1  # no poll did it: the one before merging
        again = await gh.deliver(pr.number)  # GitHub redelivers: nothing happens twice
        assert again[0].json()["settled"] == 0

        async with weft.client() as raw:
            ping = await raw.post(
                f"/hooks/github?project={project_id}",
                content=b"{}",
                headers={"X-GitHub-Event": "ping", "X-Hub-Signature-256": signature_of(secret, b"{}")},
            )
            assert ping.status_code == 202 and ping.json() == {"event": "ping", "settled": 0}
            broken = b'{"action": "closed", "repository": {"full_name": "acme/app"}}'
            bad = await raw.post(
                "/hooks/github",
                content=broken,
                headers={
                    "X-GitHub-Event": "pull_request",
                    "X-Hub-Signature-256": signature_of(secret, broken),
                },
            )
            assert bad.status_code == 400 and bad.json()["details"]["field"] == "pull_request.number"

    async with weft_factory(project_id=project_id) as off, off.client() as raw:
        body = b"{}"
        answer = await raw.post("/hooks/github", content=body, headers={"X-GitHub-Event": "ping"})
        assert answer.status_code == 404 and "WEFT_GITHUB_WEBHOOK_SECRET" in answer.json()["message"]
