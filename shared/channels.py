"""Reading a project's channels: one stream per channel, paged by stream sequence.

Warp (an agent reading, within its scopes) and Weft (the operator's view of every
message) read the same streams, so they read them here, one way: a cursor is "the
next sequence to read" for one channel, so it stays right when old messages expire
(the next read starts at the oldest message still stored and counts what it skipped);
a page is filled by batched direct gets, a bounded number of round trips however many
messages a reader may not see. Sending, and the limits each channel's stream gets from
the project's configuration, are Warp's (``warp/channels.py``); which channels exist
is Weft's listing (``weft/channels.py``).

A channel never leaves its project: stream names embed the project id
(``shared.names``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Generic, TypeVar

from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext
from pydantic import ValidationError

from shared.models import CHANNEL_HDR_SCOPE, CHANNEL_HDR_SENDER, CHANNEL_HDR_USER, ChannelMessage, Scope
from shared.names import ProjectNames
from shared.nats.jsapi import StoredMsg, direct_get_batch
from shared.paging import CursorError, decode_cursor, encode_cursor
from shared.trace.tracing import work_of_headers

MAX_PAGE: Final = 200
"""The most messages one read returns."""
_SCAN_ROUNDS: Final = 10
"""Direct gets one read may make to fill its page past messages its reader may not see."""
RAW_CHARS: Final = 64_000
"""How much of a payload that is not a Loom message the operator's view shows."""

T = TypeVar("T")


@dataclass(frozen=True)
class Viewer:
    """Who reads: an agent, whose scopes decide which channel messages, and which thread
    and tree contents, it sees. Weft, the operator's view of the whole project, has none."""

    agent_id: str
    user_id: str


def visible(headers: Mapping[str, str], viewer: Viewer) -> bool:
    """Whether ``viewer`` may see a stored message, by the scope and sender its headers carry:
    ``private`` messages only their sender, ``personal`` ones agents of the sender's user,
    ``team`` (also a message without a scope) and ``public`` ones everyone in the project."""
    scope = headers.get(CHANNEL_HDR_SCOPE, Scope.TEAM.value)
    if scope == Scope.PRIVATE.value:
        return headers.get(CHANNEL_HDR_SENDER, "") == viewer.agent_id
    if scope == Scope.PERSONAL.value:
        return headers.get(CHANNEL_HDR_USER, "") == viewer.user_id
    return True


@dataclass(frozen=True)
class ChannelBounds:
    """What a channel's stream holds: the sequences of its oldest and newest messages, and how many."""

    first_seq: int
    last_seq: int
    messages: int


@dataclass
class ReadMessage:
    """A message as an agent reads it."""

    seq: int
    message: ChannelMessage
    about: tuple[str, str] | None = None
    """The work item it was sent about and the trace it carries (``shared.trace.tracing.work_of_headers``)."""


@dataclass
class StoredChannelMessage:
    """A message as the operator sees it: also a payload that is not a Loom message (``raw``)."""

    seq: int
    stored_at: datetime | None
    message: ChannelMessage | None
    raw: str | None


@dataclass
class ChannelPage(Generic[T]):
    """One page of a channel, oldest first."""

    channel: str
    messages: list[T]
    next_seq: int
    has_more: bool
    skipped_expired: int = 0
    hidden: int = 0
    follow_seq: int = 0
    """Where a later read picks up messages sent after this page (also past its end)."""

    @property
    def next_cursor(self) -> str:
        return channel_cursor(self.channel, self.next_seq)

    @property
    def follow_cursor(self) -> str:
        return channel_cursor(self.channel, self.follow_seq)


def channel_cursor(channel: str, seq: int) -> str:
    return encode_cursor({"ch": channel, "seq": seq})


def cursor_start(cursor: str | None, channel: str) -> int | None:
    """The sequence a cursor of ``channel`` resumes at; None without a cursor. A cursor
    this channel's reads did not issue is refused (:class:`CursorError`)."""
    state = decode_cursor(cursor)
    if state is None:
        return None
    if state.get("ch") != channel or not isinstance(state.get("seq"), int) or state["seq"] < 1:
        raise CursorError()
    return int(state["seq"])


class ChannelReader:
    """Pages of one project's channel streams."""

    def __init__(self, nc: NatsClient, names: ProjectNames, js: JetStreamContext | None = None) -> None:
        self._nc = nc
        self._js = js or nc.jetstream()
        self.names = names

    async def bounds(self, channel: str) -> ChannelBounds:
        """The stream's state (one stream-info call)."""
        info = await self._js.stream_info(self.names.channel_stream(channel))
        state = info.state
        return ChannelBounds(
            first_seq=int(state.first_seq or 0),
            last_seq=int(state.last_seq or 0),
            messages=int(state.messages or 0),
        )

    async def read_as(
        self,
        viewer: Viewer,
        channel: str,
        *,
        limit: int,
        cursor: str | None = None,
        from_beginning: bool = False,
    ) -> ChannelPage[ReadMessage]:
        """An agent's page: only messages its scopes let it see; the others, and payloads
        that are not Loom messages, are counted in ``hidden``. The stream's state is read
        only to find the latest messages (no cursor, not from the beginning)."""
        start = cursor_start(cursor, channel)
        bounds = None if start is not None or from_beginning else await self.bounds(channel)

        def keep(stored: StoredMsg) -> ReadMessage | None:
            if not visible(stored.headers, viewer):
                return None
            try:
                message = ChannelMessage.model_validate_json(stored.data)
            except ValidationError:
                return None
            return ReadMessage(stored.seq, message, work_of_headers(stored.headers))

        return await self._page(
            channel, keep, limit=limit, start=start, from_beginning=from_beginning, bounds=bounds
        )

    async def read_all(
        self,
        channel: str,
        bounds: ChannelBounds,
        *,
        limit: int,
        cursor: str | None = None,
        from_beginning: bool = False,
    ) -> ChannelPage[StoredChannelMessage]:
        """The operator's page: every message whatever its scope, a payload that is not a
        Loom message as text. ``bounds``: the stream's state, as the caller found it."""

        def keep(stored: StoredMsg) -> StoredChannelMessage:
            try:
                return StoredChannelMessage(
                    stored.seq, stored.time, ChannelMessage.model_validate_json(stored.data), None
                )
            except ValidationError:
                return StoredChannelMessage(
                    stored.seq, stored.time, None, stored.data.decode(errors="replace")[:RAW_CHARS]
                )

        start = cursor_start(cursor, channel)
        return await self._page(
            channel, keep, limit=limit, start=start, from_beginning=from_beginning, bounds=bounds
        )

    async def _page(
        self,
        channel: str,
        keep: Callable[[StoredMsg], T | None],
        *,
        limit: int,
        start: int | None,
        from_beginning: bool,
        bounds: ChannelBounds | None,
    ) -> ChannelPage[T]:
        """Oldest first from ``start`` (a cursor's), else from the beginning, else the latest
        ``limit`` (which takes ``bounds``). Without ``bounds`` the stream is read as it is;
        with them, an empty one is not read at all."""
        resumed = start is not None
        if start is None:
            start = _first_to_read(bounds, from_beginning=from_beginning, limit=limit)
        stream = self.names.channel_stream(channel)
        kept: list[T] = []
        hidden = skipped = 0
        next_seq = start
        more = False
        if bounds is None or bounds.messages:
            for _ in range(_SCAN_ROUNDS):
                batch = await direct_get_batch(self._nc, stream, start_seq=next_seq, batch=limit - len(kept))
                if not batch:
                    more = False
                    break
                if resumed and not kept and not hidden and batch[0].seq > next_seq:
                    skipped += batch[0].seq - next_seq  # expired since the cursor was issued
                for stored in batch:
                    item = keep(stored)
                    if item is None:
                        hidden += 1
                    else:
                        kept.append(item)
                    next_seq = stored.seq + 1
                more = batch[-1].pending > 0
                if len(kept) >= limit or not more:
                    break
        follow = next_seq if more or bounds is None else max(next_seq, bounds.last_seq + 1)
        return ChannelPage(
            channel=channel,
            messages=kept,
            next_seq=next_seq,
            has_more=more,
            skipped_expired=skipped,
            hidden=hidden,
            follow_seq=follow,
        )


def _first_to_read(bounds: ChannelBounds | None, *, from_beginning: bool, limit: int) -> int:
    """Where a read without a cursor starts: the oldest stored message, or the latest
    ``limit`` (just past the end of an empty stream)."""
    if bounds is None:  # from the beginning, the stream's state not read
        return 1
    if from_beginning:
        return max(1, bounds.first_seq)
    if not bounds.messages:
        return bounds.last_seq + 1
    return max(bounds.first_seq, bounds.last_seq - limit + 1, 1)
