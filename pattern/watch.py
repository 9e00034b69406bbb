"""Follow a subject filter of a KV bucket into the :class:`MemoryIndex`.

The watch itself is :class:`shared.nats.watch.KeyWatch`, the one every copy of a
bucket reads through; it tells an expiry (the server's marker) from a deliberate
forget, which the index counts apart.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from nats.js import JetStreamContext
from pydantic import ValidationError

from pattern.index import MemoryIndex
from pattern.models import MemoryRecord
from shared.names import kv_subject
from shared.nats.watch import KeyChange, KeyWatch

log = logging.getLogger("loom.pattern.watch")

HEARTBEAT_S = 1.0
"""nats-py recreates an ordered consumer after two missed heartbeats, e.g. after nats-server restarted
and lost the ephemeral consumer; a short interval keeps the index stale for seconds, not tens of seconds."""


class BucketWatch:
    """One ordered consumer on ``$KV.<bucket>.<filter>``, applied to the index."""

    def __init__(
        self,
        js: JetStreamContext,
        bucket: str,
        key_filter: str,
        index: MemoryIndex,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.bucket = bucket
        self.key_filter = key_filter
        self._index = index
        self._on_change = on_change
        self._watch = KeyWatch(js, bucket, key_filter, on_change=self._on_key, heartbeat_s=HEARTBEAT_S)
        self.ready = self._watch.loaded
        self.applied = 0

    async def start(self) -> None:
        await self._watch.start()

    async def stop(self) -> None:
        await self._watch.stop()

    async def _on_key(self, change: KeyChange) -> None:
        try:
            self._apply(change)
        except Exception:  # one bad message must not stop the watch
            log.exception("could not apply %s", kv_subject(self.bucket, change.key))

    def _apply(self, change: KeyChange) -> None:
        key, revision = change.key, change.revision
        changed: bool
        if change.expired:
            changed = self._index.remove(self.bucket, key, revision, expired_at=change.stored_at.timestamp())
        elif change.removed:
            changed = self._index.remove(self.bucket, key, revision)
        else:
            try:
                record = MemoryRecord.model_validate_json(change.value)
            except ValidationError:
                log.warning("ignoring %s/%s: not a Pattern memory record", self.bucket, key)
                return
            changed = self._index.put(self.bucket, key, record, revision)
        if changed:
            self.applied += 1
            if self._on_change is not None:
                self._on_change()
