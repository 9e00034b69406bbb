"""Direct messages: a durable per-agent inbox.

The project's inbox stream (work-queue retention) holds every agent's messages
on ``loom.<project>.inbox.<agent-id>``; each agent has one durable pull
consumer filtered to its own subject. Nothing consumes in the background:

* a read pulls what is waiting *now* (no-wait pull, no long poll), keeps what
  it returns and acknowledges exactly those (the ack is on record before the
  read returns, and work-queue retention then drops the message);
* messages a filter (sender, type) or the page size leaves out are handed back
  at once (a confirmed NAK), so the next read sees them again;
* a peek reads the stored messages directly and acknowledges nothing.

A message to an agent that is offline, or has never read its inbox, simply
waits in the stream until that agent reads.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, RetentionPolicy, StorageType, StreamConfig
from pydantic import ValidationError

from shared.models import DirectMessage, new_id
from shared.names import ProjectNames, validate_agent_id
from shared.nats.jetstream import ensure_stream, provisioned_project
from shared.nats.jsapi import JetStreamReplyError, ack_all, consumer_next, direct_get_batch
from shared.paging import CursorError, decode_cursor, encode_cursor
from shared.trace.tracing import with_trace_headers, work_of_headers
from warp.errors import WarpError

INBOX_MAX_AGE_S = 30 * 24 * 3600
INBOX_MAX_PER_AGENT = 10_000
INBOX_ACK_WAIT_S = 30.0
CONSUMER_INACTIVE_S = 30 * 24 * 3600
MAX_READ = 100
SCAN_LIMIT = 2_000
CATCH_UP_S = 0.1
_BATCH = 256
REMEMBERED = 1000
"""Messages this process sent or read lately, kept so a reply can find the thread of the
message it answers or start one with it (the inbox forgets a message once it is read)."""


@dataclass
class InboxMessage:
    seq: int
    message: DirectMessage
    about: tuple[str, str] | None = None
    """The work item it was sent about and the trace it carries (``shared.trace.tracing.work_of_headers``)."""


@dataclass
class InboxPage:
    messages: list[InboxMessage]
    next_cursor: str | None
    has_more: bool
    skipped: int = 0
    """Waiting messages this read left for later (filtered out or past the page)."""


@dataclass(frozen=True)
class InboxFilter:
    sender: str | None = None
    message_type: str | None = None

    def matches(self, msg: DirectMessage) -> bool:
        return (self.sender is None or msg.sender_id == self.sender) and (
            self.message_type is None or msg.message_type == self.message_type
        )


class InboxService:
    def __init__(
        self, nc: NatsClient, js: JetStreamContext, names: ProjectNames, *, timeout: float = 5.0
    ) -> None:
        self._nc = nc
        self._js = js
        self.names = names
        self._timeout = timeout
        self._stream_ready = False
        self._consumers: set[str] = set()
        self._read: OrderedDict[str, DirectMessage] = OrderedDict()

    def remembered(self, message_id: str) -> DirectMessage | None:
        """A message this process read lately (for replies), or None."""
        return self._read.get(message_id)

    def _remember(self, messages: list[InboxMessage]) -> None:
        for kept in messages:
            self._read[kept.message.id] = kept.message
            self._read.move_to_end(kept.message.id)
        while len(self._read) > REMEMBERED:
            self._read.popitem(last=False)

    def forget(self) -> None:
        self._stream_ready = False
        self._consumers.clear()

    async def ensure_stream(self) -> None:
        if self._stream_ready:
            return
        await ensure_stream(
            self._js,
            StreamConfig(
                name=self.names.inbox_stream,
                description="Loom direct messages",
                subjects=[self.names.inbox_subjects],
                retention=RetentionPolicy.WORK_QUEUE,
                storage=StorageType.FILE,
                max_age=INBOX_MAX_AGE_S,
                max_msgs_per_subject=INBOX_MAX_PER_AGENT,
                allow_direct=True,
                duplicate_window=120,
            ),
        )
        self._stream_ready = True

    async def ensure_consumer(self, agent_id: str) -> str:
        name = self.names.inbox_consumer(agent_id)
        if name in self._consumers:
            return name
        await self.ensure_stream()
        await self._js.add_consumer(
            self.names.inbox_stream,
            ConsumerConfig(
                # name as well as durable: created through the API subject that names the
                # filter, the one scoped credentials allow (only for the agent's own inbox)
                name=name,
                durable_name=name,
                filter_subject=self.names.inbox_subject(agent_id),
                deliver_policy=DeliverPolicy.ALL,
                ack_policy=AckPolicy.EXPLICIT,
                ack_wait=INBOX_ACK_WAIT_S,
                max_deliver=-1,
                max_ack_pending=SCAN_LIMIT * 2,
                inactive_threshold=CONSUMER_INACTIVE_S,
            ),
        )
        self._consumers.add(name)
        return name

    async def send(
        self,
        *,
        sender_id: str,
        sender_handle: str,
        recipient_id: str,
        body: str,
        message_type: str = "text",
        metadata: dict[str, str] | None = None,
        reply_to: str | None = None,
        thread_id: str | None = None,
        message_id: str | None = None,
    ) -> InboxMessage:
        """``message_id``: the id to give it (a protocol prompt knows its id before it is sent)."""
        validate_agent_id(recipient_id, "recipient_id")
        await self.ensure_stream()
        message = DirectMessage(
            id=message_id or new_id(),
            sender_id=sender_id,
            sender_handle=sender_handle,
            recipient_id=recipient_id,
            message_type=message_type,
            body=body,
            metadata=metadata or {},
            reply_to=reply_to,
            thread_id=thread_id,
        )
        ack = await self._js.publish(
            self.names.inbox_subject(recipient_id),
            message.to_json_bytes(),
            stream=self.names.inbox_stream,
            headers=with_trace_headers({"Nats-Msg-Id": message.id}),
        )
        sent = InboxMessage(seq=int(ack.seq), message=message)
        self._remember([sent])
        return sent

    async def read(
        self,
        agent_id: str,
        *,
        limit: int = 20,
        cursor: str | None = None,
        filters: InboxFilter | None = None,
        peek: bool = False,
    ) -> InboxPage:
        if not 1 <= limit <= MAX_READ:
            raise WarpError(f"must be between 1 and {MAX_READ}", field="limit")
        wanted, after = _resolve_cursor(cursor, filters or InboxFilter(), peek)
        if peek and provisioned_project(self._js) is None:
            return await self._peek(agent_id, limit, wanted, after)
        # Scoped credentials may not read the inbox stream directly (any agent's messages are
        # there): a peek then takes through the agent's own consumer and hands everything back.
        consumer = await self.ensure_consumer(agent_id)
        subject = self.names.inbox_subject(agent_id)
        try:
            return await self._take(consumer, subject, limit, wanted, after, consume=not peek)
        except JetStreamReplyError as exc:
            if exc.status == "503":
                self.forget()  # the consumer vanished (fresh server, inactivity): recreate once
                consumer = await self.ensure_consumer(agent_id)
                return await self._take(consumer, subject, limit, wanted, after, consume=not peek)
            raise

    async def _catch_up(self, stream: str, consumer: str, subject: str, want: int) -> list[Msg]:
        """A message stored a moment ago can be invisible to a no-wait pull for a few
        microseconds (the consumer learns of it asynchronously). When the pull came
        back empty but the stream holds messages for this agent, pull once more,
        letting the server wait briefly for them."""
        stored = await self._stored(subject)
        if stored == 0:
            return []
        return await consumer_next(
            self._nc, stream, consumer, batch=min(want, stored), timeout=self._timeout, expires_s=CATCH_UP_S
        )

    async def _take(
        self,
        consumer: str,
        subject: str,
        limit: int,
        wanted: InboxFilter,
        after: int,
        *,
        consume: bool = True,
    ) -> InboxPage:
        """Pull, keep up to ``limit`` wanted messages and hand the rest back; ``consume``:
        acknowledge the kept ones (else they are handed back too: a peek)."""
        stream = self.names.inbox_stream
        keep: list[InboxMessage] = []
        keep_msgs: list[Msg] = []
        hand_back: list[Msg] = []
        junk: list[Msg] = []
        more = False
        plain = wanted == InboxFilter() and after == 0
        scanned = 0
        while scanned < SCAN_LIMIT:
            want = limit if plain else min(_BATCH, SCAN_LIMIT - scanned)
            batch = await consumer_next(self._nc, stream, consumer, batch=want, timeout=self._timeout)
            if not batch and scanned == 0:
                batch = await self._catch_up(stream, consumer, subject, want)
            scanned += len(batch)
            for msg in batch:
                seq = int(msg.metadata.sequence.stream)
                try:
                    parsed = DirectMessage.model_validate_json(msg.data)
                except ValidationError:
                    junk.append(msg)
                    continue
                if seq <= after or not wanted.matches(parsed) or len(keep) >= limit:
                    if len(keep) >= limit and seq > after and wanted.matches(parsed):
                        more = True
                    hand_back.append(msg)
                else:
                    keep.append(InboxMessage(seq, parsed, work_of_headers(msg.headers)))
                    keep_msgs.append(msg)
            if batch and int(batch[-1].metadata.num_pending) > 0 and len(keep) >= limit:
                more = True
            if len(batch) < want or len(keep) >= limit:
                break
        else:
            more = True
        await ack_all(self._nc, keep_msgs, b"+ACK" if consume else b"-NAK", timeout=self._timeout)
        await ack_all(self._nc, junk, b"+TERM", timeout=self._timeout)
        await ack_all(self._nc, hand_back, b"-NAK", timeout=self._timeout)
        if plain and len(keep) >= limit and not more:
            # num_pending counts only never-delivered messages; ones handed back by an
            # earlier filtered read are waiting too. The stream knows (acked ones are gone).
            more = await self._stored(subject) > (0 if consume else len(keep))
        keep.sort(key=lambda m: m.seq)
        self._remember(keep)
        last = keep[-1].seq if keep else after
        next_cursor = _encode(wanted, last, peek=not consume) if more else None
        return InboxPage(messages=keep, next_cursor=next_cursor, has_more=more, skipped=len(hand_back))

    async def _peek(self, agent_id: str, limit: int, wanted: InboxFilter, after: int) -> InboxPage:
        await self.ensure_stream()
        stream = self.names.inbox_stream
        subject = self.names.inbox_subject(agent_id)
        shown: list[InboxMessage] = []
        next_seq = after + 1
        more = False
        scanned = 0
        while scanned < SCAN_LIMIT and len(shown) < limit:
            batch = await direct_get_batch(
                self._nc, stream, start_seq=next_seq, batch=_BATCH, subject=subject, timeout=self._timeout
            )
            if not batch:
                break
            scanned += len(batch)
            for stored in batch:
                try:
                    parsed = DirectMessage.model_validate_json(stored.data)
                except ValidationError:
                    next_seq = stored.seq + 1
                    continue
                if wanted.matches(parsed):
                    if len(shown) >= limit:
                        more = True
                        break
                    shown.append(InboxMessage(stored.seq, parsed, work_of_headers(stored.headers)))
                next_seq = stored.seq + 1
            if more or batch[-1].pending == 0:
                break
        last = shown[-1].seq if shown else after
        self._remember(shown)
        return InboxPage(
            messages=shown, next_cursor=_encode(wanted, last, peek=True) if more else None, has_more=more
        )

    async def waiting(self, agent_id: str) -> int:
        """Messages in the agent's inbox not yet acknowledged (one stream-info call)."""
        await self.ensure_stream()
        return await self._stored(self.names.inbox_subject(agent_id))

    async def _stored(self, subject: str) -> int:
        info = await self._js.stream_info(self.names.inbox_stream, subjects_filter=subject)
        return int((info.state.subjects or {}).get(subject, 0))


def _encode(wanted: InboxFilter, after: int, *, peek: bool) -> str:
    return encode_cursor({"after": after, "sender": wanted.sender, "type": wanted.message_type, "peek": peek})


def _resolve_cursor(cursor: str | None, given: InboxFilter, peek: bool) -> tuple[InboxFilter, int]:
    """The filters and position to read with: a cursor carries the filters it was issued for."""
    state = decode_cursor(cursor)
    if state is None:
        return given, 0
    after = state.get("after")
    if not isinstance(after, int) or after < 0 or bool(state.get("peek")) != peek:
        raise CursorError()
    from_cursor = InboxFilter(sender=state.get("sender"), message_type=state.get("type"))
    if given != InboxFilter() and given != from_cursor:
        raise WarpError(
            "was issued for other filters; pass the same sender/message_type (or none) with it",
            field="cursor",
        )
    return from_cursor, after
