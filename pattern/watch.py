"""Follow a subject filter of a KV bucket into the :class:`MemoryIndex`.

nats-py's ``KeyValue.watch`` folds server expiry markers into "purge", and we
need to tell an expiry from a deliberate forget, so this reads the KV stream
directly with an ordered consumer (``last per subject`` first, then live).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import DeliverPolicy
from pydantic import ValidationError

from pattern.index import MemoryIndex
from pattern.models import MemoryRecord
from shared.names import kv_stream, kv_subject

log = logging.getLogger("loom.pattern.watch")

KV_OPERATION = "KV-Operation"
HEARTBEAT_S = 1.0
"""nats-py recreates an ordered consumer after two missed heartbeats, e.g. after nats-server restarted
and lost the ephemeral consumer; a short interval keeps the index stale for seconds, not tens of seconds."""
MARKER_REASON = "Nats-Marker-Reason"


class BucketWatch:
    """One ordered consumer on ``$KV.<bucket>.<filter>``."""

    def __init__(
        self,
        js: JetStreamContext,
        bucket: str,
        key_filter: str,
        index: MemoryIndex,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self._js = js
        self.bucket = bucket
        self.key_filter = key_filter
        self._index = index
        self._prefix = kv_subject(bucket, "")
        self._on_change = on_change
        self._sub: JetStreamContext.PushSubscription | None = None
        self.ready = asyncio.Event()
        self.applied = 0

    async def start(self) -> None:
        self._sub = await self._js.subscribe(
            self._prefix + self.key_filter,
            stream=kv_stream(self.bucket),
            cb=self._on_msg,
            ordered_consumer=True,
            deliver_policy=DeliverPolicy.LAST_PER_SUBJECT,
            inactive_threshold=300,
            idle_heartbeat=HEARTBEAT_S,
        )
        info = await self._sub.consumer_info()
        if info.num_pending == 0 and (info.delivered is None or not info.delivered.consumer_seq):
            self.ready.set()

    async def stop(self) -> None:
        sub, self._sub = self._sub, None
        if sub is not None:
            try:
                await sub.unsubscribe()
            except Exception as exc:  # closing connection: nothing left to unsubscribe
                log.debug("unsubscribe %s failed: %s", self.key_filter, exc)

    async def _on_msg(self, msg: Msg) -> None:
        try:
            self._apply(msg)
        except Exception:  # one bad message must not stop the watch
            log.exception("could not apply %s", msg.subject)
        if msg.metadata.num_pending == 0:
            self.ready.set()

    def _apply(self, msg: Msg) -> None:
        meta = msg.metadata
        key = msg.subject[len(self._prefix) :]
        revision = meta.sequence.stream
        headers = msg.headers or {}
        reason = headers.get(MARKER_REASON)
        op = headers.get(KV_OPERATION)
        changed: bool
        if reason is not None:
            expired_at = meta.timestamp.timestamp() if reason == "MaxAge" else None
            changed = self._index.remove(self.bucket, key, revision, expired_at=expired_at)
        elif op in ("DEL", "PURGE") or not msg.data:
            changed = self._index.remove(self.bucket, key, revision)
        else:
            try:
                record = MemoryRecord.model_validate_json(msg.data)
            except ValidationError:
                log.warning("ignoring %s/%s: not a Pattern memory record", self.bucket, key)
                return
            changed = self._index.put(self.bucket, key, record, revision)
        if changed:
            self.applied += 1
            if self._on_change is not None:
                self._on_change()
