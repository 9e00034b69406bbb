"""The work lifecycle on JetStream (DESIGN §3): submit, claim, progress,
complete, fail, cancel, expire, retry, dead-letter.

Both Warp (agents) and Weft (coordinator) drive work through this module, so
an item submitted over REST and one broadcast by an agent are the same thing
in the same queue.

Layout (names from :class:`shared.names.ProjectNames`):

* the **record** of each item lives in the project's work KV bucket (key = work
  id) and is the source of truth; every change is compare-and-set;
* the **queue** is a work-queue stream with one subject per (capability,
  boundary, required agent type, priority) and one shared durable pull
  consumer per subject, so competing agents each get a message exactly once;
* a **claim** holds the JetStream message unacknowledged; its ack subject is
  stored in the record, so any process can later complete (``+ACK``), report
  progress (``+WPI``, extends the ack deadline), retry (``-NAK``) or terminate
  (``+TERM``) it. A claim that goes silent past the ack deadline is redelivered
  by JetStream and counted as a failed attempt;
* after ``max_attempts`` the item moves to the dead-letter stream, addressed by
  the sequence stored in its record (no scanning).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import KeyWrongLastSequenceError, NotFoundError
from nats.js.kv import KeyValue
from pydantic import Field

from shared.errors import Conflict, Forbidden, LoomError, NotFound
from shared.events import ensure_events_stream, publish_event
from shared.jsraw import JetStreamReplyError, consumer_next
from shared.jsutil import (
    CAS_RETRIES,
    cas_backoff,
    delete_unchanged,
    ensure_kv,
    ensure_stream,
    get_or_none,
    snapshot,
)
from shared.models import (
    AttemptError,
    ControlRequest,
    LoomModel,
    Progress,
    WorkItem,
    WorkStatus,
    WorkSubmission,
    can_transition,
    utcnow,
)
from shared.names import ProjectNames, validate_agent_id, validate_capability
from shared.paging import Page, decode_cursor, encode_cursor
from shared.policy import BoundaryPolicy, config_bucket, read_policy

log = logging.getLogger("loom.work")

DEFAULT_ACK_WAIT_S = 60.0
POLICY_CACHE_S = 2.0
CLAIM_LINGER_S = 0.05
DLQ_MAX_AGE_S = 30 * 24 * 3600
CLAIMABLE = frozenset({WorkStatus.SUBMITTED, WorkStatus.QUEUED, WorkStatus.FAILED})
HELD = frozenset({WorkStatus.CLAIMED, WorkStatus.IN_PROGRESS})


def default_ack_wait() -> float:
    raw = os.environ.get("LOOM_WORK_ACK_WAIT_S")
    if not raw:
        return DEFAULT_ACK_WAIT_S
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"LOOM_WORK_ACK_WAIT_S: {raw!r} is not a number of seconds") from None
    if not 0.5 <= value <= 86_400:
        raise ValueError("LOOM_WORK_ACK_WAIT_S: must be between 0.5 and 86400 seconds")
    return value


# -- errors ----------------------------------------------------------------------


class WorkError(LoomError):
    """A refused work operation; ``code`` maps to an HTTP status / tool error."""


class WorkNotFound(WorkError, NotFound):
    def __init__(self, work_id: str) -> None:
        # The id is not repeated: the caller sent it, and it may not be an id at all.
        super().__init__("no work item with this id in this project", field="work_id")
        self.work_id = work_id


class WorkConflict(WorkError, Conflict):
    """The item is not in a state that allows the operation."""


class NotClaimant(WorkError, Forbidden):
    pass


# -- stored shapes -----------------------------------------------------------------


class Delivery(LoomModel):
    ack_subject: str
    stream_seq: int
    delivered: int


class WorkRecord(LoomModel):
    """What the KV bucket holds: the public item plus queue bookkeeping."""

    item: WorkItem
    queue_seq: int | None = None
    enqueues: int = 0
    delivery: Delivery | None = None
    dlq_seq: int | None = None
    dlq_at: datetime | None = None
    notes: list[str] = Field(default_factory=list)


@dataclass(frozen=True)
class Claimant:
    """Who is claiming: what the agent is allowed to take."""

    agent_id: str
    agent_type: str
    capabilities: tuple[str, ...]
    boundaries: tuple[str, ...] = ("default",)

    def __post_init__(self) -> None:
        validate_agent_id(self.agent_id)


@dataclass(frozen=True)
class WorkFilter:
    status: WorkStatus | None = None
    capability: str | None = None
    boundary: str | None = None
    assigned_to: str | None = None

    def matches(self, item: WorkItem) -> bool:
        return (
            (self.status is None or item.status == self.status)
            and (self.capability is None or item.capability == self.capability)
            and (self.boundary is None or item.boundary == self.boundary)
            and (self.assigned_to is None or item.assigned_to == self.assigned_to)
        )


@dataclass
class DeadLetter:
    item: WorkItem
    dlq_seq: int
    dead_lettered_at: datetime


class WorkQueue:
    """All work operations for one project."""

    def __init__(
        self,
        nc: NatsClient,
        names: ProjectNames,
        *,
        js: JetStreamContext | None = None,
        ack_wait_s: float | None = None,
    ) -> None:
        self._nc = nc
        self._js = js or nc.jetstream()
        self.names = names
        self.ack_wait_s = ack_wait_s if ack_wait_s is not None else default_ack_wait()
        self._kv: KeyValue | None = None
        self._config_kv: KeyValue | None = None
        self._consumers: set[str] = set()
        self._ensured = False
        self._policy: BoundaryPolicy | None = None
        self._policy_read_at = 0.0
        self._ensure_lock = asyncio.Lock()
        self._events_in_flight: set[asyncio.Task[None]] = set()

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
            self._kv = await ensure_kv(self._js, self.names.work_records_bucket, description="Loom work")
            self._config_kv = await config_bucket(self._js, self.names)
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
        raw, revision = await self._load_raw(work_id)
        return WorkRecord.model_validate_json(raw), revision

    async def _load_raw(self, work_id: str) -> tuple[bytes, int]:
        entry = await get_or_none(await self.records_bucket(), work_id)
        if entry is None or entry.value is None:
            raise WorkNotFound(work_id)
        return entry.value, int(entry.revision or 0)

    async def _mutate(
        self, work_id: str, change: Callable[[WorkRecord], WorkRecord | None]
    ) -> tuple[WorkRecord, WorkRecord]:
        """Compare-and-set ``change`` onto the record; returns (before, after).

        ``change`` may raise to refuse, or return None to leave the record alone.
        """
        kv = await self.records_bucket()
        for attempt in range(CAS_RETRIES):
            raw, revision = await self._load_raw(work_id)
            # Two parses of the stored bytes: a fresh copy for ``change`` costs a fifth of a deep copy.
            record = WorkRecord.model_validate_json(raw)
            updated = change(WorkRecord.model_validate_json(raw))
            if updated is None:
                return record, record
            updated.item.updated_at = utcnow()
            try:
                await kv.update(work_id, updated.to_json_bytes(), last=revision)
            except KeyWrongLastSequenceError:
                await cas_backoff(attempt)
                continue
            return record, updated
        raise WorkConflict(f"work_id: {work_id} is being changed concurrently; try again", field="work_id")

    async def get(self, work_id: str) -> WorkItem:
        record, _ = await self._load(work_id)
        return record.item

    async def get_record(self, work_id: str) -> WorkRecord:
        record, _ = await self._load(work_id)
        return record

    async def all_records(self) -> list[WorkRecord]:
        """Every record in one pass over the bucket (no per-key get)."""
        values = await snapshot(await self.records_bucket())
        return [WorkRecord.model_validate_json(raw) for raw in values.values()]

    async def list_items(
        self, filters: WorkFilter | None = None, *, limit: int = 50, cursor: str | None = None
    ) -> Page[WorkItem]:
        """Newest first, paged with an opaque cursor."""
        if not 1 <= limit <= 1000:
            raise WorkError("limit: must be between 1 and 1000", field="limit")
        wanted = filters or WorkFilter()
        after = decode_cursor(cursor)
        items = [r.item for r in await self.all_records() if wanted.matches(r.item)]
        return page_items(items, limit=limit, after=after)

    # -- events ------------------------------------------------------------------
    async def _event(self, action: str, item: WorkItem, **extra: Any) -> None:
        """Announce a transition that is already on record, after any still in flight."""
        await self.settle()
        await self._publish_event(action, item, **extra)

    def _event_soon(self, action: str, item: WorkItem, **extra: Any) -> None:
        """Announce a transition without making the caller wait for the server's ack.

        Events leave in order: publishes go out in the order their tasks start, and
        :meth:`_event` waits for these first.
        """
        task = asyncio.create_task(self._publish_event(action, item, **extra), name=f"work-event-{action}")
        self._events_in_flight.add(task)
        task.add_done_callback(self._events_in_flight.discard)

    async def settle(self) -> None:
        """Wait until every event published in the background is acknowledged (or logged)."""
        while self._events_in_flight:
            await asyncio.wait(list(self._events_in_flight))

    async def _publish_event(self, action: str, item: WorkItem, **extra: Any) -> None:
        """The record is the truth and has changed by now, so an event that cannot be
        published is logged, never reported as a failed operation: the caller would
        retry something that happened (claim it twice, resubmit it)."""
        data: dict[str, Any] = {"item": item.model_dump(mode="json")}
        data.update(extra)
        try:
            await publish_event(self._js, self.names, "work", action, item.id, data)
        except Exception as exc:
            log.warning("work %s: %s, but its event was not published: %s", item.id, action, exc)

    # -- submit -----------------------------------------------------------------
    async def submit(self, submission: WorkSubmission, *, submitted_by: str | None = None) -> WorkItem:
        await self.ensure()
        if submission.deadline is not None and submission.deadline <= utcnow():
            raise WorkError("deadline: must be in the future", field="deadline")
        item = WorkItem(
            **submission.model_dump(),
            project_id=self.names.project_id,
            status=WorkStatus.QUEUED,
            submitted_by=submitted_by,
        )
        record = WorkRecord(item=item)
        kv = await self.records_bucket()
        subject = self.names.work_subject(
            item.capability, item.boundary, item.required_agent_type, item.priority
        )
        await self._ensure_consumer(subject)
        revision = await kv.create(item.id, record.to_json_bytes())
        # The two events, then the queue message, pipelined on one connection: one round
        # trip, and the server receives them in that order, so a claim (and its event) can
        # only come after them. The queue message decides the outcome.
        _, _, published = await asyncio.gather(  # a new item: no earlier event to wait for
            self._publish_event("submitted", item),
            self._publish_event("queued", item),
            self._js.publish(
                subject,
                json.dumps({"work_id": item.id, "epoch": 1}).encode(),
                headers={"Nats-Msg-Id": f"{item.id}.1"},
            ),
            return_exceptions=True,
        )
        if isinstance(published, BaseException):
            # Not queued: take the record back (unless something changed it), so the error
            # the caller sees means "nothing was submitted" and no record waits forever.
            with contextlib.suppress(Exception):
                await kv.delete(item.id, last=revision)
            raise published
        ack = published
        record.queue_seq = int(ack.seq)
        record.enqueues = 1
        try:
            await kv.update(item.id, record.to_json_bytes(), last=revision)
        except KeyWrongLastSequenceError:  # claimed (or cancelled) already: record the seq onto that

            def store_seq(r: WorkRecord) -> WorkRecord:
                r.queue_seq = int(ack.seq)
                r.enqueues = max(r.enqueues, 1)
                return r

            await self._mutate(item.id, store_seq)
        return item

    async def _enqueue(self, work_id: str) -> int:
        """Publish the queue message for the record's current state; store its seq."""
        record, _ = await self._load(work_id)
        item = record.item
        subject = self.names.work_subject(
            item.capability, item.boundary, item.required_agent_type, item.priority
        )
        await self._ensure_consumer(subject)
        epoch = record.enqueues + 1
        ack = await self._js.publish(
            subject,
            json.dumps({"work_id": item.id, "epoch": epoch}).encode(),
            headers={"Nats-Msg-Id": f"{item.id}.{epoch}"},
        )

        def store_seq(r: WorkRecord) -> WorkRecord:
            r.queue_seq = ack.seq
            r.enqueues = max(r.enqueues, epoch)
            return r

        await self._mutate(work_id, store_seq)
        return int(ack.seq)

    async def _ensure_consumer(self, subject: str) -> str:
        name = self.names.work_consumer(subject)
        if name in self._consumers:
            return name
        await self.ensure()
        config = ConsumerConfig(
            durable_name=name,
            filter_subject=subject,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=self.ack_wait_s,
            max_deliver=-1,
            max_ack_pending=10_000,
        )
        await self._js.add_consumer(self.names.work_stream, config)
        self._consumers.add(name)
        return name

    # -- claim -----------------------------------------------------------------
    async def eligible_subjects(self, claimant: Claimant) -> list[str]:
        """Queue subjects holding messages this claimant may take, highest priority first."""
        await self.ensure()
        policy = await self.policy()
        info = await self._js.stream_info(self.names.work_stream, subjects_filter=self.names.work_subjects)
        subjects = info.state.subjects or {}
        eligible: list[tuple[int, str]] = []
        for subject, count in subjects.items():
            parts = self.names.parse_work_subject(subject)
            if parts is None or count <= 0:
                continue
            if parts.capability not in claimant.capabilities:
                continue
            if parts.boundary not in claimant.boundaries:
                continue
            if parts.agent_type is not None and parts.agent_type != claimant.agent_type:
                continue
            if not policy.allows_agent(parts.boundary, claimant.agent_type):
                continue
            eligible.append((parts.priority, subject))
        eligible.sort(key=lambda pair: (-pair[0], pair[1]))
        return [subject for _, subject in eligible]

    async def queue_depths(self) -> dict[str, int]:
        """Messages waiting or in flight, per capability."""
        await self.ensure()
        info = await self._js.stream_info(self.names.work_stream, subjects_filter=self.names.work_subjects)
        depths: dict[str, int] = {}
        for subject, count in (info.state.subjects or {}).items():
            parts = self.names.parse_work_subject(subject)
            if parts is not None:
                depths[parts.capability] = depths.get(parts.capability, 0) + count
        return depths

    async def _next(self, subject: str, *, linger_s: float = 0.0) -> Msg | None:
        """Pull one message; without ``linger_s`` it does not wait at all."""
        consumer = await self._ensure_consumer(subject)
        try:
            msgs = await consumer_next(
                self._nc,
                self.names.work_stream,
                consumer,
                batch=1,
                timeout=2.0 + linger_s,
                expires_s=linger_s or None,
            )
        except (JetStreamReplyError, NatsTimeoutError, TimeoutError):
            self._consumers.discard(consumer)  # gone or unreachable: re-create on the next claim
            return None
        return msgs[0] if msgs else None

    async def _undelivered(self, subject: str) -> bool:
        """Whether the subject's consumer still has messages nobody was handed yet."""
        info = await self._js.consumer_info(self.names.work_stream, self.names.work_consumer(subject))
        return bool(info.num_pending)

    async def claim(self, claimant: Claimant) -> WorkItem | None:
        """Take the highest-priority eligible item, or None when there is none."""
        for subject in await self.eligible_subjects(claimant):
            lingered = False
            while True:
                msg = await self._next(subject)
                if msg is None and not lingered and await self._undelivered(subject):
                    # A message stored a moment ago may not have reached the
                    # consumer yet; a no-wait pull then answers "none". Wait
                    # briefly for it rather than report an empty queue.
                    lingered = True
                    msg = await self._next(subject, linger_s=CLAIM_LINGER_S)
                if msg is None:
                    break
                item = await self._take(msg, claimant)
                if item is not None:
                    return item
        return None

    async def _take(self, msg: Msg, claimant: Claimant) -> WorkItem | None:
        """Turn a delivered message into a claim, or dispose of it; None if not taken."""
        try:
            work_id = str(json.loads(msg.data)["work_id"])
        except (ValueError, KeyError, TypeError):
            log.warning("dropping malformed queue message on %s", msg.subject)
            await self._ack(msg.reply, b"+TERM")
            return None
        meta = msg.metadata
        stream_seq, delivered = int(meta.sequence.stream), int(meta.num_delivered)
        now = utcnow()
        outcome: dict[str, Any] = {}

        def take(r: WorkRecord) -> WorkRecord | None:
            outcome.clear()
            item = r.item
            if r.queue_seq is not None and r.queue_seq != stream_seq:
                outcome["drop"] = "stale queue message"
                return None
            if item.status in HELD:
                if r.delivery is None or delivered <= r.delivery.delivered:
                    outcome["drop"] = "already claimed"
                    return None
                item.errors.append(
                    AttemptError(
                        attempt=item.attempts,
                        agent_id=item.assigned_to,
                        error="claim expired: no progress or completion before the ack deadline",
                    )
                )
                outcome["expired_claim_of"] = item.assigned_to
                item.error = item.errors[-1].error
                if item.attempts >= item.max_attempts:
                    item.status = WorkStatus.FAILED
                    item.assigned_to = None
                    r.delivery = None
                    outcome["dead_letter"] = True
                    return r
            elif item.status not in CLAIMABLE:
                outcome["drop"] = f"item is {item.status.value}"
                return None
            if item.deadline is not None and item.deadline <= now:
                item.status = WorkStatus.EXPIRED
                item.finished_at = now
                outcome["expired"] = True
                return r
            item.status = WorkStatus.CLAIMED
            item.attempts += 1
            item.assigned_to = claimant.agent_id
            item.claimed_at = now
            item.progress = None
            item.waiting_reason = None
            r.delivery = Delivery(ack_subject=msg.reply, stream_seq=stream_seq, delivered=delivered)
            outcome["claimed"] = True
            return r

        try:
            before, after = await self._mutate(work_id, take)
        except WorkNotFound:
            await self._ack(msg.reply, b"+TERM")
            return None
        if "drop" in outcome:
            if outcome["drop"] != "already claimed":
                await self._ack(msg.reply, b"+TERM")
            return None
        if "expired_claim_of" in outcome:
            await self._event(
                "redelivered",
                after.item,
                previous_agent=outcome["expired_claim_of"],
                attempt=before.item.attempts,
            )
        if outcome.get("dead_letter"):
            await self._ack(msg.reply, b"+TERM")
            await self._dead_letter(work_id)
            return None
        if outcome.get("expired"):
            await self._ack(msg.reply, b"+TERM")
            await self._event("expired", after.item)
            return None
        self._event_soon("claimed", after.item, agent_id=claimant.agent_id)  # the claim need not wait
        return after.item

    async def _ack(self, ack_subject: str | None, verb: bytes) -> None:
        if ack_subject:
            await self._nc.publish(ack_subject, verb)

    # -- holder operations ------------------------------------------------------
    def _require_holder(self, r: WorkRecord, agent_id: str, operation: str) -> None:
        item = r.item
        if item.status == WorkStatus.CANCELLED:
            raise WorkConflict(f"work_id: {item.id} was cancelled; stop working on it", field="work_id")
        if item.status not in HELD:
            raise WorkConflict(
                f"work_id: cannot {operation} {item.id}: it is {item.status.value}, not claimed",
                field="work_id",
            )
        if item.assigned_to != agent_id:
            raise NotClaimant(
                f"work_id: {item.id} is claimed by another agent (its claim may have expired and "
                "been redelivered)",
                field="work_id",
            )

    async def progress(self, work_id: str, agent_id: str, percent: int, note: str = "") -> WorkItem:
        if not 0 <= percent <= 100:
            raise WorkError("percent: must be between 0 and 100", field="percent")

        def report(r: WorkRecord) -> WorkRecord:
            self._require_holder(r, agent_id, "report progress on")
            r.item.status = WorkStatus.IN_PROGRESS
            r.item.progress = Progress(percent=percent, note=note)
            return r

        _, after = await self._mutate(work_id, report)
        assert after.delivery is not None
        await self._ack(after.delivery.ack_subject, b"+WPI")
        await self._event("progress", after.item, agent_id=agent_id, percent=percent, note=note)
        return after.item

    async def complete(self, work_id: str, agent_id: str, result: Any = None) -> WorkItem:
        delivery: list[Delivery] = []

        def finish(r: WorkRecord) -> WorkRecord:
            self._require_holder(r, agent_id, "complete")
            assert r.delivery is not None
            delivery[:] = [r.delivery]
            r.item.status = WorkStatus.COMPLETED
            r.item.result = result
            r.item.error = None
            r.item.finished_at = utcnow()
            if r.item.progress is not None:
                r.item.progress = Progress(percent=100, note=r.item.progress.note)
            r.delivery = None
            return r

        _, after = await self._mutate(work_id, finish)
        await self._ack(delivery[0].ack_subject, b"+ACK")
        await self._event("completed", after.item, agent_id=agent_id)
        return after.item

    async def fail(self, work_id: str, agent_id: str, error: str, *, retryable: bool = True) -> WorkItem:
        """Record a failed attempt: back to the queue, or to the DLQ when attempts are used up."""
        if not error.strip():
            raise WorkError("error: must describe what went wrong", field="error")
        delivery: list[Delivery] = []
        dead: list[bool] = []

        def record_failure(r: WorkRecord) -> WorkRecord:
            self._require_holder(r, agent_id, "fail")
            assert r.delivery is not None
            delivery[:] = [r.delivery]
            item = r.item
            item.errors.append(AttemptError(attempt=item.attempts, agent_id=agent_id, error=error))
            item.error = error
            item.status = WorkStatus.FAILED
            item.assigned_to = None
            r.delivery = None
            dead[:] = [not retryable or item.attempts >= item.max_attempts]
            return r

        _, after = await self._mutate(work_id, record_failure)
        await self._event("failed", after.item, agent_id=agent_id, error=error)
        if dead[0]:
            await self._ack(delivery[0].ack_subject, b"+TERM")
            return await self._dead_letter(work_id)

        def requeue(r: WorkRecord) -> WorkRecord | None:
            if r.item.status != WorkStatus.FAILED:
                return None
            r.item.status = WorkStatus.QUEUED
            return r

        _, queued = await self._mutate(work_id, requeue)
        await self._ack(delivery[0].ack_subject, b"-NAK")
        await self._event("queued", queued.item, retry=True)
        return queued.item

    async def _dead_letter(self, work_id: str) -> WorkItem:
        record, _ = await self._load(work_id)
        item = record.item.model_copy(update={"status": WorkStatus.DEAD_LETTERED})
        ack = await self._js.publish(
            self.names.dlq_subject(item.capability),
            item.to_json_bytes(),
            headers={"Nats-Msg-Id": f"dlq.{item.id}.{record.enqueues}"},
        )

        def bury(r: WorkRecord) -> WorkRecord:
            r.item.status = WorkStatus.DEAD_LETTERED
            r.item.finished_at = utcnow()
            r.item.assigned_to = None
            r.dlq_seq = int(ack.seq)
            r.dlq_at = utcnow()
            r.delivery = None
            return r

        _, after = await self._mutate(work_id, bury)
        await self._event("dead-lettered", after.item, errors=len(after.item.errors))
        return after.item

    # -- operator operations ------------------------------------------------------
    async def cancel(self, work_id: str, *, reason: str = "", by: str = "operator") -> WorkItem:
        previous: list[WorkRecord] = []

        def stop(r: WorkRecord) -> WorkRecord:
            if not can_transition(r.item.status, WorkStatus.CANCELLED):
                raise WorkConflict(
                    f"work_id: {r.item.id} is {r.item.status.value} and can no longer be cancelled",
                    field="work_id",
                )
            previous[:] = [r.model_copy(deep=True)]
            r.item.status = WorkStatus.CANCELLED
            r.item.finished_at = utcnow()
            r.item.error = f"cancelled by {by}" + (f": {reason}" if reason else "")
            r.delivery = None
            return r

        _, after = await self._mutate(work_id, stop)
        before = previous[0]
        if before.delivery is not None and before.item.assigned_to:
            await self._ack(before.delivery.ack_subject, b"+TERM")
            request = ControlRequest(action="cancel-work", work_id=work_id, reason=reason, requested_by=by)
            await self._nc.publish(
                self.names.control_subject(before.item.assigned_to), request.to_json_bytes()
            )
        elif before.queue_seq is not None:
            await self._delete_queued(before.queue_seq)
        await self._event("cancelled", after.item, reason=reason, by=by)
        return after.item

    async def _delete_queued(self, seq: int) -> None:
        try:
            await self._js.delete_msg(self.names.work_stream, seq)
        except NotFoundError:
            pass  # already delivered; the claim will see the final state and drop it
        except Exception as exc:  # a message already removed answers with a 400-style error
            log.debug("queue message %s not deleted: %s", seq, exc)

    async def expire_due(self, now: datetime | None = None) -> list[WorkItem]:
        """Move queued items whose deadline has passed to ``expired``."""
        moment = now or utcnow()
        expired: list[WorkItem] = []
        for record in await self.all_records():
            item = record.item
            if item.status not in CLAIMABLE or item.deadline is None or item.deadline > moment:
                continue

            def expire(r: WorkRecord) -> WorkRecord | None:
                if r.item.status not in CLAIMABLE:
                    return None
                r.item.status = WorkStatus.EXPIRED
                r.item.finished_at = moment
                return r

            before, after = await self._mutate(item.id, expire)
            if after.item.status == WorkStatus.EXPIRED and before.item.status != WorkStatus.EXPIRED:
                if before.queue_seq is not None:
                    await self._delete_queued(before.queue_seq)
                await self._event("expired", after.item)
                expired.append(after.item)
        return expired

    async def retry(self, work_id: str) -> WorkItem:
        """Back to the queue with attempts reset, from ``failed`` or ``dead-lettered``."""
        previous: list[WorkRecord] = []

        def reset(r: WorkRecord) -> WorkRecord:
            if r.item.status not in (WorkStatus.FAILED, WorkStatus.DEAD_LETTERED):
                raise WorkConflict(
                    f"work_id: {r.item.id} is {r.item.status.value}; only failed or dead-lettered work "
                    "can be retried",
                    field="work_id",
                )
            previous[:] = [r.model_copy(deep=True)]
            r.item.status = WorkStatus.QUEUED
            r.item.attempts = 0
            r.item.assigned_to = None
            r.item.finished_at = None
            r.item.progress = None
            r.dlq_seq = None
            r.dlq_at = None
            r.delivery = None
            r.notes.append(f"retried at {utcnow().isoformat()}")
            return r

        await self._mutate(work_id, reset)
        await self._enqueue(work_id)
        if previous[0].dlq_seq is not None:
            try:
                await self._js.delete_msg(self.names.dlq_stream, previous[0].dlq_seq)
            except Exception as exc:
                log.debug("DLQ message %s not deleted: %s", previous[0].dlq_seq, exc)
        item = await self.get(work_id)
        await self._event("retried", item)
        await self._event("queued", item, retry=True)
        return item

    # -- retention ---------------------------------------------------------------
    async def forget(self, work_id: str, *, revision: int) -> bool:
        """Delete a finished record, unless it changed since ``revision`` (a retry, say)."""
        return await delete_unchanged(await self.records_bucket(), work_id, revision)

    # -- dead-letter queue --------------------------------------------------------
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

    async def dlq_retry(self, work_id: str) -> WorkItem:
        await self.dlq_get(work_id)
        return await self.retry(work_id)

    async def dlq_discard(self, work_id: str) -> WorkItem:
        letter = await self.dlq_get(work_id)

        def discard(r: WorkRecord) -> WorkRecord:
            if r.dlq_seq != letter.dlq_seq:
                raise WorkConflict(f"work_id: {work_id} changed while being discarded", field="work_id")
            r.dlq_seq = None
            r.notes.append(f"discarded from the dead-letter queue at {utcnow().isoformat()}")
            return r

        _, after = await self._mutate(work_id, discard)
        try:
            await self._js.delete_msg(self.names.dlq_stream, letter.dlq_seq)
        except Exception as exc:
            log.debug("DLQ message %s not deleted: %s", letter.dlq_seq, exc)
        await self._event("discarded", after.item)
        return after.item


def page_items(items: Iterable[WorkItem], *, limit: int, after: dict[str, Any] | None) -> Page[WorkItem]:
    """Newest first; the cursor remembers the last (created_at, id) returned."""
    ordered = sorted(items, key=lambda i: (i.created_at, i.id), reverse=True)
    total = len(ordered)
    if after is not None:
        try:
            last = (datetime.fromisoformat(str(after["created_at"])), str(after["id"]))
        except (KeyError, ValueError):
            from shared.paging import CursorError

            raise CursorError() from None
        ordered = [i for i in ordered if (i.created_at, i.id) < last]
    page = ordered[:limit]
    more = len(ordered) > limit
    cursor = (
        encode_cursor({"created_at": page[-1].created_at.isoformat(), "id": page[-1].id}) if more else None
    )
    return Page(items=page, next_cursor=cursor, total=total)
