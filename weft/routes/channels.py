"""``/api/channels``: read Warp's project channels (operator view: every scope)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from shared.channels import MAX_PAGE
from shared.models import ChannelMessage
from weft.channels import list_channels, read_messages
from weft.deps import Cursor, ProjectDep, require_token
from weft.errors import ERROR_RESPONSES
from weft.routes.common import ChannelName
from weft.strictquery import STRICT_QUERY

router = APIRouter(
    prefix="/api/channels",
    tags=["channels"],
    dependencies=[STRICT_QUERY, Depends(require_token)],
    responses=ERROR_RESPONSES,
)


class ChannelOut(BaseModel):
    name: str
    messages: int
    bytes: int
    first_seq: int
    last_seq: int
    last_message_at: datetime | None


class ChannelsOut(BaseModel):
    channels: list[ChannelOut]


class ChannelMessageOut(BaseModel):
    seq: int
    stored_at: datetime | None
    message: ChannelMessage | None = Field(description="null when the stored payload is not a Loom message")
    raw: str | None = Field(default=None, description="The payload as text when it is not a Loom message")


class ChannelMessagesOut(BaseModel):
    channel: str
    items: list[ChannelMessageOut]
    next_cursor: str | None = Field(description="More stored messages follow; null on the last page")
    follow_cursor: str = Field(description="Pass back later to get only messages sent since this page")


@router.get("", response_model=ChannelsOut, summary="Channels of a project")
async def channels(project: ProjectDep) -> ChannelsOut:
    found = await list_channels(project.nc, project.names)
    return ChannelsOut(
        channels=[
            ChannelOut(
                name=c.name,
                messages=c.messages,
                bytes=c.bytes,
                first_seq=c.first_seq,
                last_seq=c.last_seq,
                last_message_at=c.last_message_at,
            )
            for c in found
        ]
    )


@router.get(
    "/{name}/messages", response_model=ChannelMessagesOut, summary="Messages of a channel, oldest first"
)
async def messages(
    name: ChannelName,
    project: ProjectDep,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    cursor: Cursor = None,
    from_beginning: bool = False,
) -> ChannelMessagesOut:
    """Without a cursor: the latest ``limit`` messages (the first ones with ``from_beginning``)."""
    page = await read_messages(
        project.nc, project.names, name, limit=limit, cursor=cursor, from_beginning=from_beginning
    )
    return ChannelMessagesOut(
        channel=page.channel,
        items=[
            ChannelMessageOut(seq=m.seq, stored_at=m.stored_at, message=m.message, raw=m.raw)
            for m in page.messages
        ],
        next_cursor=page.next_cursor if page.has_more else None,
        follow_cursor=page.follow_cursor,
    )


class ThreadOut(BaseModel):
    tree_id: str = Field(description="Read it with GET /api/contexts/{tree_id}/nodes")
    root_seq: int
    title: str
    replies: int
    last_at: datetime | None
    started_by: str


class ThreadsOut(BaseModel):
    channel: str
    threads: list[ThreadOut]


@router.get("/{name}/threads", response_model=ThreadsOut, summary="Threads of a channel, newest first")
async def threads(
    name: ChannelName, project: ProjectDep, limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50
) -> ThreadsOut:
    """Each thread's root message and how many replies it has."""
    found = await project.contexts.threads.channel_threads(name, limit=limit)
    return ThreadsOut(
        channel=name,
        threads=[
            ThreadOut(
                tree_id=t.tree_id,
                root_seq=t.root_seq,
                title=t.title,
                replies=t.replies,
                last_at=t.last_at,
                started_by=t.started_by,
            )
            for t in found
        ],
    )
