"""Workstreams through Warp's tools (docs/workstreams.md): a claim makes the item's
worktree, progress checkpoints it, completion pushes before done, a failure to make one
gives the claim back. Real NATS, real git, the SDK's in-memory MCP client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from nats.aio.client import Client as NatsClient
from warp_harness import make_identity, ok, text

from shared.git.repository import RepositorySettings, RepositoryStore
from shared.git.workstream import checkpoint_ref
from shared.models import WorkStatus
from shared.names import ProjectNames
from shared.nats.server import EmbeddedNatsServer
from testsupport.git import clone, make_origin, remote_sha, run_git, tree_state
from testsupport.work import work_queue
from warp.runtime import WarpRuntime
from warp.server import build_server
from warp.settings import WarpSettings

A = "a" * 32
B = "b" * 32


@asynccontextmanager
async def agent(url: str, project_id: str, folder: Path, agent_id: str) -> AsyncIterator[Client]:
    settings = WarpSettings(capabilities=("code", "review"), heartbeat_s=5.0, checkpoint_s=0)
    rt = WarpRuntime(make_identity(project_id, folder, agent_id), settings, nats_url=url)
    async with Client(build_server(rt)) as client:
        await rt.services()
        await ok(client, "warp_registry_register", {"capabilities": ["code", "review"]})
        yield client


def gone(path: Path) -> bool:
    return not path.exists()


@asynccontextmanager
async def nats(url: str) -> AsyncIterator[NatsClient]:
    nc = NatsClient()
    await nc.connect(url)
    try:
        yield nc
    finally:
        await nc.close()


async def set_repository(nc: NatsClient, project_id: str, url: str) -> None:
    await RepositoryStore(nc.jetstream(), ProjectNames(project_id)).put(
        RepositorySettings(url=url), by="admin"
    )


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    return make_origin(tmp_path, {"README.md": "hello\n", "old.txt": "old\n"})


async def test_claim_progress_and_complete_work_in_the_items_worktree(
    nats_server: EmbeddedNatsServer, project_id: str, origin: Path, tmp_path: Path
) -> None:
    checkout = clone(origin, tmp_path / "host1")
    before = tree_state(checkout)
    async with nats(nats_server.url) as nc:
        await set_repository(nc, project_id, str(origin))
        async with agent(nats_server.url, project_id, checkout, A) as client:
            sent = await ok(client, "warp_work_broadcast", {"description": "fix it", "capability": "code"})
            work_id = sent["item"]["id"]
            claimed = await ok(client, "warp_work_claim")
            place = claimed["workstream"]
            directory = Path(place["directory"])
            assert directory.parent == checkout / ".loom" / "worktrees"
            assert place["branch"].startswith("loom/") and place["base_sha"] == before[0]
            assert claimed["item"]["id"] == work_id

            (directory / "new.txt").write_text("written by a shell\n")
            (directory / "old.txt").unlink()
            progress = await client.call_tool("warp_work_progress", {"work_id": work_id, "percent": 50})
            assert "Checkpoint" in text(progress)
            item = (await work_queue(nc, ProjectNames(project_id)).get(work_id)).workstream
            assert item is not None and item.resume_from is not None and len(item.checkpoints) == 1
            assert remote_sha(origin, checkpoint_ref(work_id)) == item.resume_from

            done = await client.call_tool("warp_work_complete", {"work_id": work_id, "result": "ok"})
            assert not done.is_error, text(done)
            assert "pushed at" in text(done) and "Queued for landing" in text(done)
        final = await work_queue(nc, ProjectNames(project_id)).get(work_id)
    assert final.status is WorkStatus.LANDING and final.workstream is not None  # docs/landing.md
    ws = final.workstream
    assert ws.head_sha == remote_sha(origin, f"refs/heads/{ws.branch}")
    assert (ws.commits, ws.files_changed) == (1, 2) and ws.resume_from is None
    assert run_git("show", f"{ws.head_sha}:new.txt", cwd=origin) == "written by a shell"
    assert gone(directory)  # a final item's worktree goes
    assert tree_state(checkout) == before  # the agent's own checkout untouched


async def test_a_workstream_that_cannot_be_made_gives_the_claim_back(
    nats_server: EmbeddedNatsServer, project_id: str, origin: Path, tmp_path: Path
) -> None:
    checkout = clone(origin, tmp_path / "host1")
    async with nats(nats_server.url) as nc:
        await set_repository(nc, project_id, str(tmp_path / "moved-away.git"))
        async with agent(nats_server.url, project_id, checkout, A) as client:
            sent = await ok(client, "warp_work_broadcast", {"description": "d", "capability": "code"})
            res = await client.call_tool("warp_work_claim", {})
            assert res.is_error
            said = text(res)
            assert said.startswith("workstream: ") and "given back" in said and "main checkout" in said
            assert (res.meta or {})["loom/error"]["details"]["field"] == "workstream"
            item = await work_queue(nc, ProjectNames(project_id)).get(sent["item"]["id"])
            assert item.status is WorkStatus.QUEUED and item.assigned_to is None
            assert item.errors and "workstream" in item.errors[-1].error
            made = [p.name for p in (checkout / ".loom" / "worktrees").iterdir() if p.name != ".repo.git"]
            assert made == [".gitignore"]  # nothing half-made
            assert run_git("status", "--porcelain", cwd=checkout) == ""


async def test_an_item_that_opts_out_and_a_project_without_repository_claim_as_before(
    nats_server: EmbeddedNatsServer, project_id: str, origin: Path, tmp_path: Path
) -> None:
    checkout = clone(origin, tmp_path / "host1")
    async with nats(nats_server.url) as nc, agent(nats_server.url, project_id, checkout, A) as client:
        await ok(client, "warp_work_broadcast", {"description": "d", "capability": "code"})
        first = await ok(client, "warp_work_claim")
        assert first["workstream"] is None  # no repository set
        await ok(client, "warp_work_complete", {"work_id": first["item"]["id"]})
        await set_repository(nc, project_id, str(origin))
        queue = work_queue(nc, ProjectNames(project_id))
        from shared.models import WorkSubmission

        await queue.submit(WorkSubmission(task_id="t", description="d", capability="code", isolated=False))
        claimed = await ok(client, "warp_work_claim")
    assert claimed["claimed"] is True and claimed["workstream"] is None


async def test_leases_foresee_two_branches_changing_the_same_paths(
    nats_server: EmbeddedNatsServer, project_id: str, origin: Path, tmp_path: Path
) -> None:
    """Each item in its own worktree and branch: a lease is still project-wide, given as the
    worktree's paths (absolute or relative), and a refusal names the other item's branch."""
    async with nats(nats_server.url) as nc:
        await set_repository(nc, project_id, str(origin))
        async with (
            agent(nats_server.url, project_id, clone(origin, tmp_path / "host1"), A) as one,
            agent(nats_server.url, project_id, clone(origin, tmp_path / "host2"), B) as two,
        ):
            for n in (1, 2):
                await ok(one, "warp_work_broadcast", {"description": f"d{n}", "capability": "code"})
            first, second = await ok(one, "warp_work_claim"), await ok(two, "warp_work_claim")
            here = Path(first["workstream"]["directory"])
            held = await ok(
                one,
                "warp_lease_acquire",
                {"patterns": [str(here / "src" / "app.py")], "work_id": first["item"]["id"]},
            )
            assert held["lease"]["patterns"] == ["src/app.py"]  # the worktree's path, not the host's
            assert held["lease"]["branch"] == first["workstream"]["branch"]
            refused = await two.call_tool(
                "warp_lease_acquire", {"patterns": ["src/**"], "work_id": second["item"]["id"]}
            )
            assert refused.is_error
            said = text(refused)
            assert f"on branch {first['workstream']['branch']}" in said and "src/app.py" in said


async def test_the_sweep_takes_leftover_worktrees_and_old_checkpoint_refs(
    nats_server: EmbeddedNatsServer, project_id: str, origin: Path, tmp_path: Path
) -> None:
    from shared.git.repository import Repository
    from shared.git.workstream import HostWorkstreams
    from shared.models import WorkSubmission
    from shared.work.rules import Claimant
    from warp.workstreams import Workstreams

    checkout = clone(origin, tmp_path / "host1")
    names = ProjectNames(project_id)
    async with nats(nats_server.url) as nc:
        store = RepositoryStore(nc.jetstream(), names)
        await store.put(RepositorySettings(url=str(origin), keep_days=1), by="admin")
        queue = work_queue(nc, names)
        me = Claimant(agent_id=A, agent_type="generic", capabilities=("code",))
        done = await queue.submit(WorkSubmission(task_id="done", description="d", capability="code"))
        held = await queue.submit(WorkSubmission(task_id="held", description="d", capability="code"))
        for _ in range(2):
            assert await queue.claim(me) is not None
        await queue.complete(done.id, A)
        host = HostWorkstreams(checkout, Repository(url=str(origin)), author=("t", "t@loom.invalid"))
        for work_id in (done.id, held.id, "f" * 32):  # the last one's record is gone
            place, _ = await host.open(item_of(work_id))
            (place.directory / "x.txt").write_text(work_id)
            await host.checkpoint(place, work_id, attempt=1, agent_id=A, previous=None)
        sweeper = Workstreams(nc.jetstream(), names, make_identity(project_id, checkout, A))

        assert await sweeper.sweep(queue) == (0, 1)  # young: only the ref of a gone record
        assert set(host.worktree_ages()) == {done.id, held.id, "f" * 32}

        await store.put(RepositorySettings(url=str(origin), keep_days=0), by="admin")
        assert await sweeper.sweep(queue) == (2, 1)
        assert set(host.worktree_ages()) == {held.id}  # this agent still works on it
        assert remote_sha(origin, checkpoint_ref(held.id)) is not None
        assert remote_sha(origin, checkpoint_ref(done.id)) is None
        assert run_git("status", "--porcelain", cwd=checkout) == ""


def item_of(work_id: str) -> Any:
    from shared.models import WorkItem

    return WorkItem(
        id=work_id, project_id="p", task_id=f"t-{work_id[:4]}", description="d", capability="code"
    )


async def test_a_warp_started_again_takes_up_the_worktree_and_still_pushes_before_done(
    nats_server: EmbeddedNatsServer, project_id: str, origin: Path, tmp_path: Path
) -> None:
    checkout = clone(origin, tmp_path / "host1")
    async with nats(nats_server.url) as nc:
        await set_repository(nc, project_id, str(origin))
        async with agent(nats_server.url, project_id, checkout, A) as first:
            await ok(first, "warp_work_broadcast", {"description": "d", "capability": "code"})
            claimed = await ok(first, "warp_work_claim")
        work_id = claimed["item"]["id"]
        directory = Path(claimed["workstream"]["directory"])
        (directory / "after-restart.txt").write_text("kept\n")
        async with agent(nats_server.url, project_id, checkout, A) as again:  # same agent, new process
            progress = await again.call_tool("warp_work_progress", {"work_id": work_id, "percent": 50})
            assert "Checkpoint" in text(progress), text(progress)
            done = await again.call_tool("warp_work_complete", {"work_id": work_id})
            assert not done.is_error and "pushed at" in text(done), text(done)
        final = await work_queue(nc, ProjectNames(project_id)).get(work_id)
    assert final.workstream is not None and final.workstream.head_sha is not None
    assert run_git("show", f"{final.workstream.head_sha}:after-restart.txt", cwd=origin) == "kept"


async def test_completing_without_the_worktree_on_this_host_is_refused(
    nats_server: EmbeddedNatsServer, project_id: str, origin: Path, tmp_path: Path
) -> None:
    import shutil

    checkout = clone(origin, tmp_path / "host1")
    async with nats(nats_server.url) as nc:
        await set_repository(nc, project_id, str(origin))
        async with agent(nats_server.url, project_id, checkout, A) as first:
            await ok(first, "warp_work_broadcast", {"description": "d", "capability": "code"})
            claimed = await ok(first, "warp_work_claim")
        shutil.rmtree(claimed["workstream"]["directory"])  # the host lost it
        async with agent(nats_server.url, project_id, checkout, A) as again:
            refused = await again.call_tool("warp_work_complete", {"work_id": claimed["item"]["id"]})
            assert refused.is_error
            assert "is gone" in text(refused) and "nothing was completed" in text(refused)
        item = await work_queue(nc, ProjectNames(project_id)).get(claimed["item"]["id"])
    assert item.status.value == "claimed" and item.assigned_to == A
