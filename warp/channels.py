"""Project channels on JetStream: one stream per channel, limits from config.

Warp sends, keeps each channel's stream in line with the project's configuration, and
reads through the reader Weft uses too (``shared/channels.py``: pages by stream
sequence, cursors that survive expiry, an agent sees what its scopes allow).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext
from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import NotFoundError

from shared.channels import MAX_PAGE, ChannelPage, ChannelReader, ReadMessage, Viewer
from shared.models import CHANNEL_HDR_SCOPE, CHANNEL_HDR_SENDER, CHANNEL_HDR_USER, ChannelMessage, Scope
from shared.names import ProjectNames, validate_channel
from shared.nats.jetstream import ensure_stream
from shared.nats.jsapi import direct_get_batch
from shared.trace.tracing import with_trace_headers
from warp.config import ChannelSpec, ConfigLoader
from warp.errors import NotFound, WarpError

HDR_SCOPE = CHANNEL_HDR_SCOPE
HDR_SENDER = CHANNEL_HDR_SENDER
HDR_USER = CHANNEL_HDR_USER


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


class ChannelService:
    def __init__(
        self, nc: NatsClient, js: JetStreamContext, names: ProjectNames, loader: ConfigLoader
    ) -> None:
        self._nc = nc
        self._js = js
        self.names = names
        self.loader = loader
        self._reader = ChannelReader(nc, names, js)
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
    ) -> ChannelPage[ReadMessage]:
        """Without a cursor: the latest ``limit`` messages (or the oldest, ``from_beginning``).
        With one: the messages after the previous page. Oldest first either way."""
        if not 1 <= limit <= MAX_PAGE:
            raise WarpError(f"must be between 1 and {MAX_PAGE}", field="limit")
        await self.ensure(channel)
        return await self._reader.read_as(
            viewer, channel, limit=limit, cursor=cursor, from_beginning=from_beginning
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
