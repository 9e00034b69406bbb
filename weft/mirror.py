"""A watch-backed, read-only copy of one KV bucket in memory.

Listings (agents, work, targets) are served from the copy so they cost no
NATS round trips per item; the copy is rebuilt from KV whenever Weft starts,
so it holds nothing that a restart would lose. :meth:`BucketMirror.sync`
gives read-your-writes: it waits until the copy has seen the bucket's last
write (one stream-info round trip).

Values are parsed lazily (and once) because most updates are never read:
at hundreds of submissions a second, parsing every intermediate record
would cost more than serving the listings.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from nats.js import JetStreamContext
from nats.js.kv import KV_DEL, KV_PURGE, KeyValue

from shared.jsutil import newest_stored_seq
from shared.names import kv_stream
from shared.redact import redact
from weft.tasks import raise_if_cancelling, stop_task

log = logging.getLogger("loom.weft.mirror")

T = TypeVar("T")

SYNC_TIMEOUT_S = 2.0


@dataclass
class Slot(Generic[T]):
    raw: bytes
    revision: int
    parsed: T | None = None


ChangeCallback = Callable[[str, "Slot[T] | None", "Slot[T] | None", bool], Awaitable[None]]
"""(key, before, after, initial): after is None for a delete; initial is True while
the start-up snapshot loads (a value that existed before, not a change)."""


class BucketMirror(Generic[T]):
    def __init__(
        self,
        js: JetStreamContext,
        kv: KeyValue,
        bucket: str,
        parse: Callable[[bytes], T],
        *,
        on_change: ChangeCallback[T] | None = None,
        key_filter: Callable[[str], bool] | None = None,
    ) -> None:
        self._js = js
        self._kv = kv
        self.bucket = bucket
        self._parse = parse
        self._on_change = on_change
        self._key_filter = key_filter
        self._slots: dict[str, Slot[T]] = {}
        self._revision = 0
        self._advanced = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self.ready = asyncio.Event()

    # -- life cycle ------------------------------------------------------------
    async def start(self) -> None:
        """Load the bucket's current state, then follow it in the background.

        Returns once the copy holds every write the bucket had when the initial snapshot
        ended. nats-py's end-of-snapshot marker alone is not enough: it can arrive before
        values the server has already sent (the consumer-info reply that decides it and
        the pushed values travel separately), so the copy also waits for the bucket's
        newest stored message as of the marker (:meth:`_settle`).
        """
        watcher = await self._kv.watchall()
        self._task = asyncio.create_task(self._follow(watcher), name=f"mirror:{self.bucket}")
        await self.ready.wait()

    async def stop(self) -> None:
        await stop_task(self._task)
        self._task = None

    async def _follow(self, watcher: KeyValue.KeyWatcher) -> None:
        settle: asyncio.Task[None] | None = None
        try:
            async for entry in watcher:
                if entry is None:  # end of the initial snapshot, as nats-py sees it
                    settle = asyncio.create_task(self._settle(), name=f"mirror-settle:{self.bucket}")
                    continue
                try:
                    await self._apply(entry)
                except Exception:  # one bad record must not stop the mirror
                    raise_if_cancelling()
                    log.exception("mirror %s: cannot apply %s", self.bucket, entry.key)
        finally:
            self.ready.set()
            await stop_task(settle)
            with contextlib.suppress(Exception):
                await watcher.stop()  # type: ignore[no-untyped-call]

    async def _settle(self) -> None:
        """Declare the copy ready once it has the bucket's newest stored message as of now.

        The newest stored one, not the stream's last sequence: retention purges delete
        markers, so the last sequence may name a message that is gone (a copy started
        afterwards never sees it). Once the newest is in, everything up to the last
        sequence is in or gone, and :meth:`sync` may count from there."""
        stream = kv_stream(self.bucket)
        try:
            last = int((await self._js.stream_info(stream)).state.last_seq or 0)
            newest = await newest_stored_seq(self._js, self.bucket)
        except Exception as exc:
            raise_if_cancelling()
            log.warning("mirror %s: cannot check the start-up copy (%s)", self.bucket, redact(exc))
            self.ready.set()
            return
        try:
            async with asyncio.timeout(SYNC_TIMEOUT_S), self._advanced:
                await self._advanced.wait_for(lambda: self._revision >= newest)
                self._revision = max(self._revision, last)
                self._advanced.notify_all()
        except TimeoutError:
            log.warning("mirror %s: start-up copy still short of revision %s", self.bucket, newest)
        self.ready.set()

    async def _apply(self, entry: KeyValue.Entry) -> None:
        revision = int(entry.revision or 0)
        key = entry.key
        try:
            if self._key_filter is None or self._key_filter(key):
                before = self._slots.get(key)
                after: Slot[T] | None
                if entry.operation in (KV_DEL, KV_PURGE) or not entry.value:
                    after = None
                    self._slots.pop(key, None)
                else:
                    after = Slot(raw=entry.value, revision=revision)
                    self._slots[key] = after
                if self._on_change is not None:
                    await self._on_change(key, before, after, not self.ready.is_set())
        finally:  # even a record that failed to apply has been seen: sync() must not wait for it
            async with self._advanced:
                self._revision = max(self._revision, revision)
                self._advanced.notify_all()

    # -- reads -----------------------------------------------------------------
    async def sync(self, timeout: float = SYNC_TIMEOUT_S) -> None:
        """Wait until every write the bucket had when called is in the copy."""
        info = await self._js.stream_info(kv_stream(self.bucket))
        target = int(info.state.last_seq or 0)
        if self._revision >= target:
            return
        try:
            async with asyncio.timeout(timeout), self._advanced:
                await self._advanced.wait_for(lambda: self._revision >= target)
        except TimeoutError:
            log.warning(
                "mirror %s lags behind (%s < %s); serving what it has", self.bucket, self._revision, target
            )

    def value_of(self, slot: Slot[T]) -> T:
        if slot.parsed is None:
            slot.parsed = self._parse(slot.raw)
        return slot.parsed

    def get(self, key: str) -> T | None:
        slot = self._slots.get(key)
        return None if slot is None else self.value_of(slot)

    def revision_of(self, key: str) -> int | None:
        slot = self._slots.get(key)
        return None if slot is None else slot.revision

    def items(self) -> Iterator[tuple[str, T]]:
        for key, slot in list(self._slots.items()):
            try:
                yield key, self.value_of(slot)
            except ValueError:
                log.warning("mirror %s: skipping unreadable record %s", self.bucket, key)

    def values(self) -> list[T]:
        return [value for _, value in self.items()]

    def __len__(self) -> int:
        return len(self._slots)

    @property
    def revision(self) -> int:
        return self._revision
