"""Threads: replies to channel and direct messages form a context tree over the messages
(docs/context.md, Threads).

A message that answers another names it (``reply_to``) and its thread (``thread_id``).
The thread is a tree whose root is the first message answered and whose nodes are the
messages, each under the one it answers; a node keeps the message's text, so a thread
reads back whole after the channel's limits drop the message or the recipient's inbox
forgets it. Tree and node ids are derived from the messages (channel and sequence, or
message id), so two agents answering the same message at once make one thread.

Plain messages pay nothing: only a reply reads the message it answers and appends a node.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from nats.aio.client import Client as NatsClient
from pydantic import ValidationError

from shared.channels import Viewer
from shared.context.store import ContextStore
from shared.context.trees import (
    ContextConflict,
    ContextHandle,
    ContextNode,
    ContextNotFound,
    HandleSource,
    TreeMeta,
    TreeState,
    channel_handle,
    channel_node_id,
    channel_thread_id,
    dm_node_id,
    dm_thread_id,
    may_read_tree,
    readable,
)
from shared.models import CHANNEL_HDR_USER, ChannelMessage, DirectMessage, Scope
from shared.names import ProjectNames
from shared.nats.jsapi import JetStreamReplyError, direct_get_batch

THREAD_TITLE_CHARS = 120


@dataclass(frozen=True)
class ThreadLink:
    """Where a reply goes: its thread and the node of the message it answers."""

    tree_id: str
    parent_id: str


@dataclass
class ThreadSummary:
    tree_id: str
    channel: str
    root_seq: int
    title: str
    replies: int
    last_at: datetime | None
    started_by: str


def _not_found(field_name: str) -> ContextNotFound:
    return ContextNotFound(
        "no message with this sequence in this channel (it may have expired)", field=field_name
    )


class Threads:
    """Threads of one project's channels and direct messages."""

    def __init__(self, nc: NatsClient, names: ProjectNames, store: ContextStore) -> None:
        self._nc = nc
        self.names = names
        self.store = store

    # -- channels ---------------------------------------------------------------------------
    async def _stored(self, channel: str, seq: int, field_name: str) -> tuple[ChannelMessage, str | None]:
        """The channel message at ``seq`` and its sender's user id."""
        try:
            found = await direct_get_batch(
                self._nc, self.names.channel_stream(channel), start_seq=seq, batch=1
            )
        except (JetStreamReplyError, TimeoutError):
            found = []
        if not found or found[0].seq != seq:
            raise _not_found(field_name)
        try:
            message = ChannelMessage.model_validate_json(found[0].data)
        except ValidationError:
            raise _not_found(field_name) from None
        return message, found[0].headers.get(CHANNEL_HDR_USER)

    async def channel_reply(self, channel: str, reply_to: int, viewer: Viewer) -> ThreadLink:
        """The thread a reply to message ``reply_to`` of ``channel`` goes into, started
        (its root made from that message) when this is its first reply."""
        await self.store.ensure()
        target, user = await self._stored(channel, reply_to, "reply_to")
        if target.scope is not Scope.TEAM and target.scope is not Scope.PUBLIC:
            probe = ContextNode(
                tree_id="0" * 32, author=target.sender_id, author_user=user, scope=target.scope
            )
            if not readable(probe, agent_id=viewer.agent_id, user_id=viewer.user_id):
                raise _not_found("reply_to")
        parent = channel_node_id(channel, reply_to)
        if target.thread_id is not None:
            return ThreadLink(tree_id=target.thread_id, parent_id=parent)
        tree_id = channel_thread_id(channel, reply_to)
        meta = TreeMeta(
            kind="thread",
            title=" ".join(target.body.split())[:THREAD_TITLE_CHARS],
            ref={"channel": channel, "seq": str(reply_to)},
        )
        await self.store.create_tree(
            meta,
            author=target.sender_id,
            author_user=user,
            tree_id=tree_id,
            root_id=parent,
            kind="message",
            handle=channel_handle(channel, reply_to),
            text=target.body,
            scope=target.scope,
        )
        return ThreadLink(tree_id=tree_id, parent_id=parent)

    async def record_channel_message(
        self, link: ThreadLink, channel: str, seq: int, message: ChannelMessage, sender_user: str
    ) -> ContextNode:
        """Append a sent reply to its thread (a node derived from the message: idempotent)."""
        node = ContextNode(
            id=channel_node_id(channel, seq),
            tree_id=link.tree_id,
            parent_id=link.parent_id,
            kind="message",
            handle=channel_handle(channel, seq),
            author=message.sender_id,
            author_user=sender_user,
            scope=message.scope,
            at=message.sent_at,
            text=message.body,
            meta={"handle": message.sender_handle},
        )
        await self.store.publish(node)
        return node

    async def channel_thread(self, channel: str, seq: int) -> TreeState:
        """The thread message ``seq`` of ``channel`` belongs to (as root or reply)."""
        message, _ = await self._stored(channel, seq, "seq")
        tree_id = message.thread_id or channel_thread_id(channel, seq)
        state = await self.store.tree(tree_id)
        if not state.exists:
            raise ContextNotFound("this message has no replies (no thread)", field="seq")
        return state

    async def channel_threads(self, channel: str, *, limit: int = 50) -> list[ThreadSummary]:
        """The channel's threads, newest first, each with its reply count."""
        entries = (await self.store.entries(f"thread.{channel}.*"))[-limit:]
        out: list[ThreadSummary] = []
        for entry in reversed(entries):
            state = await self.store.tree(entry.tree_id)
            if not state.exists:
                continue
            newest = state.latest(state.order[-1])
            out.append(
                ThreadSummary(
                    tree_id=entry.tree_id,
                    channel=channel,
                    root_seq=int(entry.ref.get("seq", "0")),
                    title=entry.title,
                    replies=sum(1 for f in state.newest_first() if f != state.root),
                    last_at=newest.at,
                    started_by=entry.created_by,
                )
            )
        return out

    # -- direct messages ----------------------------------------------------------------------
    async def dm_reply(
        self, reply_to: str, *, sender: str, recipient: str, known: DirectMessage | None
    ) -> ThreadLink:
        """The thread a direct reply to message ``reply_to`` goes into. ``known`` is that
        message when the replier still has it (it read it); a thread's replies stay between
        its two participants."""
        await self.store.ensure()
        parent = dm_node_id(reply_to)
        if known is not None and known.thread_id is not None:
            tree_id = known.thread_id
            state = await self.store.tree(tree_id)
        else:
            tree_id = dm_thread_id(reply_to)
            state = await self.store.tree(tree_id)
            if not state.exists:
                if known is not None and recipient not in (known.sender_id, known.recipient_id):
                    raise ContextConflict(
                        "a reply goes to the other participant of the message it answers",
                        field="recipient_id",
                    )
                meta = TreeMeta(
                    kind="dm-thread",
                    title=" ".join((known.body if known else "").split())[:THREAD_TITLE_CHARS],
                    ref={"message_id": reply_to},
                    participants=sorted({sender, recipient}),
                )
                state, _, _ = await self.store.create_tree(
                    meta,
                    author=known.sender_id if known else recipient,
                    tree_id=tree_id,
                    root_id=parent,
                    kind="message",
                    handle=ContextHandle(source=HandleSource.DIRECT, id=reply_to),
                    text=known.body if known else None,
                    scope=Scope.TEAM,
                )
        if not state.exists or parent not in state.origin:
            raise ContextNotFound(
                "no direct message with this id in a thread you can answer", field="reply_to"
            )
        if not (may_read_tree(state.meta, sender) and may_read_tree(state.meta, recipient)):
            raise ContextConflict("a reply goes to the other participant of its thread", field="recipient_id")
        return ThreadLink(tree_id=tree_id, parent_id=parent)

    async def record_dm(self, link: ThreadLink, message: DirectMessage) -> ContextNode:
        node = ContextNode(
            id=dm_node_id(message.id),
            tree_id=link.tree_id,
            parent_id=link.parent_id,
            kind="message",
            handle=ContextHandle(source=HandleSource.DIRECT, id=message.id),
            author=message.sender_id,
            at=message.sent_at,
            text=message.body,
            meta={"handle": message.sender_handle, "recipient": message.recipient_id},
        )
        await self.store.publish(node)
        return node

    async def dm_thread(self, ref: str, viewer: Viewer) -> TreeState:
        """A direct-message thread by its id (a message's ``thread_id``) or by the id of
        the message that started it; only for its participants."""
        for tree_id in (ref, dm_thread_id(ref)):
            state = await self.store.tree(tree_id)
            if state.exists and may_read_tree(state.meta, viewer.agent_id):
                return state
            if state.exists and state.meta.kind != "dm-thread":
                break
        raise ContextNotFound("no direct-message thread you take part in has this id", field="thread_id")
