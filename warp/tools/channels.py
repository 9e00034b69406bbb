"""warp_channels_list, warp_channels_send, warp_channels_read, warp_channels_status."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from mcp_types import CallToolResult
from pydantic import Field

from shared.mcp.tools import tool
from shared.models import Scope
from warp.runtime import WarpRuntime
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
    ThreadListOut,
    ThreadNodeOut,
    ThreadOut,
    ThreadSummaryOut,
)
from warp.tools.base import about_held_work, record_received, result

if TYPE_CHECKING:
    from shared.channels import ReadMessage
    from shared.context.trees import ContextNode, TreeMeta
    from warp.channels import ChannelStatus


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
        reply_to=m.reply_to,
        thread_id=m.thread_id,
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


async def _listing(rt: WarpRuntime, channel: str | None) -> ChannelList:
    svc = await rt.services()
    statuses = await svc.channels.status(channel)
    sources = statuses[0].sources if statuses else []
    return ChannelList(channels=[_info(s) for s in statuses], config_files=sources)


async def warp_channels_list(rt: WarpRuntime) -> Annotated[CallToolResult, ChannelList]:
    """List this project's channels with their descriptions and message counts."""
    listing = await _listing(rt, None)
    return result(listing, _channel_lines(listing, detail=False))


async def warp_channels_status(
    rt: WarpRuntime,
    channel: Annotated[Channel | None, Field(description="One channel; omit for all")] = None,
) -> Annotated[CallToolResult, ChannelList]:
    """Channel details: message count, sequence range, size, last message time and limits."""
    listing = await _listing(rt, channel)
    return result(listing, _channel_lines(listing, detail=True))


async def warp_channels_send(
    rt: WarpRuntime,
    channel: Channel,
    message: Body,
    scope: Annotated[
        Scope,
        Field(description="Who may read it: private (you), personal (your user), team/public (project)"),
    ] = Scope.TEAM,
    metadata: Metadata | None = None,
    reply_to: Annotated[
        int | None,
        Field(ge=1, description="Answer this message (its seq in the same channel): it joins its thread"),
    ] = None,
) -> Annotated[CallToolResult, ChannelSendOut]:
    """Post a message to a project channel (roadmap, parallel-work, errors or a configured one).
    With reply_to it answers a message of the channel, and the two join a thread."""
    svc = await rt.services()
    link = None
    if reply_to is not None:
        from shared.channels import Viewer

        svc.channels.spec(channel)  # an unconfigured channel is named as such, not as a missing message
        link = await svc.threads.channel_reply(
            channel, reply_to, Viewer(agent_id=svc.agent_id, user_id=svc.identity.user_id)
        )
    with about_held_work(svc, "message.send", f"channel {channel}"):
        sent = await svc.channels.send(
            channel,
            message,
            sender_id=svc.agent_id,
            sender_handle=rt.handle,
            sender_user=svc.identity.user_id,
            scope=scope,
            metadata=metadata,
            reply_to=reply_to,
            thread_id=link.tree_id if link else None,
        )
    if link is not None:
        await svc.threads.record_channel_message(link, channel, sent.seq, sent.message, svc.identity.user_id)
    out = ChannelSendOut(
        channel=channel,
        seq=sent.seq,
        scope=scope,
        sent_at=sent.message.sent_at,
        reply_to=reply_to,
        thread_id=link.tree_id if link else None,
    )
    thread = f", reply to seq {reply_to} in thread {link.tree_id}" if link else ""
    return result(out, f"Sent to #{channel} (seq {sent.seq}, {scope.value}{thread}).")


async def warp_channels_read(
    rt: WarpRuntime,
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
    from shared.channels import Viewer

    svc = await rt.services()
    page = await svc.channels.read(
        channel,
        Viewer(agent_id=svc.agent_id, user_id=svc.identity.user_id),
        limit=limit,
        cursor=cursor,
        from_beginning=from_beginning,
    )
    record_received(svc, page.messages, f"channel {channel}")
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


async def warp_channels_thread(
    rt: WarpRuntime,
    channel: Channel,
    seq: Annotated[int, Field(ge=1, description="Any message of the thread: its root or a reply")],
    limit: Annotated[int, Field(ge=1, le=200, description="Messages per page (1-200)")] = 50,
    cursor: Annotated[Cursor | None, Field(description="next_cursor of the previous page")] = None,
) -> Annotated[CallToolResult, ThreadOut]:
    """Read a thread of a channel in tree order: each reply under the message it answers."""
    from shared.context.reads import in_tree_order

    svc = await rt.services()
    svc.channels.spec(channel)
    state = await svc.threads.channel_thread(channel, seq)
    page, following = in_tree_order(state, limit=limit, cursor=cursor)
    out = thread_out(state.tree_id, state.meta, page, following, svc.agent_id, svc.identity.user_id)
    return result(out, thread_text(out))


async def warp_channels_threads(
    rt: WarpRuntime,
    channel: Channel,
    limit: Annotated[int, Field(ge=1, le=200, description="Threads to list, newest first")] = 20,
) -> Annotated[CallToolResult, ThreadListOut]:
    """The threads of a channel (newest first) with their reply counts."""
    svc = await rt.services()
    svc.channels.spec(channel)
    found = await svc.threads.channel_threads(channel, limit=limit)
    out = ThreadListOut(
        channel=channel,
        threads=[
            ThreadSummaryOut(
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
    lines = [
        f"[{t.root_seq}] {t.replies} repl{'y' if t.replies == 1 else 'ies'}: {t.title}" for t in out.threads
    ]
    return result(out, f"#{channel}: {len(lines)} thread(s)\n" + "\n".join(lines) if lines else "No threads.")


TOOLS = (
    tool(warp_channels_list, title="List channels", read_only=True, idempotent=True),
    tool(warp_channels_send, title="Send to a channel"),
    tool(warp_channels_read, title="Read a channel", read_only=True, idempotent=True),
    tool(warp_channels_status, title="Channel status", read_only=True, idempotent=True),
    tool(warp_channels_thread, title="Read a thread", read_only=True, idempotent=True),
    tool(warp_channels_threads, title="List threads", read_only=True, idempotent=True),
)


def thread_out(
    tree_id: str,
    meta: TreeMeta,
    page: list[tuple[ContextNode, int]],
    following: str | None,
    agent_id: str,
    user_id: str,
) -> ThreadOut:
    """A page of a thread as the agent may see it (content of others' private nodes withheld)."""
    from shared.context.trees import readable

    nodes: list[ThreadNodeOut] = []
    withheld = 0
    for node, depth in page:
        if not readable(node, agent_id=agent_id, user_id=user_id):
            withheld += 1
            node = node.model_copy(update={"text": None, "meta": {}})
        nodes.append(ThreadNodeOut(depth=depth, node=node))
    return ThreadOut(tree_id=tree_id, meta=meta, nodes=nodes, next_cursor=following, withheld=withheld)


def thread_text(out: ThreadOut) -> str:
    lines = [f"Thread {out.tree_id}: {out.meta.title}"]
    for shown in out.nodes:
        n = shown.node
        who = n.meta.get("handle") or n.author[:8]
        body = n.text if n.text is not None else "(withheld)"
        lines.append(f"{'  ' * shown.depth}- {n.at:%Y-%m-%d %H:%M:%S} {who}: {body}")
    if out.next_cursor:
        lines.append(f"More: next_cursor {out.next_cursor}")
    return "\n".join(lines)
