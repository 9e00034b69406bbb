"""Read-only view of a project's channels (streams written by Warp).

Weft is the operator's view, so it shows every message of the project's
channels whatever its scope; nothing outside the project is reachable
(stream names embed the project id).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from nats.aio.client import Client as NatsClient
from pydantic import ValidationError

from shared.errors import NotFound
from shared.models import ChannelMessage
from shared.names import ProjectNames, validate_channel
from shared.nats.jsapi import direct_get_batch, list_streams, parse_timestamp
from shared.paging import CursorError, decode_cursor, encode_cursor

MAX_PAGE = 200
_SCAN_ROUNDS = 10


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


@dataclass
class StoredChannelMessage:
    seq: int
    stored_at: datetime | None
    message: ChannelMessage | None
    raw: str | None


@dataclass
class ChannelPage:
    channel: str
    items: list[StoredChannelMessage]
    next_cursor: str | None
    follow_cursor: str
    """Pass back to get messages that arrive later (also when next_cursor is null)."""


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
    streams = await list_streams(nc, subject=f"loom.{names.project_id}.chan.>")
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
) -> ChannelPage:
    """Oldest first. Without a cursor: the latest ``limit`` (or the first, ``from_beginning``)."""
    info = await channel_info(nc, names, channel)
    state = decode_cursor(cursor)
    if state is not None:
        if state.get("ch") != channel or not isinstance(state.get("seq"), int) or state["seq"] < 1:
            raise CursorError()
        start = int(state["seq"])
    elif from_beginning:
        start = max(1, info.first_seq)
    else:
        start = max(info.first_seq, info.last_seq - limit + 1, 1)
    items: list[StoredChannelMessage] = []
    next_seq = start
    more = False
    if info.messages:
        for _ in range(_SCAN_ROUNDS):
            batch = await direct_get_batch(nc, info.stream, start_seq=next_seq, batch=limit - len(items))
            for stored in batch:
                items.append(_decode(stored.seq, stored.time, stored.data))
                next_seq = stored.seq + 1
            more = bool(batch) and batch[-1].pending > 0
            if not batch or len(items) >= limit or not more:
                break
    follow = encode_cursor({"ch": channel, "seq": max(next_seq, info.last_seq + 1 if not more else next_seq)})
    return ChannelPage(
        channel=channel,
        items=items,
        next_cursor=encode_cursor({"ch": channel, "seq": next_seq}) if more else None,
        follow_cursor=follow,
    )


def _decode(seq: int, at: datetime | None, data: bytes) -> StoredChannelMessage:
    try:
        return StoredChannelMessage(seq, at, ChannelMessage.model_validate_json(data), None)
    except ValidationError:
        return StoredChannelMessage(seq, at, None, data.decode(errors="replace")[:64_000])
