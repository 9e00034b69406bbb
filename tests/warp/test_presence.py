"""Registry entry and heartbeat of one agent (warp.presence)."""

from __future__ import annotations

from pathlib import Path

import pytest
from nats.aio.client import Client as NatsClient
from warp_harness import eventually, make_identity

from shared.agents.registry import AgentFilter, Registry
from shared.models import AgentStatus
from shared.names import ProjectNames
from warp.errors import WarpError
from warp.presence import Presence
from warp.settings import WarpSettings

A = "a" * 32


def presence(nc: NatsClient, project_id: str, tmp_path: Path, **settings: object) -> Presence:
    names = ProjectNames(project_id)
    js = nc.jetstream()
    ident = make_identity(project_id, tmp_path, A)
    s = WarpSettings(capabilities=("code",), heartbeat_s=0.2).model_copy(update=settings)
    return Presence(Registry(js, names), js, names, ident, s, handle=lambda: "alpha")


async def test_register_records_environment_and_starts_heartbeat(
    nc: NatsClient, project_id: str, tmp_path: Path
) -> None:
    p = presence(nc, project_id, tmp_path, target_id="t1", spinup_id="s1", work_id="w" * 32)
    entry = await p.register(p.defaults())
    try:
        stored = await p.registry.get(A)
        assert stored.handle == "alpha" and stored.capabilities == ["code"]
        assert (stored.target_id, stored.spinup_id) == ("t1", "s1")
        assert stored.metadata["work_id"] == "w" * 32
        assert stored.heartbeat_interval_s == 0.2 and stored.hostname == "test-host"
        first = entry.last_heartbeat

        async def beaten() -> bool:
            return (await p.registry.get(A)).last_heartbeat > first

        await eventually(beaten)
    finally:
        await p.deregister()


async def test_quick_task_changes_cost_one_registry_write(
    nc: NatsClient, project_id: str, tmp_path: Path
) -> None:
    p = presence(nc, project_id, tmp_path, heartbeat_s=60.0, max_concurrent_tasks=5)
    await p.register(p.defaults())
    kv = await nc.jetstream().key_value(ProjectNames(project_id).registry_bucket)
    try:
        before = int((await kv.get(A)).revision or 0)
        p.tasks_changed(claimed="w1")
        p.tasks_changed(released="w1")
        p.tasks_changed(claimed="w2")
        await p.flush()
        after = await kv.get(A)
        assert int(after.revision or 0) == before + 1  # a claim, its completion and the next claim: one write
        assert (await p.registry.get(A)).current_tasks == 1
        p.tasks_changed(released="w2")  # nobody flushes: the background write happens all the same

        async def written() -> bool:
            return (await p.registry.get(A)).current_tasks == 0

        await eventually(written)
    finally:
        await p.deregister()


async def test_an_item_claimed_and_released_at_once_costs_no_registry_write(
    nc: NatsClient, project_id: str, tmp_path: Path
) -> None:
    p = presence(nc, project_id, tmp_path, heartbeat_s=60.0)
    await p.register(p.defaults())
    kv = await nc.jetstream().key_value(ProjectNames(project_id).registry_bucket)
    try:
        before = int((await kv.get(A)).revision or 0)
        p.tasks_changed(claimed="w1")  # busy (one task at most) and straight back to online
        p.tasks_changed(released="w1")
        await p.flush()
        assert int((await kv.get(A)).revision or 0) == before  # the count came back: nothing to write
        p.tasks_changed(claimed="w2")
        await p.flush()  # the settle is cut short: the count is there now
        stored = await p.registry.get(A)
        assert (stored.current_tasks, stored.status) == (1, AgentStatus.BUSY)
        assert int((await kv.get(A)).revision or 0) == before + 1
    finally:
        await p.deregister()


async def test_task_count_and_busy_follow_claims(nc: NatsClient, project_id: str, tmp_path: Path) -> None:
    p = presence(nc, project_id, tmp_path, max_concurrent_tasks=2)
    await p.register(p.defaults())
    try:
        p.tasks_changed(claimed="w1")
        await p.flush()
        stored = await p.registry.get(A)
        assert (stored.current_tasks, stored.status) == (1, AgentStatus.ONLINE)
        p.tasks_changed(claimed="w2")
        await p.flush()
        stored = await p.registry.get(A)
        assert (stored.current_tasks, stored.status) == (2, AgentStatus.BUSY)
        p.tasks_changed(released="w1")
        await p.flush()
        stored = await p.registry.get(A)
        assert (stored.current_tasks, stored.status) == (1, AgentStatus.ONLINE)
    finally:
        await p.deregister()


async def test_presence_update_and_deregister(nc: NatsClient, project_id: str, tmp_path: Path) -> None:
    p = presence(nc, project_id, tmp_path)
    with pytest.raises(WarpError, match="registration: this agent is not registered"):
        await p.update_presence(AgentStatus.BUSY, None)
    await p.register(p.defaults())
    entry = await p.update_presence(AgentStatus.BUSY, "deep in a refactor")
    assert entry.status is AgentStatus.BUSY and entry.metadata["status_note"] == "deep in a refactor"
    with pytest.raises(WarpError, match="status: use warp_registry_deregister"):
        await p.update_presence(AgentStatus.OFFLINE, None)
    cleared = await p.update_presence(None, "")
    assert cleared.status is AgentStatus.ONLINE and "status_note" not in cleared.metadata
    renamed = await p.set_handle("beta")
    assert renamed is not None and renamed.handle == "beta"
    gone = await p.deregister("test over")
    assert gone is not None and gone.status is AgentStatus.OFFLINE
    assert (await p.registry.get(A)).metadata["offline_reason"] == "test over"
    assert await p.deregister() is None


async def test_heartbeat_recreates_a_vanished_entry(nc: NatsClient, project_id: str, tmp_path: Path) -> None:
    p = presence(nc, project_id, tmp_path)
    await p.register(p.defaults())
    try:
        await p.registry.remove(A)

        async def back() -> bool:
            found = await p.registry.discover(viewer_agent_id=A, viewer_user_id="1" * 16)
            return any(e.agent_id == A for e, _ in found)

        await eventually(back)
    finally:
        await p.deregister()


async def test_stopped_heartbeat_shows_offline_to_others(
    nc: NatsClient, project_id: str, tmp_path: Path
) -> None:
    p = presence(nc, project_id, tmp_path, heartbeat_s=0.1)
    await p.register(p.defaults())
    p.stop_heartbeat()  # as if the process died: nobody marks it offline

    async def offline() -> bool:
        found = await p.registry.discover(
            viewer_agent_id="b" * 32, viewer_user_id="2" * 16, filters=AgentFilter(status=AgentStatus.OFFLINE)
        )
        return [e.agent_id for e, _ in found] == [A]

    await eventually(offline)
    assert (
        await p.registry.get(A)
    ).status is AgentStatus.ONLINE  # stored status unchanged; effective offline
