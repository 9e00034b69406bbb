"""Workstreams (shared.git.workstream, docs/workstreams.md): issue 30's targets, against
raw git in the same run, interleaved so both see the same load.

* **open** (what a claim does: ls-remote, fetch, branch, worktree) on a repository of
  10,000 files (1,000 with ``--quick``), against the raw ``git worktree add -b`` it needs
  from an already fetched bare repository: target p50 within 1.5x, p95 <= 500 ms.
* **checkpoint** of a 100-file change: the snapshot (a temporary index, a commit) against
  raw ``git add -A && git commit`` in a scratch copy of the worktree's index, which does the
  same work: target p50 within 1.5x. The whole checkpoint adds its push to the item's
  private ref (here to a local file repository: git's own cost, not a network's), a row
  of its own: the raw comparison has no push.
Both sides run git without its fsyncs (``core.fsync=none``), as Loom does on its own copy
(everything there is fetched again or pushed right after, shared/git/cli.py): on this
virtual disk git's fsyncs alone cost 0.5-1.5 s per worktree, which would measure the disk.

* **a claim taking up a prepared worktree** (``loom-run`` made it before the agent CLI
  started): what the claim is left to do (read the note, check the worktree's top level
  and branch), against the same raw ``worktree add``.
* **the agent's own git while checkpoints run**: ``git status`` in the worktree while a
  checkpoint loop runs beside it, against the same with no checkpoints: the agent's calls
  must not be slowed (ratio reported).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from pathlib import Path

from benchlib import BenchContext, BenchResult, summarize

from shared.git.cli import git
from shared.git.repository import Repository
from shared.git.workstream import HostWorkstreams
from shared.models import WorkItem
from testsupport.git import make_origin, run_git

RAW_ADD = "raw git: worktree add -b (fetched)"
RAW_COMMIT = "raw git: add -A && commit (scratch index)"
RAW_STATUS = "raw git: status, no checkpoints"


def _origin(scratch: Path, files: int) -> Path:
    tree = {f"src/pkg{i % 100}/mod{i}.py": f"x = {i}\n" for i in range(files)}
    return make_origin(scratch, tree, name=f"origin-{files}.git")


def _item(n: int) -> WorkItem:
    return WorkItem(
        id=f"{n:032x}", project_id="bench", task_id=f"bench-{n}", description="d", capability="code"
    )


async def _open_vs_raw(ctx: BenchContext, origin: Path, runs: int) -> tuple[list[float], list[float]]:
    host = ctx.scratch / f"ws-host-{time.monotonic_ns()}"
    ws = HostWorkstreams(host, Repository(url=str(origin)), author=("bench", "bench@loom.invalid"))
    raw_repo = ctx.scratch / f"raw-{time.monotonic_ns()}.git"
    run_git("clone", "--quiet", "--bare", str(origin), str(raw_repo))
    base = run_git("rev-parse", "main", cwd=raw_repo)
    raw: list[float] = []
    ours: list[float] = []
    for n in range(runs + 2):
        target = ctx.scratch / f"raw-wt-{n}"
        item = _item(n + 1)

        async def raw_add(target: Path = target, n: int = n) -> float:
            start = time.perf_counter()
            await git(
                f"--git-dir={raw_repo}",
                "worktree",
                "add",
                "--quiet",
                "-b",
                f"raw-{n}",
                str(target),
                base,
                fsync=False,
            )
            return (time.perf_counter() - start) * 1000

        async def open_item(item: WorkItem = item) -> float:
            start = time.perf_counter()
            await ws.open(item)
            return (time.perf_counter() - start) * 1000

        # alternate which goes first: the disk is slower right after 10,000 files were written
        if n % 2:
            took_ours, took_raw = await open_item(), await raw_add()
        else:
            took_raw, took_ours = await raw_add(), await open_item()
        if n >= 2:  # the first ones warm the caches (and make Loom's bare repository)
            raw.append(took_raw)
            ours.append(took_ours)
        await ws.close(item.id, branch=ws.branch_of(item))
        await git(f"--git-dir={raw_repo}", "worktree", "remove", "--force", str(target))
    shutil.rmtree(host, ignore_errors=True)
    shutil.rmtree(raw_repo, ignore_errors=True)
    return raw, ours


async def _take_prepared(ctx: BenchContext, origin: Path, runs: int) -> list[float]:
    host = ctx.scratch / f"ws-prepared-{time.monotonic_ns()}"
    ws = HostWorkstreams(host, Repository(url=str(origin)), author=("bench", "bench@loom.invalid"))
    took: list[float] = []
    for n in range(runs + 2):
        item = _item(10_000 + n)
        await ws.prepare(item, agent_id="a" * 32)
        claimed = item.model_copy(update={"attempts": 1})
        start = time.perf_counter()
        taken = await ws.take_prepared(claimed, agent_id="a" * 32)
        elapsed = (time.perf_counter() - start) * 1000
        assert taken is not None, "the prepared worktree was not taken up"
        if n >= 2:
            took.append(elapsed)
        await ws.close(item.id, branch=ws.branch_of(item))
    shutil.rmtree(host, ignore_errors=True)
    return took


def _change(directory: Path, round_: int) -> None:
    for i in range(100):
        (directory / "src" / f"pkg{i}" / f"mod{i}.py").write_text(f"x = {i} + {round_}\n")


async def _checkpoint_vs_raw(
    ctx: BenchContext, origin: Path, runs: int
) -> tuple[list[float], list[float], list[float]]:
    """Each round changes the same 100 files three times over: raw add+commit in a scratch
    copy of the worktree's index, then Loom's snapshot (temporary index, commit), then a
    whole checkpoint (the snapshot and its push), so each writes the same amount."""
    host = ctx.scratch / f"cp-host-{time.monotonic_ns()}"
    ws = HostWorkstreams(host, Repository(url=str(origin)), author=("bench", "bench@loom.invalid"))
    item = _item(10_000)
    place, _ = await ws.open(item)
    author = {
        "GIT_AUTHOR_NAME": "bench",
        "GIT_AUTHOR_EMAIL": "bench@loom.invalid",
        "GIT_COMMITTER_NAME": "bench",
        "GIT_COMMITTER_EMAIL": "bench@loom.invalid",
    }
    index = place.directory.parent / ".repo.git" / "worktrees" / item.id / "index"
    raw: list[float] = []
    snapshots: list[float] = []
    whole: list[float] = []
    previous: str | None = None
    fd, scratch_index = tempfile.mkstemp(suffix=".index")
    os.close(fd)
    try:
        for n in range(runs + 2):
            _change(place.directory, 3 * n)
            shutil.copy(index, scratch_index)
            scratch = {**author, "GIT_INDEX_FILE": scratch_index}
            start = time.perf_counter()
            await git("add", "-A", cwd=place.directory, env=scratch, fsync=False)
            await git("commit", "--quiet", "-m", "raw", cwd=place.directory, env=scratch, fsync=False)
            took_raw = (time.perf_counter() - start) * 1000
            await git("reset", "--quiet", "--soft", "HEAD~1", cwd=place.directory)  # the branch back
            _change(place.directory, 3 * n + 1)
            start = time.perf_counter()
            snap = await ws.snapshot(place, item.id, attempt=1, agent_id="a" * 32, previous=previous)
            took_snapshot = (time.perf_counter() - start) * 1000
            assert snap is not None
            _change(place.directory, 3 * n + 2)
            start = time.perf_counter()
            made = await ws.checkpoint(place, item.id, attempt=1, agent_id="a" * 32, previous=previous)
            took_whole = (time.perf_counter() - start) * 1000
            assert made is not None and made.files == 100
            previous = made.sha
            if n >= 2:
                raw.append(took_raw)
                snapshots.append(took_snapshot)
                whole.append(took_whole)
    finally:
        os.unlink(scratch_index)
        await ws.close(item.id, branch=place.branch)
        shutil.rmtree(host, ignore_errors=True)
    return raw, snapshots, whole


async def _status_beside_checkpoints(
    ctx: BenchContext, origin: Path, runs: int
) -> tuple[list[float], list[float]]:
    host = ctx.scratch / f"st-host-{time.monotonic_ns()}"
    ws = HostWorkstreams(host, Repository(url=str(origin)), author=("bench", "bench@loom.invalid"))
    item = _item(20_000)
    place, _ = await ws.open(item)
    _change(place.directory, 1)

    async def statuses() -> list[float]:
        out: list[float] = []
        for _ in range(runs):
            start = time.perf_counter()
            await git("status", "--porcelain", cwd=place.directory)
            out.append((time.perf_counter() - start) * 1000)
        return out

    stop = asyncio.Event()

    async def checkpoints() -> None:
        previous: str | None = None
        round_ = 0
        while not stop.is_set():
            round_ += 1
            (place.directory / "touched.txt").write_text(str(round_))
            made = await ws.checkpoint(place, item.id, attempt=1, agent_id="a" * 32, previous=previous)
            previous = made.sha if made is not None else previous

    try:
        alone = await statuses()
        loop = asyncio.create_task(checkpoints())
        beside = await statuses()
        stop.set()
        await loop
    finally:
        await ws.close(item.id, branch=place.branch)
        shutil.rmtree(host, ignore_errors=True)
    return alone, beside


async def run(ctx: BenchContext) -> list[BenchResult]:
    files = 1_000 if ctx.quick else 10_000
    runs = ctx.iterations(30, 5)
    origin = _origin(ctx.scratch, files)
    raw_add, opened = await _open_vs_raw(ctx, origin, runs)
    taken = await _take_prepared(ctx, origin, runs)
    raw_commit, snapshots, checkpointed = await _checkpoint_vs_raw(ctx, origin, runs)
    alone, beside = await _status_beside_checkpoints(ctx, origin, ctx.iterations(40, 10))
    return [
        summarize(f"{RAW_ADD}, {files:,} files", raw_add),
        summarize(
            f"workstream: open (fetch, branch, worktree), {files:,} files",
            opened,
            baseline=f"{RAW_ADD}, {files:,} files",
            target="p50 <= 1.5x raw (p95 <= 500 ms: docs/performance.md)",
        ),
        summarize(
            f"workstream: claim taking up a prepared worktree (loom-run), {files:,} files",
            taken,
            baseline=f"{RAW_ADD}, {files:,} files",
        ),
        summarize(f"{RAW_COMMIT}, 100 files changed", raw_commit),
        summarize(
            "workstream: checkpoint snapshot (temporary index, commit), 100 files changed",
            snapshots,
            baseline=f"{RAW_COMMIT}, 100 files changed",
            target="p50 <= 1.5x raw",
        ),
        summarize(
            "workstream: checkpoint with its push (a local repository), 100 files changed",
            checkpointed,
            baseline=f"{RAW_COMMIT}, 100 files changed",
        ),
        summarize(RAW_STATUS, alone),
        summarize(
            "workstream: agent's git status while checkpoints run",
            beside,
            baseline=RAW_STATUS,
            target="not slowed (x raw ~ 1)",
        ),
    ]
