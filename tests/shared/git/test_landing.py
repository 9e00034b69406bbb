"""Landing batches on real git repositories: a bare origin, branches pushed to it as the
workers' hand-ins, and the lander's own copy (shared/git/landing.py)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from shared.git.landing import Candidate, HostLanding, LandingError, Settled, gate_env, tail
from shared.git.repository import Repository
from testsupport.git import clone, make_origin, remote_sha, run_git

PY = sys.executable


class Recorder:
    """The lander's side of the steps: what it was told, in order."""

    def __init__(self) -> None:
        self.done: list[Settled] = []
        self.pushed: list[tuple[str, list[str]]] = []
        self.steps: list[str] = []

    async def before_push(self, sha: str, items: list[Candidate]) -> None:
        self.pushed.append((sha, [c.work_id for c in items]))

    async def settled(self, outcome: Settled) -> None:
        self.done.append(outcome)

    async def alive(self) -> None:
        return None

    def took(self, step: str, items: list[Candidate], start_ns: int, **attributes: str | int | bool) -> None:
        self.steps.append(step)


def outcomes(rec: Recorder) -> dict[str, str]:
    return {s.candidate.work_id: s.outcome for s in rec.done}


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    return make_origin(tmp_path, {"README.md": "hello\n", "shared.txt": "one\ntwo\nthree\n"})


@pytest.fixture
def worker(origin: Path, tmp_path: Path) -> Path:
    return clone(origin, tmp_path / "worker")


def hand_in(worker: Path, name: str, files: dict[str, str], *, base: str = "main") -> Candidate:
    """A worker's branch from ``base`` with ``files`` changed, pushed: a handed-in item."""
    run_git("checkout", "--quiet", "-B", f"loom/{name}", f"origin/{base}", cwd=worker)
    for rel, text in files.items():
        path = worker / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    run_git("add", "--all", cwd=worker)
    run_git("commit", "--quiet", "-m", f"work on {name}", cwd=worker)
    run_git("push", "--quiet", "origin", f"loom/{name}", cwd=worker)
    head = run_git("rev-parse", "HEAD", cwd=worker)
    work_id = (name * 32)[:32] if len(name) == 1 else name.ljust(32, "0")[:32]
    return Candidate(work_id=work_id, title=f"{name}: change", branch=f"loom/{name}", head_sha=head)


def lander(origin: Path, folder: Path, **settings: object) -> HostLanding:
    repo = Repository(url=str(origin), **settings)
    folder.mkdir(exist_ok=True)
    return HostLanding(folder, repo, author=("Loom lander", "lander@loom.invalid"))


def target_files(origin: Path, tmp_path: Path) -> Path:
    return clone(origin, tmp_path / f"check-{len(list(tmp_path.iterdir()))}")


async def test_a_clean_batch_lands_in_one_push_in_order(origin: Path, worker: Path, tmp_path: Path) -> None:
    batch = [hand_in(worker, n, {f"{n}.txt": f"{n}\n"}) for n in "abc"]
    before = remote_sha(origin, "refs/heads/main")
    rec = Recorder()
    host = lander(origin, tmp_path / "lander")
    await host.land(batch, rec)

    assert outcomes(rec) == {c.work_id: "landed" for c in batch}
    tip = remote_sha(origin, "refs/heads/main")
    assert tip != before and {s.sha for s in rec.done} == {tip}
    assert {s.splits for s in rec.done} == {0}  # landed whole: no split
    assert host.stats.pushes == 1 and rec.pushed == [(tip, [c.work_id for c in batch])]
    assert rec.steps == ["land.build", "land.push"]  # no gate set: no gate step
    check = target_files(origin, tmp_path)
    assert all((check / f"{n}.txt").exists() for n in "abc")
    merges = run_git("log", "--merges", "--format=%s", cwd=check).splitlines()
    assert merges == ["Land c: change", "Land b: change", "Land a: change"]  # newest first: a went in first
    assert "Loom-Work-Id: " + batch[0].work_id in run_git("log", "--merges", "--format=%B", cwd=check)


async def test_an_item_that_conflicts_with_the_target_is_set_aside_with_its_files_and_the_rest_lands(
    origin: Path, worker: Path, tmp_path: Path
) -> None:
    theirs = hand_in(worker, "b", {"shared.txt": "one\nTWO by b\nthree\n", "b.txt": "b\n"})
    first = hand_in(worker, "a", {"shared.txt": "one\nTWO by a\nthree\n"})
    await lander(origin, tmp_path / "l0").land([first], Recorder())  # the target now holds a's line
    third = hand_in(worker, "c", {"c.txt": "c\n"})
    rec = Recorder()
    await lander(origin, tmp_path / "lander").land([theirs, third], rec)

    assert outcomes(rec) == {theirs.work_id: "conflict", third.work_id: "landed"}
    conflict = next(s for s in rec.done if s.outcome == "conflict")
    assert conflict.files == ("shared.txt",) and "conflicts with main in: shared.txt" in conflict.detail
    check = target_files(origin, tmp_path)
    assert (check / "shared.txt").read_text() == "one\nTWO by a\nthree\n"
    assert not (check / "b.txt").exists() and (check / "c.txt").exists()


async def test_an_item_that_conflicts_only_with_one_ahead_of_it_in_the_batch_is_deferred(
    origin: Path, worker: Path, tmp_path: Path
) -> None:
    """Not the item's to fix yet: the one ahead may still fail the gate."""
    first = hand_in(worker, "a", {"shared.txt": "one\nTWO by a\nthree\n"})
    second = hand_in(worker, "b", {"shared.txt": "one\nTWO by b\nthree\n"})
    rec = Recorder()
    await lander(origin, tmp_path / "lander").land([first, second], rec)
    assert outcomes(rec) == {first.work_id: "landed", second.work_id: "deferred"}
    deferred = next(s for s in rec.done if s.outcome == "deferred")
    assert deferred.files == ("shared.txt",) and "ahead of it in the same batch" in deferred.detail

    # on the new tip it is the item's own conflict
    rec = Recorder()
    await lander(origin, tmp_path / "lander").land([second], rec)
    assert outcomes(rec) == {second.work_id: "conflict"}


GATE = [PY, "-c", "import pathlib,sys; sys.exit(1 if pathlib.Path('bad.txt').exists() else 0)"]


@pytest.mark.parametrize("size", [4, 8])
async def test_a_failing_batch_is_bisected_to_the_one_bad_item(
    origin: Path, worker: Path, tmp_path: Path, size: int
) -> None:
    names = "abcdefgh"[:size]
    bad = names[size // 2 + 1]
    batch = [hand_in(worker, n, {f"{n}.txt": n, **({"bad.txt": "x"} if n == bad else {})}) for n in names]
    rec = Recorder()
    host = lander(origin, tmp_path / "lander", gate=GATE)
    await host.land(batch, rec)

    expected = {c.work_id: "landed" for c in batch}
    expected[batch[names.index(bad)].work_id] = "gate-failed"
    assert outcomes(rec) == expected
    assert host.stats.gate_runs <= 2 * math.log2(size) + 1
    assert host.stats.bisections >= 1
    splits = {s.candidate.work_id: s.splits for s in rec.done}
    assert splits[batch[names.index(bad)].work_id] == math.log2(size)  # halved down to itself
    assert max(splits.values()) == math.log2(size) and min(splits.values()) >= 1
    check = target_files(origin, tmp_path)
    assert not (check / "bad.txt").exists()
    assert all((check / f"{n}.txt").exists() for n in names if n != bad)


async def test_the_gates_output_tail_is_kept_redacted_and_a_hung_gate_is_stopped(
    origin: Path, worker: Path, tmp_path: Path
) -> None:
    noisy = [PY, "-c", "print('x' * 9000); print('password=hunter22'); raise SystemExit(3)"]
    one = hand_in(worker, "a", {"a.txt": "a\n"})
    rec = Recorder()
    await lander(origin, tmp_path / "l1", gate=noisy).land([one], rec)
    failed = rec.done[0]
    assert failed.outcome == "gate-failed" and len(failed.detail) <= 4000
    assert "hunter22" not in failed.detail and "password=" in failed.detail

    hung = [PY, "-c", "import time; print('started', flush=True); time.sleep(60)"]
    rec = Recorder()
    host = lander(origin, tmp_path / "l2", gate=hung, gate_timeout_s=1)
    await host.land([one], rec)
    stuck = rec.done[0]
    assert stuck.outcome == "gate-failed" and "did not finish within 1 s" in stuck.detail
    assert "started" in stuck.detail
    assert remote_sha(origin, "refs/heads/main") == run_git("rev-parse", "origin/main", cwd=worker)


async def test_a_target_that_moves_under_the_build_is_built_again_on_its_new_tip(
    origin: Path, worker: Path, tmp_path: Path
) -> None:
    """The gate itself pushes to the target on its first run (another landing, a person):
    the lander's push is refused, it builds again on the new tip and lands on top."""
    outsider = clone(origin, tmp_path / "outsider")
    marker = tmp_path / "moved-once"
    script = (
        "import pathlib,subprocess,sys\n"
        f"m = pathlib.Path({str(marker)!r})\n"
        "if not m.exists():\n"
        "    m.write_text('x')\n"
        f"    d = {str(outsider)!r}\n"
        "    pathlib.Path(d, 'outside.txt').write_text('o')\n"
        "    for a in (['add', '-A'], ['commit', '-qm', 'outside'], ['push', '-q', 'origin', 'main']):\n"
        "        subprocess.run(['git', *a], cwd=d, check=True)\n"
    )
    run_git("config", "user.email", "o@example.invalid", cwd=outsider)
    run_git("config", "user.name", "o", cwd=outsider)
    one = hand_in(worker, "a", {"a.txt": "a\n"})
    rec = Recorder()
    gate = tmp_path / "gate.py"
    gate.write_text(script)
    host = lander(origin, tmp_path / "lander", gate=[PY, str(gate)])
    await host.land([one], rec)

    assert outcomes(rec) == {one.work_id: "landed"}
    assert host.stats.builds == 2 and host.stats.pushes == 2
    check = target_files(origin, tmp_path)
    assert (check / "outside.txt").exists() and (check / "a.txt").exists()


async def test_what_a_lander_pushed_before_it_died_is_found_and_not_landed_twice(
    origin: Path, worker: Path, tmp_path: Path
) -> None:
    one = hand_in(worker, "a", {"a.txt": "a\n"})
    first = Recorder()
    await lander(origin, tmp_path / "l1").land([one], first)
    pushed = remote_sha(origin, "refs/heads/main")

    # the same item comes back to another lander (the first died before recording it)
    again = Candidate(one.work_id, one.title, one.branch, one.head_sha, pending_sha=pushed)
    rec = Recorder()
    host = lander(origin, tmp_path / "l2")
    await host.land([again], rec)
    assert outcomes(rec) == {one.work_id: "landed"} and rec.done[0].sha == pushed
    assert host.stats.pushes == 0 and remote_sha(origin, "refs/heads/main") == pushed


async def test_rebase_mode_replays_the_commits_with_no_merge_commit(
    origin: Path, worker: Path, tmp_path: Path
) -> None:
    batch = [hand_in(worker, n, {f"{n}.txt": n}) for n in "ab"]
    rec = Recorder()
    await lander(origin, tmp_path / "lander", land_mode="rebase").land(batch, rec)
    assert outcomes(rec) == {c.work_id: "landed" for c in batch}
    check = target_files(origin, tmp_path)
    assert run_git("log", "--merges", "--format=%s", cwd=check) == ""
    assert run_git("log", "--format=%s", "-n", "2", cwd=check).splitlines() == ["work on b", "work on a"]


async def test_an_unreachable_repository_or_a_gate_that_cannot_run_is_a_landing_error(
    origin: Path, worker: Path, tmp_path: Path
) -> None:
    one = hand_in(worker, "a", {"a.txt": "a\n"})
    with pytest.raises(LandingError, match="cannot be reached") as gone:
        await lander(tmp_path / "nowhere.git", tmp_path / "l1").land([one], Recorder())
    assert gone.value.field == "repository"
    with pytest.raises(LandingError, match="cannot be run") as missing:
        await lander(origin, tmp_path / "l2", gate=["no-such-program-xyz"]).land([one], Recorder())
    assert missing.value.field == "gate"
    assert remote_sha(origin, "refs/heads/main") == run_git("rev-parse", "origin/main", cwd=worker)


async def test_landed_branches_and_checkpoints_are_deleted(
    origin: Path, worker: Path, tmp_path: Path
) -> None:
    one = hand_in(worker, "a", {"a.txt": "a\n"})
    run_git("push", "--quiet", "origin", f"HEAD:refs/loom/checkpoints/{one.work_id}", cwd=worker)
    host = lander(origin, tmp_path / "lander")
    await host.land([one], Recorder())
    await host.delete_refs([one])
    assert remote_sha(origin, f"refs/heads/{one.branch}") is None
    assert remote_sha(origin, f"refs/loom/checkpoints/{one.work_id}") is None


def test_the_gate_gets_no_nats_or_loom_credentials() -> None:
    env = gate_env(
        {"PATH": "/bin", "NATS_PASSWORD": "p", "NATS_URL": "u", "LOOM_TOKEN": "t", "LOOM_PROJECT_ID": "x"}
    )
    assert env == {"PATH": "/bin", "LOOM_PROJECT_ID": "x"}


def test_the_tail_starts_at_a_line_and_is_bounded() -> None:
    text = "\n".join(f"line {i}" for i in range(2000))
    kept = tail(text, 100)
    assert len(kept) <= 100 and kept.startswith("line ") and kept.endswith("line 1999")
