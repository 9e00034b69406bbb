"""Agent registry (shared.agents.registry) against a real nats-server."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
from nats.aio.client import Client as NatsClient

from shared.agents.registry import AgentFilter, AgentNotFound, Registry, RegistryError
from shared.models import AgentEntry, AgentStatus, Scope, utcnow
from shared.names import ProjectNames

# Random users: personal and public entries are visible across projects by design,
# so fixed ids would leak this module's agents into other tests on the same server.
USER_1 = uuid.uuid4().hex[:16]
USER_2 = uuid.uuid4().hex[:16]


def entry(agent_id: str, project_id: str, **kw: object) -> AgentEntry:
    data: dict[str, object] = {
        "agent_id": agent_id,
        "handle": f"h-{agent_id[:4]}",
        "project_id": project_id,
        "user_id": USER_1,
        "hostname": "box.internal",
        "capabilities": ["code"],
    }
    data.update(kw)
    return AgentEntry.model_validate(data)


async def test_put_get_list_and_remove(nc: NatsClient, project_id: str) -> None:
    reg = Registry(nc.jetstream(), ProjectNames(project_id))
    await reg.put(entry("a" * 32, project_id))
    await reg.put(entry("b" * 32, project_id, capabilities=["review"]))
    assert (await reg.get("a" * 32)).capabilities == ["code"]
    assert sorted(e.agent_id for e in await reg.list_project()) == ["a" * 32, "b" * 32]
    await reg.remove("a" * 32)
    with pytest.raises(AgentNotFound, match="agent_id"):
        await reg.get("a" * 32)
    with pytest.raises(AgentNotFound):
        await reg.remove("a" * 32)


async def test_concurrent_updates_never_clobber(nc: NatsClient, project_id: str) -> None:
    reg = Registry(nc.jetstream(), ProjectNames(project_id))
    await reg.put(entry("a" * 32, project_id, max_concurrent_tasks=100))

    def bump(e: AgentEntry) -> AgentEntry:
        e.current_tasks += 1
        return e

    await asyncio.gather(*(reg.update("a" * 32, bump) for _ in range(25)), reg.heartbeat("a" * 32))
    assert (await reg.get("a" * 32)).current_tasks == 25


async def test_stale_entry_shows_offline_and_filters_apply(nc: NatsClient, project_id: str) -> None:
    reg = Registry(nc.jetstream(), ProjectNames(project_id))
    old = utcnow() - timedelta(seconds=31)
    await reg.put(entry("a" * 32, project_id, heartbeat_interval_s=10, last_heartbeat=old))
    await reg.put(entry("b" * 32, project_id, agent_type="copilot", boundaries=["corporate"]))
    found = await reg.discover(viewer_agent_id="c" * 32, viewer_user_id=USER_1)
    status = {e.agent_id: s for e, s in found}
    assert status == {"a" * 32: AgentStatus.OFFLINE, "b" * 32: AgentStatus.ONLINE}
    online = await reg.discover(
        viewer_agent_id="c" * 32, viewer_user_id=USER_1, filters=AgentFilter(status=AgentStatus.ONLINE)
    )
    assert [e.agent_id for e, _ in online] == ["b" * 32]
    typed = await reg.discover(
        viewer_agent_id="c" * 32,
        viewer_user_id=USER_1,
        filters=AgentFilter(agent_type="copilot", boundary="corporate", capability="code"),
    )
    assert [e.agent_id for e, _ in typed] == ["b" * 32]
    none = await reg.discover(
        viewer_agent_id="c" * 32, viewer_user_id=USER_1, filters=AgentFilter(capability="deploy")
    )
    assert none == []


async def test_scopes_across_projects_and_redaction(nc: NatsClient, project_id: str) -> None:
    other = project_id + "-b"
    reg_a = Registry(nc.jetstream(), ProjectNames(project_id))
    reg_b = Registry(nc.jetstream(), ProjectNames(other))
    await reg_a.put(entry("a" * 32, project_id, scope=Scope.TEAM))
    await reg_a.put(entry("b" * 32, project_id, scope=Scope.PRIVATE))
    await reg_a.put(entry("c" * 32, project_id, scope=Scope.PERSONAL))
    await reg_a.put(entry("d" * 32, project_id, scope=Scope.PUBLIC, metadata={"k": "v"}))
    # Same project, another agent of the same user: team, personal, public; not private.
    same = {e.agent_id for e, _ in await reg_a.discover(viewer_agent_id="e" * 32, viewer_user_id=USER_1)}
    assert same == {"a" * 32, "c" * 32, "d" * 32}
    # The private agent sees itself.
    own = {e.agent_id for e, _ in await reg_a.discover(viewer_agent_id="b" * 32, viewer_user_id=USER_1)}
    assert "b" * 32 in own
    # Other project, same user: personal and public.
    mine = {e.agent_id for e, _ in await reg_b.discover(viewer_agent_id="f" * 32, viewer_user_id=USER_1)}
    assert {"c" * 32, "d" * 32} <= mine and not {"a" * 32, "b" * 32} & mine
    # Other project, other user: public only, without host or metadata.
    theirs = {e.agent_id: e for e, _ in await reg_b.discover(viewer_agent_id="f" * 32, viewer_user_id=USER_2)}
    assert "d" * 32 in theirs and not {"a" * 32, "b" * 32, "c" * 32} & set(theirs)
    assert theirs["d" * 32].hostname == "" and theirs["d" * 32].metadata == {}
    # Narrowing the scope removes the global mirror.
    await reg_a.update("d" * 32, lambda e: e.model_copy(update={"scope": Scope.TEAM}))
    later = {e.agent_id for e, _ in await reg_b.discover(viewer_agent_id="f" * 32, viewer_user_id=USER_2)}
    assert "d" * 32 not in later


async def test_writes_to_foreign_project_refused(nc: NatsClient, project_id: str) -> None:
    reg = Registry(nc.jetstream(), ProjectNames(project_id))
    with pytest.raises(RegistryError, match="project_id"):
        await reg.put(entry("a" * 32, project_id + "-x"))
    with pytest.raises(AgentNotFound):
        await reg.update("a" * 32, lambda e: e)
    with pytest.raises(ValueError, match="agent_id"):
        await reg.get("not-an-id")
