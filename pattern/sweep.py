"""Reads counted between sweeps (docs/pattern.md, Importance and tiers).

Every read a Pattern process serves (a recall's results, a read by id) counts as an
access of the memory. Counting into the stored record on every read would turn each
recall into a burst of writes, so the process keeps the counts here and its sweep
(``MemoryService.sweep``, every ``PATTERN_SWEEP_S``) writes them into the records, one
compare-and-set per memory read since the last sweep. Until then the counts here take
part in the memory's score, so the process that read a memory sees it rise at once.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime

from pattern.index import Entry, MemoryIndex
from pattern.models import MemoryRecord
from shared.redact import redact
from shared.tasks import tick

log = logging.getLogger("loom.pattern.sweep")

PutIfUnchanged = Callable[..., Awaitable[bool]]
"""``put(record, expected=revision)``: store only if the key is still at that revision."""


class AccessLog:
    """Accesses per memory (``Entry.uid``) not yet written into its record."""

    def __init__(self) -> None:
        self._pending: dict[str, tuple[int, datetime]] = {}
        self.version = 0
        """Bumped on every change (kept tier orders are recomputed)."""

    def touch(self, entries: Iterable[Entry], now: datetime) -> None:
        for entry in entries:
            count, _ = self._pending.get(entry.uid, (0, now))
            self._pending[entry.uid] = (count + 1, now)
            self.version += 1

    def pending(self, uid: str) -> tuple[int, datetime | None]:
        count, last = self._pending.get(uid, (0, None))
        return count, last

    def take(self) -> dict[str, tuple[int, datetime]]:
        """Everything counted so far (the caller writes it, or gives back what it could not)."""
        taken, self._pending = self._pending, {}
        return taken

    def give_back(self, uid: str, count: int, last: datetime) -> None:
        """Counts a write lost to another writer: kept for the next sweep."""
        have, seen = self._pending.get(uid, (0, last))
        self._pending[uid] = (have + count, max(seen, last))

    def uids(self) -> set[str]:
        return set(self._pending)

    def __len__(self) -> int:
        return len(self._pending)


async def write_back(accesses: AccessLog, index: MemoryIndex, put: PutIfUnchanged) -> int:
    """Write the counted accesses into the records: one compare-and-set per memory read
    since the last sweep; a write lost to another writer keeps its count for the next
    sweep. Returns how many records were written."""
    written = 0
    for uid, (count, last) in accesses.take().items():
        entry = index.entry(uid)
        if entry is None:
            continue  # forgotten or expired meanwhile
        old: MemoryRecord = entry.record
        seen = max(t for t in (old.accessed_at, last) if t is not None)
        record = old.model_copy(update={"access_count": old.access_count + count, "accessed_at": seen})
        if await put(record, expected=entry.revision):
            written += 1
        else:
            accesses.give_back(uid, count, last)
    return written


async def sweep_every(
    sweep: Callable[[], Awaitable[int]], due: Callable[[], bool], interval_s: float
) -> None:
    """``sweep`` every ``interval_s`` while ``due()`` says there is something to write and
    NATS is there (a failed sweep keeps its counts for the next)."""
    while True:
        await tick(interval_s)
        if not due():
            continue
        try:
            written = await sweep()
            log.debug("sweep: wrote the accesses of %d memories", written)
        except Exception as exc:  # the counts stay; the next sweep tries again
            log.warning("sweep: could not write accesses: %s", redact(str(exc)))
