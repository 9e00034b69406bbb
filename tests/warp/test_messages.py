"""Direct messages on a real nats-server (warp.messages)."""

from __future__ import annotations

import pytest
from nats.aio.client import Client as NatsClient

from shared.names import InvalidNameError, ProjectNames
from shared.nats.client import connect
from shared.nats.server import EmbeddedNatsServer
from shared.paging import CursorError
from warp.errors import WarpError
from warp.messages import InboxFilter, InboxService

A = "a" * 32
B = "b" * 32
C = "c" * 32


def inbox(nc: NatsClient, project_id: str) -> InboxService:
    return InboxService(nc, nc.jetstream(), ProjectNames(project_id))


async def dm(svc: InboxService, body: str, *, sender: str = A, to: str = B, kind: str = "text") -> None:
    await svc.send(
        sender_id=sender, sender_handle=f"h-{sender[:2]}", recipient_id=to, body=body, message_type=kind
    )


def bodies(page: object) -> list[str]:
    return [m.message.body for m in page.messages]  # type: ignore[attr-defined]


async def test_read_returns_waiting_at_once_and_acks_exactly_that(nc: NatsClient, project_id: str) -> None:
    svc = inbox(nc, project_id)
    await dm(svc, "one")
    await dm(svc, "two")
    page = await svc.read(B)
    assert bodies(page) == ["one", "two"]
    assert page.has_more is False and page.next_cursor is None
    assert bodies(await svc.read(B)) == []
    assert await svc.waiting(B) == 0


async def test_offline_recipient_reads_later_from_another_connection(
    nats_server: EmbeddedNatsServer, nc: NatsClient, project_id: str
) -> None:
    await dm(inbox(nc, project_id), "while you were away")
    later = await connect(url=nats_server.url)
    try:
        svc = inbox(later, project_id)
        assert await svc.waiting(B) == 1
        assert bodies(await svc.read(B)) == ["while you were away"]
    finally:
        await later.close()


async def test_unread_messages_survive_a_reader_restart(
    nats_server: EmbeddedNatsServer, nc: NatsClient, project_id: str
) -> None:
    svc = inbox(nc, project_id)
    for i in range(3):
        await dm(svc, f"m{i}")
    first = await svc.read(B, limit=1)
    assert bodies(first) == ["m0"] and first.has_more and first.next_cursor
    restarted = await connect(url=nats_server.url)
    try:
        assert bodies(await inbox(restarted, project_id).read(B)) == ["m1", "m2"]
    finally:
        await restarted.close()


async def test_pages_with_the_cursor_it_returns(nc: NatsClient, project_id: str) -> None:
    svc = inbox(nc, project_id)
    for i in range(5):
        await dm(svc, f"m{i}")
    page = await svc.read(B, limit=2)
    got = bodies(page)
    while page.next_cursor:
        page = await svc.read(B, limit=2, cursor=page.next_cursor)
        got += bodies(page)
    assert got == [f"m{i}" for i in range(5)]


async def test_filters_leave_the_others_waiting(nc: NatsClient, project_id: str) -> None:
    svc = inbox(nc, project_id)
    await dm(svc, "from a 1", sender=A)
    await dm(svc, "from c", sender=C, kind="alert")
    await dm(svc, "from a 2", sender=A)
    await dm(svc, "from c 2", sender=C)
    only_c = await svc.read(B, filters=InboxFilter(sender=C))
    assert bodies(only_c) == ["from c", "from c 2"]
    assert only_c.skipped == 2
    alerts = await svc.read(B, filters=InboxFilter(message_type="alert"))
    assert bodies(alerts) == []
    rest = await svc.read(B)  # immediately: the filtered-out ones are already back
    assert bodies(rest) == ["from a 1", "from a 2"]


async def test_filtered_paging_keeps_its_filter(nc: NatsClient, project_id: str) -> None:
    svc = inbox(nc, project_id)
    for i in range(3):
        await dm(svc, f"a{i}", sender=A)
        await dm(svc, f"c{i}", sender=C)
    page = await svc.read(B, limit=2, filters=InboxFilter(sender=A))
    assert bodies(page) == ["a0", "a1"] and page.next_cursor
    nxt = await svc.read(B, limit=2, cursor=page.next_cursor)
    assert bodies(nxt) == ["a2"] and nxt.next_cursor is None
    with pytest.raises(WarpError, match="cursor: was issued for other filters"):
        await svc.read(B, cursor=page.next_cursor, filters=InboxFilter(sender=C))
    assert bodies(await svc.read(B)) == ["c0", "c1", "c2"]


async def test_peek_acknowledges_nothing(nc: NatsClient, project_id: str) -> None:
    svc = inbox(nc, project_id)
    for i in range(3):
        await dm(svc, f"p{i}")
    first = await svc.read(B, limit=2, peek=True)
    assert bodies(first) == ["p0", "p1"] and first.next_cursor
    second = await svc.read(B, limit=2, peek=True, cursor=first.next_cursor)
    assert bodies(second) == ["p2"] and second.next_cursor is None
    with pytest.raises(CursorError):
        await svc.read(B, cursor=first.next_cursor)  # a peek cursor is not a read cursor
    assert bodies(await svc.read(B)) == ["p0", "p1", "p2"]


async def test_bad_input(nc: NatsClient, project_id: str) -> None:
    svc = inbox(nc, project_id)
    with pytest.raises(InvalidNameError, match="recipient_id"):
        await dm(svc, "x", to="not-an-id")
    with pytest.raises(WarpError, match="limit: must be between 1 and 100"):
        await svc.read(B, limit=101)
    with pytest.raises(CursorError):
        await svc.read(B, cursor="%%%")


async def test_junk_in_an_inbox_is_dropped_not_fatal(nc: NatsClient, project_id: str) -> None:
    svc = inbox(nc, project_id)
    await svc.ensure_stream()
    names = ProjectNames(project_id)
    await nc.jetstream().publish(names.inbox_subject(B), b"not a message")
    await dm(svc, "real")
    assert bodies(await svc.read(B)) == ["real"]
    assert await svc.waiting(B) == 0


async def test_inboxes_are_per_agent_and_per_project(nc: NatsClient, project_id: str) -> None:
    svc = inbox(nc, project_id)
    await dm(svc, "for b", to=B)
    await dm(svc, "for c", to=C)
    assert bodies(await svc.read(C)) == ["for c"]
    other = inbox(nc, f"{project_id}-other")
    assert bodies(await other.read(B)) == []
    assert bodies(await svc.read(B)) == ["for b"]


async def test_a_message_is_readable_right_after_its_send_returns(nc: NatsClient, project_id: str) -> None:
    """A no-wait pull can miss a message stored microseconds earlier; the read must not."""
    sender = inbox(nc, project_id)
    reader = inbox(nc, project_id)
    for i in range(400):
        await dm(sender, f"n{i}")
        assert bodies(await reader.read(B)) == [f"n{i}"]


async def test_paging_after_a_filtered_read_still_says_more_is_waiting(
    nc: NatsClient, project_id: str
) -> None:
    svc = inbox(nc, project_id)
    for n in range(3):
        await dm(svc, f"status {n}")
    await dm(svc, "review", kind="review")
    review = await svc.read(B, filters=InboxFilter(message_type="review"))
    assert bodies(review) == ["review"] and review.skipped == 3
    page = await svc.read(B, limit=2)  # the three were handed back: redeliveries, not "pending"
    assert bodies(page) == ["status 0", "status 1"]
    assert page.has_more is True and page.next_cursor
    last = await svc.read(B, limit=2, cursor=page.next_cursor)
    assert bodies(last) == ["status 2"] and last.has_more is False and last.next_cursor is None
