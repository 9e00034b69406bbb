"""Scenario 27: workstreams (docs/workstreams.md). A bare repository stands in for the
project's origin; three Warp agents in three clones (three hosts) work on three items at
once, each in its own worktree. One is SIGKILLed after writing files through a shell
without committing: its item is redelivered and the next agent's worktree holds those
files. Every item is handed in with its branch pushed and recorded (and queued for
landing, which scenario 28 carries on); no commit lands on another item's branch; every
clone's own tree is untouched."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from scenario_harness import Fabric, eventually
from scenario_harness.drills import kill_agent

from testsupport.git import clone, make_origin, remote_sha, run_git, tree_state

FAST = {"LOOM_WORK_ACK_WAIT_S": "5", "LOOM_CHECKPOINT_S": "0.3"}
"""A claim nobody keeps alive lapses after the ack wait (ben's, once he is killed): short, but
longer than the three claims take together on a loaded machine, or a lapsed claim is handed
to the next claimant and two agents work on one item."""


def changed_files(origin: Path, base: str, head: str) -> set[str]:
    return set(run_git("diff", "--name-only", base, head, cwd=origin).splitlines())


async def test_three_hosts_three_items_one_killed_nothing_lost(fabric: Fabric) -> None:
    git_dir = fabric.workdir / "git"
    git_dir.mkdir()
    origin = make_origin(git_dir, {"README.md": "hello\n", "src/app.py": "print('app')\n"})
    main_before = remote_sha(origin, "refs/heads/main")
    hosts = {name: clone(origin, git_dir / f"host-{name}") for name in ("ana", "ben", "cy")}
    trees = {name: tree_state(path) for name, path in hosts.items()}

    repo = await fabric.shuttle_json("repo", "set", str(origin))
    assert repo["reach"]["target_found"] is True
    items = [
        await fabric.shuttle_json("submit", f"task {n}", "--capability", "code", "--task-id", f"task-{n}")
        for n in (1, 2, 3)
    ]
    async with AsyncExitStack() as stack:
        agents = {
            name: await stack.enter_async_context(
                fabric.agent(name, capabilities=["code"], project_path=hosts[name], extra_env=FAST)
            )
            for name in ("ana", "ben", "cy")
        }
        # the three hosts claim at once, as they would
        taken_at_once = await asyncio.gather(*(agent.call("warp_work_claim") for agent in agents.values()))
        claims: dict[str, dict[str, Any]] = dict(zip(agents, taken_at_once, strict=True))
        for name, claim in claims.items():
            assert claim["claimed"], name
        places = {name: Path(c["workstream"]["directory"]) for name, c in claims.items()}
        for name, place in places.items():
            assert place.is_relative_to(hosts[name]) and place != hosts[name]
            assert (
                run_git("symbolic-ref", "--short", "HEAD", cwd=place) == claims[name]["workstream"]["branch"]
            )
        assert len({c["workstream"]["branch"] for c in claims.values()}) == 3

        # ana and cy edit as an editor would; ben through a shell, and never commits
        (places["ana"] / "ana.txt").write_text("ana's change\n")
        (places["cy"] / "src" / "cy.py").write_text("print('cy')\n")
        shell = await asyncio.create_subprocess_exec(
            "sh",
            "-c",
            "echo 'ben was here' > ben.txt && mkdir -p notes && echo draft > notes/plan.md",
            cwd=places["ben"],
        )
        assert await shell.wait() == 0
        bens_item = claims["ben"]["item"]["id"]

        async def checkpointed() -> str | None:
            # the timer's checkpoint, with the shell's files in it, has reached the origin and
            # the item's record (a checkpoint is pushed first, then recorded: killed between
            # the two, the next attempt still starts from it, but the hand-off would name the
            # one before)
            sha = remote_sha(origin, f"refs/loom/checkpoints/{bens_item}")
            if sha is None:
                return None
            files = run_git("ls-tree", "-r", "--name-only", sha, cwd=origin).splitlines()
            if not {"ben.txt", "notes/plan.md"} <= set(files):
                return None
            async with fabric.api() as api:
                ws = (await api.get(f"/api/work/{bens_item}")).json()["workstream"]
            return sha if ws and ws["resume_from"] == sha else None

        checkpoint = await eventually(checkpointed, timeout=30, what="a checkpoint of ben's worktree")
        kill_agent(agents["ben"])  # no goodbye, no hand-in

        for name in ("ana", "cy"):
            done = await agents[name].call(
                "warp_work_complete", work_id=claims[name]["item"]["id"], result="ok"
            )
            assert done["item"]["status"] == "landing"  # complete once a lander lands it

        async def redelivered() -> dict[str, Any] | None:
            out = await agents["ana"].call("warp_work_claim")
            return out if out["claimed"] else None

        taken = await eventually(redelivered, timeout=30, interval=0.5, what="ben's item redelivered")
        assert taken["item"]["id"] == bens_item and taken["item"]["attempts"] == 2
        resumed = taken["workstream"]
        assert resumed["branch"] == claims["ben"]["workstream"]["branch"]
        assert resumed["resumed_from"] == checkpoint
        here = Path(resumed["directory"])
        assert here.is_relative_to(hosts["ana"])
        assert (here / "ben.txt").read_text() == "ben was here\n"
        assert (here / "notes" / "plan.md").read_text() == "draft\n"
        assert "?? ben.txt" in run_git("status", "--porcelain", cwd=here)  # uncommitted, as ben left it
        said = [n["text"] or "" for n in taken["context"]["nodes"] if n["kind"] == "workstream"]
        assert any(checkpoint[:12] in s for s in said), said
        (here / "ben.txt").write_text("ben was here\nana finished it\n")
        await agents["ana"].call("warp_work_complete", work_id=bens_item, result="ok")

    async with fabric.api() as api:
        finals = {i["id"]: (await api.get(f"/api/work/{i['id']}")).json() for i in items}
    own = {
        claims["ana"]["item"]["id"]: {"ana.txt"},
        claims["cy"]["item"]["id"]: {"src/cy.py"},
        bens_item: {"ben.txt", "notes/plan.md"},
    }
    for work_id, item in finals.items():
        assert item["status"] == "landing", item  # no lander runs here: scenario 28 lands
        ws = item["workstream"]
        assert ws["head_sha"] == remote_sha(origin, f"refs/heads/{ws['branch']}")  # pushed
        assert ws["base_sha"] == main_before and ws["commits"] >= 1
        assert changed_files(origin, ws["base_sha"], ws["head_sha"]) == own[work_id]  # no one else's
    assert remote_sha(origin, "refs/heads/main") == main_before  # nothing landed on the target
    for name, path in hosts.items():
        assert tree_state(path) == trees[name], name  # each host's own checkout untouched

    listed = await fabric.shuttle("work", "checkpoints", bens_item)
    assert listed.exit_code == 0 and checkpoint[:12] in listed.stdout, listed.stderr
    diffed = await fabric.shuttle("work", "diff", bens_item)
    assert diffed.exit_code == 0, diffed.stderr
    assert "A ben.txt  +2 -0" in diffed.stdout and "+ana finished it" in diffed.stdout
