"""Channels on a real nats-server (warp.channels)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from nats.aio.client import Client as NatsClient

from shared.channels import Viewer
from shared.models import Scope
from shared.names import InvalidNameError, ProjectNames
from shared.paging import CursorError
from warp.channels import ChannelService
from warp.config import ConfigError, ConfigLoader
from warp.errors import NotFound, WarpError

A = "a" * 32
B = "b" * 32
C = "c" * 32
USER_1 = "1" * 16
USER_2 = "2" * 16
ME = Viewer(agent_id=A, user_id=USER_1)


def service(nc: NatsClient, project_id: str, project_dir: Path) -> ChannelService:
    home = project_dir.parent / "home"
    home.mkdir(exist_ok=True)
    return ChannelService(nc, nc.jetstream(), ProjectNames(project_id), ConfigLoader(project_dir, home))


async def send(svc: ChannelService, channel: str, body: str, sender: str = A, **kw: object) -> int:
    sent = await svc.send(
        channel,
        body,
        sender_id=sender,
        sender_handle=f"h-{sender[:2]}",
        sender_user=USER_1,
        **kw,  # type: ignore[arg-type]
    )
    return sent.seq


def configure(project_dir: Path, channels: dict[str, dict[str, object]]) -> None:
    (project_dir / ".loom").mkdir(exist_ok=True)
    (project_dir / ".loom" / "config.json").write_text(json.dumps({"channels": channels}))


async def test_send_and_read_latest_then_only_newer(
    nc: NatsClient, project_id: str, project_dir: Path
) -> None:
    svc = service(nc, project_id, project_dir)
    for i in range(5):
        await send(svc, "roadmap", f"m{i}")
    page = await svc.read("roadmap", ME, limit=3)
    assert [m.message.body for m in page.messages] == ["m2", "m3", "m4"]
    assert [m.seq for m in page.messages] == [3, 4, 5]
    assert page.has_more is False
    again = await svc.read("roadmap", ME, limit=3, cursor=page.next_cursor)
    assert again.messages == []
    await send(svc, "roadmap", "m5")
    newer = await svc.read("roadmap", ME, limit=3, cursor=page.next_cursor)
    assert [m.message.body for m in newer.messages] == ["m5"]


async def test_pages_forward_from_the_beginning(nc: NatsClient, project_id: str, project_dir: Path) -> None:
    svc = service(nc, project_id, project_dir)
    for i in range(7):
        await send(svc, "errors", f"e{i}")
    seen: list[str] = []
    page = await svc.read("errors", ME, limit=3, from_beginning=True)
    seen += [m.message.body for m in page.messages]
    while page.has_more:
        page = await svc.read("errors", ME, limit=3, cursor=page.next_cursor)
        seen += [m.message.body for m in page.messages]
    assert seen == [f"e{i}" for i in range(7)]


async def test_empty_channel_reads_empty(nc: NatsClient, project_id: str, project_dir: Path) -> None:
    svc = service(nc, project_id, project_dir)
    page = await svc.read("parallel-work", ME)
    assert page.messages == [] and page.has_more is False
    await send(svc, "parallel-work", "first")
    later = await svc.read("parallel-work", ME, cursor=page.next_cursor)
    assert [m.message.body for m in later.messages] == ["first"]


async def test_cursor_stays_right_when_messages_expire(
    nc: NatsClient, project_id: str, project_dir: Path
) -> None:
    configure(project_dir, {"tiny": {"max_messages": 3}})
    svc = service(nc, project_id, project_dir)
    await send(svc, "tiny", "t0")
    page = await svc.read("tiny", ME)
    assert [m.message.body for m in page.messages] == ["t0"]
    for i in range(1, 6):
        await send(svc, "tiny", f"t{i}")  # t0..t2 are pushed out by the 3-message limit
    after = await svc.read("tiny", ME, cursor=page.next_cursor)
    assert [m.message.body for m in after.messages] == ["t3", "t4", "t5"]
    assert after.skipped_expired == 2  # t1 and t2 expired unread; t0 had been read
    assert (await svc.read("tiny", ME, cursor=after.next_cursor)).messages == []


async def test_limits_applied_and_updated_when_config_changes(
    nc: NatsClient, project_id: str, project_dir: Path
) -> None:
    configure(project_dir, {"ops": {"max_messages": 50, "max_bytes": 100_000, "max_age_s": 3600}})
    svc = service(nc, project_id, project_dir)
    await send(svc, "ops", "hello")
    names = ProjectNames(project_id)
    info = await nc.jetstream().stream_info(names.channel_stream("ops"))
    assert (info.config.max_msgs, info.config.max_bytes, info.config.max_age) == (50, 100_000, 3600)
    configure(project_dir, {"ops": {"max_messages": 2, "max_bytes": 50_000, "max_age_s": 0}})
    for i in range(3):
        await send(svc, "ops", f"x{i}")
    info = await nc.jetstream().stream_info(names.channel_stream("ops"))
    assert (info.config.max_msgs, info.config.max_bytes) == (2, 50_000)
    assert info.state.messages == 2
    statuses = await svc.status("ops")
    assert statuses[0].spec.max_messages == 2 and statuses[0].messages == 2
    assert statuses[0].last_message_at is not None


async def test_status_lists_every_configured_channel(
    nc: NatsClient, project_id: str, project_dir: Path
) -> None:
    configure(project_dir, {"deploys": {"description": "deploy log"}})
    svc = service(nc, project_id, project_dir)
    await send(svc, "deploys", "v1 out")
    statuses = {s.name: s for s in await svc.status()}
    assert set(statuses) == {"roadmap", "parallel-work", "errors", "deploys"}
    assert statuses["deploys"].messages == 1 and statuses["deploys"].spec.description == "deploy log"
    assert statuses["roadmap"].messages == 0


async def test_scope_private_and_personal(nc: NatsClient, project_id: str, project_dir: Path) -> None:
    svc = service(nc, project_id, project_dir)
    await svc.send(
        "roadmap", "mine only", sender_id=A, sender_handle="a", sender_user=USER_1, scope=Scope.PRIVATE
    )
    await svc.send(
        "roadmap", "my user", sender_id=A, sender_handle="a", sender_user=USER_1, scope=Scope.PERSONAL
    )
    await svc.send("roadmap", "everyone", sender_id=A, sender_handle="a", sender_user=USER_1)
    as_a = await svc.read("roadmap", ME)
    same_user = await svc.read("roadmap", Viewer(agent_id=B, user_id=USER_1))
    other_user = await svc.read("roadmap", Viewer(agent_id=C, user_id=USER_2))
    assert [m.message.body for m in as_a.messages] == ["mine only", "my user", "everyone"]
    assert [m.message.body for m in same_user.messages] == ["my user", "everyone"]
    assert same_user.hidden == 1
    assert [m.message.body for m in other_user.messages] == ["everyone"]
    assert other_user.hidden == 2


async def test_errors_name_the_field(nc: NatsClient, project_id: str, project_dir: Path) -> None:
    svc = service(nc, project_id, project_dir)
    with pytest.raises(NotFound, match=r"^channel: not a configured channel"):
        await send(svc, "nope", "x")
    with pytest.raises(InvalidNameError, match="channel"):
        await send(svc, "Bad!", "x")
    with pytest.raises(WarpError, match="limit: must be between 1 and 200"):
        await svc.read("roadmap", ME, limit=0)
    with pytest.raises(CursorError, match="cursor"):
        await svc.read("roadmap", ME, cursor="garbage!")
    other = await svc.read("errors", ME)
    with pytest.raises(CursorError):
        await svc.read("roadmap", ME, cursor=other.next_cursor)
    configure(project_dir, {"ops": {"max_messages": "many"}})
    with pytest.raises(ConfigError, match=r"channels\.ops\.max_messages"):
        await send(svc, "roadmap", "x")


async def test_projects_do_not_see_each_other(nc: NatsClient, project_id: str, project_dir: Path) -> None:
    one = service(nc, project_id, project_dir)
    two = service(nc, f"{project_id}-two", project_dir)
    await send(one, "roadmap", "secret plan")
    assert (await two.read("roadmap", ME, from_beginning=True)).messages == []
    assert all(s.messages == 0 for s in await two.status())
