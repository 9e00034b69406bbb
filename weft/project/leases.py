"""Weft's side of file leases (docs/leases.md): it ends the leases nobody will release.

Agents take and release leases through Warp; a lease also ends when its holder no longer
holds the work item it serves, when the holder goes offline, or when its TTL passes. Weft
follows the project's work records and registry (the mirrors it keeps anyway) and ends
such leases as soon as the change shows there, plus on a periodic sweep for what only the
clock reveals (a TTL passed, heartbeats stopped). Every end is compare-and-set on the
lease's revision, so several replicas end each lease once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from shared.leases.book import LeaseBook
from shared.models import AgentEntry, AgentStatus, Lease, WorkItem
from shared.nats.mirror import Slot
from shared.tasks import raise_if_cancelling, stop_task
from weft.project.agents import AgentDirectory
from weft.project.work import WorkIndex

log = logging.getLogger("loom.weft.leases")


class LeaseWarden:
    """One project's lease book, with the sweeps that end leases by themselves."""

    def __init__(self, book: LeaseBook, agents: AgentDirectory, work: WorkIndex) -> None:
        self.book = book
        self._agents = agents
        self._work = work
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    async def start(self, interval_s: float = 1.0) -> None:
        await self.book.start()
        self._work.mirror.listen(self._work_changed)
        self._agents.mirror.listen(self._agent_changed)
        self._task = asyncio.create_task(self._run(interval_s), name=f"leases:{self.book.names.project_id}")

    async def stop(self) -> None:
        await stop_task(self._task)
        self._task = None
        await self.book.settle()
        await self.book.stop()

    def holder_online(self, agent_id: str) -> bool:
        entry = self._agents.mirror.get(agent_id)
        return entry is not None and entry.effective_status() is not AgentStatus.OFFLINE

    def work_item(self, work_id: str) -> WorkItem | None:
        return self._work.mirror.get(work_id)

    async def sweep(self) -> list[tuple[Lease, str]]:
        """End every lease whose time, holder or work is over."""
        return await self.book.sweep(holder_online=self.holder_online, work_item=self.work_item)

    async def _run(self, interval_s: float) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=interval_s)
            self._wake.clear()
            try:
                await self.sweep()
            except Exception as exc:
                raise_if_cancelling()
                log.warning("lease sweep of project %s failed: %s", self.book.names.project_id, exc)

    async def _work_changed(
        self, key: str, _b: Slot[WorkItem] | None, _a: Slot[WorkItem] | None, initial: bool
    ) -> None:
        if not initial and any(lease.work_id == key for lease in self.book.leases()):
            self._wake.set()

    async def _agent_changed(
        self, key: str, _b: Slot[AgentEntry] | None, _a: Slot[AgentEntry] | None, initial: bool
    ) -> None:
        if not initial and any(lease.holder == key for lease in self.book.leases()):
            self._wake.set()
