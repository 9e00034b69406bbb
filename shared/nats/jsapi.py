"""JetStream requests nats-py does not offer in the shape Loom needs.

* batched direct get: up to N stored messages from a sequence in one round
  trip (channel reads, inbox peeks), ending with an ``EOB`` status;
* a no-wait pull of up to N messages from a durable consumer, ending as soon
  as the server has nothing more (inbox reads: no 30 s wait), and handing
  back what it delivers after its caller gave up (no message held for the
  consumer's ack wait by nobody);
* stream listing with the server-side subject filter and every page, which
  nats-py's ``streams_info`` does not expose (Weft: channels, projects, spin-ups).

Several replies answer one such request, so nats-py's request/response
helper (first reply only) does not fit. Direct gets share one wildcard inbox
subscription per connection, made on first use, that hands every reply to the
queue of the request it answers (no SUB/UNSUB per read); a pull keeps a
one-shot subscription, since the messages it delivers name their stream
subject rather than the inbox. Acks that must be on record before a call
returns are sent as requests and awaited together (one round trip for the
whole batch).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import weakref
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.js.errors import APIError

from shared.names import JS_API
from shared.nats.failures import JetStreamRefused
from shared.redact import redact
from shared.tasks import Background


class JetStreamReplyError(JetStreamRefused, RuntimeError):
    """The server answered with an error status (no stream, no consumer, ...).

    A :class:`~shared.nats.failures.JetStreamRefused` (``jetstream_error``) like
    nats-py's own ``APIError``; still a ``RuntimeError`` for callers that catch that."""

    def __init__(self, status: str, description: str) -> None:
        super().__init__(redact(f"JetStream answered {status}: {description}"))
        self.status = status
        self.description = redact(description)


@dataclass
class StoredMsg:
    seq: int
    subject: str
    data: bytes
    headers: dict[str, str]
    time: datetime
    pending: int
    """Messages after this one that match the request (Nats-Num-Pending)."""


class _ReplyRouter:
    """One ``<inbox>.*`` subscription; each request listens on its own token under it."""

    def __init__(self, nc: NatsClient) -> None:
        # No reference to ``nc`` is kept: the router must not keep its connection alive.
        self._prefix = nc.new_inbox()
        self._waiting: dict[str, asyncio.Queue[Msg]] = {}
        self._next_token = 0
        self._subscribed = False
        self._lock = asyncio.Lock()

    async def _deliver(self, msg: Msg) -> None:
        queue = self._waiting.get(msg.subject)
        if queue is not None:  # else: a late reply to a request that gave up
            queue.put_nowait(msg)

    @asynccontextmanager
    async def listen(self, nc: NatsClient) -> AsyncIterator[tuple[str, asyncio.Queue[Msg]]]:
        if not self._subscribed:
            async with self._lock:
                if not self._subscribed:
                    await nc.subscribe(f"{self._prefix}.*", cb=self._deliver)
                    self._subscribed = True
        self._next_token += 1
        inbox = f"{self._prefix}.{self._next_token}"
        queue: asyncio.Queue[Msg] = asyncio.Queue()
        self._waiting[inbox] = queue
        try:
            yield inbox, queue
        finally:
            del self._waiting[inbox]


_routers: weakref.WeakKeyDictionary[NatsClient, _ReplyRouter] = weakref.WeakKeyDictionary()


def _replies(nc: NatsClient) -> AbstractAsyncContextManager[tuple[str, asyncio.Queue[Msg]]]:
    """An inbox for one request's replies and the queue they arrive on."""
    router = _routers.get(nc)
    if router is None:
        router = _routers[nc] = _ReplyRouter(nc)
    return router.listen(nc)


def parse_timestamp(raw: str | None) -> datetime | None:
    """An RFC 3339 server timestamp (nanoseconds trimmed to microseconds), or None."""
    if not raw:
        return None
    text = raw.rstrip("Z")
    head, _, fraction = text.partition(".")
    try:
        return datetime.fromisoformat(f"{head}.{fraction[:6]}" if fraction else head).replace(tzinfo=UTC)
    except ValueError:
        return None


async def direct_get_batch(
    nc: NatsClient,
    stream: str,
    *,
    start_seq: int,
    batch: int,
    subject: str | None = None,
    timeout: float = 5.0,
) -> list[StoredMsg]:
    """Up to ``batch`` messages with sequence >= ``start_seq`` (optionally only ``subject``)."""
    request: dict[str, object] = {"seq": max(1, start_seq), "batch": batch}
    if subject is not None:
        request["next_by_subj"] = subject
    out: list[StoredMsg] = []
    async with _replies(nc) as (inbox, replies):
        await nc.publish(f"{JS_API}.DIRECT.GET.{stream}", json.dumps(request).encode(), reply=inbox)
        async with asyncio.timeout(timeout):
            while len(out) < batch:
                msg = await replies.get()
                headers = dict(msg.headers or {})
                status = headers.get("Status")
                if status is not None:
                    if status in ("204", "404"):
                        break  # end of batch / nothing (more) stored
                    raise JetStreamReplyError(status, headers.get("Description", ""))
                out.append(
                    StoredMsg(
                        seq=int(headers.get("Nats-Sequence", "0")),
                        subject=headers.get("Nats-Subject", msg.subject),
                        data=msg.data,
                        headers=headers,
                        time=parse_timestamp(headers.get("Nats-Time-Stamp")) or datetime.now(UTC),
                        pending=int(headers.get("Nats-Num-Pending", "0") or 0),
                    )
                )
    return out


LATE_GRACE_S = 10.0
"""How long a pull the caller gave up on (timeout, cancellation) still listens for its
answer: a message the server delivered meanwhile is handed back at once rather than
left pending until the consumer's ack wait (a minute for work) passes."""

_late_pulls = Background()


async def consumer_next(
    nc: NatsClient,
    stream: str,
    consumer: str,
    *,
    batch: int,
    timeout: float = 5.0,
    expires_s: float | None = None,
) -> list[Msg]:
    """Whatever the durable consumer can deliver right now, up to ``batch`` messages.

    With ``expires_s`` the server may wait that long for the batch to fill
    (used when the stream says messages exist that a no-wait pull did not see).
    A pull given up before the server finished answering hands back (NAK) what
    arrives after (see :data:`LATE_GRACE_S`).
    """
    # Its own subscription: delivered messages carry their stream subject, not the
    # inbox, so only the subscription (not a shared router) can tell whose they are.
    # Delivered into a queue of our own: a caller cancelled while waiting on it loses
    # nothing (nats-py's next_msg may drop the message it was handing over).
    arrived: asyncio.Queue[Msg] = asyncio.Queue()

    async def deliver(msg: Msg) -> None:
        arrived.put_nowait(msg)

    sub = await nc.subscribe(nc.new_inbox(), cb=deliver)
    out: list[Msg] = []
    answered = False
    try:
        body: dict[str, object] = {"batch": batch}
        if expires_s is None:
            body["no_wait"] = True
        else:
            body["expires"] = int(expires_s * 1e9)
        request = json.dumps(body).encode()
        await nc.publish(f"{JS_API}.CONSUMER.MSG.NEXT.{stream}.{consumer}", request, reply=sub.subject)
        async with asyncio.timeout(timeout):
            while len(out) < batch:
                msg = await arrived.get()
                status = (msg.headers or {}).get("Status")
                if status is not None:
                    answered = True
                    if status in ("404", "408"):
                        break  # no (more) messages
                    raise JetStreamReplyError(status, (msg.headers or {}).get("Description", ""))
                if msg.reply:
                    out.append(msg)
            answered = True
    finally:
        if answered:
            await sub.unsubscribe()
        else:  # what it delivered so far never reaches the caller either
            _late_pulls.spawn(
                _hand_back_late(nc, sub, arrived, out, batch - len(out), (expires_s or 0) + LATE_GRACE_S),
                name="late-pull",
            )
    return out


async def _hand_back_late(
    nc: NatsClient,
    sub: Any,
    arrived: asyncio.Queue[Msg],
    taken: list[Msg],
    still_due: int,
    grace_s: float,
) -> None:
    """A pull its caller gave up on: what it took and every message still arriving in its
    answer is NAKed (redelivered at once), until the server's closing status, the
    batch, or ``grace_s``."""
    # Timed out, or the connection closed: nothing more will come.
    with contextlib.suppress(Exception):
        for msg in taken:
            await nc.publish(msg.reply, b"-NAK")
        async with asyncio.timeout(grace_s):
            while still_due > 0:
                msg = await arrived.get()
                if (msg.headers or {}).get("Status") is not None:
                    break
                if msg.reply:
                    still_due -= 1
                    await nc.publish(msg.reply, b"-NAK")
    with contextlib.suppress(Exception):
        await sub.unsubscribe()


async def ack_all(nc: NatsClient, msgs: list[Msg], verb: bytes, *, timeout: float = 5.0) -> None:
    """Send ``verb`` (+ACK, -NAK, +TERM) for every message and wait until the server has
    recorded each one, so the next read already sees the result."""
    if not msgs:
        return
    await asyncio.gather(*(nc.request(m.reply, verb, timeout=timeout) for m in msgs))


_MAX_PAGES = 1000


async def _every_page(nc: NatsClient, api: str, request: dict[str, Any], timeout: float) -> list[Any]:
    """The ``streams`` of every page of a listing request (``offset`` advanced page by page)."""
    found: list[Any] = []
    for _ in range(_MAX_PAGES):
        body = {**request, "offset": len(found)}
        reply = await nc.request(f"{JS_API}.{api}", json.dumps(body).encode(), timeout=timeout)
        answer = json.loads(reply.data)
        if "error" in answer:
            APIError.from_error(answer["error"])  # raises  # type: ignore[no-untyped-call]
        page = answer.get("streams") or []
        found.extend(page)
        if not page or len(found) >= int(answer.get("total", 0)):
            break
    return found


async def list_streams(
    nc: NatsClient, *, subject: str | None = None, timeout: float = 5.0
) -> list[dict[str, Any]]:
    """Every stream's info (config and state), optionally only those that capture ``subject``."""
    request: dict[str, Any] = {"subject": subject} if subject else {}
    return await _every_page(nc, "STREAM.LIST", request, timeout)


async def stream_names(nc: NatsClient, *, timeout: float = 5.0) -> list[str]:
    """The name of every stream on the account."""
    return await _every_page(nc, "STREAM.NAMES", {}, timeout)
