"""warp_messages_send_direct, warp_messages_read_direct: the durable per-agent inbox."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from mcp_types import CallToolResult
from pydantic import Field

from shared.mcp.tools import tool
from warp.runtime import WarpRuntime
from warp.schemas import (
    AgentId,
    Body,
    Cursor,
    DirectMessageOut,
    DirectReadOut,
    DirectSendOut,
    MessageId,
    MessageType,
    Metadata,
    ThreadOut,
    TreeId,
)
from warp.tools.base import about_held_work, record_received, result

if TYPE_CHECKING:
    from warp.messages import InboxMessage
    from warp.services import Services


def _out(m: InboxMessage) -> DirectMessageOut:
    d = m.message
    return DirectMessageOut(
        id=d.id,
        seq=m.seq,
        sender_id=d.sender_id,
        sender_handle=d.sender_handle,
        message_type=d.message_type,
        body=d.body,
        sent_at=d.sent_at,
        metadata=d.metadata,
        reply_to=d.reply_to,
        thread_id=d.thread_id,
    )


async def _recipient_status(svc: Services, agent_id: str) -> str:
    from shared.agents.registry import AgentNotFound

    try:
        entry = await svc.registry.get(agent_id)
    except AgentNotFound:
        return "unregistered"
    return entry.effective_status().value


async def warp_messages_send_direct(
    rt: WarpRuntime,
    recipient_id: Annotated[AgentId, Field(description="The recipient's agent id (from discover)")],
    message: Body,
    message_type: Annotated[
        MessageType, Field(description="Lets the recipient filter (default text)")
    ] = "text",
    metadata: Metadata | None = None,
    reply_to: Annotated[
        MessageId | None, Field(description="Answer this direct message (its id): the two join a thread")
    ] = None,
) -> Annotated[CallToolResult, DirectSendOut]:
    """Send a direct message to one agent's inbox. It waits there, durably, until that agent
    reads it, even if the agent is offline right now. With reply_to it answers a message you
    received or sent, and the two join a thread (warp_messages_thread)."""
    import asyncio

    svc = await rt.services()
    if rt.protocol_prompts.answers(reply_to):
        return _answer_protocol_prompt(rt, recipient_id, message, metadata, reply_to)
    link = None
    if reply_to is not None:
        link = await svc.threads.dm_reply(
            reply_to, sender=svc.agent_id, recipient=recipient_id, known=svc.inbox.remembered(reply_to)
        )
    with about_held_work(svc, "message.send", "inbox"):
        sent, status = await asyncio.gather(
            svc.inbox.send(
                sender_id=svc.agent_id,
                sender_handle=rt.handle,
                recipient_id=recipient_id,
                body=message,
                message_type=message_type,
                metadata=metadata,
                reply_to=reply_to,
                thread_id=link.tree_id if link else None,
            ),
            _recipient_status(svc, recipient_id),
        )
    if link is not None:
        await svc.threads.record_dm(link, sent.message)
    out = DirectSendOut(
        message_id=sent.message.id,
        recipient_id=recipient_id,
        recipient_status=status,
        seq=sent.seq,
        sent_at=sent.message.sent_at,
        reply_to=reply_to,
        thread_id=link.tree_id if link else None,
    )
    note = {
        "online": "",
        "busy": " (recipient is busy)",
        "offline": " (recipient is offline; it will read it when it is back)",
        "unregistered": " (no agent with this id is registered in this project; it waits in that inbox)",
    }[status]
    return result(out, f"Delivered to {recipient_id}'s inbox{note}. Message id {sent.message.id}.")


def _answer_protocol_prompt(
    rt: WarpRuntime, recipient_id: str, message: str, metadata: dict[str, str] | None, reply_to: str | None
) -> CallToolResult:
    """A reply to a prompt of the agent protocol goes to the prompt's stream (warp/protocol.py)."""
    from shared.models import new_id, utcnow
    from warp.protocol import ended_reply_error, goes_on

    assert reply_to is not None
    if not rt.protocol_prompts.reply(reply_to, message, metadata):
        raise ended_reply_error()
    more = goes_on(metadata)
    out = DirectSendOut(
        message_id=new_id(),
        recipient_id=recipient_id,
        recipient_status="online",
        seq=0,
        sent_at=utcnow(),
        reply_to=reply_to,
        streamed=True,
    )
    then = "the stream goes on" if more else "the stream has ended"
    return result(out, f"Streamed to the agent-protocol caller of message {reply_to}; {then}.")


async def warp_messages_read_direct(
    rt: WarpRuntime,
    limit: Annotated[int, Field(ge=1, le=100, description="Messages per read (1-100)")] = 20,
    cursor: Cursor | None = None,
    sender_id: Annotated[AgentId | None, Field(description="Only messages from this agent")] = None,
    message_type: Annotated[MessageType | None, Field(description="Only messages of this type")] = None,
    peek: Annotated[
        bool, Field(description="Look without marking anything read (the messages stay waiting)")
    ] = False,
) -> Annotated[CallToolResult, DirectReadOut]:
    """Read your inbox: returns what is waiting now (oldest first) and marks exactly those
    messages read. Messages a filter leaves out stay waiting for a later read."""
    from warp.messages import InboxFilter

    svc = await rt.services()
    page = await svc.inbox.read(
        svc.agent_id,
        limit=limit,
        cursor=cursor,
        filters=InboxFilter(sender=sender_id, message_type=message_type),
        peek=peek,
    )
    record_received(svc, page.messages, "inbox")
    out = DirectReadOut(
        messages=[_out(m) for m in page.messages],
        next_cursor=page.next_cursor,
        has_more=page.has_more,
        left_waiting=page.skipped,
        acknowledged=not peek,
    )
    if not out.messages:
        text = "No messages waiting." if not (sender_id or message_type) else "No matching messages."
    else:
        lines = [
            f"[{m.sent_at:%Y-%m-%d %H:%M:%S}] from {m.sender_handle} ({m.sender_id}) "
            f"<{m.message_type}>: {m.body}"
            for m in out.messages
        ]
        text = f"{len(lines)} message(s){' (peek: still unread)' if peek else ''}\n" + "\n".join(lines)
    if page.has_more:
        text += f"\nMore waiting: pass next_cursor: {page.next_cursor}"
    if page.skipped:
        text += f"\n{page.skipped} other message(s) left waiting."
    return result(out, text)


async def warp_messages_thread(
    rt: WarpRuntime,
    thread_id: Annotated[
        TreeId, Field(description="A message's thread_id, or the id of the message that started it")
    ],
    limit: Annotated[int, Field(ge=1, le=200, description="Messages per page (1-200)")] = 50,
    cursor: Annotated[Cursor | None, Field(description="next_cursor of the previous page")] = None,
) -> Annotated[CallToolResult, ThreadOut]:
    """Read a direct-message thread you take part in, in tree order."""
    from shared.channels import Viewer
    from shared.context.reads import in_tree_order
    from warp.tools.channels import thread_out, thread_text

    svc = await rt.services()
    state = await svc.threads.dm_thread(
        thread_id, Viewer(agent_id=svc.agent_id, user_id=svc.identity.user_id)
    )
    page, following = in_tree_order(state, limit=limit, cursor=cursor)
    out = thread_out(state.tree_id, state.meta, page, following, svc.agent_id, svc.identity.user_id)
    return result(out, thread_text(out))


TOOLS = (
    tool(warp_messages_send_direct, title="Send a direct message"),
    tool(warp_messages_read_direct, title="Read direct messages"),
    tool(warp_messages_thread, title="Read a direct-message thread", read_only=True, idempotent=True),
)
