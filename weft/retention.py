"""Finished work records are kept for ``WEFT_WORK_RETENTION_S``, then deleted.

Without this the work bucket, and every Weft's in-memory copy of it, grows with
each item ever submitted. Only final records go (completed, cancelled, expired;
dead-lettered ones not before the dead-letter queue itself drops them), each by
a revision-checked delete, so a record retried meanwhile stays and two Weft
replicas sweeping together delete it once. The delete marker that tells every
mirror the record went is itself removed a minute later.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta

from shared.models import WorkStatus, utcnow
from shared.work import DLQ_MAX_AGE_S, WorkQueue
from weft.workview import WorkIndex

log = logging.getLogger("loom.weft.retention")

MARKER_KEEP_S = 60.0
"""How long a delete marker stays: long enough for every mirror to see it."""

DELETED_AFTER_RETENTION = frozenset({WorkStatus.COMPLETED, WorkStatus.CANCELLED, WorkStatus.EXPIRED})


class WorkRetention:
    def __init__(self, queue: WorkQueue, index: WorkIndex, *, marker_keep_s: float = MARKER_KEEP_S) -> None:
        self.queue = queue
        self.index = index
        self.marker_keep_s = marker_keep_s
        self._markers: dict[str, float] = {}  # work id -> when its record was deleted

    def due(self, retention_s: float, now: datetime | None = None) -> list[tuple[str, int]]:
        """(work id, revision) of every record whose retention has run out."""
        moment = now or utcnow()
        finished = moment - timedelta(seconds=retention_s)
        dead_lettered = moment - timedelta(seconds=max(retention_s, DLQ_MAX_AGE_S))
        found: list[tuple[str, int]] = []
        mirror = self.index.mirror
        for work_id, item in mirror.items():
            if item.finished_at is None:
                continue
            if item.status in DELETED_AFTER_RETENTION:
                cutoff = finished
            elif item.status is WorkStatus.DEAD_LETTERED:
                cutoff = dead_lettered
            else:
                continue
            revision = mirror.revision_of(work_id)
            if item.finished_at <= cutoff and revision is not None:
                found.append((work_id, revision))
        return found

    async def sweep(self, retention_s: float, now: datetime | None = None) -> int:
        """Delete the records due; returns how many went (0 when retention is off)."""
        deleted = 0
        if retention_s > 0:
            for work_id, revision in self.due(retention_s, now):
                if await self.queue.forget(work_id, revision=revision):
                    deleted += 1
                    self._markers[work_id] = time.monotonic()
            if deleted:
                log.info("%s: deleted %d finished work records", self.queue.names.project_id, deleted)
        await self._drop_markers()
        return deleted

    async def _drop_markers(self) -> None:
        limit = time.monotonic() - self.marker_keep_s
        for work_id in [w for w, at in self._markers.items() if at <= limit]:
            try:
                await self.queue.drop_marker(work_id)
            except Exception as exc:  # NATS away: the next sweep tries again
                log.debug("delete marker of %s not removed yet: %s", work_id, exc)
                continue
            self._markers.pop(work_id, None)

    @property
    def pending_markers(self) -> int:
        return len(self._markers)
