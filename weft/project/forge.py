"""Forge mode's watch (docs/landing.md): items whose lander opened a pull request wait in
``landing`` with no queue message; Weft's sweep asks GitHub about each pull request every
``WEFT_FORGE_POLL_S`` and settles the item when GitHub reports it merged (completed, its
dependents unblock) or closed without merging (back to its author, or to the DLQ after the
project's allowed failures). Every replica may watch: the settling is compare-and-set and
does nothing for an item that no longer waits on that pull request."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from shared.git.forge import ForgeError, GitHub
from shared.work.landing import on_pull_request

if TYPE_CHECKING:
    from shared.git.repository import RepositoryStore
    from shared.work.queue import WorkQueue
    from weft.project.work import WorkIndex

log = logging.getLogger("loom.weft.forge")


class ForgeWatch:
    """When each waiting pull request of one project was last asked about."""

    def __init__(self) -> None:
        self._asked: dict[str, float] = {}

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
        if not waiting:
            return 0
        repository = await repositories.get()
        if repository is None or repository.forge != "github" or repository.github_repository is None:
            return 0
        github = GitHub(repository.github_api_url, repository.github_repository, token)
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
            if pr.merged and pr.merge_commit_sha:
                done = await queue.forge_settled(
                    item.id, pr.number, pr.merge_commit_sha, max_failures=repository.land_failures
                )
            elif pr.state == "closed" and not pr.merged:
                done = await queue.forge_settled(
                    item.id, pr.number, None, max_failures=repository.land_failures
                )
            else:
                continue
            settled += done is not None
        return settled
