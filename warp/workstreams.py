"""This agent's workstreams: an item's branch and worktree made at the claim, checkpoints on
progress and on a timer, the hand-in before completion (docs/workstreams.md).

The git steps are :mod:`shared.git.workstream`'s; this module decides when they run for
the items this Warp holds and records each on the item (the work queue's
``record_workstream``), so any host's next attempt finds the branch and the checkpoint.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path

from nats.js import JetStreamContext

from shared.git.repository import Repository, RepositoryStore
from shared.git.workstream import HostWorkstreams, Place
from shared.identity import Identity
from shared.models import Checkpoint, WorkItem, WorkStatus, Workstream, utcnow
from shared.names import ProjectNames
from shared.work.queue import WorkQueue

log = logging.getLogger("loom.warp.workstreams")


@dataclass
class Held:
    """An item this Warp works on in a worktree."""

    host: HostWorkstreams
    place: Place
    record: Workstream
    attempt: int
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class Workstreams:
    def __init__(self, js: JetStreamContext, names: ProjectNames, identity: Identity) -> None:
        self.repositories = RepositoryStore(js, names)
        self.identity = identity
        self._held: dict[str, Held] = {}
        self._plain: set[str] = set()
        """Items this process claimed without a worktree: nothing to hand in, no read."""

    def _host(self, repository: Repository) -> HostWorkstreams:
        return host_workstreams(self.identity, repository)

    async def repository_for(self, item: WorkItem) -> Repository | None:
        """The repository ``item`` works in (None: none, or the item is not isolated); read
        by the claim beside the item's context, then given to :meth:`open`."""
        if not item.isolated:
            return None
        repository = await self.repositories.get()
        return repository if repository is not None and repository.enabled else None

    def place(self, work_id: str) -> Place | None:
        held = self._held.get(work_id)
        return held.place if held is not None else None

    def held_ids(self) -> list[str]:
        return list(self._held)

    def plain(self, work_id: str) -> bool:
        """Whether this process claimed ``work_id`` without a worktree (its record then has
        no workstream either: only :meth:`open` gives it one)."""
        return work_id in self._plain

    # -- the claim ------------------------------------------------------------------
    async def open(self, item: WorkItem, work: WorkQueue, repository: Repository | None) -> Place | None:
        """The worktree the agent works in for ``item`` in ``repository`` (its
        :meth:`repository_for`; None: workstreams are off for the project or the item). A
        worker's is made fail-closed: :class:`WorkstreamError` and the caller gives the
        claim back. A reviewer's is its own detached worktree of the handed-in SHA."""
        if repository is None:
            self._plain.add(item.id)
            return None
        self._plain.discard(item.id)
        host = self._host(repository)
        if item.status is WorkStatus.REVIEWING:
            if item.workstream is None:
                return None
            place = await host.open_review(item)
            self._held[item.id] = Held(host, place, item.workstream, item.attempts)
            return place
        # made before this agent started (loom-run), or now
        taken = await host.take_prepared(item, agent_id=self.identity.agent_id)
        place, record = taken if taken is not None else await host.open(item)
        step = "resumed" if place.resumed_from else "opened"
        try:
            await work.record_workstream(item.id, self.identity.agent_id, record, step=step)
        except BaseException:
            await host.close(item.id, branch=place.branch)
            raise
        self._held[item.id] = Held(host, place, record, item.attempts)
        return place

    async def adopt(self, item: WorkItem) -> Held | None:
        """The worktree of an item this agent holds but this process did not open (Warp
        started again while holding it): taken up again as it is. None when the item works
        without a workstream; :class:`WorkstreamError` when it has one and its worktree is
        not on this host (its files are then only in its last checkpoint)."""
        held = self._held.get(item.id)
        if held is not None:
            return held
        if item.workstream is None or item.status is WorkStatus.REVIEWING:
            return None
        if item.assigned_to != self.identity.agent_id:
            return None
        repository = await self.repository_for(item)
        if repository is None:
            return None
        host = self._host(repository)
        ws = item.workstream
        place = Place(host.directory(item.id), ws.branch, ws.base_ref, ws.base_sha)
        await host.check_place(place)  # gone or drifted: said, never committed elsewhere
        held = Held(host, place, ws, item.attempts)
        self._held[item.id] = held
        return held

    # -- checkpoints ------------------------------------------------------------------
    async def checkpoint(
        self, work_id: str, work: WorkQueue, item: WorkItem | None = None
    ) -> Checkpoint | None:
        """Snapshot the item's worktree if it changed, and record it on the item."""
        held = self._held.get(work_id)
        if held is None and item is not None:
            held = await self.adopt(item)
        if held is None or held.place.review:
            return None
        async with held.lock:
            previous = held.record.resume_from or (
                held.record.checkpoints[0].sha if held.record.checkpoints else None
            )
            made = await held.host.checkpoint(
                held.place, work_id, attempt=held.attempt, agent_id=self.identity.agent_id, previous=previous
            )
            if made is None:
                return None
            record = held.record.model_copy(
                update={"checkpoints": [made, *held.record.checkpoints], "resume_from": made.sha}
            )
            await work.record_workstream(work_id, self.identity.agent_id, record, step="checkpoint")
            held.record = record
            return made

    async def checkpoint_all(self, work: WorkQueue) -> None:
        """The timer's round: every held worktree that changed."""
        for work_id in self.held_ids():
            try:
                await self.checkpoint(work_id, work)
            except Exception as exc:
                log.warning("checkpoint of %s not taken now: %s", work_id, exc)

    # -- hand-in ---------------------------------------------------------------------------
    async def hand_in(self, item: WorkItem, work: WorkQueue) -> Workstream | None:
        """Commit what is left, push the branch and record what it holds; only then may the
        item be completed (push before done). None when the item works without one."""
        held = await self.adopt(item)
        if held is None or held.place.review:
            return None
        async with held.lock:
            message = f"{item.task_id}: {item.description.splitlines()[0][:200]}"
            done = await held.host.hand_in(held.place, message=message)
            record = held.record.model_copy(
                update={
                    "head_sha": done.head_sha,
                    "commits": done.commits,
                    "files_changed": done.files_changed,
                    "insertions": done.insertions,
                    "deletions": done.deletions,
                    "handed_in_at": utcnow(),
                    "resume_from": None,
                }
            )
            await work.record_workstream(item.id, self.identity.agent_id, record, step="handed-in")
            held.record = record
            return record

    # -- the sweep ---------------------------------------------------------------------------
    async def sweep(self, work: WorkQueue) -> tuple[int, int]:
        """Remove this host's worktrees whose item is no longer this agent's, and the
        repository's checkpoint refs of items long finished or gone, each after the
        repository's ``keep_days`` (docs/workstreams.md, Cleanup). Returns what went
        (worktrees, checkpoint refs). Several hosts sweeping at once is harmless."""
        from shared.git.workstream import checkpoints_to_sweep, worktree_to_sweep
        from shared.names import is_work_id

        repository = await self.repositories.get()
        if repository is None:
            return 0, 0
        host = self._host(repository)
        removed = 0
        for work_id, age in host.worktree_ages().items():
            if work_id in self._held or not is_work_id(work_id):
                continue
            item = await _item_or_none(work, work_id)
            if worktree_to_sweep(
                item, agent_id=self.identity.agent_id, age_s=age, keep_days=repository.keep_days
            ):
                branch = item.workstream.branch if item is not None and item.workstream is not None else None
                await host.close(work_id, branch=branch)
                removed += 1
        now = utcnow()
        dropped = []
        for work_id in await host.remote_checkpoints():
            if is_work_id(work_id) and checkpoints_to_sweep(
                await _item_or_none(work, work_id), now=now, keep_days=repository.keep_days
            ):
                dropped.append(work_id)
        await host.drop_checkpoints(dropped)
        if removed or dropped:
            log.info(
                "workstream sweep: %d worktree(s) and %d checkpoint ref(s) removed", removed, len(dropped)
            )
        return removed, len(dropped)

    # -- the end of a hold -------------------------------------------------------------------
    async def release(self, work_id: str) -> None:
        """The item left this agent (completed, handed in, failed, cancelled, lapsed): its
        worktree here goes; what was pushed stays on the repository."""
        self._plain.discard(work_id)
        held = self._held.pop(work_id, None)
        if held is None:
            return
        try:
            await held.host.close(work_id, branch=None if held.place.review else held.place.branch)
        except Exception as exc:  # a worktree left behind is the sweep's, not an error of the tool
            log.warning("worktree of %s not removed now: %s", work_id, exc)


def host_workstreams(identity: Identity, repository: Repository) -> HostWorkstreams:
    """The workstreams of this agent's project folder; its commits are by its handle."""
    author = (identity.handle, f"{identity.agent_id}@loom.invalid")
    return HostWorkstreams(Path(identity.project_path), repository, author=author)


async def _item_or_none(work: WorkQueue, work_id: str) -> WorkItem | None:
    from shared.work.rules import WorkNotFound

    try:
        return await work.get(work_id)
    except WorkNotFound:
        return None
