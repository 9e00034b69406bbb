"""Weft's read side of the work records, plus the one field Weft itself writes.

Records are written by whoever performs a transition (Warp agents claim,
progress, complete and fail them directly), so Weft follows the work bucket
instead of assuming it saw every change.
"""

from __future__ import annotations

import logging
from collections import Counter
from datetime import datetime

from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext

from shared.models import WorkItem, WorkStatus, utcnow
from shared.nats.mirror import BucketMirror
from shared.paging import Page, decode_cursor
from shared.refs import Candidate, RefIndex
from shared.work.graph import WorkGraph, bottlenecks, held_up, work_graph
from shared.work.queue import WorkQueue
from shared.work.rules import EXPIRABLE, WAITING, WorkFilter, WorkRecord, page_items

log = logging.getLogger("loom.weft.work")


def _parse(_key: str, raw: bytes) -> WorkItem:
    return WorkRecord.model_validate_json(raw).item


class WorkIndex:
    """Watch-backed copy of one project's work records (items only)."""

    def __init__(self, nc: NatsClient, js: JetStreamContext, queue: WorkQueue) -> None:
        self._nc = nc
        self._js = js
        self.queue = queue
        self._mirror: BucketMirror[WorkItem] | None = None
        self._bottlenecks: tuple[int, dict[str, int]] | None = None
        """(the copy's revision, how many open items each open item holds up) at that revision."""
        self._refs: tuple[int, RefIndex] | None = None
        """(the copy's revision, its ids and task ids arranged for references) at that revision."""

    async def start(self) -> None:
        await self.queue.records_bucket()
        self._mirror = BucketMirror(self._js, self.queue.names.work_records_bucket, _parse, nc=self._nc)
        await self._mirror.start()

    async def stop(self) -> None:
        if self._mirror is not None:
            await self._mirror.stop()

    @property
    def mirror(self) -> BucketMirror[WorkItem]:
        assert self._mirror is not None, "WorkIndex.start() was not awaited"
        return self._mirror

    async def list_page(self, filters: WorkFilter, *, limit: int, cursor: str | None) -> Page[WorkItem]:
        await self.mirror.sync()
        after = decode_cursor(cursor)
        return page_items((i for i in self.mirror.values() if filters.matches(i)), limit=limit, after=after)

    def counts_by_status(self) -> dict[str, int]:
        counts = Counter(item.status.value for item in self.mirror.values())
        return {status.value: counts.get(status.value, 0) for status in WorkStatus}

    def waiting(self) -> list[WorkItem]:
        """Items waiting for an agent (a worker, or a reviewer), highest priority first,
        then oldest first. Blocked items wait for other work, not for an agent."""
        items = [i for i in self.mirror.values() if i.status in WAITING]
        items.sort(key=lambda i: (-i.priority, i.created_at))
        return items

    async def landing(self) -> list[WorkItem]:
        """The landing queue: items being landed, then those waiting for a lander in the
        order landers take them (highest priority, then longest queued for landing)."""
        await self.mirror.sync()
        items = [i for i in self.mirror.values() if i.status in (WorkStatus.MERGING, WorkStatus.LANDING)]
        items.sort(key=lambda i: (i.status is not WorkStatus.MERGING, -i.priority, _queued_at(i)))
        return items

    def has_expired(self, now: datetime | None = None) -> bool:
        moment = now or utcnow()
        return any(
            i.status in EXPIRABLE and i.deadline is not None and i.deadline <= moment
            for i in self.mirror.values()
        )

    async def graph(self, root: WorkItem) -> WorkGraph:
        """The items ``root`` depends on and the items that depend on it, from the copy."""
        await self.mirror.sync()
        return work_graph(root, self.mirror.get)

    def bottlenecks(self, threshold: int) -> dict[str, int]:
        """The open items holding up at least ``threshold`` open items (docs/operator.md);
        counted again only when the copy changed (every sweep asks)."""
        revision = self.mirror.revision
        if self._bottlenecks is None or self._bottlenecks[0] != revision:
            self._bottlenecks = (revision, held_up(dict(self.mirror.items())))
        return bottlenecks(self._bottlenecks[1], threshold)

    def refs(self) -> RefIndex:
        """The copy's ids and task ids for ``GET /api/work/resolve`` (shared.refs), arranged
        again only when the copy changed."""
        revision = self.mirror.revision
        if self._refs is None or self._refs[0] != revision:
            index = RefIndex(Candidate(item.id, (item.task_id,)) for _, item in self.mirror.items())
            self._refs = (revision, index)
        return self._refs[1]

    def by_id(self) -> dict[str, WorkItem]:
        return dict(self.mirror.items())


def _queued_at(item: WorkItem) -> datetime:
    return item.landing.queued_at if item.landing is not None else item.updated_at
