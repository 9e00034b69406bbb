"""A project's work records and events on JetStream (docs/architecture.md, Work): the
streams and buckets, the compare-and-set write of a rule's record, the listing, and the
events each transition publishes. :class:`shared.work.queue.WorkQueue` builds every
operation on it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext
from nats.js.api import RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import NotFoundError
from nats.js.kv import KeyValue

from shared.context.store import ContextStore
from shared.events import ensure_events_stream, publish_event
from shared.models import WorkItem, WorkStatus, utcnow
from shared.names import ProjectNames, validate_capability
from shared.nats.cas import cas_update
from shared.nats.jetstream import (
    delete_unchanged,
    ensure_kv,
    ensure_stream,
    get_or_none,
    snapshot,
    through_leader,
)
from shared.paging import Page, decode_cursor, encode_cursor
from shared.settings import DEFAULT_ACK_WAIT_S
from shared.tasks import Background
from shared.trace.tracing import TraceLog, ensure_traces_stream
from shared.usage.ledger import UsageLedger
from shared.work.context import work_nodes
from shared.work.moves import disposes_unconfirmed
from shared.work.policy import BoundaryPolicy, config_bucket, read_policy
from shared.work.rules import (
    DLQ_MAX_AGE_S,
    POLICY_CACHE_S,
    Change,
    DeadLetter,
    WorkConflict,
    WorkError,
    WorkEvent,
    WorkFilter,
    WorkNotFound,
    WorkRecord,
    page_items,
)

log = logging.getLogger("loom.work")


class WorkRecords:
    """One project's work records, read and changed compare-and-set, and their events."""

    def __init__(
        self,
        nc: NatsClient,
        names: ProjectNames,
        *,
        contexts: ContextStore | None,
        traces: TraceLog,
        ledger: UsageLedger,
        js: JetStreamContext | None = None,
        ack_wait_s: float | None = None,
    ) -> None:
        """The collaborators are the caller's (Warp's and Weft's use them too, one copy each):
        ``contexts``, the project's context trees, which every transition appends to (None:
        record no context); ``traces``, the spans this process makes of the project's items;
        ``ledger``, the day's usage counters and the budgets that claims check."""
        self._nc = nc
        self._js = js or nc.jetstream()
        self.names = names
        self.contexts = contexts
        """Each item's context tree (docs/context.md); every transition appends to it."""
        self.ledger = ledger
        """The day's usage counters and the budgets (docs/operations.md)."""
        self.traces = traces
        """The spans of the project's items this process makes (docs/operations.md, Traces)."""
        self.ack_wait_s = ack_wait_s if ack_wait_s is not None else DEFAULT_ACK_WAIT_S
        """How long a claim may stay silent (``LOOM_WORK_ACK_WAIT_S``, passed in by the part's start-up)."""
        self._kv: KeyValue | None = None
        self._config_kv: KeyValue | None = None
        self._consumers: set[str] = set()
        self._ensured = False
        self._policy: BoundaryPolicy | None = None
        self._policy_read_at = 0.0
        self._ensure_lock = asyncio.Lock()
        self._events_in_flight = Background(log)

    # -- set-up --------------------------------------------------------------
    async def ensure(self) -> None:
        if self._ensured:
            return
        async with self._ensure_lock:
            if self._ensured:
                return
            await ensure_stream(
                self._js,
                StreamConfig(
                    name=self.names.work_stream,
                    subjects=[self.names.work_subjects],
                    retention=RetentionPolicy.WORK_QUEUE,
                    storage=StorageType.FILE,
                    duplicate_window=120,
                ),
            )
            await ensure_stream(
                self._js,
                StreamConfig(
                    name=self.names.dlq_stream,
                    subjects=[self.names.dlq_subjects],
                    retention=RetentionPolicy.LIMITS,
                    storage=StorageType.FILE,
                    max_age=DLQ_MAX_AGE_S,
                    duplicate_window=120,
                ),
            )
            await ensure_events_stream(self._js, self.names)
            await ensure_traces_stream(self._js, self.names)
            self._kv = await ensure_kv(self._js, self.names.work_records_bucket, description="Loom work")
            self._config_kv = await config_bucket(self._js, self.names)
            if self.contexts is not None:
                await self.contexts.ensure()
            self._ensured = True

    async def records_bucket(self) -> KeyValue:
        await self.ensure()
        assert self._kv is not None
        return self._kv

    async def policy(self) -> BoundaryPolicy:
        """The project's boundary policy, cached for a couple of seconds."""
        await self.ensure()
        now = time.monotonic()
        if self._policy is None or now - self._policy_read_at > POLICY_CACHE_S:
            assert self._config_kv is not None
            self._policy = await read_policy(self._config_kv)
            self._policy_read_at = now
        return self._policy

    def forget_policy_cache(self) -> None:
        self._policy = None

    # -- records ---------------------------------------------------------------
    async def _load(self, work_id: str) -> tuple[WorkRecord, int]:
        found = await self._found(work_id)
        if found is None:
            raise WorkNotFound(work_id)
        return found

    async def _found(self, work_id: str, *, leader: bool = False) -> tuple[WorkRecord, int] | None:
        """The record and its revision; None only when the stream's leader says there is
        none (a claim drops the queue message of an item with no record). ``leader``: read
        the leader's copy, never a replica's that may be behind."""
        bucket = await self.records_bucket()
        if leader:
            bucket = through_leader(bucket)
        entry = await get_or_none(bucket, work_id, confirm_absent=True)
        if entry is None or entry.value is None:
            return None
        return WorkRecord.model_validate_json(entry.value), int(entry.revision or 0)

    async def _mutate(self, work_id: str, rule: Callable[[WorkRecord], Change]) -> tuple[WorkRecord, Change]:
        """Compare-and-set what ``rule`` decides; returns the record it decided on and its
        Change (whose record is the one now stored).

        ``rule`` raises to refuse; a Change without a record leaves the stored one alone.
        Only I/O here: load, decide, write, and again from the top when another writer won.
        """
        record, change, _ = await self._mutate_at(work_id, rule)
        return record, change

    async def _mutate_at(
        self, work_id: str, rule: Callable[[WorkRecord], Change]
    ) -> tuple[WorkRecord, Change, int]:
        """:meth:`_mutate`, plus the revision the record now has (the one it was read at
        when the rule changed nothing), for a next write that need not read it again."""
        decided: list[Change] = []

        def decide(record: WorkRecord) -> WorkRecord | None:
            decided[:] = [rule(record)]
            return decided[0].record

        for leader in (False, True):  # the second time on the leader's copy of the record
            swap = await cas_update(
                await self.records_bucket(),
                work_id,
                decide,
                read=functools.partial(self._found, work_id, leader=leader),
                parse=WorkRecord.model_validate_json,
                dump=WorkRecord.to_json_bytes,
                absent=lambda: WorkNotFound(work_id),
                conflict=lambda: WorkConflict(
                    f"work_id: {work_id} is being changed concurrently; try again", field="work_id"
                ),
            )
            if not disposes_unconfirmed(decided[0]):
                break
        return swap.before, decided[0], swap.revision

    async def get(self, work_id: str) -> WorkItem:
        record, _ = await self._load(work_id)
        return record.item

    async def get_record(self, work_id: str) -> WorkRecord:
        record, _ = await self._load(work_id)
        return record

    async def all_records(self, where: Callable[[bytes], bool] | None = None) -> list[WorkRecord]:
        """Every record in one pass over the bucket (no per-key get); ``where``: only those
        whose stored bytes pass it (see :meth:`WorkFilter.may_match`)."""
        values = await snapshot(await self.records_bucket(), where=where)
        return [WorkRecord.model_validate_json(raw) for raw in values.values()]

    async def list_items(
        self, filters: WorkFilter | None = None, *, limit: int = 50, cursor: str | None = None
    ) -> Page[WorkItem]:
        """Newest first, paged with an opaque cursor."""
        if not 1 <= limit <= 1000:
            raise WorkError("limit: must be between 1 and 1000", field="limit")
        wanted = filters or WorkFilter()
        after = decode_cursor(cursor)
        items = [r.item for r in await self.all_records(wanted.may_match) if wanted.matches(r.item)]
        return page_items(items, limit=limit, after=after)

    # -- events ------------------------------------------------------------------
    # -- retention ---------------------------------------------------------------
    async def forget(self, work_id: str, *, revision: int) -> bool:
        """Delete a finished record, unless it changed since ``revision`` (a retry, say);
        its context tree goes with it."""
        deleted = await delete_unchanged(await self.records_bucket(), work_id, revision)
        if deleted and self.contexts is not None:
            try:
                await self.contexts.purge(work_id)
            except Exception as exc:
                log.warning("work %s: record deleted, but its context tree was not: %s", work_id, exc)
        return deleted

    # -- queue and dead-letter messages removed -----------------------------------
    async def _delete_queued(self, seq: int) -> None:
        try:
            await self._js.delete_msg(self.names.work_stream, seq)
        except NotFoundError:
            pass  # already delivered; the claim will see the final state and drop it
        except Exception as exc:  # a message already removed answers with a 400-style error
            log.debug("queue message %s not deleted: %s", seq, exc)

    async def _delete_dead_letter(self, seq: int) -> None:
        try:
            await self._js.delete_msg(self.names.dlq_stream, seq)
        except Exception as exc:
            log.debug("DLQ message %s not deleted: %s", seq, exc)

    # -- the dead-letter queue, read ------------------------------------------------
    async def dlq_list(
        self, *, capability: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> Page[DeadLetter]:
        if not 1 <= limit <= 1000:
            raise WorkError("limit: must be between 1 and 1000", field="limit")
        await self.ensure()
        subject = (
            self.names.dlq_subject(validate_capability(capability)) if capability else self.names.dlq_subjects
        )
        state = decode_cursor(cursor)
        seq = int(state.get("seq", 0)) + 1 if state else 1
        letters: list[DeadLetter] = []
        more = False
        while True:
            try:
                raw = await self._js.get_msg(self.names.dlq_stream, seq=seq, subject=subject, next=True)
            except NotFoundError:
                break
            if len(letters) == limit:
                more = True
                break
            assert raw.seq is not None and raw.data is not None
            item = WorkItem.model_validate_json(raw.data)
            at = raw.time if isinstance(raw.time, datetime) else utcnow()
            letters.append(DeadLetter(item=item, dlq_seq=raw.seq, dead_lettered_at=at))
            seq = raw.seq + 1
        next_cursor = encode_cursor({"seq": letters[-1].dlq_seq}) if more and letters else None
        return Page(items=letters, next_cursor=next_cursor)

    async def dlq_get(self, work_id: str) -> DeadLetter:
        record, _ = await self._load(work_id)
        if record.item.status != WorkStatus.DEAD_LETTERED or record.dlq_seq is None:
            raise WorkNotFound(work_id)
        return DeadLetter(
            item=record.item, dlq_seq=record.dlq_seq, dead_lettered_at=record.dlq_at or utcnow()
        )

    async def _event(self, action: str, item: WorkItem, **extra: Any) -> None:
        """Announce a transition that is already on record, after any still in flight."""
        await self.settle()
        await self._publish_event(action, item, **extra)

    def _event_soon(self, action: str, item: WorkItem, **extra: Any) -> None:
        """Announce a transition without making the caller wait for the server's ack.

        Events leave in order: publishes go out in the order their tasks start, and
        :meth:`_event` waits for these first.
        """
        self._events_in_flight.spawn(self._publish_event(action, item, **extra), name=f"work-event-{action}")

    async def _announce(self, events: Iterable[WorkEvent], item: WorkItem) -> None:
        """Publish a rule's events, in order, for the item as it now stands."""
        for event in events:
            await self._event(event.action, item, **event.data)

    async def settle(self) -> None:
        """Wait until every event published in the background is acknowledged (or logged)."""
        await self._events_in_flight.wait()

    async def _publish_event(self, action: str, item: WorkItem, **extra: Any) -> None:
        """The record is the truth and has changed by now, so an event that cannot be
        published is logged, never reported as a failed operation: the caller would
        retry something that happened (claim it twice, resubmit it)."""
        data: dict[str, Any] = {"item": item.model_dump(mode="json")}
        data.update(extra)
        # The transition's context nodes go out with its event (one round trip).
        nodes = work_nodes(action, item, extra) if self.contexts is not None else []
        published, *recorded = await asyncio.gather(
            publish_event(self._js, self.names, "work", action, item.id, data, traceparent=item.traceparent),
            *(self.contexts.publish(node) for node in nodes if self.contexts is not None),
            return_exceptions=True,
        )
        if isinstance(published, Exception):
            log.warning("work %s: %s, but its event was not published: %s", item.id, action, published)
        if any(isinstance(outcome, Exception) for outcome in recorded):
            log.warning("work %s: %s, but its context was not recorded", item.id, action)
