"""The one watch of a KV bucket: each key's current value, then every change.

Everything that follows or reads a bucket key by key goes through it: the copies
of buckets (:class:`shared.nats.mirror.BucketMirror`: Weft's, the lease book's),
Pattern's memory index (``pattern/watch.py``) and the one-pass reads
(:func:`shared.nats.jetstream.snapshot`). It reads the bucket's stream with one ordered consumer
(last message per key first, then live) rather than through nats-py's
``KeyValue.watch``, because that one

* folds the server's markers into "purge", so a key that expired (TTL, max age)
  cannot be told from one that was forgotten, and drops the time it happened;
* may announce the end of the initial values before values it has already
  received (it asks the consumer how many it delivered client-side); here the
  end comes with the message after which the server has nothing pending, or at
  once when the server delivered nothing and holds nothing;
* cannot set the consumer's heartbeat, which decides how soon a consumer lost with
  a restarted server is noticed and recreated.

Read it as an async iterator (None marks the end of the initial values; the
iteration ends at :meth:`KeyWatch.stop`) or give ``on_change`` to have each change
handed over as it arrives.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import DeliverPolicy

from shared.names import kv_stream, kv_subject
from shared.tasks import raise_if_cancelling

log = logging.getLogger("loom.watch")

PUT: Final = "PUT"
DEL: Final = "DEL"
PURGE: Final = "PURGE"
KV_OPERATION: Final = "KV-Operation"
MARKER_REASON: Final = "Nats-Marker-Reason"
"""Set on the markers the server itself places (``MaxAge``, ``Purge``, ``Remove``)."""
INACTIVE_S = 300.0
"""The server removes the consumer this long after its subscriber went away."""
QUEUE_SIZE = 256
"""Changes read ahead of an iterating reader (then the consumer waits for it)."""


@dataclass(frozen=True, slots=True)
class KeyChange:
    """One message of the bucket's stream, as a change of one key."""

    key: str
    value: bytes
    revision: int
    operation: str
    """:data:`PUT`, :data:`DEL` or :data:`PURGE` (a server marker counts as one of the two)."""
    expired: bool
    """A marker the server placed because the key's value expired (TTL or max age)."""
    stored_at: datetime
    pending: int
    """Messages under the watched keys still to come after this one (as the server saw it)."""

    @property
    def removed(self) -> bool:
        """The key has no value now."""
        return self.operation != PUT or not self.value


class _End:
    """Ends an iterating reader (after :meth:`KeyWatch.stop`)."""


_END: Final = _End()

OnChange = Callable[[KeyChange], Awaitable[None]]


class KeyWatch:
    """One ordered consumer over ``$KV.<bucket>.<keys>`` (``keys``: a key pattern)."""

    def __init__(
        self,
        js: JetStreamContext,
        bucket: str,
        keys: str = ">",
        *,
        on_change: OnChange | None = None,
        heartbeat_s: float | None = None,
        inactive_s: float = INACTIVE_S,
    ) -> None:
        self._js = js
        self.bucket = bucket
        self.keys = keys
        self._on_change = on_change
        self._heartbeat_s = heartbeat_s
        self._inactive_s = inactive_s
        self._prefix = kv_subject(bucket, "")
        self._sub: JetStreamContext.PushSubscription | None = None
        self._queue: asyncio.Queue[KeyChange | _End | None] = asyncio.Queue(maxsize=QUEUE_SIZE)
        self.loaded = asyncio.Event()
        """Set once every value stored when the watch started has been handed over."""

    async def start(self) -> KeyWatch:
        self._sub = await self._js.subscribe(
            self._prefix + self.keys,
            stream=kv_stream(self.bucket),
            cb=self._on_msg,
            ordered_consumer=True,
            deliver_policy=DeliverPolicy.LAST_PER_SUBJECT,
            inactive_threshold=self._inactive_s,
            idle_heartbeat=self._heartbeat_s,
        )
        info = await self._sub.consumer_info()
        if info.num_pending == 0 and (info.delivered is None or not info.delivered.consumer_seq):
            await self._loaded()  # nothing stored, nothing on its way
        return self

    async def stop(self) -> None:
        """Stop following (an iterating reader's loop ends); safe to call twice."""
        sub, self._sub = self._sub, None
        if sub is not None:
            try:
                await sub.unsubscribe()
            except Exception as exc:  # a closing connection: nothing left to unsubscribe
                log.debug("watch %s %s: unsubscribe failed: %s", self.bucket, self.keys, exc)
        while True:
            try:
                self._queue.put_nowait(_END)
                return
            except asyncio.QueueFull:  # the reader is gone or behind: it only needs the end
                self._queue.get_nowait()

    def __aiter__(self) -> KeyWatch:
        return self

    async def __anext__(self) -> KeyChange | None:
        item = await self._queue.get()
        if isinstance(item, _End):
            self._queue.put_nowait(_END)  # a second loop over a stopped watch ends too
            raise StopAsyncIteration
        return item

    async def _on_msg(self, msg: Msg) -> None:
        change = self._decode(msg)
        if self._on_change is None:
            await self._queue.put(change)
        else:
            try:
                await self._on_change(change)
            except Exception:  # one bad message must not stop the watch
                raise_if_cancelling()
                log.exception("watch %s: could not apply %s", self.bucket, change.key)
        if change.pending == 0:
            await self._loaded()

    async def _loaded(self) -> None:
        if self.loaded.is_set():
            return
        self.loaded.set()
        if self._on_change is None:
            await self._queue.put(None)

    def _decode(self, msg: Msg) -> KeyChange:
        meta = msg.metadata
        headers = msg.headers or {}
        reason = headers.get(MARKER_REASON)
        operation = headers.get(KV_OPERATION)
        if reason is not None:  # the server's own marker: the key's value is gone
            operation = DEL if reason == "Remove" else PURGE
        elif operation not in (DEL, PURGE):
            operation = PUT
        return KeyChange(
            key=msg.subject[len(self._prefix) :],
            value=msg.data or b"",
            revision=int(meta.sequence.stream),
            operation=operation,
            expired=reason == "MaxAge",
            stored_at=meta.timestamp,
            pending=int(meta.num_pending),
        )
