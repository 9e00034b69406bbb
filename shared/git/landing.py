"""Landing a batch of handed-in branches on the target branch (docs/landing.md).

A lander's git work, on its own bare copy of the repository (``<worktree root>/.land.git``)
and a temporary detached worktree per build, so nothing it does touches a checkout:

1. fetch the target and the batch's branches in one call;
2. settle what is already on the target (a lander that crashed after its push, found
   through the commit recorded before the push, or a branch merged by hand);
3. build: the target's tip, then each item in order (a merge commit each, or its commits
   replayed); an item that conflicts with the target is set aside with the files that
   conflicted; one that conflicts only with an item ahead of it in the batch is deferred
   (given back untouched: it lands after that one, which may yet fail the gate);
4. run the gate (the project's command, an argument list, never a shell) with a timeout,
   keeping only the redacted tail of its output;
5. push the result to the target: a plain push, refused by git when the target moved
   meanwhile (then everything runs again on the new tip). The target never holds part of
   a batch: one commit moves it.

A batch that fails the gate is split in two and each half landed on its own (the first
half's push comes first), down to the one item that fails alone: with one bad item among
``n`` the gate runs at most ``2·log2(n) + 1`` times.

What becomes of each item is told to :class:`Steps` as soon as it is known, so a lander
that dies mid-batch has recorded everything up to then.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shutil
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Protocol

from shared.errors import Conflict
from shared.git.cli import GitFailed, commit_env, git, said
from shared.git.repository import Repository
from shared.git.workstream import checkpoint_ref, ensure_own_copy
from shared.models import MAX_LANDING_DETAIL, LandingOutcome
from shared.redact import redact

LAND_REF: Final = "refs/loom/land/"
PUSH_TRIES: Final = 5
"""Builds on a target that moved under each one before the lander gives the batch back."""
OUTPUT_KEPT: Final = 64 * 1024
"""Bytes of the gate's output read back (its tail); what is stored is shorter still."""
_SECRET_HINTS: Final = ("TOKEN", "PASSWORD", "SECRET", "CREDENTIAL", "NKEY")


class LandingError(Conflict):
    """The batch cannot be landed now for a reason that is not its items' (the repository
    unreachable, the gate not runnable, the target moving on every try)."""

    code = "landing_failed"


@dataclass
class Candidate:
    """One item to land: its handed-in head, and the commit a lander recorded before
    pushing it (if one did)."""

    work_id: str
    title: str
    branch: str
    head_sha: str
    pending_sha: str | None = None


@dataclass(frozen=True)
class Settled:
    """What became of one item."""

    candidate: Candidate
    outcome: LandingOutcome
    batch: int = 1
    files: tuple[str, ...] = ()
    detail: str = ""
    gate_s: float | None = None
    sha: str | None = None
    splits: int = 0
    """Times the failing batch that held it was split before this outcome (bisection)."""


@dataclass(frozen=True)
class DiffSummary:
    """What an operator reads before answering "land this?" (the coordinator's veto)."""

    commits: list[str]
    """``<short sha> <subject>``, newest first, at most :data:`SUMMARY_COMMITS`."""
    more_commits: int
    stat: str
    """``git diff --stat`` from where the branch left the target to its handed-in head."""
    conflicts: list[str]
    """The files it conflicts in with the target's tip (none: it merges cleanly)."""


SUMMARY_COMMITS: Final = 20


@dataclass(frozen=True)
class GateRun:
    ok: bool
    output: str
    seconds: float
    timed_out: bool = False


@dataclass
class LandingStats:
    gate_runs: int = 0
    builds: int = 0
    pushes: int = 0
    bisections: int = 0
    gate_s: list[float] = field(default_factory=list)


class Steps(Protocol):
    """What the lander records as the landing goes."""

    async def before_push(self, sha: str, items: list[Candidate]) -> None:
        """``sha`` is about to be pushed with ``items`` (recorded first, for crash recovery)."""

    async def settled(self, outcome: Settled) -> None:
        """One item's outcome, as soon as it is known."""

    async def alive(self) -> None:
        """Called between steps: renew what must not lapse (raise to stop)."""

    def took(self, step: str, items: list[Candidate], start_ns: int, **attributes: str | int | bool) -> None:
        """``step`` (build, gate, push) ran for ``items`` from ``start_ns`` until now."""


def gate_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The gate's environment: the lander's, without Loom's and NATS's credentials (the
    gate runs the project's code, which has no business with them)."""
    kept = {}
    for key, value in environ.items():
        upper = key.upper()
        if upper.startswith("NATS_") or (
            upper.startswith("LOOM_") and any(h in upper for h in _SECRET_HINTS)
        ):
            continue
        kept[key] = value
    return kept


def tail(text: str, limit: int = MAX_LANDING_DETAIL) -> str:
    """The last ``limit`` characters of ``text``, redacted, from a line start when it can."""
    text = redact(text)
    if len(text) <= limit:
        return text
    cut = text[-limit:]
    newline = cut.find("\n")
    return cut[newline + 1 :] if 0 <= newline < limit // 2 else cut


class HostLanding:
    """A lander's repository work for one project on one host."""

    def __init__(self, project_path: Path, repository: Repository, *, author: tuple[str, str]) -> None:
        self.repository = repository
        root = Path(repository.worktree_root)
        self.root = (root if root.is_absolute() else project_path / root).resolve()
        self.git_dir = self.root / ".land.git"
        self._author = commit_env(*author)
        self._builds = 0
        self.stats = LandingStats()

    async def _git(self, *args: str, cwd: Path | None = None, step: str | None = None) -> str:
        where = () if cwd is not None else (f"--git-dir={self.git_dir}",)
        result = await git(*where, *args, cwd=cwd, env=self._author, step=step, fsync=False)
        return result.stdout.strip()

    async def _ensure_repo(self) -> None:
        await ensure_own_copy(self.root, self.git_dir)
        if self._builds == 0:  # builds a killed lander left registered: forgotten, once a landing
            await git(f"--git-dir={self.git_dir}", "worktree", "prune", check=False, fsync=False)

    # -- the steps -------------------------------------------------------------------------
    async def fetch(self, candidates: list[Candidate]) -> str:
        """The target's tip now, with every candidate's branch fetched (one call)."""
        await self._ensure_repo()
        target = self.repository.target_branch
        specs = [f"+refs/heads/{target}:{LAND_REF}target"]
        specs += [f"+refs/heads/{c.branch}*:{LAND_REF}items/{c.work_id}*" for c in candidates]
        fetched = await git(
            f"--git-dir={self.git_dir}",
            "fetch",
            "--quiet",
            "--no-tags",
            "--",
            self.repository.url,
            *specs,
            check=False,
            fsync=False,
        )
        if fetched.returncode != 0:
            if "couldn't find remote ref" in fetched.stderr:
                raise LandingError(
                    f"the target branch {target} does not exist on the repository", field="target"
                )
            raise LandingError(f"the repository cannot be reached: {said(fetched)}", field="repository")
        return await self._git("rev-parse", f"{LAND_REF}target^{{commit}}", step="rev-parse")

    async def _has(self, sha: str) -> bool:
        found = await git(f"--git-dir={self.git_dir}", "cat-file", "-e", f"{sha}^{{commit}}", check=False)
        return found.returncode == 0

    async def contains(self, tip: str, sha: str) -> bool:
        """Whether ``sha`` is in the history of ``tip``."""
        if not await self._has(sha):
            return False
        found = await git(f"--git-dir={self.git_dir}", "merge-base", "--is-ancestor", sha, tip, check=False)
        return found.returncode == 0

    async def already_landed(self, tip: str, candidate: Candidate) -> str | None:
        """The commit of the target that already holds the item, or None: the commit a
        lander recorded before its push, or (merge mode) the handed-in head itself."""
        if candidate.pending_sha and await self.contains(tip, candidate.pending_sha):
            return candidate.pending_sha
        if self.repository.land_mode == "merge" and await self.contains(tip, candidate.head_sha):
            return tip
        return None

    async def build(
        self, tip: str, batch: list[Candidate]
    ) -> tuple[Path, str, list[Candidate], list[Settled]]:
        """A worktree at ``tip`` with each item added in order: its directory, the result,
        the items in it and the items that conflicted (set aside)."""
        self._builds += 1
        self.stats.builds += 1
        directory = self.root / f".land-{os.getpid()}-{self._builds}"
        await self._git("worktree", "add", "--quiet", "--detach", str(directory), tip, step="worktree add")
        merged: list[Candidate] = []
        conflicts: list[Settled] = []
        for c in batch:
            if not await self._has(c.head_sha):
                detail = "its handed-in commit is not on its branch any more (was the branch rewritten?)"
                conflicts.append(Settled(c, "conflict", batch=len(batch), detail=detail))
                continue
            files = await self._add(directory, c)
            if files is None:
                merged.append(c)
                continue
            if merged and not await self.conflicts_on(tip, c.head_sha):
                # it conflicts only with an item ahead of it in this batch, which may yet fail
                # the gate: not the item's to fix (yet); it lands after that one, or alone
                detail = f"conflicts in {', '.join(files)} with an item ahead of it in the same batch"
                conflicts.append(Settled(c, "deferred", batch=len(batch), files=tuple(files), detail=detail))
                continue
            detail = f"conflicts with {self.repository.target_branch} in: {', '.join(files) or 'its changes'}"
            conflicts.append(Settled(c, "conflict", batch=len(batch), files=tuple(files), detail=detail))
        result = await self._git("rev-parse", "HEAD", cwd=directory, step="rev-parse")
        return directory, result, merged, conflicts

    async def conflicts_on(self, tip: str, head: str) -> list[str]:
        """The files ``head`` conflicts in when merged alone on ``tip`` (none: it merges
        cleanly), from ``git merge-tree``: no worktree, no index."""
        asked = ("merge-tree", "--write-tree", "--name-only", "--no-messages", tip, head)
        found = await git(f"--git-dir={self.git_dir}", *asked, check=False, fsync=False)
        if found.returncode == 0:
            return []
        if found.returncode != 1:
            raise GitFailed("merge-tree", f"git merge-tree failed: {said(found)}")
        return sorted({line for line in found.stdout.splitlines()[1:] if line.strip()})

    async def summary(self, tip: str, c: Candidate) -> DiffSummary:
        """The item's commits and files against the target's ``tip`` (fetched), and whether
        it merges cleanly there now."""
        base = await self._git("merge-base", tip, c.head_sha, step="merge-base")
        count = int(await self._git("rev-list", "--count", f"{tip}..{c.head_sha}", step="rev-list"))
        log = await self._git(
            "log", f"--max-count={SUMMARY_COMMITS}", "--format=%h %s", f"{tip}..{c.head_sha}", step="log"
        )
        stat = await self._git("diff", "--stat=100", base, c.head_sha, step="diff")
        commits = log.splitlines()
        return DiffSummary(commits, count - len(commits), stat, await self.conflicts_on(tip, c.head_sha))

    async def _add(self, directory: Path, c: Candidate) -> list[str] | None:
        """Add one item to the build; None when it went in, else the conflicting files
        (the build is as it was before it)."""
        message = f"Land {c.title}\n\nLoom-Work-Id: {c.work_id}\nLoom-Branch: {c.branch}"
        if self.repository.land_mode == "merge":
            done = await git(
                "merge",
                "--no-ff",
                "--no-edit",
                "-m",
                message,
                c.head_sha,
                cwd=directory,
                env=self._author,
                check=False,
                fsync=False,
            )
            undo = ("merge", "--abort")
        else:
            base = await self._git("merge-base", "HEAD", c.head_sha, cwd=directory, step="merge-base")
            listed = await self._git(
                "rev-list", "--reverse", "--no-merges", f"{base}..{c.head_sha}", cwd=directory
            )
            commits = listed.split()
            if not commits:
                return None
            done = await git(
                "cherry-pick",
                "--allow-empty",
                *commits,
                cwd=directory,
                env=self._author,
                check=False,
                fsync=False,
            )
            undo = ("cherry-pick", "--abort")
        if done.returncode == 0:
            return None
        unmerged = await git(
            "diff", "--name-only", "--diff-filter=U", cwd=directory, check=False, fsync=False
        )
        files = sorted(set(unmerged.stdout.split()))
        await git(*undo, cwd=directory, check=False, fsync=False)
        if not files:  # not a conflict: git failed for another reason
            raise GitFailed(undo[0], f"git {undo[0]} failed: {said(done)}")
        return files

    async def gate(self, directory: Path) -> GateRun | None:
        """Run the project's gate in the build; None when it has none."""
        argv = self.repository.gate
        if not argv:
            return None
        self.stats.gate_runs += 1
        started = time.monotonic()
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=directory,
                env=gate_env(os.environ),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,  # its children are stopped with it on a timeout
            )
        except (FileNotFoundError, PermissionError):
            raise LandingError(
                "gate: its program cannot be run on this lander's host", field="gate"
            ) from None
        kept = bytearray()

        async def read() -> None:
            assert proc.stdout is not None
            while chunk := await proc.stdout.read(65536):
                kept.extend(chunk)
                del kept[:-OUTPUT_KEPT]

        timed_out = False
        try:
            await asyncio.wait_for(asyncio.gather(read(), proc.wait()), self.repository.gate_timeout_s)
        except TimeoutError:
            timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
        seconds = time.monotonic() - started
        self.stats.gate_s.append(seconds)
        output = kept.decode(errors="replace")
        if timed_out:
            output += f"\n[the gate did not finish within {self.repository.gate_timeout_s} s and was stopped]"
        return GateRun(
            ok=not timed_out and proc.returncode == 0,
            output=tail(output),
            seconds=seconds,
            timed_out=timed_out,
        )

    async def push(self, sha: str) -> bool:
        """Move the target to ``sha``; False when git refused because the target moved."""
        self.stats.pushes += 1
        target = self.repository.target_branch
        pushed = await git(
            f"--git-dir={self.git_dir}",
            "push",
            "--quiet",
            "--porcelain",
            "--",
            self.repository.url,
            f"{sha}:refs/heads/{target}",
            check=False,
            fsync=False,
        )
        if pushed.returncode == 0:
            return True
        text = pushed.stdout + pushed.stderr
        if any(s in text for s in ("non-fast-forward", "fetch first", "rejected", "stale info")):
            return False
        raise LandingError(f"the push to {target} failed: {said(pushed)}", field="repository")

    async def remove(self, directory: Path) -> None:
        await git(
            f"--git-dir={self.git_dir}",
            "worktree",
            "remove",
            "--force",
            str(directory),
            check=False,
            fsync=False,
        )
        await asyncio.to_thread(shutil.rmtree, directory, True)  # what git left, if anything

    async def delete_refs(self, landed: list[Candidate]) -> None:
        """A landed item's branch and checkpoints on the repository (one push; a ref gone
        already is no error), and the lander's copies of them."""
        if not landed:
            return
        refs = [r for c in landed for r in (f":refs/heads/{c.branch}", f":{checkpoint_ref(c.work_id)}")]
        await git(
            f"--git-dir={self.git_dir}",
            "push",
            "--quiet",
            "--",
            self.repository.url,
            *refs,
            check=False,
            fsync=False,
        )

    # -- the whole landing -----------------------------------------------------------------
    async def land(self, batch: list[Candidate], steps: Steps) -> None:
        """Land ``batch`` in order: each item ends landed, conflicting or failing the gate
        (told to ``steps``); :class:`LandingError` when the rest cannot be landed now."""
        await self._land(list(batch), steps, len(batch))

    async def _land(self, batch: list[Candidate], steps: Steps, size: int, splits: int = 0) -> None:
        told = _Splits(steps, splits)  # each outcome with the splits before it
        for _ in range(PUSH_TRIES):
            await told.alive()
            tip = await self.fetch(batch)
            waiting: list[Candidate] = []
            for c in batch:
                sha = await self.already_landed(tip, c)
                if sha is not None:
                    await told.settled(
                        Settled(c, "landed", batch=size, sha=sha, detail="found on the target")
                    )
                else:
                    waiting.append(c)
            if not waiting:
                return
            started = time.time_ns()
            directory, result, merged, conflicts = await self.build(tip, waiting)
            told.took("land.build", waiting, started, merged=len(merged), conflicts=len(conflicts))
            try:
                for conflict in conflicts:
                    await told.settled(conflict)
                batch = merged
                if not merged:
                    return
                await told.alive()
                started = time.time_ns()
                run = await self.gate(directory)
                if run is not None:
                    told.took("land.gate", merged, started, ok=run.ok, timed_out=run.timed_out)
            finally:
                await self.remove(directory)
            if run is None or run.ok:
                await told.before_push(result, merged)
                for c in merged:
                    c.pending_sha = result
                started = time.time_ns()
                pushed = await self.push(result)
                told.took("land.push", merged, started, pushed=pushed)
                if pushed:
                    seconds = run.seconds if run is not None else None
                    for c in merged:
                        await told.settled(
                            Settled(c, "landed", batch=len(merged), sha=result, gate_s=seconds)
                        )
                    return
                continue  # the target moved: build again on its new tip
            if len(merged) == 1:
                detail = run.output or "the gate failed and said nothing"
                await told.settled(
                    Settled(merged[0], "gate-failed", batch=size, detail=detail, gate_s=run.seconds)
                )
                return
            self.stats.bisections += 1
            half = len(merged) // 2
            await self._land(merged[:half], steps, size, splits + 1)
            await self._land(merged[half:], steps, size, splits + 1)
            return
        raise LandingError(f"the target branch moved during each of {PUSH_TRIES} builds", field="target")


class _Splits:
    """The steps, told each outcome with how many times its batch was split before it."""

    def __init__(self, steps: Steps, splits: int) -> None:
        self._steps = steps
        self._splits = splits

    async def before_push(self, sha: str, items: list[Candidate]) -> None:
        await self._steps.before_push(sha, items)

    async def settled(self, outcome: Settled) -> None:
        await self._steps.settled(dataclasses.replace(outcome, splits=self._splits))

    async def alive(self) -> None:
        await self._steps.alive()

    def took(self, step: str, items: list[Candidate], start_ns: int, **attributes: str | int | bool) -> None:
        self._steps.took(step, items, start_ns, splits=self._splits, **attributes)
