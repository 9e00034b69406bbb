"""Forge mode's watch (docs/landing.md): items whose lander opened a pull request wait in
``landing`` with no queue message; Weft's sweep asks GitHub about each pull request every
``WEFT_FORGE_POLL_S`` and settles the item when GitHub reports it merged (completed, its
dependents unblock) or closed without merging (back to its author, or to the DLQ after the
project's allowed failures). GitHub's webhook (``POST /hooks/github``, weft/routes/hooks.py)
settles the same way at once (:func:`hear`); the poll stays as the net for a delivery that
never came. Every replica may watch: the settling is compare-and-set and does nothing for
an item that no longer waits on that pull request."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from shared.git.forge import ForgeError, GitHub, PullRequest
from shared.models import WorkStatus
from shared.work.landing import on_pull_request

if TYPE_CHECKING:
    from shared.git.repository import RepositoryStore
    from shared.models import WorkItem
    from shared.work.queue import WorkQueue
    from weft.project.work import WorkIndex

log = logging.getLogger("loom.weft.forge")


class ForgeWatch:
    """When each waiting pull request of one project was last asked about."""

    def __init__(self) -> None:
        self._asked: dict[str, float] = {}
        self._closed: set[str] = set()
        """Cancelled items whose pull request this replica closed (a second close is harmless)."""

    async def sweep(
        self,
        work: WorkIndex,
        repositories: RepositoryStore,
        queue: WorkQueue,
        token: str | None,
        every_s: float,
    ) -> int:
        """Ask GitHub about the pull requests that are due; the number of items settled."""
        waiting = [i for i in work.mirror.values() if on_pull_request(i)]
        ids = {i.id for i in waiting}
        self._asked = {k: v for k, v in self._asked.items() if k in ids}
        self._closed = {k for k in self._closed if work.mirror.get(k) is not None}  # deleted: forgotten
        cancelled = [i for i in work.mirror.values() if _left_open(i) and i.id not in self._closed]
        if not waiting and not cancelled:
            return 0
        repository = await repositories.get()
        if repository is None or repository.forge != "github" or repository.github_repository is None:
            return 0
        github = GitHub(repository.github_api_url, repository.github_repository, token)
        for item in cancelled:
            assert item.landing is not None and item.landing.pull_request is not None  # _left_open
            try:
                await github.close_pull_request(item.landing.pull_request)
            except ForgeError as exc:
                log.warning("the pull request of cancelled %s was not closed: %s", item.id, exc)
                break  # the next sweep tries again
            self._closed.add(item.id)
        now, settled = time.monotonic(), 0
        for item in waiting:
            assert item.landing is not None and item.landing.pull_request is not None  # on_pull_request
            if now - self._asked.get(item.id, float("-inf")) < every_s:
                continue
            self._asked[item.id] = now
            try:
                pr = await github.pull_request(item.landing.pull_request)
            except ForgeError as exc:
                log.warning("pull request of %s not read: %s", item.id, exc)
                return settled  # the others would meet the same answer: next sweep
            done = await settle(queue, item.id, pr, repository.land_failures)
            settled += done is not None
        return settled


def _left_open(item: WorkItem) -> bool:
    """Cancelled while it waited on its pull request (which may still be open on GitHub)."""
    return (
        item.status is WorkStatus.CANCELLED
        and item.landing is not None
        and item.landing.pull_request is not None
    )


async def settle(queue: WorkQueue, work_id: str, pr: PullRequest, max_failures: int) -> WorkItem | None:
    """The item waiting on ``pr`` as GitHub says it stands: merged (completed), closed
    without merging (sent back), or still open (left alone: None)."""
    if pr.merged and pr.merge_commit_sha:
        return await queue.forge_settled(work_id, pr.number, pr.merge_commit_sha, max_failures=max_failures)
    if pr.state == "closed" and not pr.merged:
        return await queue.forge_settled(work_id, pr.number, None, max_failures=max_failures)
    return None


async def hear(
    work: WorkIndex, repositories: RepositoryStore, queue: WorkQueue, repository_name: str, pr: PullRequest
) -> int:
    """GitHub's webhook said ``pr`` of ``repository_name`` was closed: the items of this
    project (in forge mode on that repository) waiting on it are settled; their number."""
    repository = await repositories.get()
    if (
        repository is None
        or repository.forge != "github"
        or (repository.github_repository or "").lower() != repository_name.lower()
    ):
        return 0
    settled = 0
    await work.mirror.sync()  # an item may have begun waiting a moment ago; a hook is rare
    for item in list(work.mirror.values()):
        if on_pull_request(item) and item.landing is not None and item.landing.pull_request == pr.number:
            settled += await settle(queue, item.id, pr, repository.land_failures) is not None
    return settled
