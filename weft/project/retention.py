"""What Weft keeps, and for how long: finished work records for ``WEFT_WORK_RETENTION_S``,
registry entries of agents gone offline for ``WEFT_AGENT_RETENTION_S``.

Without this the work and registry buckets, and every Weft's in-memory copies of them,
grow with each item ever submitted and each agent ever started (spun-up agents get a new
id each). Only finished records go (completed, cancelled, expired; dead-lettered ones not
before the dead-letter queue itself drops them) and only entries of agents offline (or
silent) for the whole period. Each delete is revision-checked, so a record retried or an
agent back meanwhile stays, and two Weft replicas sweeping together delete once. The
delete marker that tells every mirror the key went is itself removed a minute later.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta

from nats.js import JetStreamContext

from shared.agents.registry import Registry
from shared.models import AgentStatus, WorkStatus, utcnow
from shared.nats.jetstream import drop_delete_marker
from shared.work.queue import WorkQueue
from shared.work.rules import DLQ_MAX_AGE_S
from weft.project.agents import AgentDirectory
from weft.project.work import WorkIndex

log = logging.getLogger("loom.weft.retention")

MARKER_KEEP_S = 60.0
"""How long a delete marker stays: long enough for every mirror to see it."""

DELETED_AFTER_RETENTION = frozenset({WorkStatus.COMPLETED, WorkStatus.CANCELLED, WorkStatus.EXPIRED})


class Retention:
    def __init__(
        self,
        js: JetStreamContext,
        queue: WorkQueue,
        work: WorkIndex,
        registry: Registry,
        agents: AgentDirectory,
        *,
        marker_keep_s: float = MARKER_KEEP_S,
    ) -> None:
        self._js = js
        self.queue = queue
        self.work = work
        self.registry = registry
        self.agents = agents
        self.marker_keep_s = marker_keep_s
        self._markers: dict[tuple[str, str], float] = {}  # (bucket, key) -> when it was deleted

    # -- what is due --------------------------------------------------------------------
    def work_due(self, retention_s: float, now: datetime | None = None) -> list[tuple[str, int]]:
        """(work id, revision) of every finished record whose retention has run out."""
        moment = now or utcnow()
        finished = moment - timedelta(seconds=retention_s)
        dead_lettered = moment - timedelta(seconds=max(retention_s, DLQ_MAX_AGE_S))
        found: list[tuple[str, int]] = []
        mirror = self.work.mirror
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

    def agents_due(self, retention_s: float, now: datetime | None = None) -> list[tuple[str, int]]:
        """(agent id, revision) of every entry offline, and silent, for the whole period."""
        moment = now or utcnow()
        cutoff = moment - timedelta(seconds=retention_s)
        found: list[tuple[str, int]] = []
        mirror = self.agents.mirror
        for agent_id, entry in mirror.items():
            if entry.effective_status(moment) is not AgentStatus.OFFLINE:
                continue
            last_seen = max(entry.last_heartbeat, entry.last_activity or entry.last_heartbeat)
            revision = mirror.revision_of(agent_id)
            if last_seen <= cutoff and revision is not None:
                found.append((agent_id, revision))
        return found

    # -- deleting ------------------------------------------------------------------------
    async def sweep(
        self, work_retention_s: float, agent_retention_s: float, now: datetime | None = None
    ) -> dict[str, int]:
        """Delete what is due (a retention of 0 keeps everything); how many of each went."""
        deleted = {"work": 0, "agents": 0}
        if work_retention_s > 0:
            bucket = self.queue.names.work_records_bucket
            for work_id, revision in self.work_due(work_retention_s, now):
                if await self.queue.forget(work_id, revision=revision):
                    deleted["work"] += 1
                    self._markers[(bucket, work_id)] = time.monotonic()
        if agent_retention_s > 0:
            bucket = self.queue.names.registry_bucket
            for agent_id, revision in self.agents_due(agent_retention_s, now):
                if await self.registry.forget(agent_id, revision=revision):
                    deleted["agents"] += 1
                    self._markers[(bucket, agent_id)] = time.monotonic()
        if any(deleted.values()):
            log.info(
                "%s: deleted %d finished work records, %d offline agents",
                self.queue.names.project_id,
                deleted["work"],
                deleted["agents"],
            )
        await self._drop_markers()
        return deleted

    async def _drop_markers(self) -> None:
        limit = time.monotonic() - self.marker_keep_s
        for bucket, key in [k for k, at in self._markers.items() if at <= limit]:
            try:
                await drop_delete_marker(self._js, bucket, key)
            except Exception as exc:  # NATS away: the next sweep tries again
                log.debug("delete marker of %s/%s not removed yet: %s", bucket, key, exc)
                continue
            self._markers.pop((bucket, key), None)

    @property
    def pending_markers(self) -> int:
        return len(self._markers)
