"""``loom-run``: the agent CLI a spin-up starts for one item starts in that item's
worktree, made before it (docs/workstreams.md), and its Warp takes the worktree up at the
claim. Real NATS, real git, real processes: ``loom-run`` execs a scripted agent CLI
(run_agent.py) that runs ``warp`` over MCP stdio as a host does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from nats.aio.client import Client as NatsClient

from shared.git.repository import RepositorySettings, RepositoryStore
from shared.models import WorkStatus, WorkSubmission
from shared.names import ProjectNames
from shared.nats.server import EmbeddedNatsServer
from testsupport.env import without_fabric
from testsupport.git import clone, make_origin, remote_sha, run_git, tree_state
from testsupport.work import work_queue

LOOM_RUN = str(Path(sys.executable).parent / "loom-run")
AGENT_SCRIPT = str(Path(__file__).with_name("run_agent.py"))
A = "a" * 32


def run(env: dict[str, str], cwd: Path, *command: str) -> subprocess.CompletedProcess[str]:
    full = without_fabric()
    full.update(env)
    return subprocess.run(
        [LOOM_RUN, *command], env=full, cwd=cwd, capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def spun_up(nats_server: EmbeddedNatsServer, project_id: str, work_id: str, tmp_path: Path) -> dict[str, str]:
    """What a spin-up gives an agent (docs/spinup.md), for the item ``work_id``."""
    return {
        "NATS_URL": nats_server.url,
        "LOOM_PROJECT_ID": project_id,
        "LOOM_AGENT_ID": A,
        "LOOM_WORK_ID": work_id,
        "LOOM_CAPABILITIES": "code",
        "LOOM_AUTO_REGISTER": "1",
        "LOOM_CHECKPOINT_S": "0",
        "RUN_AGENT_ERRLOG": str(tmp_path / "warp.err"),
    }


async def queued_item(nc: NatsClient, project_id: str, repository: str | None, **submission: object) -> str:
    names = ProjectNames(project_id)
    if repository is not None:
        await RepositoryStore(nc.jetstream(), names).put(RepositorySettings(url=repository), by="admin")
    item = await work_queue(nc, names).submit(
        WorkSubmission(task_id="t", description="fix it", capability="code", **submission)  # type: ignore[arg-type]
    )
    return item.id


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    return make_origin(tmp_path, {"README.md": "hello\n"})


async def test_the_agent_cli_starts_in_the_items_worktree_and_its_warp_takes_it_up(
    nats_server: EmbeddedNatsServer, nc: NatsClient, project_id: str, origin: Path, tmp_path: Path
) -> None:
    checkout = clone(origin, tmp_path / "host1")
    before = tree_state(checkout)
    work_id = await queued_item(nc, project_id, str(origin))
    env = spun_up(nats_server, project_id, work_id, tmp_path)
    done = run(env, checkout, "--", sys.executable, AGENT_SCRIPT)
    assert done.returncode == 0, done.stderr + (tmp_path / "warp.err").read_text()
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    worktree = checkout / ".loom" / "worktrees" / work_id
    assert Path(seen["cwd"]) == worktree == Path(seen["worktree_env"])  # the CLI started in it
    assert Path(seen["workstream"]["directory"]) == worktree  # the claim named the same one

    item = await work_queue(nc, ProjectNames(project_id)).get(work_id)
    assert item.status is WorkStatus.LANDING and item.workstream is not None
    ws = item.workstream
    assert ws.head_sha == remote_sha(origin, f"refs/heads/{ws.branch}")
    # written before the claim and after it: the claim kept the worktree, it did not make another
    listed = run_git("ls-tree", "-r", "--name-only", ws.head_sha, cwd=origin).splitlines()
    assert {"early.txt", "late.txt", "README.md"} <= set(listed) and ws.files_changed == 2
    assert tree_state(checkout) == before  # the main tree untouched


async def test_a_worktree_that_cannot_be_made_never_starts_the_agent(
    nats_server: EmbeddedNatsServer, nc: NatsClient, project_id: str, tmp_path: Path
) -> None:
    checkout = tmp_path / "host1"
    checkout.mkdir()
    work_id = await queued_item(nc, project_id, str(tmp_path / "gone.git"))
    marker = tmp_path / "started"
    done = run(spun_up(nats_server, project_id, work_id, tmp_path), checkout, "--", "touch", str(marker))
    assert done.returncode == 3 and not marker.exists()
    assert done.stderr.startswith("loom-run: workstream: ") and "main checkout" in done.stderr
    item = await work_queue(nc, ProjectNames(project_id)).get(work_id)
    assert item.status is WorkStatus.QUEUED and item.attempts == 0  # nothing claimed, nothing lost
    assert list(checkout.iterdir()) in ([], [checkout / ".loom"])
    assert not (checkout / ".loom" / "worktrees" / work_id).exists()


async def test_without_an_item_a_repository_or_isolation_the_cli_starts_where_it_was_asked(
    nats_server: EmbeddedNatsServer, nc: NatsClient, project_id: str, origin: Path, tmp_path: Path
) -> None:
    checkout = clone(origin, tmp_path / "host1")
    env = spun_up(nats_server, project_id, "", tmp_path)
    pwd = ("sh", "-c", 'pwd; echo "${LOOM_WORKTREE:-none}"; exit 7')
    manual = run(env, checkout, "--", *pwd)  # a manual start: no item
    assert manual.returncode == 7 and manual.stdout.split() == [str(checkout), "none"]

    opted_out = await queued_item(nc, project_id, str(origin), isolated=False)
    done = run({**env, "LOOM_WORK_ID": opted_out}, checkout, "--", *pwd)
    assert done.returncode == 7 and done.stdout.split() == [str(checkout), "none"]
    assert not (checkout / ".loom" / "worktrees" / opted_out).exists()


def test_bad_input_is_named_and_nothing_starts(tmp_path: Path) -> None:
    none = run({}, tmp_path, "--")
    assert none.returncode == 2 and "command: required" in none.stderr
    missing = run({}, tmp_path, "--", "no-such-agent-cli-anywhere")
    assert missing.returncode == 127 and "command: not found" in missing.stderr
    assert "no-such-agent-cli-anywhere" not in missing.stderr
    bad = run({"LOOM_WORK_ID": "not an id; rm -rf"}, tmp_path, "--", "true")
    assert bad.returncode == 2 and "LOOM_WORK_ID" in bad.stderr and "rm -rf" not in bad.stderr
    short = run({"LOOM_WORK_ID": "abc"}, tmp_path, "--", "true")
    assert short.returncode == 2 and "LOOM_WORK_ID: must be a work id" in short.stderr
