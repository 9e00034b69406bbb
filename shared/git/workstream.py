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
* :meth:`prepare` makes an item's worktree before the agent that will claim it starts
  (``loom-run``, so the agent CLI starts in it); the agent's Warp takes it up at the claim
  (:meth:`take_prepared`) when nothing about the item changed in between.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from pydantic import ValidationError

from shared.base import LoomModel
from shared.errors import Conflict, Invalid, NotFound
from shared.git.cli import GitFailed, GitResult, commit_env, git, out, said
from shared.git.repository import Repository, branch_for
from shared.models import FINAL_WORK_STATES, Checkpoint, WorkItem, Workstream

CHECKPOINT_REF: Final = "refs/loom/checkpoints/"
BASE_REF: Final = "refs/loom/base/"
REMOTE_BRANCH_REF: Final = "refs/loom/remote/"
REMOTE_CHECKPOINT_REF: Final = "refs/loom/remote-checkpoints/"
IGNORE_ALL: Final = "# Loom's worktrees and repository: never part of the project's own tree\n*\n"
_SHA = re.compile(r"[0-9a-f]{4,40}")
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


class Prepared(LoomModel):
    """A worktree made before its agent started (``loom-run``): for whom, and the item as it
    was then, so the claim takes it up only if nothing changed since."""

    agent_id: str
    attempts: int
    record: Workstream | None
    """The item's workstream when the worktree was made (None: a first attempt)."""
    branch: str
    base_ref: str
    base_sha: str
    resumed_from: str | None = None


@dataclass(frozen=True)
class HandedIn:
    head_sha: str
    commits: int
    files_changed: int
    insertions: int
    deletions: int
    committed_rest: bool


async def local_git(*args: str, **options: Any) -> GitResult:
    """git on Loom's own copy and worktrees: everything there can be fetched again or is
    pushed right after, so without git's fsyncs (:func:`shared.git.cli.git`)."""
    return await git(*args, fsync=False, **options)


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
        await ensure_own_copy(self.root, self.git_dir)

    async def _git(self, *args: str, step: str | None = None, cwd: Path | None = None) -> str:
        if cwd is None:
            return await out(f"--git-dir={self.git_dir}", *args, step=step, fsync=False)
        return await out(*args, cwd=cwd, step=step, fsync=False)

    async def _fetch_item_refs(self, target: str, branch: str, work_id: str) -> dict[str, str]:
        """One fetch of what an item's workstream needs: the target branch (which must
        exist), the item's branch and its checkpoints (which may not: their refspecs are
        globs, and a glob that matches nothing is no error; the names carry the item's id,
        so nothing else matches). Returns the remote ref -> SHA of what was found."""
        wanted = _item_refs(target, branch, work_id)
        specs = _item_refspecs(wanted)
        result = await local_git(
            f"--git-dir={self.git_dir}",
            "fetch",
            "--quiet",
            "--no-tags",
            "--prune",
            "--",
            self.repository.url,
            *specs,
            check=False,
        )
        if result.returncode != 0:
            if "couldn't find remote ref" in result.stderr:
                raise WorkstreamError(
                    f"workstream: the target branch {target} does not exist on the repository",
                    field="target_branch",
                )
            raise GitFailed("fetch", f"git fetch failed: {said(result)}")
        listing = await self._git("for-each-ref", "--format=%(refname) %(objectname)", *wanted.values())
        local = dict(line.split(" ", 1) for line in listing.splitlines() if " " in line)
        return {src: local[dst] for src, dst in wanted.items() if dst in local}

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
        remote = await self._fetch_item_refs(target, branch, item.id)
        pushed_branch = remote.get(f"refs/heads/{branch}")
        if earlier is None and pushed_branch is not None:
            raise WorkstreamError(
                f"workstream: branch {branch} already exists on the repository; it is not this "
                "item's, so it is not reused (rename it, or change the branch template)",
                field="branch",
            )
        base_remote = remote.get(f"refs/heads/{target}")
        resume = earlier.resume_from if earlier is not None else None
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
        await self._add_worktree(directory, "-B", branch, str(directory), start)
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
            await self._add_worktree(directory, "--detach", str(directory), ws.head_sha)
        except GitFailed as exc:
            await self._remove_worktree(directory)
            raise WorkstreamError(f"workstream: {exc.message}", field="workstream") from None
        return Place(directory, ws.branch, ws.base_ref, ws.base_sha, review=True)

    def branch_of(self, item: WorkItem) -> str:
        return branch_for(
            self.repository.branch_template, task_id=item.task_id, work_id=item.id, capability=item.capability
        )

    # -- made before the agent starts (loom-run) --------------------------------------
    def _prepared_file(self, work_id: str) -> Path:
        return self.git_dir / "loom-prepared" / f"{work_id}.json"

    async def prepare(self, item: WorkItem, *, agent_id: str) -> Place:
        """The worktree :meth:`open` would make at the claim, made now for the agent
        ``agent_id`` that is about to start for ``item``, and noted for its claim. Fails
        closed like :meth:`open`."""
        place, _ = await self.open(item)
        note = Prepared(
            agent_id=agent_id,
            attempts=item.attempts,
            record=item.workstream,
            branch=place.branch,
            base_ref=place.base_ref,
            base_sha=place.base_sha,
            resumed_from=place.resumed_from,
        )
        path = self._prepared_file(item.id)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(note.model_dump_json())
        return place

    async def take_prepared(self, item: WorkItem, *, agent_id: str) -> tuple[Place, Workstream] | None:
        """The worktree :meth:`prepare` made for this claim, if there is one and nothing
        changed since: the same agent, the claim right after it (no other attempt in between),
        the item's workstream as it was, the worktree still on the item's branch. A prepared
        worktree that does not qualify is removed (the claim then makes a fresh one); None
        when there is none to take."""
        path = self._prepared_file(item.id)
        try:
            note = Prepared.model_validate_json(path.read_text())
        except (OSError, ValidationError):
            return None
        path.unlink(missing_ok=True)
        earlier = item.workstream
        branch = earlier.branch if earlier is not None else self.branch_of(item)
        place = Place(
            self.directory(item.id), note.branch, note.base_ref, note.base_sha, resumed_from=note.resumed_from
        )
        same = (
            note.agent_id == agent_id
            and note.attempts + 1 == item.attempts
            and note.record == earlier
            and note.branch == branch
        )
        if same:
            try:
                await self.check_place(place)
            except WorkstreamError:
                same = False
        if not same:
            await self._remove_worktree(place.directory)
            return None
        record = earlier or Workstream(branch=note.branch, base_ref=note.base_ref, base_sha=note.base_sha)
        return place, record

    # -- drift ----------------------------------------------------------------------
    async def check_place(self, place: Place, *also: str) -> tuple[str, list[str] | None]:
        """The worktree is the item's and on its branch (else :class:`WorkstreamDrift`).
        Returns its HEAD commit and what ``also`` (revisions) resolve to, None when one of
        them does not: in one git call when they all do."""
        if not place.directory.is_dir():
            raise WorkstreamDrift(f"workstream: {place.directory} is gone", field="workstream")
        asked = ["rev-parse", "--show-toplevel", "HEAD", *also, "--symbolic-full-name", "HEAD"]
        found = await local_git(*asked, cwd=place.directory, check=False)  # the flag: what follows it
        resolved: list[str] | None = list(also)
        if found.returncode != 0 and also:
            resolved = None
            found = await local_git(*[a for a in asked if a not in also], cwd=place.directory, check=False)
        if found.returncode != 0:
            raise WorkstreamDrift(
                f"workstream: {place.directory} is not a worktree any more", field="workstream"
            )
        lines = found.stdout.splitlines()
        top, head, ref = lines[0], lines[1], lines[-1]
        if resolved is not None:
            resolved = lines[2 : 2 + len(also)]
        if not _same_directory(Path(top), place.directory):
            raise WorkstreamDrift(
                f"workstream: the worktree's top level is {top}, not {place.directory}; "
                "nothing was committed",
                field="workstream",
            )
        on = ref.removeprefix("refs/heads/") if ref.startswith("refs/heads/") else "(detached HEAD)"
        if on != place.branch:
            raise WorkstreamDrift(
                f"workstream: {place.directory} is on {on}, not the item's branch {place.branch}; "
                "nothing was committed (switch back with git switch)",
                field="branch",
            )
        return head, resolved

    # -- checkpoints -----------------------------------------------------------------
    async def checkpoint(
        self, place: Place, work_id: str, *, attempt: int, agent_id: str, previous: str | None
    ) -> Checkpoint | None:
        """Snapshot the worktree (:meth:`snapshot`) and push it to the item's private ref
        on the repository, where any host's next attempt finds it; None when nothing
        changed since ``previous``. The agent's index and branch stay as they are."""
        made = await self.snapshot(place, work_id, attempt=attempt, agent_id=agent_id, previous=previous)
        if made is None:
            return None
        sha, head = made
        ref = checkpoint_ref(work_id)
        try:
            _, changed = await asyncio.gather(
                self._git(
                    "push", "--quiet", "--force", "--", self.repository.url, f"{sha}:{ref}", step="push"
                ),
                self._git("diff", "--name-only", head, sha, cwd=place.directory, step="checkpoint"),
            )
        except GitFailed as exc:
            raise WorkstreamError(f"checkpoint: {exc.message}", field="checkpoint") from None
        files = len([line for line in changed.splitlines() if line.strip()])
        return Checkpoint(sha=sha, attempt=attempt, agent_id=agent_id, files=files)

    async def snapshot(
        self, place: Place, work_id: str, *, attempt: int, agent_id: str, previous: str | None
    ) -> tuple[str, str] | None:
        """The worktree as a commit (its SHA, and the branch's head it sits on), made
        through a temporary index: the branch's head its first parent, ``previous`` its
        second (so every checkpoint stays reachable from the newest); None when nothing
        changed since ``previous``."""
        also = (f"{previous}^{{tree}}", f"{previous}^1") if previous is not None else ()
        head, known = await self.check_place(place, *also)
        cwd = place.directory
        fd, index = tempfile.mkstemp(prefix="loom-checkpoint-", suffix=".index")
        os.close(fd)
        env = {"GIT_INDEX_FILE": index}
        try:
            # A copy of the agent's index keeps git's record of unchanged files, so only
            # what changed is hashed again; without one, start from HEAD's tree.
            if not _copy_index(cwd, Path(index)):
                os.unlink(index)  # git makes it; an empty file is not an index
                await local_git("read-tree", "HEAD", cwd=cwd, env=env, step="checkpoint")
            await local_git("add", "--all", "--", ".", cwd=cwd, env=env, step="checkpoint")
            # every blob is there: the worktree was checked out from them or add wrote them
            written = await local_git("write-tree", "--missing-ok", cwd=cwd, env=env, step="checkpoint")
            tree = written.stdout.strip()
            parents = ["-p", head]
            if previous is not None and known:
                if known == [tree, head]:
                    return None  # nothing changed since the last one
                parents += ["-p", previous]
            message = f"Loom checkpoint of {work_id}, attempt {attempt}, by {agent_id}"
            made = await local_git(
                "commit-tree", tree, *parents, "-m", message, cwd=cwd, env=self._author, step="checkpoint"
            )
        except GitFailed as exc:
            raise WorkstreamError(f"checkpoint: {exc.message}", field="checkpoint") from None
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(index)
        return made.stdout.strip(), head

    # -- hand-in ------------------------------------------------------------------------
    async def hand_in(self, place: Place, *, message: str) -> HandedIn:
        """Commit what is left, push the branch (push before done), and count what it holds
        from the base."""
        await self.check_place(place)
        cwd = place.directory
        try:
            await local_git("add", "--all", "--", ".", cwd=cwd, step="hand-in")
            staged = await local_git("diff", "--cached", "--quiet", cwd=cwd, check=False)
            committed = staged.returncode != 0
            if committed:
                await local_git(
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

    # -- cleanup --------------------------------------------------------------------------
    async def close(self, work_id: str, *, branch: str | None = None) -> None:
        """Remove the item's worktrees (its own and a review's) and its local branch; what
        was pushed stays on the repository."""
        for directory in (self.directory(work_id), self.directory(work_id, review=True)):
            await self._remove_worktree(directory)
        self._prepared_file(work_id).unlink(missing_ok=True)
        if branch and (self.git_dir / "HEAD").exists():
            # its local branch and the copies open fetched (a ref already gone is no error)
            refs = [f"refs/heads/{branch}", *_own_refs(branch, work_id).values()]
            await local_git(
                f"--git-dir={self.git_dir}",
                "update-ref",
                "--stdin",
                stdin="".join(f"delete {ref}\n" for ref in refs).encode(),
                check=False,
            )

    async def _add_worktree(self, directory: Path, *args: str) -> None:
        """``git worktree add``; a leftover of the same item on this host (a folder, or a
        registration whose folder is gone) is cleared first."""
        if _exists(directory):
            await self._remove_worktree(directory)
        added = await local_git(f"--git-dir={self.git_dir}", "worktree", "add", "--quiet", *args, check=False)
        if added.returncode != 0 and "already registered" in added.stderr:
            await local_git(f"--git-dir={self.git_dir}", "worktree", "prune", check=False)
            added = await local_git(
                f"--git-dir={self.git_dir}", "worktree", "add", "--quiet", *args, check=False
            )
        if added.returncode != 0:
            raise GitFailed("worktree add", f"git worktree add failed: {said(added)}")

    async def _remove_worktree(self, directory: Path) -> None:
        """Unregister and delete it (``worktree remove`` also unregisters one whose folder
        is already gone; a folder git does not know is deleted all the same)."""
        if (self.git_dir / "HEAD").exists():
            await local_git(
                f"--git-dir={self.git_dir}", "worktree", "remove", "--force", str(directory), check=False
            )
        _remove_tree(directory)

    def worktree_ages(self) -> dict[str, float]:
        """The work ids this host has worktrees for, each with the seconds since its folder
        last changed (the newest of its own and its review's): the sweep's view."""
        if not self.root.is_dir():
            return {}
        now = time.time()
        ages: dict[str, float] = {}
        for path in self.root.iterdir():
            if path.is_dir() and path != self.git_dir:
                work_id = path.name.removesuffix("-review")
                age = max(0.0, now - path.stat().st_mtime)
                ages[work_id] = min(age, ages.get(work_id, age))
        return ages

    async def remote_checkpoints(self) -> list[str]:
        """The work ids with a checkpoint ref on the repository."""
        listing = await self._git(
            "ls-remote", "--", self.repository.url, f"{CHECKPOINT_REF}*", step="ls-remote"
        )
        return sorted(
            line.rpartition(CHECKPOINT_REF)[2] for line in listing.splitlines() if CHECKPOINT_REF in line
        )

    async def drop_checkpoints(self, work_ids: list[str]) -> None:
        """Delete these items' checkpoint refs on the repository (one push; a ref another
        host deleted first is no error)."""
        if work_ids:
            refs = [f":{checkpoint_ref(w)}" for w in work_ids]
            await local_git(
                f"--git-dir={self.git_dir}", "push", "--quiet", "--", self.repository.url, *refs, check=False
            )


DAY_S: Final = 86_400.0


def worktree_to_sweep(item: WorkItem | None, *, agent_id: str, age_s: float, keep_days: int) -> bool:
    """A worktree on an agent's host goes once its item is no longer that agent's to work
    on (finished, gone, or redelivered to another agent) and nobody touched it for
    ``keep_days`` (time for an operator to look at what was never checkpointed)."""
    mine = item is not None and item.assigned_to == agent_id and item.status not in FINAL_WORK_STATES
    return not mine and age_s >= keep_days * DAY_S


def checkpoints_to_sweep(item: WorkItem | None, *, now: datetime, keep_days: int) -> bool:
    """An item's checkpoint ref on the repository goes ``keep_days`` after the item
    finished (a dead letter retried within them still starts from its files), or at once
    when its record is gone."""
    if item is None:
        return True
    if item.status not in FINAL_WORK_STATES:
        return False
    finished = item.finished_at or item.updated_at
    return (now - finished).total_seconds() >= keep_days * DAY_S


def _own_refs(branch: str, work_id: str) -> dict[str, str]:
    """The item's own refs on the repository -> Loom's local copies: its branch, its
    checkpoints."""
    return {
        f"refs/heads/{branch}": f"{REMOTE_BRANCH_REF}{branch}",
        checkpoint_ref(work_id): f"{REMOTE_CHECKPOINT_REF}{work_id}",
    }


def _item_refs(target: str, branch: str, work_id: str) -> dict[str, str]:
    """What an item's workstream reads from the repository -> Loom's local copy of it: the
    target branch first, then the item's own refs."""
    return {f"refs/heads/{target}": f"{BASE_REF}{target}", **_own_refs(branch, work_id)}


def _item_refspecs(refs: dict[str, str]) -> list[str]:
    """Fetch refspecs for :func:`_item_refs`: the target exactly (it must exist); the item's
    branch and checkpoints as globs, which match nothing without error (their names carry
    the item's id, so nothing else matches)."""
    (target, base), *optional = refs.items()
    return [f"+{target}:{base}", *(f"+{src}*:{dst}*" for src, dst in optional)]


async def ensure_own_copy(root: Path, git_dir: Path) -> None:
    """Loom's folder on a host (``root``, ignored by the project's own tree) and its bare copy
    of the repository in it (an agent's workstreams', or a lander's)."""
    _ignored_folder(root)
    await _init_bare(git_dir)


def _ignored_folder(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    ignore = root / ".gitignore"
    if not ignore.exists():
        ignore.write_text(IGNORE_ALL)


async def _init_bare(git_dir: Path) -> None:
    """Loom's own bare copy of the repository, made once."""
    if not _exists(git_dir / "HEAD"):
        await local_git("init", "--quiet", "--bare", str(git_dir), step="init")
        # the checkpoints' commits are reached only through refs it fetched; gc must wait
        await local_git(f"--git-dir={git_dir}", "config", "gc.auto", "0", step="config")


def _copy_index(worktree: Path, to: Path) -> bool:
    """Copy the worktree's own index (``.git`` is a file naming its folder) to ``to``."""
    dotgit = worktree / ".git"
    try:
        if dotgit.is_file():
            text = dotgit.read_text().strip()
            if not text.startswith("gitdir:"):
                return False
            source = Path(text.removeprefix("gitdir:").strip())
            source = (source if source.is_absolute() else worktree / source) / "index"
        else:
            source = dotgit / "index"
        shutil.copyfile(source, to)
    except OSError:
        return False
    return True


def _exists(path: Path) -> bool:
    return path.exists()


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


# -- reading an item's code from elsewhere (Weft) ----------------------------------------------

MAX_DIFF_BYTES: Final = 1_000_000
"""A diff longer than this is cut (the file list is always whole)."""


@dataclass(frozen=True)
class FileChange:
    path: str
    status: str
    """git's letter: A added, M modified, D deleted, R renamed, ..."""
    insertions: int | None
    deletions: int | None
    """None for a binary file."""


@dataclass(frozen=True)
class ItemDiff:
    base_sha: str
    head_sha: str
    files: list[FileChange]
    diff: str
    truncated: bool


class RepositoryCache:
    """A bare copy of a project's repository on Weft's host, fetched on demand, from which
    an item's diff is read (its branch's head or one of its checkpoints against its base)."""

    def __init__(self, folder: Path, repository: Repository) -> None:
        self.git_dir = folder / "repo.git"
        self.repository = repository

    async def _git(self, *args: str, step: str) -> GitResult:
        return await local_git(f"--git-dir={self.git_dir}", *args, step=step)

    async def item_diff(self, work_id: str, ws: Workstream, *, checkpoint: str | None = None) -> ItemDiff:
        """What the item changed from its base: at ``checkpoint`` when given, else at its
        handed-in head, else at its newest checkpoint, else at its branch's head."""
        if checkpoint is not None and _SHA.fullmatch(checkpoint) is None:
            raise Invalid("must be a commit's SHA (4 to 40 hex digits)", field="checkpoint", rule="sha")
        try:
            await _init_bare(self.git_dir)
            specs = _item_refspecs(_item_refs(ws.base_ref, ws.branch, work_id))
            await self._git("fetch", "--quiet", "--no-tags", "--", self.repository.url, *specs, step="fetch")
            head = checkpoint or ws.head_sha or ws.resume_from
            if head is None:
                head = (
                    await self._git("rev-parse", f"{REMOTE_BRANCH_REF}{ws.branch}", step="rev-parse")
                ).stdout
            head = head.strip()
            known = await local_git(
                f"--git-dir={self.git_dir}", "cat-file", "-e", f"{head}^{{commit}}", check=False
            )
            if known.returncode != 0:
                raise NotFound("not a commit of this item's branch or checkpoints", field="checkpoint")
            numstat, names, text = await asyncio.gather(
                self._git("diff", "--numstat", "-z", ws.base_sha, head, step="diff"),
                self._git("diff", "--name-status", "-z", ws.base_sha, head, step="diff"),
                self._git("diff", ws.base_sha, head, step="diff"),
            )
        except GitFailed as exc:
            raise WorkstreamError(f"diff: {exc.message}", field="workstream") from None
        files = _changes(numstat.stdout, names.stdout)
        body = text.stdout
        truncated = len(body.encode()) > MAX_DIFF_BYTES
        if truncated:
            body = body.encode()[:MAX_DIFF_BYTES].decode(errors="ignore")
        return ItemDiff(ws.base_sha, head, files, body, truncated)


def _changes(numstat: str, name_status: str) -> list[FileChange]:
    """``--numstat -z`` and ``--name-status -z`` side by side (renames give two paths)."""
    statuses: dict[str, str] = {}
    parts = name_status.split("\0")
    i = 0
    while i < len(parts) - 1:
        letter = parts[i][:1]
        if letter in ("R", "C"):
            statuses[parts[i + 2]] = letter
            i += 3
        else:
            statuses[parts[i + 1]] = letter
            i += 2
    changes: list[FileChange] = []
    records = numstat.split("\0")
    i = 0
    while i < len(records) - 1:
        added, deleted, path = [*records[i].split("\t", 2), "", "", ""][:3]
        if path == "":  # a rename: the two paths follow
            path = records[i + 2]
            i += 3
        else:
            i += 1
        changes.append(
            FileChange(
                path=path,
                status=statuses.get(path, "M"),
                insertions=int(added) if added.isdigit() else None,
                deletions=int(deleted) if deleted.isdigit() else None,
            )
        )
    return changes
