"""Project channels on JetStream: one stream per channel, limits from config.

Reads page by stream sequence. A cursor is "the next sequence to read" for one
channel, so it stays right when old messages expire: the next read simply
starts at the oldest message still stored and reports how many were skipped.
Visibility: ``private`` messages are shown only to their sender, ``personal``
ones to agents of the same user; ``team`` and ``public`` ones to everyone in
the project (a channel never leaves its project).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext
from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import NotFoundError
from pydantic import ValidationError

from shared.models import CHANNEL_HDR_SCOPE, CHANNEL_HDR_SENDER, CHANNEL_HDR_USER, ChannelMessage, Scope
from shared.names import ProjectNames, validate_channel
from shared.nats.jetstream import ensure_stream
from shared.nats.jsapi import direct_get_batch
from shared.paging import CursorError, decode_cursor, encode_cursor
from shared.trace.tracing import with_trace_headers, work_of_headers
from warp.config import ChannelSpec, ConfigLoader
from warp.errors import NotFound, WarpError

HDR_SCOPE = CHANNEL_HDR_SCOPE
HDR_SENDER = CHANNEL_HDR_SENDER
HDR_USER = CHANNEL_HDR_USER
MAX_READ = 200
_SCAN_ROUNDS = 10


@dataclass(frozen=True)
class Viewer:
    agent_id: str
    user_id: str


@dataclass
class ReadMessage:
    seq: int
    message: ChannelMessage
    about: tuple[str, str] | None = None
    """The work item it was sent about and the trace it carries (``shared.trace.tracing.work_of_headers``)."""


@dataclass
class ReadPage:
    channel: str
    messages: list[ReadMessage]
    next_cursor: str
    has_more: bool
    skipped_expired: int = 0
    hidden: int = 0


@dataclass
class ChannelStatus:
    name: str
    spec: ChannelSpec
    messages: int = 0
    bytes: int = 0
    first_seq: int = 0
    last_seq: int = 0
    last_message_at: datetime | None = None
    exists: bool = False
    sources: list[str] = field(default_factory=list)


def visible(scope: str, sender: str, sender_user: str, viewer: Viewer) -> bool:
    if scope == Scope.PRIVATE.value:
        return sender == viewer.agent_id
    if scope == Scope.PERSONAL.value:
        return sender_user == viewer.user_id
    return True


class ChannelService:
    def __init__(
        self, nc: NatsClient, js: JetStreamContext, names: ProjectNames, loader: ConfigLoader
    ) -> None:
        self._nc = nc
        self._js = js
        self.names = names
        self.loader = loader
        self._ensured: dict[str, ChannelSpec] = {}

    def forget(self) -> None:
        """Forget which streams exist (after a reconnect: the server may be a fresh one)."""
        self._ensured.clear()

    def spec(self, channel: str) -> ChannelSpec:
        validate_channel(channel)
        config = self.loader.current()
        spec = config.get(channel)
        if spec is None:
            known = ", ".join(sorted(config.channels))
            raise NotFound(
                f"not a configured channel (configured: {known}); add it under "
                '"channels" in the project\'s .loom/config.json',
                field="channel",
            )
        return spec

    def stream_config(self, channel: str, spec: ChannelSpec) -> StreamConfig:
        return StreamConfig(
            name=self.names.channel_stream(channel),
            description=spec.description or None,
            subjects=[self.names.channel_subject(channel)],
            retention=RetentionPolicy.LIMITS,
            storage=StorageType.FILE,
            discard=DiscardPolicy.OLD,
            max_msgs=spec.max_messages,
            max_bytes=spec.max_bytes,
            max_age=spec.max_age_s,
            allow_direct=True,
            duplicate_window=min(120.0, spec.max_age_s) if spec.max_age_s else 120.0,
        )

    async def ensure(self, channel: str) -> ChannelSpec:
        """The channel's spec, with its stream created or its limits updated to match."""
        spec = self.spec(channel)
        if self._ensured.get(channel) != spec:
            await ensure_stream(self._js, self.stream_config(channel, spec))
            self._ensured[channel] = spec
        return spec

    async def send(
        self,
        channel: str,
        body: str,
        *,
        sender_id: str,
        sender_handle: str,
        sender_user: str,
        scope: Scope = Scope.TEAM,
        metadata: dict[str, str] | None = None,
        reply_to: int | None = None,
        thread_id: str | None = None,
    ) -> ReadMessage:
        await self.ensure(channel)
        message = ChannelMessage(
            channel=channel,
            sender_id=sender_id,
            sender_handle=sender_handle,
            body=body,
            scope=scope,
            metadata=metadata or {},
            reply_to=reply_to,
            thread_id=thread_id,
        )
        ack = await self._js.publish(
            self.names.channel_subject(channel),
            message.to_json_bytes(),
            stream=self.names.channel_stream(channel),
            headers=with_trace_headers(
                {HDR_SCOPE: scope.value, HDR_SENDER: sender_id, HDR_USER: sender_user}
            ),
        )
        return ReadMessage(seq=int(ack.seq), message=message)

    async def read(
        self,
        channel: str,
        viewer: Viewer,
        *,
        limit: int = 20,
        cursor: str | None = None,
        from_beginning: bool = False,
    ) -> ReadPage:
        """Without a cursor: the latest ``limit`` messages (or the oldest, ``from_beginning``).
        With one: the messages after the previous page. Oldest first either way."""
        if not 1 <= limit <= MAX_READ:
            raise WarpError(f"must be between 1 and {MAX_READ}", field="limit")
        await self.ensure(channel)
        stream = self.names.channel_stream(channel)
        state = decode_cursor(cursor)
        if state is not None:
            if state.get("ch") != channel or not isinstance(state.get("seq"), int) or state["seq"] < 1:
                raise CursorError()
            start = int(state["seq"])
        elif from_beginning:
            start = 1
        else:
            info = await self._js.stream_info(stream)
            last, first = int(info.state.last_seq or 0), int(info.state.first_seq or 0)
            if info.state.messages == 0:
                return ReadPage(
                    channel=channel, messages=[], next_cursor=_cursor(channel, last + 1), has_more=False
                )
            start = max(first, last - limit + 1)
        shown: list[ReadMessage] = []
        hidden = 0
        skipped = 0
        next_seq = start
        has_more = False
        for _ in range(_SCAN_ROUNDS):
            batch = await direct_get_batch(self._nc, stream, start_seq=next_seq, batch=limit - len(shown))
            if not batch:
                has_more = False
                break
            if state is not None and not shown and not hidden and batch[0].seq > next_seq:
                skipped += batch[0].seq - next_seq
            for stored in batch:
                headers = stored.headers
                if not visible(
                    headers.get(HDR_SCOPE, Scope.TEAM.value),
                    headers.get(HDR_SENDER, ""),
                    headers.get(HDR_USER, ""),
                    viewer,
                ):
                    hidden += 1
                else:
                    try:
                        message = ChannelMessage.model_validate_json(stored.data)
                    except ValidationError:
                        hidden += 1
                    else:
                        shown.append(ReadMessage(stored.seq, message, work_of_headers(headers)))
                next_seq = stored.seq + 1
            has_more = batch[-1].pending > 0
            if len(shown) >= limit or not has_more:
                break
        return ReadPage(
            channel=channel,
            messages=shown,
            next_cursor=_cursor(channel, next_seq),
            has_more=has_more,
            skipped_expired=skipped,
            hidden=hidden,
        )

    async def status(self, channel: str | None = None) -> list[ChannelStatus]:
        """Configured channels with their stream state (one stream-info call each)."""
        config = self.loader.current()
        names = [channel] if channel is not None else sorted(config.channels)
        sources = [str(p) for p in config.sources]
        out: list[ChannelStatus] = []
        for name in names:
            spec = await self.ensure(name)
            status = ChannelStatus(name=name, spec=spec, sources=sources)
            try:
                info = await self._js.stream_info(self.names.channel_stream(name))
            except NotFoundError:
                out.append(status)
                continue
            status.exists = True
            status.messages = int(info.state.messages or 0)
            status.bytes = int(info.state.bytes or 0)
            status.first_seq = int(info.state.first_seq or 0)
            status.last_seq = int(info.state.last_seq or 0)
            if status.last_seq:
                last = await direct_get_batch(
                    self._nc, info.config.name or "", start_seq=status.last_seq, batch=1
                )
                status.last_message_at = last[0].time if last else None
            out.append(status)
        return out


def _cursor(channel: str, seq: int) -> str:
    return encode_cursor({"ch": channel, "seq": seq})
