"""shared.channels: the one reader of channel streams, an agent's view and the operator's,
on a real nats-server."""

from __future__ import annotations

import pytest
from nats.aio.client import Client as NatsClient
from nats.js.api import StreamConfig

from shared.channels import ChannelReader, Viewer, visible
from shared.models import CHANNEL_HDR_SCOPE, CHANNEL_HDR_SENDER, CHANNEL_HDR_USER, ChannelMessage, Scope
from shared.names import ProjectNames
from shared.paging import CursorError

A, B = "a" * 32, "b" * 32
USER_A, USER_B = "1" * 16, "2" * 16


async def _channel(nc: NatsClient, names: ProjectNames, channel: str) -> None:
    await nc.jetstream().add_stream(
        StreamConfig(
            name=names.channel_stream(channel), subjects=[names.channel_subject(channel)], allow_direct=True
        )
    )


async def _send(nc: NatsClient, names: ProjectNames, body: str, sender: str, user: str, scope: Scope) -> None:
    message = ChannelMessage(channel="ops", sender_id=sender, sender_handle="h", body=body, scope=scope)
    headers = {CHANNEL_HDR_SCOPE: scope.value, CHANNEL_HDR_SENDER: sender, CHANNEL_HDR_USER: user}
    await nc.jetstream().publish(names.channel_subject("ops"), message.to_json_bytes(), headers=headers)


async def test_an_agent_sees_its_scopes_and_the_operator_sees_everything(
    nc: NatsClient, project_id: str
) -> None:
    names = ProjectNames(project_id)
    await _channel(nc, names, "ops")
    await _send(nc, names, "team note", A, USER_A, Scope.TEAM)
    await _send(nc, names, "a's own", A, USER_A, Scope.PRIVATE)
    await _send(nc, names, "a's user", A, USER_A, Scope.PERSONAL)
    await nc.jetstream().publish(names.channel_subject("ops"), b"not a Loom message")
    reader = ChannelReader(nc, names)

    as_b = await reader.read_as(Viewer(B, USER_B), "ops", limit=10, from_beginning=True)
    assert [m.message.body for m in as_b.messages] == ["team note"] and as_b.hidden == 3
    as_a = await reader.read_as(Viewer(A, USER_A), "ops", limit=10)
    assert [m.message.body for m in as_a.messages] == ["team note", "a's own", "a's user"]
    assert as_a.hidden == 1 and not as_a.has_more

    bounds = await reader.bounds("ops")
    everything = await reader.read_all("ops", bounds, limit=10)
    assert [m.seq for m in everything.messages] == [1, 2, 3, 4]
    assert everything.messages[3].message is None and everything.messages[3].raw == "not a Loom message"
    assert everything.next_cursor == as_a.next_cursor  # the same cursor: the next sequence, 5


async def test_pages_resume_from_a_cursor_and_refuse_another_channels(
    nc: NatsClient, project_id: str
) -> None:
    names = ProjectNames(project_id)
    await _channel(nc, names, "ops")
    await _channel(nc, names, "empty")
    for n in range(5):
        await _send(nc, names, f"m{n}", A, USER_A, Scope.TEAM)
    reader = ChannelReader(nc, names)

    first = await reader.read_all("ops", await reader.bounds("ops"), limit=2, from_beginning=True)
    assert [m.seq for m in first.messages] == [1, 2] and first.has_more
    rest = await reader.read_as(Viewer(B, USER_B), "ops", limit=10, cursor=first.next_cursor)
    assert [m.seq for m in rest.messages] == [3, 4, 5] and rest.skipped_expired == 0
    with pytest.raises(CursorError):
        await reader.read_as(Viewer(B, USER_B), "empty", limit=10, cursor=first.next_cursor)

    empty = await reader.read_all("empty", await reader.bounds("empty"), limit=10)
    assert empty.messages == [] and not empty.has_more
    assert empty.follow_cursor == (await reader.read_as(Viewer(A, USER_A), "empty", limit=10)).next_cursor


def test_visibility_reads_the_scope_and_sender_headers() -> None:
    me = Viewer(A, USER_A)
    assert visible({}, me)  # no scope header: team
    assert visible({CHANNEL_HDR_SCOPE: "private", CHANNEL_HDR_SENDER: A}, me)
    assert not visible({CHANNEL_HDR_SCOPE: "private", CHANNEL_HDR_SENDER: B}, me)
    assert not visible({CHANNEL_HDR_SCOPE: "private"}, me)
    assert visible({CHANNEL_HDR_SCOPE: "personal", CHANNEL_HDR_USER: USER_A}, me)
    assert not visible({CHANNEL_HDR_SCOPE: "personal", CHANNEL_HDR_USER: USER_B}, me)
    assert visible({CHANNEL_HDR_SCOPE: "public", CHANNEL_HDR_SENDER: B}, me)
