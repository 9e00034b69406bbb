"""warp_channels_list, warp_channels_send, warp_channels_read, warp_channels_status."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from mcp.server.mcpserver.tools import Tool
from mcp_types import CallToolResult
from pydantic import Field

from shared.models import Scope
from warp.schemas import (
    Body,
    Channel,
    ChannelInfo,
    ChannelList,
    ChannelMessageOut,
    ChannelReadOut,
    ChannelSendOut,
    Cursor,
    Metadata,
)
from warp.tools.base import make_tool, result

if TYPE_CHECKING:
    from warp.channels import ChannelStatus, ReadMessage
    from warp.runtime import WarpRuntime


def _info(status: ChannelStatus) -> ChannelInfo:
    spec = status.spec
    return ChannelInfo(
        name=status.name,
        description=spec.description,
        max_messages=spec.max_messages,
        max_bytes=spec.max_bytes,
        max_age_s=spec.max_age_s,
        messages=status.messages,
        bytes=status.bytes,
        first_seq=status.first_seq,
        last_seq=status.last_seq,
        last_message_at=status.last_message_at,
    )


def _message(read: ReadMessage) -> ChannelMessageOut:
    m = read.message
    return ChannelMessageOut(
        seq=read.seq,
        channel=m.channel,
        sender_id=m.sender_id,
        sender_handle=m.sender_handle,
        body=m.body,
        scope=m.scope,
        sent_at=m.sent_at,
        metadata=m.metadata,
    )


def _age(seconds: float) -> str:
    if not seconds:
        return "no age limit"
    days = seconds / 86400
    return f"{days:g} days" if days >= 1 else f"{seconds:g}s"


def _channel_lines(listing: ChannelList, *, detail: bool) -> str:
    if not listing.channels:
        return "No channels configured."
    lines = []
    for c in listing.channels:
        line = f"#{c.name} ({c.messages} messages)"
        if c.description:
            line += f" - {c.description}"
        if detail:
            last = c.last_message_at.isoformat() if c.last_message_at else "never"
            line += (
                f"\n    seq {c.first_seq}..{c.last_seq}, {c.bytes} bytes, last message {last}"
                f"\n    limits: {c.max_messages} messages, {c.max_bytes} bytes, {_age(c.max_age_s)}"
            )
        lines.append(line)
    if listing.config_files:
        lines.append("Config: " + ", ".join(listing.config_files))
    return "\n".join(lines)


def tools(rt: WarpRuntime) -> list[Tool]:
    async def _listing(channel: str | None) -> ChannelList:
        svc = await rt.services()
        statuses = await svc.channels.status(channel)
        sources = statuses[0].sources if statuses else []
        return ChannelList(channels=[_info(s) for s in statuses], config_files=sources)

    async def warp_channels_list() -> Annotated[CallToolResult, ChannelList]:
        """List this project's channels with their descriptions and message counts."""
        listing = await _listing(None)
        return result(listing, _channel_lines(listing, detail=False))

    async def warp_channels_status(
        channel: Annotated[Channel | None, Field(description="One channel; omit for all")] = None,
    ) -> Annotated[CallToolResult, ChannelList]:
        """Channel details: message count, sequence range, size, last message time and limits."""
        listing = await _listing(channel)
        return result(listing, _channel_lines(listing, detail=True))

    async def warp_channels_send(
        channel: Channel,
        message: Body,
        scope: Annotated[
            Scope,
            Field(description="Who may read it: private (you), personal (your user), team/public (project)"),
        ] = Scope.TEAM,
        metadata: Metadata | None = None,
    ) -> Annotated[CallToolResult, ChannelSendOut]:
        """Post a message to a project channel (roadmap, parallel-work, errors or a configured one)."""
        svc = await rt.services()
        sent = await svc.channels.send(
            channel,
            message,
            sender_id=svc.agent_id,
            sender_handle=rt.handle,
            sender_user=svc.identity.user_id,
            scope=scope,
            metadata=metadata,
        )
        out = ChannelSendOut(channel=channel, seq=sent.seq, scope=scope, sent_at=sent.message.sent_at)
        return result(out, f"Sent to #{channel} (seq {sent.seq}, {scope.value}).")

    async def warp_channels_read(
        channel: Channel,
        limit: Annotated[int, Field(ge=1, le=200, description="Messages per page (1-200)")] = 20,
        cursor: Annotated[
            Cursor | None, Field(description="next_cursor of a previous read: only what came after it")
        ] = None,
        from_beginning: Annotated[
            bool, Field(description="Without a cursor: start at the oldest stored message, not the latest")
        ] = False,
    ) -> Annotated[CallToolResult, ChannelReadOut]:
        """Read a channel, oldest first. Without a cursor: the latest messages; pass next_cursor back
        to get only newer ones."""
        from warp.channels import Viewer

        svc = await rt.services()
        page = await svc.channels.read(
            channel,
            Viewer(agent_id=svc.agent_id, user_id=svc.identity.user_id),
            limit=limit,
            cursor=cursor,
            from_beginning=from_beginning,
        )
        out = ChannelReadOut(
            channel=channel,
            messages=[_message(m) for m in page.messages],
            next_cursor=page.next_cursor,
            has_more=page.has_more,
            skipped_expired=page.skipped_expired,
            hidden=page.hidden,
        )
        if not out.messages:
            text = f"#{channel}: no new messages."
        else:
            text = "\n".join(
                f"[{m.seq}] {m.sent_at:%Y-%m-%d %H:%M:%S} {m.sender_handle}: {m.body}" for m in out.messages
            )
            text = f"#{channel} ({len(out.messages)} messages)\n{text}"
        if page.skipped_expired:
            text += f"\n({page.skipped_expired} older messages expired before you read them)"
        if page.has_more:
            text += "\nMore messages are waiting: read again with next_cursor."
        text += f"\nnext_cursor: {page.next_cursor}"
        return result(out, text)

    return [
        make_tool(rt, warp_channels_list, title="List channels", read_only=True, idempotent=True),
        make_tool(rt, warp_channels_send, title="Send to a channel"),
        make_tool(rt, warp_channels_read, title="Read a channel", read_only=True, idempotent=True),
        make_tool(rt, warp_channels_status, title="Channel status", read_only=True, idempotent=True),
    ]
