"""A watch-backed, read-only copy of one KV bucket (or the keys of it matching a pattern).

Weft mirrors each bucket of a project once (agents, work records, targets,
spin-ups) and serves listings, routing and the spin-up loop from the copies,
so they cost no NATS round trip per item and no ephemeral consumer per read
(the server keeps each for minutes and caps a stream's consumers). The copy
holds nothing the bucket does not: it is rebuilt from KV whenever it starts.

What makes the copy trustworthy:

* **Server-side key filter.** ``keys`` is a KV key pattern (``t.*``); the
  server sends only matching keys, and every wait below is computed for that
  pattern alone.
* **Complete at start.** The copy reads the bucket through
  :class:`shared.nats.watch.KeyWatch` and does not take the end of its initial
  values on trust: it is declared loaded only once it holds the newest message
  stored under its pattern (:meth:`_settle`).
* **Rebuilt after an outage.** When the watch fails, or the connection comes
  back after being lost, the mirror opens a new watch and rebuilds from its
  snapshot: keys that the new snapshot no longer holds (their delete markers
  were purged meanwhile, so no watch could ever report the delete) are
  dropped and reported as deletes. nats-py's ordered consumer alone would
  resume after the last sequence it saw and keep such keys forever.
* **Re-opened when stalled.** A watch can fall silent without failing: its
  consumer lived on a server that a partition cut off, or that lost it, and
  nats-py's ordered consumer does not notice heartbeats that stop coming. When
  reads find the copy behind the bucket at the same revision for
  ``stall_s``, the watch is re-opened and the copy rebuilt, as after an outage.
  Only reads look, so an idle copy costs the server nothing.
* **Read-your-writes.** :meth:`sync` waits until the copy holds every write
  stored under its pattern when called (one round trip);
  :meth:`wait_for` waits for a revision the caller wrote itself (none).

Values are parsed lazily and once per revision: most intermediate records are
never read, and at hundreds of writes a second parsing each would cost more
than serving the listings.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext
from pydantic import BaseModel

from shared.nats.jetstream import connection_of, newest_stored_seq
from shared.nats.watch import KeyChange, KeyWatch
from shared.redact import redact
from shared.tasks import raise_if_cancelling, stop_task, tick

log = logging.getLogger("loom.mirror")

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

SYNC_TIMEOUT_S = 2.0
START_TIMEOUT_S = 10.0
RESTART_DELAY_S = 0.5
CONNECTION_CHECK_S = 1.0
"""How often a quiet watch checks whether its connection was re-established meanwhile."""
STALL_S = 5.0
"""How long reads must find the copy behind at one revision before its watch is re-opened."""

Parse = Callable[[str, bytes], T]
"""(key, raw value) -> value; raises ``ValueError`` for a record it cannot read."""


def model_parser(model: type[M]) -> Parse[M]:
    """A :data:`Parse` for buckets holding one pydantic model per key."""

    def parse(_key: str, raw: bytes) -> M:
        return model.model_validate_json(raw)

    return parse


class _Unreadable:
    """Marks a slot whose value failed to parse (logged once per revision)."""


_UNREADABLE = _Unreadable()


@dataclass
class Slot(Generic[T]):
    raw: bytes
    revision: int
    parsed: T | _Unreadable | None = None


ChangeCallback = Callable[[str, "Slot[T] | None", "Slot[T] | None", bool], Awaitable[None]]
"""(key, before, after, initial): ``after`` is None for a delete; ``initial`` is True while
the first snapshot loads (a value that existed before, not a change). Read values with
:meth:`BucketMirror.value_of`."""


class BucketMirror(Generic[T]):
    """The copy of ``bucket`` (the caller has made sure it exists) or of its ``keys``."""

    def __init__(
        self,
        js: JetStreamContext,
        bucket: str,
        parse: Parse[T],
        *,
        keys: str = ">",
        on_change: ChangeCallback[T] | None = None,
        nc: NatsClient | None = None,
        stall_s: float = STALL_S,
    ) -> None:
        self._js = js
        self.bucket = bucket
        self.keys = keys
        self._parse = parse
        self._listeners: list[ChangeCallback[T]] = [on_change] if on_change is not None else []
        self._nc = nc
        self._slots: dict[str, Slot[T]] = {}
        self._revision = 0
        self._advanced = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self.ready = asyncio.Event()
        """Set once the first snapshot is in; stays set while later rebuilds run."""
        self._current = asyncio.Event()
        """Set while the copy follows a watch whose snapshot is in (cleared during a rebuild)."""
        self.restarts = 0
        """How many times the watch was re-opened (each one rebuilt the copy)."""
        self._stall_s = stall_s
        self._behind_since: tuple[int, float] | None = None
        """(revision, when) a read first found the copy behind at that revision."""
        self._watcher: KeyWatch | None = None

    def listen(self, callback: ChangeCallback[T]) -> None:
        """Also call ``callback`` for every change (after those given earlier)."""
        self._listeners.append(callback)

    # -- life cycle ----------------------------------------------------------------------
    async def start(self, timeout: float = START_TIMEOUT_S) -> None:
        """Load the bucket's current state, then follow it in the background."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"mirror:{self.bucket}:{self.keys}")
        ready = asyncio.create_task(self.ready.wait())
        done, _ = await asyncio.wait(
            {ready, self._task}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if ready not in done:
            ready.cancel()
            if self._task in done:
                self._task.result()  # re-raise what ended the follower
            raise TimeoutError(f"the copy of bucket {self.bucket} did not load within {timeout:g}s")

    async def stop(self) -> None:
        await stop_task(self._task)
        self._task = None
        self._current.clear()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def _run(self) -> None:
        """Follow the bucket for good: a failed or interrupted watch is re-opened and rebuilt."""
        first = True
        while True:
            try:
                await self._follow(rebuild=not first)
            except Exception as exc:
                raise_if_cancelling()
                log.warning("mirror %s: watch failed (%s); re-opening it", self.bucket, redact(exc))
            self._current.clear()
            first = False
            self.restarts += 1
            await tick(RESTART_DELAY_S)

    async def _follow(self, *, rebuild: bool) -> None:
        """One watch, until it fails or the connection was lost and re-established."""
        watcher = self._watcher = await KeyWatch(self._js, self.bucket, self.keys).start()
        self._behind_since = None
        seen: set[str] = set()
        generation = _Generation()
        settle: asyncio.Task[None] | None = None
        guard = asyncio.create_task(self._end_on_reconnect(watcher), name=f"mirror-guard:{self.bucket}")
        try:
            async for entry in watcher:
                if entry is None:  # end of the snapshot, as nats-py sees it
                    if settle is None:
                        settle = asyncio.create_task(
                            self._settle(generation, seen, rebuild), name=f"mirror-settle:{self.bucket}"
                        )
                    continue
                if not generation.settled:
                    seen.add(entry.key)
                await self._apply(entry, generation)
        finally:
            await stop_task(guard)
            await stop_task(settle)
            with contextlib.suppress(Exception):
                await watcher.stop()

    async def _end_on_reconnect(self, watcher: KeyWatch) -> None:
        """End the watch once the connection has been re-established after a loss: what
        was deleted and purged meanwhile can only be learnt from a new snapshot."""
        if self._nc is None:
            return
        reconnects = self._nc.stats["reconnects"]
        # nats-py announces reconnects only to the callbacks given at connect time, so the
        # mirror looks at its public reconnect counter instead (once a second, no I/O).
        while self._nc.stats["reconnects"] == reconnects:
            await tick(CONNECTION_CHECK_S)
        log.info("mirror %s: connection re-established; rebuilding the copy", self.bucket)
        await watcher.stop()

    async def _settle(self, generation: _Generation, seen: set[str] | None, rebuild: bool) -> None:
        """Declare the copy loaded once this watch has delivered the newest message stored
        under the pattern as of now; on a rebuild, drop the keys the snapshot did not hold.

        The newest *stored* one, not the stream's last sequence: retention purges delete
        markers, so the last sequence may name a message no watch can deliver."""
        try:
            newest = await newest_stored_seq(self._js, self.bucket, self.keys)
        except Exception as exc:
            raise_if_cancelling()
            log.warning("mirror %s: cannot check the copy (%s)", self.bucket, redact(exc))
            newest = 0
        try:
            async with asyncio.timeout(SYNC_TIMEOUT_S), self._advanced:
                await self._advanced.wait_for(lambda: generation.revision >= newest)
        except TimeoutError:
            log.warning("mirror %s: copy still short of revision %s", self.bucket, newest)
        generation.settled = True
        if rebuild and seen is not None:
            for key in [k for k in self._slots if k not in seen]:
                before = self._slots.pop(key)
                await self._notify(key, before, None)
        async with self._advanced:
            self._revision = max(self._revision, newest)
            self._advanced.notify_all()
        self._current.set()
        self.ready.set()

    async def _apply(self, entry: KeyChange, generation: _Generation) -> None:
        revision = entry.revision
        key = entry.key
        try:
            before = self._slots.get(key)
            after: Slot[T] | None
            if entry.removed:
                after = None
                self._slots.pop(key, None)
            elif before is not None and before.revision == revision:
                return  # a rebuild re-delivering what the copy already holds
            else:
                after = Slot(raw=entry.value, revision=revision)
                self._slots[key] = after
            if before is None and after is None:
                return
            await self._notify(key, before, after)
        finally:  # even a record that failed to apply has been seen: waits must not hang on it
            async with self._advanced:
                generation.revision = max(generation.revision, revision)
                self._revision = max(self._revision, revision)
                self._advanced.notify_all()

    async def _notify(self, key: str, before: Slot[T] | None, after: Slot[T] | None) -> None:
        initial = not self.ready.is_set()
        for listener in self._listeners:
            try:
                await listener(key, before, after, initial)
            except Exception:  # one bad record or listener must not stop the mirror
                raise_if_cancelling()
                log.exception("mirror %s: change handler failed for %s", self.bucket, key)

    async def own_write(self, key: str, raw: bytes, revision: int) -> bool:
        """Take in a write this process just stored at ``revision``, without waiting for the
        watch to bring it back, when it is the very next one (the copy holds everything
        before it, so it stays complete); False otherwise (then :meth:`wait_for` it). The
        watch's own delivery of it later changes nothing and notifies no one twice."""
        if not self._current.is_set() or self._revision != revision - 1:
            return self._revision >= revision
        before = self._slots.get(key)
        after = Slot[T](raw=raw, revision=revision)
        self._slots[key] = after
        async with self._advanced:
            self._revision = revision
            self._advanced.notify_all()
        await self._notify(key, before, after)
        return True

    # -- waits ---------------------------------------------------------------------------
    async def sync(self, timeout: float = SYNC_TIMEOUT_S) -> bool:
        """Wait until every write stored under the pattern when called is in the copy; False
        when it could not catch up in time (it then serves what it has)."""
        if not self.running:
            return True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            # Asking the server how far the bucket goes is part of catching up, in the same
            # time: a server slow to answer is a copy that cannot catch up, not a failure.
            async with asyncio.timeout_at(deadline):
                target = await newest_stored_seq(self._js, self.bucket, self.keys)
        except TimeoutError:
            nc = self._nc or connection_of(self._js)
            if nc is not None and not nc.is_connected:
                raise  # NATS is away, not slow: the caller says so (503), it does not guess
            log.warning("mirror %s: the server did not say how far it goes; serving what it has", self.bucket)
            return False
        if self._revision >= target and self._current.is_set():
            self._behind_since = None
            return True
        try:
            async with asyncio.timeout_at(deadline):
                await self._current.wait()
                async with self._advanced:
                    await self._advanced.wait_for(lambda: self._revision >= target)
        except TimeoutError:
            log.warning(
                "mirror %s lags behind (%s < %s); serving what it has", self.bucket, self._revision, target
            )
            await self._reopen_if_stalled(target, began=deadline - timeout, now=loop.time())
            return False
        self._behind_since = None
        return True

    async def _reopen_if_stalled(self, target: int, *, began: float, now: float) -> None:
        """Re-open the watch when reads have found the copy behind at one revision for
        ``stall_s`` (its consumer is gone: see the module's notes); ``began``: when the
        read that found it behind started waiting."""
        if not self._current.is_set():
            return  # a rebuild is under way
        since = self._behind_since
        if since is None or since[0] != self._revision:
            self._behind_since = (self._revision, began)
            return
        if now - since[1] < self._stall_s:
            return
        log.warning(
            "mirror %s: its watch delivered nothing for %.0fs while the bucket holds revision %s "
            "(the copy is at %s); re-opening it",
            self.bucket,
            now - since[1],
            target,
            self._revision,
        )
        self._behind_since = None
        if self._watcher is not None:
            await self._watcher.stop()

    async def wait_for(self, revision: int, timeout: float = SYNC_TIMEOUT_S) -> bool:
        """Wait until the copy has seen ``revision`` (read-your-writes after one's own write)."""
        if self._revision >= revision:
            return True
        try:
            async with asyncio.timeout(timeout), self._advanced:
                await self._advanced.wait_for(lambda: self._revision >= revision)
        except TimeoutError:
            return False
        return True

    # -- reads ---------------------------------------------------------------------------
    def value_of(self, key: str, slot: Slot[T]) -> T | None:
        """The parsed value of ``slot`` (None, logged once, when it cannot be read)."""
        if slot.parsed is None:
            try:
                slot.parsed = self._parse(key, slot.raw)
            except ValueError:
                log.warning("mirror %s: skipping unreadable record %s", self.bucket, key)
                slot.parsed = _UNREADABLE
        return None if isinstance(slot.parsed, _Unreadable) else slot.parsed

    def get(self, key: str) -> T | None:
        slot = self._slots.get(key)
        return None if slot is None else self.value_of(key, slot)

    def revision_of(self, key: str) -> int | None:
        slot = self._slots.get(key)
        return None if slot is None else slot.revision

    def items(self, prefix: str = "") -> Iterator[tuple[str, T]]:
        for key, slot in list(self._slots.items()):
            if key.startswith(prefix):
                value = self.value_of(key, slot)
                if value is not None:
                    yield key, value

    def values(self, prefix: str = "") -> list[T]:
        return [value for _, value in self.items(prefix)]

    def __len__(self) -> int:
        return len(self._slots)

    @property
    def revision(self) -> int:
        return self._revision


@dataclass
class _Generation:
    """What one watch (the first or a rebuild) has delivered so far."""

    revision: int = 0
    settled: bool = False
