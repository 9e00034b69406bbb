"""Scenario 25: three Warp agents edit one real git repository in parallel under file
leases; overlapping acquires are refused naming the holder; the git hook refuses a commit
by an agent without the lease; killing a holder frees its leases within the liveness
window, and its work's redelivery lets another agent take them."""

from __future__ import annotations

import asyncio
import subprocess
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from scenario_harness import Fabric, agents_in, new_project_id
from scenario_harness.drills import kill_agent

from testsupport.env import without_fabric

HEARTBEAT_S = 0.5
FAST = {"LOOM_WORK_ACK_WAIT_S": "5"}
"""Short, so a killed holder's item is redelivered within the test; not so short that a
claim lapses while a loaded machine starts the other agents (then two agents held one item)."""


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = without_fabric(also=("GIT_",))
    full.update(env or {})
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, env=full, check=False)


def make_repo(repo: Path) -> None:
    for args in (
        ("init", "-q", "-b", "main"),
        ("config", "user.email", "fleet@example.com"),
        ("config", "user.name", "Fleet"),
        ("config", "commit.gpgsign", "false"),
    ):
        assert git(repo, *args).returncode == 0
    for path in ("src/api/users.py", "src/api/orders.py", "docs/guide.md", "web/index.html"):
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text("v1\n")
    git(repo, "add", "-A")
    assert git(repo, "commit", "-qm", "start").returncode == 0


async def test_three_agents_one_repository_under_leases(fabric: Fabric) -> None:
    repo = fabric.workdir / "repo"
    repo.mkdir()
    make_repo(repo)
    installed = await fabric.shuttle("leases", "install-hook", "--repo", str(repo))
    assert installed.exit_code == 0, installed.stderr
    # Each agent works in its own worktree of the repository (one index each, so they can
    # commit at the same moment); the hook is the repository's, so it guards them all.
    trees = {}
    for handle in ("alice", "bob", "carol"):
        trees[handle] = fabric.workdir / f"wt-{handle}"
        added = git(repo, "worktree", "add", "-q", "-b", handle, str(trees[handle]))
        assert added.returncode == 0, added.stderr
    hook_env = {
        "LOOM_API_URL": fabric.weft.url,
        "LOOM_PROJECT_ID": fabric.project_id,
        "HOME": str(fabric.home),
    }
    if fabric.weft.token:
        hook_env["LOOM_API_TOKEN"] = fabric.weft.token

    async def commit(
        agent: Any, path: str, message: str, *, tree: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """The agent edits ``path`` in its worktree and commits it (the hook runs as that agent)."""
        where = trees[tree or agent.handle]

        def edit_and_commit() -> subprocess.CompletedProcess[str]:
            file = where / path
            file.write_text(file.read_text() + f"{message}\n")
            env = {**hook_env, "LOOM_AGENT_ID": agent.handle}
            added = git(where, "add", path, env=env)
            assert added.returncode == 0, added.stderr
            return git(where, "commit", "-qm", message, "--", path, env=env)

        return await asyncio.to_thread(edit_and_commit)

    items = {}
    for name, task in (("api", "split the users API"), ("docs", "document it"), ("web", "new page")):
        items[name] = (await fabric.shuttle_json("submit", task, "-c", "code"))["id"]

    async with AsyncExitStack() as stack:
        agents = await agents_in(
            stack,
            fabric,
            {
                handle: {
                    "capabilities": ["code"],
                    "heartbeat_s": HEARTBEAT_S,
                    "extra_env": FAST,
                    "project_path": trees[handle],
                }
                for handle in ("alice", "bob", "carol")
            },
        )
        alice, bob, carol = agents["alice"], agents["bob"], agents["carol"]
        trio = (alice, bob, carol)
        claimed = dict(
            zip((a.handle for a in trio), await asyncio.gather(*(a.claim() for a in trio)), strict=True)
        )
        by_item = {item["id"]: handle for handle, item in claimed.items() if item}
        assert set(by_item) == set(items.values())
        work_of = {handle: item["id"] for handle, item in claimed.items() if item}

        # Each leases what it will change, for the item it holds; alice gives an absolute path.
        wants = {
            "alice": [str(trees["alice"] / "src" / "api") + "/**"],
            "bob": ["docs/*.md"],
            "carol": ["web/**"],
        }
        leases = dict(
            zip(
                wants,
                await asyncio.gather(
                    *(
                        agents[h].call(
                            "warp_lease_acquire",
                            patterns=wants[h],
                            work_id=work_of[h],
                            reason=f"{h}'s change",
                        )
                        for h in wants
                    )
                ),
                strict=True,
            )
        )
        assert leases["alice"]["lease"]["patterns"] == ["src/api/**"]
        tokens = [leases[h]["lease"]["token"] for h in wants]
        assert len(set(tokens)) == 3

        # Overlapping acquires are refused, naming the holder and the work.
        refused = await bob.error("warp_lease_acquire", patterns=["src/api/users.py"])
        assert "alice" in refused and work_of["alice"] in refused and "src/api/**" in refused
        wide = await carol.error("warp_lease_acquire", patterns=["src/**"])
        assert "alice" in wide and leases["alice"]["lease"]["id"] in wide
        in_way = await bob.call("warp_lease_list", paths=["src/api/orders.py"])
        assert [c["holder_handle"] for c in in_way["conflicts"]] == ["alice"]

        # The three commit their own files in parallel; bob's commit to alice's file is refused.
        done = await asyncio.gather(
            commit(alice, "src/api/users.py", "alice: split users"),
            commit(bob, "docs/guide.md", "bob: document"),
            commit(carol, "web/index.html", "carol: page"),
        )
        for result in done:
            assert result.returncode == 0, result.stderr
        sneaky = await commit(bob, "src/api/users.py", "bob: quick fix")
        assert sneaky.returncode != 0
        assert (
            "commit refused" in sneaky.stderr
            and "alice" in sneaky.stderr
            and work_of["alice"] in sneaky.stderr
        )
        git(trees["bob"], "reset", "-q")  # bob backs his change out
        assert git(trees["bob"], "checkout", "--", "src/api/users.py").returncode == 0

        listed = await fabric.shuttle("leases")
        assert listed.exit_code == 0 and all(h in listed.stdout for h in ("alice", "bob", "carol"))

        # Bob finishes: his lease ends with his work.
        await bob.call("warp_work_complete", work_id=work_of["bob"], result={"docs": "done"})
        shown = await fabric.shuttle_json("leases")
        assert {lease["holder_handle"] for lease in shown["items"]} == {"alice", "carol"}

        # Alice's Warp dies mid-work: her leases end once she is offline (the liveness window).
        killed_at = time.monotonic()
        kill_agent(alice)
        deadline = killed_at + 3 * HEARTBEAT_S + 15
        while True:
            holders = {lease["holder_handle"] for lease in (await fabric.shuttle_json("leases"))["items"]}
            if "alice" not in holders:
                break
            assert time.monotonic() < deadline, "alice's lease outlived her"
            await asyncio.sleep(0.2)
        freed_s = time.monotonic() - killed_at
        assert freed_s < 3 * HEARTBEAT_S + 15

        # Her item is redelivered; carol (done with the page) takes it, and the lease with it.
        await carol.call("warp_work_complete", work_id=work_of["carol"], result={"page": "done"})
        redelivered = None
        for _ in range(200):
            redelivered = await carol.claim()
            if redelivered is not None:
                break
            await asyncio.sleep(0.1)
        assert redelivered is not None and redelivered["id"] == work_of["alice"]
        taken = await carol.call(
            "warp_lease_acquire", patterns=["src/api/**"], work_id=redelivered["id"], reason="taking over"
        )
        assert taken["lease"]["token"] > max(tokens), "a takeover's fencing token is larger"
        carried_on = await commit(carol, "src/api/orders.py", "carol: finish alice's split")
        assert carried_on.returncode == 0, carried_on.stderr
        await carol.call("warp_work_complete", work_id=redelivered["id"], result={"api": "split"})
        assert (await fabric.shuttle_json("leases"))["items"] == []

    final = await fabric.shuttle_json("work", "show", work_of["alice"])
    assert final["status"] == "completed" and final["attempts"] == 2
    log = git(repo, "log", "--all", "--format=%s").stdout.split("\n")
    assert (
        "bob: quick fix" not in log and "carol: finish alice's split" in log and "alice: split users" in log
    )
    outside = fabric.project(new_project_id())
    assert (await outside.shuttle_json("leases"))["items"] == []
