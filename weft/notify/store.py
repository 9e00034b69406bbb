"""Where a project's notification sinks live, and the marks Weft replicas share while
sending (docs/operator.md, Notifications).

* ``loom-P-notify`` (Weft only: sink URLs are secrets): ``sink.<name>`` the sink, changed
  compare-and-set; ``status.<name>`` how its deliveries went.
* ``loom-P-notify-marks`` (entries live :data:`~weft.notify.rules.DEDUPE_S`):
  ``sent.<sink>.<hash of the notice's key>`` is created once per notice and sink, so a
  notice two replicas or two events make is sent once; ``rate.<sink>`` counts a sink's
  sends of the last minute by second (:func:`~weft.notify.rules.admit`), compare-and-set,
  so the limit holds across replicas.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from datetime import datetime

from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from shared.errors import Conflict
from shared.models import utcnow
from shared.names import ProjectNames
from shared.nats.cas import cas_upsert
from shared.nats.jetstream import (
    bucket_exists,
    create_new,
    delete_unchanged,
    ensure_kv,
    get_or_none,
    snapshot,
)
from weft.notify.rules import DEDUPE_S, MAX_SINKS, Sink, SinkNotFound, SinkSettings, SinkStatus, admit

SINK = "sink."
STATUS = "status."


class SinkStore:
    """One project's sinks and their status."""

    def __init__(self, js: JetStreamContext, names: ProjectNames) -> None:
        self._js = js
        self.names = names
        self._kv: KeyValue | None = None
        self._marks: KeyValue | None = None
        self._lock = asyncio.Lock()

    async def in_use(self) -> bool:
        """Whether an operator ever set a sink in this project (its bucket exists)."""
        return await bucket_exists(self._js, self.names.notify_bucket)

    async def bucket(self) -> KeyValue:
        if self._kv is None:
            async with self._lock:
                if self._kv is None:
                    self._kv = await ensure_kv(
                        self._js, self.names.notify_bucket, description="Loom notification sinks"
                    )
        return self._kv

    async def marks(self) -> KeyValue:
        if self._marks is None:
            async with self._lock:
                if self._marks is None:
                    self._marks = await ensure_kv(
                        self._js,
                        self.names.notify_marks_bucket,
                        ttl=DEDUPE_S,
                        description="Loom notification marks",
                    )
        return self._marks

    async def sinks(self) -> list[Sink]:
        return (await self.listing())[0]

    async def listing(self) -> tuple[list[Sink], dict[str, SinkStatus]]:
        """The sinks by name and their statuses by sink name, in one read of the bucket."""
        values = await snapshot(await self.bucket())
        sinks = sorted(
            (Sink.model_validate_json(raw) for key, raw in values.items() if key.startswith(SINK)),
            key=lambda s: s.name,
        )
        statuses = {
            key[len(STATUS) :]: SinkStatus.model_validate_json(raw)
            for key, raw in values.items()
            if key.startswith(STATUS)
        }
        return sinks, statuses

    async def status(self, name: str) -> SinkStatus | None:
        entry = await get_or_none(await self.bucket(), STATUS + name)
        return SinkStatus.model_validate_json(entry.value) if entry is not None and entry.value else None

    async def get(self, name: str) -> Sink:
        entry = await get_or_none(await self.bucket(), SINK + name)
        if entry is None or not entry.value:
            raise SinkNotFound()
        return Sink.model_validate_json(entry.value)

    async def put(self, name: str, settings: SinkSettings, *, by: str) -> Sink:
        """Create or replace the sink (compare-and-set); at most :data:`MAX_SINKS` a project."""
        kv = await self.bucket()
        if await get_or_none(kv, SINK + name) is None and len(await self.sinks()) >= MAX_SINKS:
            raise Conflict(
                f"a project has at most {MAX_SINKS} sinks; remove one first", field="name", rule="limit"
            )

        def replace(_: Sink | None) -> Sink:
            return Sink(name=name, updated_by=by, **dict(settings))

        swap = await cas_upsert(
            kv,
            SINK + name,
            replace,
            parse=Sink.model_validate_json,
            dump=_dump,
            conflict=lambda: Conflict("being changed concurrently; try again", field="name"),
        )
        assert swap.after is not None
        return swap.after

    async def delete(self, name: str) -> None:
        kv = await self.bucket()
        entry = await get_or_none(kv, SINK + name)
        if entry is None or not entry.value:
            raise SinkNotFound()
        if not await delete_unchanged(kv, SINK + name, int(entry.revision or 0)):
            raise Conflict("being changed concurrently; try again", field="name")
        status = await get_or_none(kv, STATUS + name)
        if status is not None and status.value:
            await delete_unchanged(kv, STATUS + name, int(status.revision or 0))

    async def record(self, name: str, error: str | None, now: datetime | None = None) -> SinkStatus:
        """How one delivery went (compare-and-set; a lost race is retried)."""
        moment = now or utcnow()

        def change(current: SinkStatus | None) -> SinkStatus:
            status = current or SinkStatus()
            if error is None:
                return status.model_copy(
                    update={"sent": status.sent + 1, "last_sent_at": moment, "failing_since": None}
                )
            return status.model_copy(
                update={
                    "failed": status.failed + 1,
                    "last_error_at": moment,
                    "last_error": error,
                    "failing_since": status.failing_since or moment,
                }
            )

        swap = await cas_upsert(
            await self.bucket(),
            STATUS + name,
            change,
            parse=SinkStatus.model_validate_json,
            dump=SinkStatus.to_json_bytes,
            conflict=lambda: Conflict("sink status busy", field="name"),
        )
        assert swap.after is not None
        return swap.after

    async def first_send(self, sink: str, key: str) -> bool:
        """Mark ``key`` sent to ``sink``: False when it was already (within the window)."""
        digest = hashlib.sha256(key.encode()).hexdigest()[:32]
        return await create_new(await self.marks(), f"sent.{sink}.{digest}", b"1") is not None

    async def take_rate(self, sink: str, per_minute: int, now: datetime | None = None) -> bool:
        """One of the sink's sends in the last minute, if it has one left (shared by replicas)."""
        now_s = int((now or utcnow()).timestamp())
        try:
            swap = await cas_upsert(
                await self.marks(),
                f"rate.{sink}",
                lambda sends: admit(sends or {}, now_s, per_minute),
                parse=_counts,
                dump=lambda sends: json.dumps(sends).encode(),
                conflict=lambda: Conflict("the sink's send count is busy", field="name"),
            )
        except Conflict:
            return False  # contended past reason: treat as limited (the record keeps the notice)
        return swap.changed


def _counts(raw: bytes) -> dict[int, int]:
    """The stored send counts by second (JSON keys are strings)."""
    return {int(second): int(count) for second, count in json.loads(raw).items()}


def _dump(sink: Sink) -> bytes:
    """The stored sink, secrets included (this bucket is Weft's alone)."""
    data = sink.model_dump(mode="json")
    data["url"] = sink.url.get_secret_value()
    data["secret"] = sink.secret.get_secret_value() if sink.secret is not None else None
    return json.dumps(data).encode()
