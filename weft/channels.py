"""Read-only view of a project's channels (streams written by Warp).

Weft is the operator's view, so it shows every message of the project's
channels whatever its scope; nothing outside the project is reachable
(stream names embed the project id). Which channels exist is found here, by
listing the project's channel streams; their messages are read with the reader
Warp uses too (``shared/channels.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from nats.aio.client import Client as NatsClient

from shared.channels import ChannelBounds, ChannelPage, ChannelReader, StoredChannelMessage
from shared.errors import NotFound
from shared.names import ProjectNames, validate_channel
from shared.nats.jsapi import list_streams, parse_timestamp


class ChannelNotFound(NotFound, LookupError):
    def __init__(self, channel: str) -> None:
        super().__init__("no such channel in this project (no message was ever sent to it)", field="channel")
        self.channel = channel


@dataclass
class ChannelInfo:
    name: str
    stream: str
    messages: int
    bytes: int
    first_seq: int
    last_seq: int
    last_message_at: datetime | None


def _info(names: ProjectNames, stream: dict[str, Any]) -> ChannelInfo | None:
    config, state = stream.get("config", {}), stream.get("state", {})
    name = str(config.get("name", ""))
    if not name.startswith(names.channel_stream_prefix):
        return None
    channel = name[len(names.channel_stream_prefix) :]
    try:
        if names.channel_stream(channel) != name:
            return None
    except ValueError:
        return None
    last_ts = state.get("last_ts")
    last_at: datetime | None = None
    if isinstance(last_ts, str) and not last_ts.startswith("0001"):
        last_at = parse_timestamp(last_ts)
    return ChannelInfo(
        name=channel,
        stream=name,
        messages=int(state.get("messages", 0)),
        bytes=int(state.get("bytes", 0)),
        first_seq=int(state.get("first_seq", 0)),
        last_seq=int(state.get("last_seq", 0)),
        last_message_at=last_at,
    )


async def list_channels(nc: NatsClient, names: ProjectNames) -> list[ChannelInfo]:
    streams = await list_streams(nc, subject=names.channel_subjects)
    found = [info for s in streams if (info := _info(names, s)) is not None]
    return sorted(found, key=lambda c: c.name)


async def channel_info(nc: NatsClient, names: ProjectNames, channel: str) -> ChannelInfo:
    validate_channel(channel)
    for info in await list_channels(nc, names):
        if info.name == channel:
            return info
    raise ChannelNotFound(channel)


async def read_messages(
    nc: NatsClient,
    names: ProjectNames,
    channel: str,
    *,
    limit: int = 50,
    cursor: str | None = None,
    from_beginning: bool = False,
) -> ChannelPage[StoredChannelMessage]:
    """Oldest first. Without a cursor: the latest ``limit`` (or the first, ``from_beginning``)."""
    info = await channel_info(nc, names, channel)
    bounds = ChannelBounds(first_seq=info.first_seq, last_seq=info.last_seq, messages=info.messages)
    return await ChannelReader(nc, names).read_all(
        channel, bounds, limit=limit, cursor=cursor, from_beginning=from_beginning
    )
