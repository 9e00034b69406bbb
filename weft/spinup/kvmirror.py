"""A live, read-only copy of a KV bucket, fed by one long-lived watcher.

The spin-up loop reads the registry, work records, targets and its own
operations every tick. Listing a bucket through a fresh watcher each time
would create an ephemeral consumer per read (the server keeps each for
minutes and caps a stream at 1,000), so each project keeps one watcher per
bucket instead and reads from memory. The copy holds nothing the bucket does
not: a restarted Weft rebuilds it from KV on start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from nats.js import JetStreamContext
from nats.js.kv import KV_DEL, KV_PURGE, KeyValue

from shared.jsutil import newest_stored_seq
from shared.redact import redact
from weft.tasks import raise_if_cancelling, stop_task

log = logging.getLogger("loom.weft.spinup.mirror")

T = TypeVar("T")

SETTLE_TIMEOUT_S = 2.0


class KvMirror(Generic[T]):
    def __init__(
        self,
        js: JetStreamContext,
        kv: KeyValue,
        bucket: str,
        parse: Callable[[bytes], T],
        *,
        keys: str = ">",
        on_update: Callable[[str, T | None], Awaitable[None]] | None = None,
    ) -> None:
        self._js = js
        self._kv = kv
        self._bucket = bucket
        self._on_update = on_update
        self._parse = parse
        self._keys = keys
        self._raw: dict[str, tuple[int, bytes]] = {}
        self._parsed: dict[str, tuple[int, T]] = {}
        self._revision = 0
        self._ready = asyncio.Event()
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self._settling: asyncio.Task[None] | None = None

    async def start(self, timeout: float = 10.0) -> None:
        """Follow the bucket; returns once the copy holds what the bucket had when the
        initial snapshot ended (:meth:`_settle`)."""
        if self._task is None:
            self._task = asyncio.create_task(self._follow(), name=f"kv-mirror-{self._bucket}")
        await asyncio.wait_for(self._ready.wait(), timeout)

    async def stop(self) -> None:
        await stop_task(self._settling)
        if self._task is not None:
            await stop_task(self._task)
            self._task = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def _follow(self) -> None:
        while True:
            try:
                watcher = await self._kv.watch(self._keys)
                try:
                    async for update in watcher:
                        if update is None:
                            if not self._ready.is_set() and self._settling is None:
                                self._settling = asyncio.create_task(
                                    self._settle(), name=f"kv-mirror-settle-{self._bucket}"
                                )
                            continue
                        key = update.key
                        if update.operation in (KV_DEL, KV_PURGE) or not update.value:
                            self._raw.pop(key, None)
                            self._parsed.pop(key, None)
                        else:
                            self._raw[key] = (int(update.revision or 0), update.value)
                        self._revision = max(self._revision, int(update.revision or 0))
                        async with self._changed:
                            self._changed.notify_all()
                        if self._on_update is not None:
                            await self._notify(key)
                finally:
                    with contextlib.suppress(Exception):
                        await watcher.stop()  # type: ignore[no-untyped-call]
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                raise_if_cancelling()
                log.warning("KV watch failed (restarting): %s", redact(exc))
                await asyncio.sleep(0.5)

    async def _settle(self) -> None:
        """Ready once the copy holds the newest stored message under its keys.

        nats-py's end-of-snapshot marker can come before values the server already
        sent (the consumer-info reply that decides it and the pushed values travel
        separately), so the marker starts this check instead of ending the load."""
        try:
            target = await newest_stored_seq(self._js, self._bucket, self._keys)
            if not await self.wait_for(target, timeout=SETTLE_TIMEOUT_S):
                log.warning("KV copy of %s: start-up copy still short of revision %s", self._bucket, target)
        except Exception as exc:
            raise_if_cancelling()
            log.warning("KV copy of %s: cannot check the start-up copy (%s)", self._bucket, redact(exc))
        self._ready.set()

    async def _notify(self, key: str) -> None:
        assert self._on_update is not None
        try:
            await self._on_update(key, self.get(key))
        except Exception as exc:
            log.warning("mirror update handler failed for %s: %s", key, redact(exc))

    def _value(self, key: str, revision: int, raw: bytes) -> T | None:
        cached = self._parsed.get(key)
        if cached is not None and cached[0] == revision:
            return cached[1]
        try:
            value = self._parse(raw)
        except ValueError:
            log.warning("skipping unreadable value under key %s", key)
            return None
        self._parsed[key] = (revision, value)
        return value

    def get(self, key: str) -> T | None:
        entry = self._raw.get(key)
        return None if entry is None else self._value(key, *entry)

    def items(self, prefix: str = "") -> list[tuple[str, T]]:
        out: list[tuple[str, T]] = []
        for key, (revision, raw) in list(self._raw.items()):
            if key.startswith(prefix):
                value = self._value(key, revision, raw)
                if value is not None:
                    out.append((key, value))
        return out

    def values(self, prefix: str = "") -> list[T]:
        return [value for _, value in self.items(prefix)]

    async def wait_for(self, revision: int, timeout: float = 2.0) -> bool:
        """Wait until the copy has seen ``revision`` (read-your-writes after a put)."""
        async with self._changed:
            try:
                await asyncio.wait_for(self._changed.wait_for(lambda: self._revision >= revision), timeout)
            except TimeoutError:
                return False
        return True
