"""An item's workstream on real git repositories: a bare origin and clones of it as the
agents' hosts (testsupport/git.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.git.repository import Repository
from shared.git.workstream import HostWorkstreams, WorkstreamDrift, WorkstreamError, checkpoint_ref
from shared.models import WorkItem, Workstream
from testsupport.git import clone, make_origin, remote_sha, run_git, tree_state

AGENT = "a" * 32
OTHER = "b" * 32


def item(work_id: str = "1" * 32, **update: object) -> WorkItem:
    base = WorkItem(id=work_id, project_id="p", task_id="fix login!", description="d", capability="code")
    return base.model_copy(update=update)


def host(origin: Path, folder: Path, **settings: object) -> HostWorkstreams:
    repo = Repository(url=str(origin), **settings)  # type: ignore[arg-type]
    return HostWorkstreams(folder, repo, author=("agent", "agent@loom.invalid"))


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    return make_origin(tmp_path, {"README.md": "hello\n", "src/app.py": "print('app')\n", "old.txt": "x\n"})


async def test_open_makes_the_items_branch_and_worktree_and_leaves_the_checkout_alone(
    origin: Path, tmp_path: Path
) -> None:
    checkout = clone(origin, tmp_path / "host1")
    before = tree_state(checkout)
    ws = host(origin, checkout)
    place, record = await ws.open(item())
    assert place.directory == checkout / ".loom" / "worktrees" / ("1" * 32)
    assert place.branch == record.branch == f"loom/fix-login-{'1' * 8}"
    assert record.base_ref == "main" and record.base_sha == run_git("rev-parse", "HEAD", cwd=checkout)
    assert run_git("symbolic-ref", "--short", "HEAD", cwd=place.directory) == place.branch
    assert (place.directory / "src" / "app.py").read_text() == "print('app')\n"
    assert tree_state(checkout) == before  # HEAD, branch, status, refs, worktrees, index


async def test_a_checkpoint_holds_untracked_changed_and_deleted_files_and_leaves_the_index_alone(
    origin: Path, tmp_path: Path
) -> None:
    ws = host(origin, clone(origin, tmp_path / "host1"))
    place, _ = await ws.open(item())
    d = place.directory
    (d / "README.md").write_text("changed\n")
    (d / "new.txt").write_text("made by a shell\n")
    (d / "old.txt").unlink()
    (d / ".gitignore").write_text("*.log\n")
    (d / "build.log").write_text("ignored\n")
    run_git("add", "README.md", cwd=d)  # the agent's own index: must stay as it was
    staged = run_git("diff", "--cached", "--name-only", cwd=d)
    head = run_git("rev-parse", "HEAD", cwd=d)

    cp = await ws.checkpoint(place, "1" * 32, attempt=1, agent_id=AGENT, previous=None)
    assert cp is not None and cp.files == 4 and cp.attempt == 1 and cp.agent_id == AGENT
    listed = set(run_git("ls-tree", "-r", "--name-only", cp.sha, cwd=d).splitlines())
    assert {"README.md", "new.txt", ".gitignore", "src/app.py"} <= listed
    assert "old.txt" not in listed and "build.log" not in listed
    assert run_git("show", f"{cp.sha}:README.md", cwd=d) == "changed"
    assert run_git("rev-parse", f"{cp.sha}^1", cwd=d) == head
    assert run_git("diff", "--cached", "--name-only", cwd=d) == staged
    assert run_git("rev-parse", "HEAD", cwd=d) == head
    assert remote_sha(origin, checkpoint_ref("1" * 32)) == cp.sha  # pushed

    assert await ws.checkpoint(place, "1" * 32, attempt=1, agent_id=AGENT, previous=cp.sha) is None
    (d / "more.txt").write_text("more\n")
    second = await ws.checkpoint(place, "1" * 32, attempt=1, agent_id=AGENT, previous=cp.sha)
    assert second is not None
    assert run_git("rev-parse", f"{second.sha}^2", cwd=d) == cp.sha  # older ones stay reachable


async def test_the_next_attempt_on_another_host_starts_from_the_last_checkpoint(
    origin: Path, tmp_path: Path
) -> None:
    first = host(origin, clone(origin, tmp_path / "host1"))
    place, record = await first.open(item())
    (place.directory / "work.py").write_text("half done\n")
    (place.directory / "old.txt").unlink()
    run_git("add", "work.py", cwd=place.directory)
    run_git("commit", "--quiet", "-m", "step 1", cwd=place.directory)  # a local commit, never pushed
    (place.directory / "notes.txt").write_text("uncommitted\n")
    cp = await first.checkpoint(place, "1" * 32, attempt=1, agent_id=AGENT, previous=None)
    assert cp is not None

    second_checkout = clone(origin, tmp_path / "host2")
    before = tree_state(second_checkout)
    second = host(origin, second_checkout)
    resumed = item(workstream=record.model_copy(update={"resume_from": cp.sha}), attempts=2)
    place2, record2 = await second.open(resumed)
    d = place2.directory
    assert place2.resumed_from == cp.sha and record2.branch == record.branch
    assert (d / "work.py").read_text() == "half done\n"
    assert (d / "notes.txt").read_text() == "uncommitted\n"
    assert not (d / "old.txt").exists()
    assert run_git("log", "-1", "--format=%s", cwd=d) == "step 1"  # the local commit came with it
    status = run_git("status", "--porcelain", cwd=d)
    assert "?? notes.txt" in status and "D old.txt" in status  # uncommitted, as they were
    assert run_git("diff", "--cached", "--name-only", cwd=d) == ""
    assert tree_state(second_checkout) == before


async def test_hand_in_commits_the_rest_pushes_and_counts(origin: Path, tmp_path: Path) -> None:
    ws = host(origin, clone(origin, tmp_path / "host1"))
    place, _ = await ws.open(item())
    d = place.directory
    (d / "a.txt").write_text("one\ntwo\n")
    run_git("add", "a.txt", cwd=d)
    run_git("commit", "--quiet", "-m", "agent's own commit", cwd=d)
    (d / "README.md").write_text("hello\nworld\n")
    (d / "old.txt").unlink()
    done = await ws.hand_in(place, message="fix login: the rest")
    assert done.committed_rest and done.commits == 2
    assert (done.files_changed, done.insertions, done.deletions) == (3, 3, 1)
    assert remote_sha(origin, f"refs/heads/{place.branch}") == done.head_sha
    assert run_git("status", "--porcelain", cwd=d) == ""
    again = await ws.hand_in(place, message="nothing new")
    assert not again.committed_rest and again.head_sha == done.head_sha


async def test_drift_is_refused_naming_both_branches_and_nothing_is_committed(
    origin: Path, tmp_path: Path
) -> None:
    ws = host(origin, clone(origin, tmp_path / "host1"))
    place, _ = await ws.open(item())
    d = place.directory
    run_git("switch", "--quiet", "-c", "somewhere-else", cwd=d)
    (d / "x.txt").write_text("x\n")
    with pytest.raises(WorkstreamDrift) as checkpoint:
        await ws.checkpoint(place, "1" * 32, attempt=1, agent_id=AGENT, previous=None)
    assert "somewhere-else" in checkpoint.value.message and place.branch in checkpoint.value.message
    with pytest.raises(WorkstreamDrift) as handing_in:
        await ws.hand_in(place, message="m")
    assert "nothing was committed" in handing_in.value.message
    assert remote_sha(origin, f"refs/heads/{place.branch}") is None
    assert remote_sha(origin, "refs/heads/somewhere-else") is None
    assert run_git("status", "--porcelain", cwd=d) == "?? x.txt"
    run_git("switch", "--quiet", "--detach", cwd=d)
    with pytest.raises(WorkstreamDrift, match="detached HEAD"):
        await ws.hand_in(place, message="m")


async def test_creation_fails_closed(origin: Path, tmp_path: Path) -> None:
    checkout = clone(origin, tmp_path / "host1")
    ws = host(origin, checkout)
    taken = item()
    run_git("push", "--quiet", str(origin), f"HEAD:refs/heads/{ws.branch_of(taken)}", cwd=checkout)
    with pytest.raises(WorkstreamError, match="already exists on the repository"):
        await ws.open(taken)
    assert not ws.directory(taken.id).exists()

    gone = host(tmp_path / "nowhere.git", checkout)
    with pytest.raises(WorkstreamError) as unreachable:
        await gone.open(item("2" * 32))
    assert unreachable.value.code == "workstream_failed" and "git fetch failed" in unreachable.value.message
    assert not gone.directory("2" * 32).exists()

    no_target = host(origin, checkout, target_branch="release")
    with pytest.raises(WorkstreamError, match="target branch release does not exist"):
        await no_target.open(item("3" * 32))


async def test_a_refused_push_loses_nothing(origin: Path, tmp_path: Path) -> None:
    checkout = clone(origin, tmp_path / "host1")
    ws = host(origin, checkout)
    place, _ = await ws.open(item())
    (place.directory / "mine.txt").write_text("mine\n")
    # someone else pushed to the item's branch meanwhile: a push is refused, not forced
    run_git("push", "--quiet", str(origin), f"HEAD:refs/heads/{place.branch}", cwd=checkout)
    run_git("commit", "--quiet", "--allow-empty", "-m", "theirs", cwd=checkout)
    run_git("push", "--quiet", "--force", str(origin), f"HEAD:refs/heads/{place.branch}", cwd=checkout)
    theirs = remote_sha(origin, f"refs/heads/{place.branch}")
    with pytest.raises(WorkstreamError, match="the item stays yours"):
        await ws.hand_in(place, message="m")
    assert remote_sha(origin, f"refs/heads/{place.branch}") == theirs
    assert (place.directory / "mine.txt").read_text() == "mine\n"
    assert run_git("log", "-1", "--format=%s", cwd=place.directory) == "m"  # committed locally, kept


async def test_a_reviewer_gets_its_own_detached_worktree_and_close_removes_both(
    origin: Path, tmp_path: Path
) -> None:
    worker = host(origin, clone(origin, tmp_path / "host1"))
    place, record = await worker.open(item())
    (place.directory / "a.txt").write_text("a\n")
    done = await worker.hand_in(place, message="handed in")
    handed = record.model_copy(update={"head_sha": done.head_sha})

    reviewer = host(origin, clone(origin, tmp_path / "host2"))
    review = await reviewer.open_review(item(workstream=handed))
    assert review.review and review.directory.name.endswith("-review")
    assert run_git("rev-parse", "HEAD", cwd=review.directory) == done.head_sha
    assert (review.directory / "a.txt").read_text() == "a\n"
    await reviewer.close("1" * 32, branch=record.branch)
    await worker.close("1" * 32, branch=record.branch)
    assert not review.directory.exists() and not place.directory.exists()
    assert worker.worktree_ages() == {}
    local = run_git(f"--git-dir={worker.git_dir}", "for-each-ref", "--format=%(refname)")
    assert record.branch not in local and "1" * 32 not in local  # its branch and copies gone
    assert remote_sha(origin, f"refs/heads/{record.branch}") == done.head_sha  # pushed work stays


async def test_a_rejected_item_carries_on_with_its_pushed_branch(origin: Path, tmp_path: Path) -> None:
    first = host(origin, clone(origin, tmp_path / "host1"))
    place, record = await first.open(item())
    (place.directory / "round1.txt").write_text("1\n")
    done = await first.hand_in(place, message="round 1")
    await first.close("1" * 32, branch=record.branch)
    second = host(origin, clone(origin, tmp_path / "host2"))
    handed = record.model_copy(update={"head_sha": done.head_sha})
    place2, record2 = await second.open(item(workstream=handed))
    assert record2.base_sha == record.base_sha
    assert run_git("rev-parse", "HEAD", cwd=place2.directory) == done.head_sha
    assert (place2.directory / "round1.txt").exists()


def test_what_the_sweep_takes() -> None:
    from datetime import UTC, datetime, timedelta

    from shared.git.workstream import DAY_S, checkpoints_to_sweep, worktree_to_sweep
    from shared.models import WorkStatus

    now = datetime(2030, 1, 1, tzinfo=UTC)
    mine = item(status=WorkStatus.IN_PROGRESS, assigned_to=AGENT)
    elsewhere = item(status=WorkStatus.IN_PROGRESS, assigned_to=OTHER)
    done = item(status=WorkStatus.COMPLETED, finished_at=now - timedelta(days=3))
    assert not worktree_to_sweep(mine, agent_id=AGENT, age_s=100 * DAY_S, keep_days=0)  # still at work
    for left in (elsewhere, done, None):
        assert worktree_to_sweep(left, agent_id=AGENT, age_s=2 * DAY_S, keep_days=2)
        assert not worktree_to_sweep(left, agent_id=AGENT, age_s=2 * DAY_S - 1, keep_days=2)
    assert checkpoints_to_sweep(None, now=now, keep_days=30)  # its record is gone
    assert not checkpoints_to_sweep(elsewhere, now=now, keep_days=0)  # the next attempt needs them
    assert checkpoints_to_sweep(done, now=now, keep_days=3) and not checkpoints_to_sweep(
        done, now=now, keep_days=4
    )


async def test_a_dirty_main_tree_is_neither_needed_nor_touched(origin: Path, tmp_path: Path) -> None:
    checkout = clone(origin, tmp_path / "host1")
    (checkout / "README.md").write_text("the person's own edit\n")
    (checkout / "scratch.txt").write_text("untracked\n")
    run_git("add", "scratch.txt", cwd=checkout)
    before = tree_state(checkout)
    ws = host(origin, checkout)
    place, _ = await ws.open(item())
    assert (place.directory / "README.md").read_text() == "hello\n"  # the base's, not the edit
    (place.directory / "a.txt").write_text("a\n")
    await ws.checkpoint(place, "1" * 32, attempt=1, agent_id=AGENT, previous=None)
    await ws.hand_in(place, message="m")
    await ws.close("1" * 32, branch=place.branch)
    assert tree_state(checkout) == before  # still dirty, exactly as it was


async def test_a_later_attempt_keeps_its_recorded_base_when_the_target_moved(
    origin: Path, tmp_path: Path
) -> None:
    checkout = clone(origin, tmp_path / "host1")
    first = host(origin, checkout)
    place, record = await first.open(item())
    (place.directory / "mine.txt").write_text("mine\n")
    await first.hand_in(place, message="round 1")
    await first.close("1" * 32, branch=place.branch)
    (checkout / "README.md").write_text("the target moved on\n")
    run_git("commit", "--quiet", "-am", "moved", cwd=checkout)
    run_git("push", "--quiet", "origin", "main", cwd=checkout)
    second = host(origin, clone(origin, tmp_path / "host2"))
    place2, record2 = await second.open(item(workstream=record))
    assert record2.base_sha == record.base_sha != remote_sha(origin, "refs/heads/main")
    assert (place2.directory / "README.md").read_text() == "hello\n"  # the recorded base's
    assert (place2.directory / "mine.txt").exists()


async def test_a_worktree_prepared_before_the_agent_started_is_taken_up_at_its_claim(
    origin: Path, tmp_path: Path
) -> None:
    checkout = clone(origin, tmp_path / "host1")
    before = tree_state(checkout)
    ws = host(origin, checkout)
    queued = item(attempts=0)
    prepared = await ws.prepare(queued, agent_id=AGENT)
    (prepared.directory / "early.txt").write_text("written before the claim\n")  # the CLI at work

    taken = await ws.take_prepared(item(attempts=1), agent_id=AGENT)
    assert taken is not None
    place, record = taken
    assert place == prepared and (place.directory / "early.txt").exists()  # the same worktree, kept
    assert (record.branch, record.base_sha) == (prepared.branch, prepared.base_sha)
    assert await ws.take_prepared(item(attempts=1), agent_id=AGENT) is None  # taken once
    assert place.directory.exists() and tree_state(checkout) == before


@pytest.mark.parametrize(
    "claim",
    [
        pytest.param({"agent_id": OTHER, "attempts": 1}, id="another-agent-claims-it"),
        pytest.param({"agent_id": AGENT, "attempts": 2}, id="another-attempt-came-in-between"),
    ],
)
async def test_a_prepared_worktree_that_no_longer_fits_the_claim_is_dropped(
    origin: Path, tmp_path: Path, claim: dict[str, object]
) -> None:
    ws = host(origin, clone(origin, tmp_path / "host1"))
    prepared = await ws.prepare(item(attempts=0), agent_id=AGENT)
    agent_id = str(claim["agent_id"])
    assert await ws.take_prepared(item(attempts=claim["attempts"]), agent_id=agent_id) is None
    assert not prepared.directory.exists()  # dropped: the claim makes a fresh one
    place, _ = await ws.open(item(attempts=claim["attempts"]))
    assert place.directory == prepared.directory and place.directory.exists()


async def test_a_prepared_worktree_is_dropped_when_the_items_record_moved_or_its_head_drifted(
    origin: Path, tmp_path: Path
) -> None:
    ws = host(origin, clone(origin, tmp_path / "host1"))
    prepared = await ws.prepare(item(attempts=0), agent_id=AGENT)
    moved = Workstream(
        branch=prepared.branch, base_ref="main", base_sha=prepared.base_sha, resume_from="f" * 40
    )
    assert await ws.take_prepared(item(attempts=1, workstream=moved), agent_id=AGENT) is None
    assert not prepared.directory.exists()

    prepared = await ws.prepare(item(attempts=0), agent_id=AGENT)
    run_git("switch", "--quiet", "-c", "elsewhere", cwd=prepared.directory)
    assert await ws.take_prepared(item(attempts=1), agent_id=AGENT) is None
    assert not prepared.directory.exists()


async def test_a_prepared_worktree_fails_closed_like_a_claim(tmp_path: Path) -> None:
    ws = host(tmp_path / "no-such-origin.git", tmp_path / "host1")
    with pytest.raises(WorkstreamError) as raised:
        await ws.prepare(item(attempts=0), agent_id=AGENT)
    assert raised.value.field == "workstream"
    assert not ws.directory("1" * 32).exists()
    assert await ws.take_prepared(item(attempts=1), agent_id=AGENT) is None
