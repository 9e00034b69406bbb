"""An item's workstream on one agent's host: its branch, its worktree, its checkpoints,
its hand-in (docs/workstreams.md).

Loom keeps its own bare repository per project folder (``<worktree root>/.repo.git``)
and makes every worktree from it, so the agent's own checkout is never touched: not its
HEAD, index, branches or refs. The worktree root carries a ``.gitignore`` of ``*`` so the
main tree does not even see it as untracked. Everything reaches the project's repository
by URL (fetch and push), so three hosts with three clones share one origin.

* :meth:`HostWorkstreams.open` makes the item's branch from a recorded base (or carries on
  with the branch an earlier attempt pushed, and the files of its last checkpoint) and a
  worktree for it; it fails closed: on any error nothing is left half-made and the caller
  gives the claim back.
* :meth:`checkpoint` snapshots the whole worktree through a temporary index (the agent's
  index and branch untouched) as a commit on ``refs/loom/checkpoints/<work id>`` and
  pushes it: edits made by any means are captured.
* :meth:`hand_in` commits what is left, pushes the branch and says what it holds.
* Before a checkpoint and a hand-in the worktree's top level and branch are checked:
  drift is refused, never committed to the wrong branch.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from shared.errors import Conflict
from shared.git.cli import GitFailed, commit_env, git, out
from shared.git.repository import Repository, branch_for
from shared.models import Checkpoint, WorkItem, Workstream

CHECKPOINT_REF: Final = "refs/loom/checkpoints/"
BASE_REF: Final = "refs/loom/base/"
REMOTE_BRANCH_REF: Final = "refs/loom/remote/"
IGNORE_ALL: Final = "# Loom's worktrees and repository: never part of the project's own tree\n*\n"
_SHORTSTAT = re.compile(r"(\d+) files? changed(?:, (\d+) insertions?\(\+\))?(?:, (\d+) deletions?\(-\))?")


class WorkstreamError(Conflict):
    """A workstream could not be made, checkpointed or handed in; nothing was lost."""

    code = "workstream_failed"


class WorkstreamDrift(WorkstreamError):
    """The worktree is not where, or not on the branch, the item's workstream is."""

    code = "workstream_drift"


@dataclass(frozen=True)
class Place:
    """Where an agent works on an item: the directory, its branch and recorded base."""

    directory: Path
    branch: str
    base_ref: str
    base_sha: str
    resumed_from: str | None = None
    review: bool = False


@dataclass(frozen=True)
class HandedIn:
    head_sha: str
    commits: int
    files_changed: int
    insertions: int
    deletions: int
    committed_rest: bool


def checkpoint_ref(work_id: str) -> str:
    return f"{CHECKPOINT_REF}{work_id}"


class HostWorkstreams:
    """The workstreams of one project folder on one host."""

    def __init__(self, project_path: Path, repository: Repository, *, author: tuple[str, str]) -> None:
        self.repository = repository
        root = Path(repository.worktree_root)
        self.root = (root if root.is_absolute() else project_path / root).resolve()
        self.git_dir = self.root / ".repo.git"
        self._author = commit_env(*author)

    # -- places -------------------------------------------------------------------
    def directory(self, work_id: str, *, review: bool = False) -> Path:
        return self.root / (f"{work_id}-review" if review else work_id)

    async def _ensure_repo(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        ignore = self.root / ".gitignore"
        if not ignore.exists():
            ignore.write_text(IGNORE_ALL)
        if not (self.git_dir / "HEAD").exists():
            await git("init", "--quiet", "--bare", str(self.git_dir), step="init")
            # the checkpoints' commits name the agent; gc must keep what worktrees use
            await self._git("config", "gc.auto", "0", step="config")

    async def _git(self, *args: str, step: str | None = None, cwd: Path | None = None) -> str:
        if cwd is None:
            return await out(f"--git-dir={self.git_dir}", *args, step=step)
        return await out(*args, cwd=cwd, step=step)

    async def _remote_refs(self, *refs: str) -> dict[str, str]:
        """The SHAs of ``refs`` on the repository (absent ones left out): one round trip."""
        listing = await self._git("ls-remote", "--", self.repository.url, *refs, step="ls-remote")
        found: dict[str, str] = {}
        for line in listing.splitlines():
            sha, _, ref = line.partition("\t")
            if ref in refs:
                found[ref] = sha
        return found

    async def _fetch(self, mapping: dict[str, str]) -> None:
        """Fetch ``remote ref -> local ref`` (forced: these local refs are Loom's mirrors)."""
        if mapping:
            specs = [f"+{src}:{dst}" for src, dst in mapping.items()]
            await self._git("fetch", "--quiet", "--no-tags", "--", self.repository.url, *specs, step="fetch")

    async def open(self, item: WorkItem) -> tuple[Place, Workstream]:
        """The item's branch and a worktree for it. Fails closed: on error the worktree is
        removed again and :class:`WorkstreamError` says why."""
        try:
            await self._ensure_repo()
            return await self._open(item)
        except GitFailed as exc:
            await self._remove_worktree(self.directory(item.id))
            raise WorkstreamError(f"workstream: {exc.message}", field="workstream") from None
        except WorkstreamError:
            await self._remove_worktree(self.directory(item.id))
            raise

    async def _open(self, item: WorkItem) -> tuple[Place, Workstream]:
        repo = self.repository
        earlier = item.workstream
        branch = earlier.branch if earlier is not None else self.branch_of(item)
        target = earlier.base_ref if earlier is not None else repo.target_branch
        wanted = [f"refs/heads/{target}", f"refs/heads/{branch}", checkpoint_ref(item.id)]
        remote = await self._remote_refs(*wanted)
        pushed_branch = remote.get(f"refs/heads/{branch}")
        if earlier is None and pushed_branch is not None:
            raise WorkstreamError(
                f"workstream: branch {branch} already exists on the repository; it is not this "
                "item's, so it is not reused (rename it, or change the branch template)",
                field="branch",
            )
        base_remote = remote.get(f"refs/heads/{target}")
        if base_remote is None and earlier is None:
            raise WorkstreamError(
                f"workstream: the target branch {target} does not exist on the repository",
                field="target_branch",
            )
        fetch = {}
        if base_remote is not None:
            fetch[f"refs/heads/{target}"] = f"{BASE_REF}{target}"
        if pushed_branch is not None:
            fetch[f"refs/heads/{branch}"] = f"{REMOTE_BRANCH_REF}{branch}"
        resume = earlier.resume_from if earlier is not None else None
        if resume is not None and checkpoint_ref(item.id) in remote:
            fetch[checkpoint_ref(item.id)] = checkpoint_ref(item.id)
        await self._fetch(fetch)
        if earlier is not None:
            base_sha = earlier.base_sha
            start = pushed_branch or base_sha
        else:
            assert base_remote is not None
            base_sha = start = base_remote
        if resume is not None:
            # the checkpoint's first parent is the branch's head when it was taken
            start = await self._git("rev-parse", "--verify", f"{resume}^1^{{commit}}", step="checkpoint")
        directory = self.directory(item.id)
        await self._remove_worktree(directory)
        await self._git(
            "worktree", "add", "--quiet", "-B", branch, str(directory), start, step="worktree add"
        )
        if resume is not None:
            # its files as they were, uncommitted: tree from the checkpoint, index back to HEAD
            await self._git("read-tree", "-u", "--reset", resume, cwd=directory, step="restore checkpoint")
            await self._git("reset", "--quiet", cwd=directory, step="restore checkpoint")
        record = earlier or Workstream(branch=branch, base_ref=target, base_sha=base_sha)
        place = Place(directory, branch, target, base_sha, resumed_from=resume)
        return place, record

    async def open_review(self, item: WorkItem) -> Place:
        """A reviewer's own worktree of the branch at the handed-in SHA (detached: the
        reviewer reads, the worker's branch stays the worker's)."""
        ws = item.workstream
        if ws is None or ws.head_sha is None:
            raise WorkstreamError("workstream: nothing was handed in to review", field="workstream")
        directory = self.directory(item.id, review=True)
        try:
            await self._ensure_repo()
            await self._fetch({f"refs/heads/{ws.branch}": f"{REMOTE_BRANCH_REF}{ws.branch}"})
            await self._remove_worktree(directory)
            await self._git(
                "worktree", "add", "--quiet", "--detach", str(directory), ws.head_sha, step="worktree add"
            )
        except GitFailed as exc:
            await self._remove_worktree(directory)
            raise WorkstreamError(f"workstream: {exc.message}", field="workstream") from None
        return Place(directory, ws.branch, ws.base_ref, ws.base_sha, review=True)

    def branch_of(self, item: WorkItem) -> str:
        return branch_for(
            self.repository.branch_template, task_id=item.task_id, work_id=item.id, capability=item.capability
        )

    # -- drift ----------------------------------------------------------------------
    async def check_place(self, place: Place) -> None:
        """The worktree is the item's and on its branch: else :class:`WorkstreamDrift`."""
        if not place.directory.is_dir():
            raise WorkstreamDrift(f"workstream: {place.directory} is gone", field="workstream")
        top = Path(await self._git("rev-parse", "--show-toplevel", cwd=place.directory, step="rev-parse"))
        if not _same_directory(top, place.directory):
            raise WorkstreamDrift(
                f"workstream: the worktree's top level is {top}, not {place.directory}; "
                "nothing was committed",
                field="workstream",
            )
        found = await git("symbolic-ref", "--quiet", "--short", "HEAD", cwd=place.directory, check=False)
        head = found.stdout.strip() if found.returncode == 0 else "(detached HEAD)"
        if head != place.branch:
            raise WorkstreamDrift(
                f"workstream: {place.directory} is on {head}, not the item's branch {place.branch}; "
                "nothing was committed (switch back with git switch)",
                field="branch",
            )

    # -- checkpoints -----------------------------------------------------------------
    async def checkpoint(
        self, place: Place, work_id: str, *, attempt: int, agent_id: str, previous: str | None
    ) -> Checkpoint | None:
        """Snapshot the worktree as a commit on the item's private ref and push it; None
        when nothing changed since ``previous``. The agent's index and branch stay as they are."""
        await self.check_place(place)
        try:
            return await self._checkpoint(
                place, work_id, attempt=attempt, agent_id=agent_id, previous=previous
            )
        except GitFailed as exc:
            raise WorkstreamError(f"checkpoint: {exc.message}", field="checkpoint") from None

    async def _checkpoint(
        self, place: Place, work_id: str, *, attempt: int, agent_id: str, previous: str | None
    ) -> Checkpoint | None:
        cwd = place.directory
        fd, index = tempfile.mkstemp(prefix="loom-checkpoint-", suffix=".index")
        os.close(fd)
        os.unlink(index)  # git makes it; an empty file is not an index
        env = {"GIT_INDEX_FILE": index}
        try:
            await git("read-tree", "HEAD", cwd=cwd, env=env, step="checkpoint")
            await git("add", "--all", "--", ".", cwd=cwd, env=env, step="checkpoint")
            tree = (await git("write-tree", cwd=cwd, env=env, step="checkpoint")).stdout.strip()
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(index)
        head = await self._git("rev-parse", "HEAD", cwd=cwd, step="checkpoint")
        if previous is not None:
            same = await git("rev-parse", f"{previous}^{{tree}}", f"{previous}^1", cwd=cwd, check=False)
            if same.returncode == 0 and same.stdout.split() == [tree, head]:
                return None
        parents = ["-p", head]
        if (
            previous is not None
            and (await git("cat-file", "-e", previous, cwd=cwd, check=False)).returncode == 0
        ):
            parents += ["-p", previous]
        message = f"Loom checkpoint of {work_id}, attempt {attempt}, by {agent_id}"
        sha = (
            await git(
                "commit-tree", tree, *parents, "-m", message, cwd=cwd, env=self._author, step="checkpoint"
            )
        ).stdout.strip()
        ref = checkpoint_ref(work_id)
        await self._git("update-ref", ref, sha, step="checkpoint")
        await self._git("push", "--quiet", "--force", "--", self.repository.url, f"{ref}:{ref}", step="push")
        changed = await self._git("diff", "--name-only", head, sha, cwd=cwd, step="checkpoint")
        files = len([line for line in changed.splitlines() if line.strip()])
        return Checkpoint(sha=sha, attempt=attempt, agent_id=agent_id, files=files)

    # -- hand-in ------------------------------------------------------------------------
    async def hand_in(self, place: Place, *, message: str) -> HandedIn:
        """Commit what is left, push the branch (push before done), and count what it holds
        from the base."""
        await self.check_place(place)
        cwd = place.directory
        try:
            await git("add", "--all", "--", ".", cwd=cwd, step="hand-in")
            staged = await git("diff", "--cached", "--quiet", cwd=cwd, check=False)
            committed = staged.returncode != 0
            if committed:
                await git(
                    "commit",
                    "--quiet",
                    "--no-verify",
                    "-m",
                    message,
                    cwd=cwd,
                    env=self._author,
                    step="commit",
                )
            head = await self._git("rev-parse", "HEAD", cwd=cwd, step="hand-in")
            await self._git(
                "push",
                "--quiet",
                "--",
                self.repository.url,
                f"HEAD:refs/heads/{place.branch}",
                cwd=cwd,
                step="push",
            )
            count = int(
                await self._git("rev-list", "--count", f"{place.base_sha}..{head}", cwd=cwd, step="hand-in")
            )
            stat = await self._git("diff", "--shortstat", place.base_sha, head, cwd=cwd, step="hand-in")
        except GitFailed as exc:
            raise WorkstreamError(
                f"hand-in: {exc.message}; the item stays yours", field="workstream"
            ) from None
        files, insertions, deletions = _shortstat(stat)
        return HandedIn(head, count, files, insertions, deletions, committed)

    async def diff(self, place: Place) -> str:
        """The unified diff of the worktree (committed and not) against the recorded base."""
        return await self._git("diff", place.base_sha, cwd=place.directory, step="diff")

    # -- cleanup --------------------------------------------------------------------------
    async def close(self, work_id: str, *, branch: str | None = None) -> None:
        """Remove the item's worktrees (its own and a review's) and its local branch; what
        was pushed stays on the repository."""
        for directory in (self.directory(work_id), self.directory(work_id, review=True)):
            await self._remove_worktree(directory)
        if branch and (self.git_dir / "HEAD").exists():
            await git(f"--git-dir={self.git_dir}", "branch", "-D", "--", branch, check=False)
            await git(f"--git-dir={self.git_dir}", "update-ref", "-d", checkpoint_ref(work_id), check=False)

    async def _remove_worktree(self, directory: Path) -> None:
        if (self.git_dir / "HEAD").exists():
            await git(
                f"--git-dir={self.git_dir}", "worktree", "remove", "--force", str(directory), check=False
            )
        _remove_tree(directory)
        if (self.git_dir / "HEAD").exists():
            await git(f"--git-dir={self.git_dir}", "worktree", "prune", check=False)

    async def worktrees(self) -> list[str]:
        """The work ids this host has worktrees for (the sweep's view)."""
        if not self.root.is_dir():
            return []
        return sorted(
            p.name.removesuffix("-review") for p in self.root.iterdir() if p.is_dir() and p != self.git_dir
        )


def _same_directory(a: Path, b: Path) -> bool:
    return a.resolve() == b.resolve()


def _remove_tree(directory: Path) -> None:
    """What ``git worktree remove`` left (a folder git no longer knew)."""
    if directory.exists():
        shutil.rmtree(directory, ignore_errors=True)


def _shortstat(text: str) -> tuple[int, int, int]:
    match = _SHORTSTAT.search(text)
    if match is None:
        return 0, 0, 0
    return int(match.group(1)), int(match.group(2) or 0), int(match.group(3) or 0)
