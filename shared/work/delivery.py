"""How work meets the queue (docs/architecture.md, Work): the subject an item's next
message goes to, the durable consumer of each subject, publishing a message and pulling
one, and the acks a claim's message gets.

:class:`shared.work.queue.WorkQueue` builds the lifecycle on this; kept apart so the
lifecycle reads as rules and their consequences, not JetStream plumbing.
"""

from __future__ import annotations

import json

from nats.aio.msg import Msg
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js.api import AckPolicy, ConsumerConfig
from nats.js.errors import NotFoundError

from shared.models import WorkItem, WorkStatus, utcnow
from shared.names import LAND_CAPABILITY
from shared.nats.jsapi import JetStreamReplyError, consumer_next
from shared.tasks import together
from shared.trace.tracing import with_trace_headers
from shared.work.records import WorkRecords
from shared.work.rules import REVIEWABLE, Ack, Claimant, WorkRecord, store_seq


class WorkDelivery(WorkRecords):
    """Queue subjects, consumers, publish and pull for one project's work."""

    async def _record_or_none(self, work_id: str) -> WorkRecord | None:
        found = await self._found(work_id)
        return None if found is None else found[0]

    async def _queued_message_held(self, record: WorkRecord) -> bool:
        """Whether the stream still holds the record's queue message (asked of its leader)."""
        assert record.queue_seq is not None
        try:
            await self._js.get_msg(self.names.work_stream, record.queue_seq)
        except NotFoundError:
            return False
        return True

    async def _enqueue(self, work_id: str, after: WorkRecord | None = None) -> int:
        """Publish the queue message for the record's current state; store its seq.

        ``after``: the record a repair judged to lack its message. The message then takes
        the enqueue number after that record's, so repairers racing on one judgement publish
        one message id (JetStream's duplicate window stores it once), even when another's
        repair is stored before this one reads the record again."""
        record, _ = await self._load(work_id)
        item = record.item
        subject = self._subject_of(item)
        await self._ensure_consumer(subject)
        epoch = (after if after is not None else record).enqueues + 1
        ack = await self._js.publish(
            subject,
            json.dumps({"work_id": item.id, "epoch": epoch}).encode(),
            headers=with_trace_headers({"Nats-Msg-Id": f"{item.id}.{epoch}"}, item.traceparent),
        )
        seq, now = int(ack.seq), utcnow()
        await self._mutate(work_id, lambda r: store_seq(r, seq, epoch, now))
        return seq

    def _subject_of(self, item: WorkItem) -> str:
        """The queue subject of the item's next message: its workers' queue, or for an item
        handed in for review the reviewers' queue, which leaves out the agent that did it;
        for one queued for landing the landers' queue."""
        if item.status in (WorkStatus.LANDING, WorkStatus.MERGING):
            return self.names.work_subject(LAND_CAPABILITY, item.boundary, None, item.priority)
        if item.status in REVIEWABLE and item.review is not None and item.author is not None:
            review = item.review
            return self.names.work_subject(
                review.capability, item.boundary, None, item.priority, not_for=item.author
            )
        return self.names.work_subject(
            item.capability,
            item.boundary,
            item.required_agent_type,
            item.priority,
            only_for=item.reserved_for,
        )

    async def _ensure_consumer(self, subject: str) -> str:
        name = self.names.work_consumer(subject)
        if name in self._consumers:
            return name
        await self.ensure()
        config = ConsumerConfig(
            name=name,  # created through the API subject that names the filter (see agent_access)
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

    async def eligible_subjects(self, claimant: Claimant) -> list[str]:
        """Queue subjects holding messages this claimant may take, highest priority first."""
        await self.ensure()
        policy, info = await together(
            self.policy(),
            self._js.stream_info(self.names.work_stream, subjects_filter=self.names.work_subjects),
        )
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
            if parts.not_for == claimant.agent_id:
                continue  # a review of this agent's own work
            if parts.only_for is not None and parts.only_for != claimant.agent_id:
                continue  # sent back to its author
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

    async def _ack(self, ack_subject: str | None, verb: Ack | None) -> None:
        if ack_subject and verb is not None:
            await self._nc.publish(ack_subject, verb.encode())
