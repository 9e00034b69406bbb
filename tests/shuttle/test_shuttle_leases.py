"""``shuttle leases`` and the loom-guard git hook against a real Weft and real git
repositories made here: commits and pushes touching another agent's exclusive lease are
refused naming the holder, the holder's own pass, an override passes and is logged."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from agent_side import Agent
from nats.aio.client import Client as NatsClient
from shuttle_helpers import Cli

from shared.errors import Unavailable
from shared.leases.book import LeaseBook
from shuttle.guard import EXIT_USAGE, GitError, staged_paths
from testsupport.env import without_fabric

ALICE = "a1" * 16
BOB = "b2" * 16


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = without_fabric(also=("GIT_",))
    full.update(env or {})
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, env=full, check=False)


def make_repo(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir()
    for args in (
        ("init", "-q", "-b", "main"),
        ("config", "user.email", "t@example.com"),
        ("config", "user.name", "T"),
        ("config", "commit.gpgsign", "false"),
    ):
        assert git(repo, *args).returncode == 0
    (repo / "src" / "api").mkdir(parents=True)
    (repo / "docs").mkdir()
    (repo / "src" / "api" / "users.py").write_text("v1\n")
    (repo / "docs" / "guide.md").write_text("v1\n")
    git(repo, "add", "-A")
    assert git(repo, "commit", "-qm", "start").returncode == 0
    return repo


def change(repo: Path, path: str) -> None:
    file = repo / path
    file.write_text(file.read_text() + "more\n")
    assert git(repo, "add", path).returncode == 0


@pytest.fixture
async def agents(nc: NatsClient, project_id: str) -> AsyncIterator[LeaseBook]:
    for agent_id, handle in ((ALICE, "alice"), (BOB, "bob")):
        await Agent(nc, project_id, agent_id).register(handle=handle)
    book = LeaseBook(nc, Agent(nc, project_id).names)
    try:
        yield book
    finally:
        await book.stop()


async def test_listing_and_an_operators_release(cli: Cli, agents: LeaseBook, project_id: str) -> None:
    held = await agents.acquire(ALICE, ["src/api/**"], handle="alice", reason="split users")
    other = await agents.acquire(BOB, ["docs/*.md"], handle="bob")
    table = cli("leases")
    assert table.exit_code == 0, table.stderr
    assert all(s in table.stdout for s in (held.id, "alice", "src/api/**", "exclusive", "bob"))
    assert cli("leases", "-q", "--holder", BOB).stdout.split() == [other.id]
    in_way = cli.json("leases", "--path", "src/api/users.py")
    assert [c["lease_id"] for c in in_way["conflicts"]] == [held.id]
    bad = cli("leases", "--holder", "s3cr3t-T0KEN")
    assert bad.exit_code != 0 and "holder" in bad.stderr and "s3cr3t" not in bad.stderr + bad.stdout
    released = cli("leases", "release", held.id)
    assert released.exit_code == 0 and "alice" in released.stdout
    assert cli("leases", "-q").stdout.split() == [other.id]
    gone = cli("leases", "release", held.id)
    assert gone.exit_code != 0 and "no such lease" in gone.stderr


async def test_the_git_hook_enforces_exclusive_leases(
    cli: Cli, agents: LeaseBook, tmp_path: Path, nc: NatsClient, project_id: str
) -> None:
    repo = make_repo(tmp_path)
    installed = cli("leases", "install-hook", "--repo", str(repo))
    assert installed.exit_code == 0, installed.stderr
    work = cli.json("submit", "split the users module", "-c", "code")["id"]
    assert (await Agent(nc, project_id, ALICE).claim()).id == work
    held = await agents.acquire(ALICE, ["src/api/**"], handle="alice", work_id=work, reason="split users")
    env = {**cli.env}

    change(repo, "src/api/users.py")
    refused = git(repo, "commit", "-qm", "bob edits users", env={**env, "LOOM_AGENT_ID": BOB})
    assert refused.returncode != 0
    for shown in ("src/api/users.py", "alice", ALICE, work, held.id, "src/api/**"):
        assert shown in refused.stderr, shown
    anonymous = git(repo, "commit", "-qm", "nobody", env=env)
    assert anonymous.returncode != 0, "no identity: other agents' leases hold"

    by_holder = git(repo, "commit", "-qm", "alice edits users", env={**env, "LOOM_AGENT_ID": "alice"})
    assert by_holder.returncode == 0, by_holder.stderr

    change(repo, "docs/guide.md")
    free = git(repo, "commit", "-qm", "bob edits docs", env={**env, "LOOM_AGENT_ID": BOB})
    assert free.returncode == 0, free.stderr

    change(repo, "src/api/users.py")
    forced = git(
        repo,
        "commit",
        "-qm",
        "hotfix",
        env={**env, "LOOM_AGENT_ID": BOB, "LOOM_LEASE_OVERRIDE": "prod is down"},
    )
    assert forced.returncode == 0 and "OVERRIDE" in forced.stderr
    (logged,) = (repo / ".git" / "loom-guard.log").read_text().splitlines()
    entry = json.loads(logged)
    assert (entry["agent"], entry["reason"], entry["paths"], entry["leases"]) == (
        BOB,
        "prod is down",
        ["src/api/users.py"],
        [held.id],
    )

    await agents.release(held.id, holder=ALICE)
    change(repo, "src/api/users.py")
    after = git(repo, "commit", "-qm", "bob after release", env={**env, "LOOM_AGENT_ID": BOB})
    assert after.returncode == 0, after.stderr


async def test_the_pre_push_hook_checks_the_commits_being_pushed(
    cli: Cli, agents: LeaseBook, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path)
    remote = tmp_path / "remote.git"
    assert git(tmp_path, "init", "-q", "--bare", str(remote)).returncode == 0
    assert git(repo, "remote", "add", "origin", str(remote)).returncode == 0
    assert git(repo, "push", "-q", "origin", "main").returncode == 0
    change(repo, "src/api/users.py")
    assert git(repo, "commit", "-qm", "made before the lease").returncode == 0  # no hook yet
    assert cli("leases", "install-hook", "--repo", str(repo)).exit_code == 0
    await agents.acquire(ALICE, ["src/api/"], handle="alice")
    env = {**cli.env, "LOOM_AGENT_ID": BOB}
    refused = git(repo, "push", "-q", "origin", "main", env=env)
    assert refused.returncode != 0 and "push refused" in refused.stderr and "alice" in refused.stderr
    assert git(repo, "push", "-q", "origin", "main", env={**cli.env, "LOOM_AGENT_ID": ALICE}).returncode == 0


def test_install_hook_keeps_someone_elses_hook_unless_forced(cli: Cli, tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    theirs = repo / ".git" / "hooks" / "pre-commit"
    theirs.write_text("#!/bin/sh\nexit 0\n")
    refused = cli("leases", "install-hook", "--repo", str(repo))
    assert refused.exit_code == 2 and "--force" in refused.stderr
    assert theirs.read_text() == "#!/bin/sh\nexit 0\n"
    assert cli("leases", "install-hook", "--repo", str(repo), "--force").exit_code == 0
    assert "loom-guard" in theirs.read_text()
    assert cli("leases", "install-hook", "--repo", str(repo)).exit_code == 0, (
        "its own hook is replaced quietly"
    )
    outside = tmp_path / "not-a-repo"
    outside.mkdir()
    assert cli("leases", "install-hook", "--repo", str(outside)).exit_code == 2


def test_weft_unreachable_warns_or_refuses_when_strict(cli: Cli, tmp_path: Path, dead_url: str) -> None:
    repo = make_repo(tmp_path)
    assert cli("leases", "install-hook", "--repo", str(repo)).exit_code == 0
    env = {"LOOM_API_URL": dead_url, "LOOM_AGENT_ID": BOB}
    change(repo, "src/api/users.py")
    warned = git(repo, "commit", "-qm", "weft down", env=env)
    assert warned.returncode == 0 and "leases not checked" in warned.stderr
    change(repo, "src/api/users.py")
    strict = git(repo, "commit", "-qm", "weft down, strict", env={**env, "LOOM_GUARD_STRICT": "1"})
    assert strict.returncode != 0 and "refusing" in strict.stderr


def test_a_git_failure_is_not_weft_being_away(tmp_path: Path, dead_url: str) -> None:
    """git cannot say what a push changes (a commit it does not have): the hook stops with a
    usage error naming git, strict or not; it is not the warning that Weft is unreachable."""
    repo = make_repo(tmp_path)
    guard = str(Path(sys.executable).with_name("loom-guard"))
    update = f"refs/heads/main {'1' * 40} refs/heads/main {'2' * 40}\n"
    env = without_fabric(also=("GIT_",))
    env.update(LOOM_API_URL=dead_url, LOOM_AGENT_ID=BOB)
    for strict in ("0", "1"):
        done = subprocess.run(
            [guard, "pre-push", "origin", "unused"],
            cwd=repo,
            input=update,
            capture_output=True,
            text=True,
            env={**env, "LOOM_GUARD_STRICT": strict},
            check=False,
        )
        assert done.returncode == EXIT_USAGE, done.stderr
        assert "git diff failed" in done.stderr and "leases not checked" not in done.stderr
    with pytest.raises(GitError) as raised:
        staged_paths(tmp_path)  # not a repository
    assert raised.value.code == "git_error" and not isinstance(raised.value, Unavailable)
