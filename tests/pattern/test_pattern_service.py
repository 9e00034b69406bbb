"""MemoryService over a real nats-server: storage, scopes, access rules, limits."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from nats.aio.client import Client as NatsClient
from pattern_helpers import eventually, make_identity, new_user_id, sub_identity

from pattern.buckets import MAX_VALUE_BYTES, ensure_bucket
from pattern.config import PatternConfig, PatternLimits, SecretScanMode
from pattern.errors import (
    AccessDeniedError,
    InvalidInputError,
    LimitExceededError,
    NotFoundError,
    ProtectedMemoryError,
    SecretBlockedError,
    UnavailableError,
)
from pattern.inputs import (
    BulkMemory,
    CleanupInput,
    CommitInsightInput,
    CoreMemoryInput,
    ForgetBulkInput,
    ForgetInput,
    RecallInput,
    RememberBulkInput,
    RememberInput,
    RememberLearningInput,
    RememberTaskInput,
    ShareLearningInput,
)
from pattern.keys import memory_key
from pattern.models import Category, MemoryRecord, Scope
from pattern.service import MemoryService
from shared.names import kv_stream, kv_subject


def ids(result: object) -> set[str]:
    return {m.id for m in result.memories}  # type: ignore[attr-defined]


async def test_remember_then_recall(make_service, project_id: str, project_path: Path) -> None:
    a = await make_service(make_identity(project_id, project_path))
    res = await a.remember(
        RememberInput(content="Use ruff for linting", tags=["Tooling", "lint"], priority=7)
    )
    m = res.memory
    assert m.scope is Scope.PRIVATE and m.category is Category.RECENT and m.own
    assert m.tags == ["tooling", "lint"]
    assert m.expires_at is not None
    assert timedelta(hours=23, minutes=59) < m.expires_at - m.created_at <= timedelta(hours=24)
    assert res.warnings == []
    got = await a.recall_context(RecallInput())
    assert [x.id for x in got.memories] == [m.id]
    assert got.memories[0].content == "Use ruff for linting"
    assert got.counts.visible == 1 and got.counts.returned == 1 and not got.counts.has_more
    assert m.id in got.summary


async def test_categories_expire_or_not(make_service, project_id: str, project_path: Path) -> None:
    a = await make_service(make_identity(project_id, project_path))
    task = (await a.remember_task(RememberTaskInput(content="finish the parser"))).memory
    learning = (await a.remember_learning(RememberLearningInput(content="pytest -x stops early"))).memory
    core = (await a.core_memory(CoreMemoryInput(content="I am the build agent"))).memory
    assert task.category is Category.TASKS and task.expires_at is not None
    assert learning.category is Category.LEARNINGS and learning.expires_at is None
    assert core.category is Category.CORE and core.expires_at is None and core.priority == 8


async def test_private_memory_invisible_to_other_agent(
    make_service, project_id: str, project_path: Path
) -> None:
    user = new_user_id()
    a = await make_service(make_identity(project_id, project_path, user_id=user))
    b = await make_service(make_identity(project_id, project_path, user_id=user))
    secret = (await a.remember(RememberInput(content="A's private note"))).memory
    longterm = (await a.remember(RememberInput(content="A's plan", category=Category.LONGTERM))).memory
    got = await b.recall_context(RecallInput(search="A's"))
    assert got.memories == []
    assert got.counts.visible == 0
    for memory_id in (secret.id, longterm.id):
        with pytest.raises(NotFoundError) as err:
            await b.forget(ForgetInput(memory_id=memory_id))
        assert str(err.value).startswith("memory_id:")
    # A still has both.
    assert ids(await a.recall_context(RecallInput())) == {secret.id, longterm.id}


async def test_team_memory_visible_but_only_creator_forgets(
    make_service, project_id: str, project_path: Path
) -> None:
    a = await make_service(make_identity(project_id, project_path))
    b = await make_service(make_identity(project_id, project_path))
    team = (
        await a.remember(
            RememberInput(content="We deploy on Fridays", category=Category.DECISIONS, scope=Scope.TEAM)
        )
    ).memory
    seen = await eventually(lambda: ids_or_none(b, team.id))
    assert seen
    got = await b.recall_context(RecallInput(scopes=[Scope.TEAM]))
    assert got.memories[0].own is False and got.memories[0].agent_id == a.agent_id
    with pytest.raises(AccessDeniedError) as err:
        await b.forget(ForgetInput(memory_id=team.id))
    assert "only its creator" in str(err.value) and str(err.value).startswith("memory_id:")
    await a.forget(ForgetInput(memory_id=team.id))
    await eventually(lambda: not b.index.get(team.id))


async def ids_or_none(service: MemoryService, memory_id: str) -> bool:
    return memory_id in ids(await service.recall_context(RecallInput()))


async def test_team_memory_not_visible_in_other_project(make_service, project_path: Path) -> None:
    a = await make_service(make_identity("t-proj-a-" + new_user_id(), project_path))
    b = await make_service(make_identity("t-proj-b-" + new_user_id(), project_path))
    team = (await a.remember(RememberInput(content="project A only", scope=Scope.TEAM))).memory
    assert team.id in ids(await a.recall_context(RecallInput()))
    assert team.id not in ids(await b.recall_context(RecallInput()))


async def test_personal_memory_follows_user_across_projects(make_service, project_path: Path) -> None:
    user = new_user_id()
    agent = make_identity("t-home-" + new_user_id(), project_path, user_id=user)
    a = await make_service(agent)
    personal = (
        await a.remember(
            RememberInput(content="prefers tabs", category=Category.LONGTERM, scope=Scope.PERSONAL)
        )
    ).memory
    # The same agent in another project (same LOOM_AGENT_ID), and another agent of the same user.
    elsewhere = await make_service(
        make_identity("t-away-" + new_user_id(), project_path, agent_id=agent.agent_id, user_id=user)
    )
    other_agent = await make_service(make_identity("t-away2-" + new_user_id(), project_path, user_id=user))
    stranger = await make_service(make_identity("t-away3-" + new_user_id(), project_path))
    assert personal.id in ids(await elsewhere.recall_context(RecallInput()))
    assert personal.id in ids(await other_agent.recall_context(RecallInput(scopes=[Scope.PERSONAL])))
    assert personal.id not in ids(await stranger.recall_context(RecallInput()))
    # The same agent may forget it from the other project.
    await elsewhere.forget(ForgetInput(memory_id=personal.id))
    await eventually(lambda: not a.index.get(personal.id))


async def test_subagent_reads_parent_private_but_not_core(
    make_service, project_id: str, project_path: Path
) -> None:
    parent_identity = make_identity(project_id, project_path)
    parent = await make_service(parent_identity)
    note = (await parent.remember(RememberInput(content="parent's working note"))).memory
    core = (await parent.core_memory(CoreMemoryInput(content="parent's identity"))).memory
    personal_core = (
        await parent.core_memory(CoreMemoryInput(content="parent personal core", scope="personal"))
    ).memory
    child = await make_service(sub_identity(parent_identity))
    assert child.identity.parent_id == parent.agent_id
    got = await child.recall_context(RecallInput())
    assert note.id in ids(got)
    assert core.id not in ids(got) and personal_core.id not in ids(got)
    assert got.counts.by_category.get("core", 0) == 0
    # Read-only: the sub-agent cannot forget or commit its parent's memory.
    with pytest.raises(AccessDeniedError) as err:
        await child.forget(ForgetInput(memory_id=note.id))
    assert "parent" in str(err.value)
    with pytest.raises(NotFoundError):
        await child.forget(ForgetInput(memory_id=core.id, force=True))
    with pytest.raises(AccessDeniedError):
        await child.commit_insight(CommitInsightInput(memory_id=note.id))
    # The sub-agent's own core memory is its own.
    own = (await child.core_memory(CoreMemoryInput(content="child core"))).memory
    assert own.id in ids(await child.recall_context(RecallInput(categories=[Category.CORE])))
    # Another agent does not see the parent's private memories at all.
    stranger = await make_service(make_identity(project_id, project_path))
    assert note.id not in ids(await stranger.recall_context(RecallInput()))


async def test_forget_core_needs_force(make_service, project_id: str, project_path: Path) -> None:
    a = await make_service(make_identity(project_id, project_path))
    core = (await a.core_memory(CoreMemoryInput(content="never delete me lightly"))).memory
    with pytest.raises(ProtectedMemoryError) as err:
        await a.forget(ForgetInput(memory_id=core.id))
    assert str(err.value).startswith("force:")
    assert core.id in ids(await a.recall_context(RecallInput()))
    result = await a.forget(ForgetInput(memory_id=core.id, force=True))
    assert result.forgotten and result.category is Category.CORE
    assert core.id not in ids(await a.recall_context(RecallInput()))


async def test_core_cap(make_service, project_id: str, project_path: Path, tmp_path: Path) -> None:
    cfg = PatternConfig(limits=PatternLimits(max_core_per_agent=3), export_dir=tmp_path)
    a = await make_service(make_identity(project_id, project_path), cfg)
    for i in range(3):
        await a.core_memory(CoreMemoryInput(content=f"core {i}"))
    with pytest.raises(LimitExceededError) as err:
        await a.core_memory(CoreMemoryInput(content="one too many"))
    assert "limit is 3" in str(err.value)
    # Non-core memories are still accepted.
    await a.remember(RememberInput(content="fine"))


async def test_per_agent_and_team_limits(
    make_service, project_id: str, project_path: Path, tmp_path: Path
) -> None:
    cfg = PatternConfig(limits=PatternLimits(max_per_agent=3, max_shared_per_project=2), export_dir=tmp_path)
    a = await make_service(make_identity(project_id, project_path), cfg)
    b = await make_service(make_identity(project_id, project_path), cfg)
    await a.remember(RememberInput(content="t1", scope=Scope.TEAM))
    await b.remember(RememberInput(content="t2", scope=Scope.TEAM))
    await eventually(lambda: len(a.index) == 2)
    with pytest.raises(LimitExceededError) as err:
        await a.remember(RememberInput(content="t3", scope=Scope.TEAM))
    assert str(err.value).startswith("content:") and "team memories" in str(err.value)
    await a.remember(RememberInput(content="p1"))
    await a.remember(RememberInput(content="p2"))
    with pytest.raises(LimitExceededError) as err:
        await a.remember(RememberInput(content="p3"))
    assert "limit is 3 per agent" in str(err.value)


async def test_recall_order_and_filters(make_service, project_id: str, project_path: Path) -> None:
    a = await make_service(make_identity(project_id, project_path))
    stored: dict[str, str] = {}
    for name, category, scope, prio, tags in [
        ("task", Category.TASKS, Scope.PRIVATE, 3, ["work"]),
        ("recent1", Category.RECENT, Scope.PRIVATE, 5, ["work", "db"]),
        ("decision", Category.DECISIONS, Scope.TEAM, 6, ["db"]),
        ("longterm", Category.LONGTERM, Scope.PRIVATE, 9, ["db", "work"]),
        ("core", Category.CORE, Scope.PRIVATE, 10, []),
        ("recent2", Category.RECENT, Scope.PRIVATE, 1, ["Work"]),
    ]:
        res = await a.remember(
            RememberInput(
                content=f"{name} about PostgreSQL", category=category, scope=scope, priority=prio, tags=tags
            )
        )
        stored[name] = res.memory.id
    everything = await a.recall_context(RecallInput())
    order = [next(k for k, v in stored.items() if v == m.id) for m in everything.memories]
    assert order == ["core", "longterm", "decision", "recent2", "recent1", "task"]
    assert everything.counts.by_category == {
        "core": 1,
        "longterm": 1,
        "decisions": 1,
        "recent": 2,
        "tasks": 1,
    }
    assert everything.counts.by_scope == {"private": 5, "team": 1}

    def names(result: object) -> list[str]:
        return [next(k for k, v in stored.items() if v == m.id) for m in result.memories]  # type: ignore[attr-defined]

    assert names(await a.recall_context(RecallInput(tags=["WORK", "db"]))) == ["longterm", "recent1"]
    assert names(await a.recall_context(RecallInput(tags=["nope"]))) == []
    assert names(await a.recall_context(RecallInput(scopes=[Scope.TEAM]))) == ["decision"]
    assert names(await a.recall_context(RecallInput(categories=[Category.RECENT, Category.TASKS]))) == [
        "recent2",
        "recent1",
        "task",
    ]
    assert names(await a.recall_context(RecallInput(priority_min=5, priority_max=9))) == [
        "longterm",
        "decision",
        "recent1",
    ]
    assert names(await a.recall_context(RecallInput(search="RECENT1 about postgres"))) == ["recent1"]
    assert names(await a.recall_context(RecallInput(search="postgresql", limit=2))) == ["core", "longterm"]
    limited = await a.recall_context(RecallInput(limit=2))
    assert limited.counts.has_more and limited.counts.returned == 2 and limited.counts.visible == 6

    created = {m.id: m.created_at for m in everything.memories}
    pivot = created[stored["decision"]]
    after = names(await a.recall_context(RecallInput(created_after=pivot)))
    assert set(after) == {"decision", "longterm", "core", "recent2"}
    before = names(await a.recall_context(RecallInput(created_before=pivot, updated_before=pivot)))
    assert set(before) == {"task", "recent1", "decision"}
    naive = pivot.replace(tzinfo=None)
    assert set(names(await a.recall_context(RecallInput(updated_after=naive)))) == set(after)


async def test_summary_is_capped(make_service, project_id: str, project_path: Path) -> None:
    a = await make_service(make_identity(project_id, project_path))
    for i in range(60):
        await a.remember(RememberInput(content=f"memory {i} " + "lorem ipsum ünïcødé " * 40))
    got = await a.recall_context(RecallInput(limit=60))
    assert len(got.memories) == 60
    assert len(got.summary.encode("utf-8")) <= 4096
    assert "more in the structured result" in got.summary


async def test_commit_insight_promotes_and_keeps(make_service, project_id: str, project_path: Path) -> None:
    a = await make_service(make_identity(project_id, project_path))
    recent = (await a.remember(RememberInput(content="raw observation", tags=["x"]))).memory
    res = await a.commit_insight(
        CommitInsightInput(memory_id=recent.id, content="distilled insight", tags=["y"])
    )
    assert res.previous_category is Category.RECENT
    assert res.memory.id == recent.id and res.memory.category is Category.LONGTERM
    assert res.memory.expires_at is None and res.memory.tags == ["x", "y"]
    got = await a.recall_context(RecallInput())
    assert [(m.id, m.category, m.content) for m in got.memories] == [
        (recent.id, Category.LONGTERM, "distilled insight")
    ]
    # The old key is gone from NATS.
    kv = await a._js.key_value(a.buckets.project)
    old_key = memory_key(Scope.PRIVATE, a.agent_id, Category.RECENT, recent.id)
    await eventually(lambda: _gone(kv, old_key))
    core = (await a.core_memory(CoreMemoryInput(content="core"))).memory
    with pytest.raises(ProtectedMemoryError) as protected:
        await a.commit_insight(CommitInsightInput(memory_id=core.id))
    assert protected.value.code == "CORE_PROTECTED"


async def _gone(kv: object, key: str) -> bool:
    from nats.js.errors import KeyNotFoundError

    try:
        entry = await kv.get(key)  # type: ignore[attr-defined]
    except KeyNotFoundError:
        return True
    return not entry.value


async def test_ttl_expiry_and_commit(
    make_service, project_id: str, project_path: Path, tmp_path: Path
) -> None:
    """recent memories vanish after the (shortened) TTL on the server; a committed one stays."""
    cfg = PatternConfig(temporary_ttl_s=2, export_dir=tmp_path)
    a = await make_service(make_identity(project_id, project_path), cfg)
    assert a.server_ttl
    fleeting = (await a.remember(RememberInput(content="fleeting"))).memory
    kept = (await a.remember(RememberInput(content="worth keeping"))).memory
    task = (await a.remember_task(RememberTaskInput(content="temporary task"))).memory
    await a.commit_insight(CommitInsightInput(memory_id=kept.id))
    assert ids(await a.recall_context(RecallInput())) == {fleeting.id, kept.id, task.id}

    kv = await a._js.key_value(a.buckets.project)
    # nats-server removes the messages themselves (per-message TTL), not just the index; the
    # task was written after the fleeting memory, so it may expire a moment later.
    for memory, category in ((fleeting, Category.RECENT), (task, Category.TASKS)):
        key = memory_key(Scope.PRIVATE, a.agent_id, category, memory.id)
        await eventually(lambda key=key: _gone(kv, key), timeout=15)

    async def only_kept() -> bool:
        got = await a.recall_context(RecallInput())
        return ids(got) == {kept.id} and got.counts.expired_recently == 2

    await eventually(only_kept, timeout=15)  # the service hears of each expiry from its watch
    # A fresh process learns about the expiry from the server's markers.
    fresh = MemoryService(a._nc, a.identity, cfg)
    await fresh.start()
    try:
        again = await fresh.recall_context(RecallInput())
        assert ids(again) == {kept.id}
        assert again.counts.expired_recently == 2
    finally:
        await fresh.close()


async def test_cleanup_backstop_without_server_ttl(
    make_service, project_id: str, project_path: Path, tmp_path: Path
) -> None:
    cfg = PatternConfig(temporary_ttl_s=1, server_ttl=False, export_dir=tmp_path)
    a = await make_service(make_identity(project_id, project_path), cfg)
    b = await make_service(make_identity(project_id, project_path), cfg)
    assert not a.server_ttl
    old = (await a.remember(RememberInput(content="stale"))).memory
    b_old = (await b.remember(RememberInput(content="b stale", scope=Scope.TEAM))).memory
    kv = await a._js.key_value(a.buckets.project)
    key = memory_key(Scope.PRIVATE, a.agent_id, Category.RECENT, old.id)
    await eventually(lambda: old.id not in ids_sync(a), timeout=10)
    assert (await kv.get(key)).value  # still stored: only cleanup removes it
    dry = await a.cleanup(CleanupInput(dry_run=True))
    assert dry.removed == [old.id] and dry.dry_run
    assert (await kv.get(key)).value
    done = await a.cleanup(CleanupInput())
    assert done.removed == [old.id]
    assert await _gone(kv, key)
    b_key = memory_key(Scope.TEAM, b.agent_id, Category.RECENT, b_old.id)
    assert (await kv.get(b_key)).value  # B's expired memory is B's to clean


def ids_sync(service: MemoryService) -> set[str]:
    service.index.expire(service.now())
    return {e.record.id for e in service.index.entries() if not e.record.is_expired(service.now())}


async def test_cleanup_never_touches_other_agents(make_service, project_id: str, project_path: Path) -> None:
    user = new_user_id()
    a = await make_service(make_identity(project_id, project_path, user_id=user))
    b = await make_service(make_identity(project_id, project_path, user_id=user))
    a_ids = [
        (await a.remember(RememberInput(content="a1"))).memory.id,
        (await a.remember_task(RememberTaskInput(content="a2", scope=Scope.TEAM))).memory.id,
        (await a.remember(RememberInput(content="a3", scope=Scope.PERSONAL))).memory.id,
    ]
    a_keep = (await a.remember(RememberInput(content="a longterm", category=Category.LONGTERM))).memory.id
    b_ids = [
        (await b.remember(RememberInput(content="b1"))).memory.id,
        (await b.remember_task(RememberTaskInput(content="b2", scope=Scope.TEAM))).memory.id,
        (await b.remember(RememberInput(content="b3", scope=Scope.PERSONAL))).memory.id,
    ]
    result = await a.cleanup(CleanupInput(older_than_hours=0))
    assert sorted(result.removed) == sorted(a_ids)
    assert ids(await a.recall_context(RecallInput(scopes=[Scope.PRIVATE]))) == {a_keep}

    async def b_sees_a_cleaned_up() -> set[str] | None:
        seen = ids(await b.recall_context(RecallInput()))
        return None if set(a_ids) & seen else seen

    # A's deletes reach B's index through its watch, within milliseconds but not at once.
    got_b = await eventually(b_sees_a_cleaned_up)
    assert set(b_ids) <= got_b
    only_tasks = await b.cleanup(CleanupInput(older_than_hours=0, categories=["tasks"], dry_run=True))
    assert only_tasks.removed == [b_ids[1]]


async def test_share_learning_copy_and_move(make_service, project_id: str, project_path: Path) -> None:
    a = await make_service(make_identity(project_id, project_path))
    b = await make_service(make_identity(project_id, project_path))
    learning = (
        await a.remember_learning(RememberLearningInput(content="cache the index", tags=["perf"]))
    ).memory
    copy = await a.share_learning(ShareLearningInput(memory_id=learning.id))
    assert copy.mode == "copy" and copy.memory.id != learning.id
    assert copy.memory.scope is Scope.TEAM and copy.memory.category is Category.LEARNINGS
    assert copy.memory.source_id == learning.id
    assert learning.id in ids(await a.recall_context(RecallInput(scopes=[Scope.PRIVATE])))
    await eventually(lambda: copy.memory.id in ids_sync(b))

    recent = (await a.remember(RememberInput(content="temporary finding"))).memory
    moved = await a.share_learning(ShareLearningInput(memory_id=recent.id, mode="move", category="decisions"))
    assert moved.memory.id == recent.id and moved.memory.scope is Scope.TEAM
    assert moved.memory.category is Category.DECISIONS and moved.memory.expires_at is None
    got = await a.recall_context(RecallInput())
    assert [m.scope for m in got.memories if m.id == recent.id] == [Scope.TEAM]

    # Only your own memories, never core, never a no-op move.
    await eventually(lambda: moved.memory.id in ids_sync(b))
    with pytest.raises(AccessDeniedError):
        await b.share_learning(ShareLearningInput(memory_id=recent.id, scope="public"))
    core = (await a.core_memory(CoreMemoryInput(content="me"))).memory
    with pytest.raises(ProtectedMemoryError):
        await a.share_learning(ShareLearningInput(memory_id=core.id))
    with pytest.raises(InvalidInputError) as err:
        await a.share_learning(ShareLearningInput(memory_id=recent.id, mode="move", category="decisions"))
    assert str(err.value).startswith("scope:")


async def test_secret_scanner_warns_blocks_or_stays_quiet(
    make_service, project_id: str, project_path: Path, tmp_path: Path
) -> None:
    leaky = "deploy with AKIAIOSFODNN7EXAMPLE and postgres://admin:hunter2@db:5432/app"
    a = await make_service(make_identity(project_id, project_path))
    res = await a.remember(RememberInput(content=leaky))
    kinds = " ".join(res.warnings)
    assert "AWS access key id" in kinds and "connection string" in kinds
    assert "AKIAIOSFODNN7EXAMPLE" not in kinds and "hunter2" not in kinds
    assert res.memory.id in ids(await a.recall_context(RecallInput()))

    quiet = await make_service(
        make_identity(project_id, project_path),
        PatternConfig(secret_scan=SecretScanMode.OFF, export_dir=tmp_path),
    )
    assert (await quiet.remember(RememberInput(content=leaky))).warnings == []

    strict = await make_service(
        make_identity(project_id, project_path),
        PatternConfig(secret_scan=SecretScanMode.BLOCK, export_dir=tmp_path),
    )
    with pytest.raises(SecretBlockedError) as err:
        await strict.remember(RememberInput(content=leaky))
    assert str(err.value).startswith("content:") and "hunter2" not in str(err.value)
    assert (await strict.recall_context(RecallInput())).memories == []


async def test_bulk_remember_and_forget(
    make_service, project_id: str, project_path: Path, tmp_path: Path
) -> None:
    cfg = PatternConfig(limits=PatternLimits(max_core_per_agent=1), export_dir=tmp_path)
    a = await make_service(make_identity(project_id, project_path), cfg)
    res = await a.remember_bulk(
        RememberBulkInput(
            memories=[
                BulkMemory(content="one"),
                BulkMemory(content="two", category=Category.CORE),
                BulkMemory(content="three", category=Category.CORE),
                BulkMemory(content="four", scope=Scope.TEAM, category=Category.ARCHITECTURE),
            ]
        )
    )
    assert res.stored == 3 and res.failed == 1
    assert res.items[2].error is not None and res.items[2].error.startswith("memories.2.")
    stored = [i.memory_id for i in res.items if i.memory_id]
    core_id = res.items[1].memory_id
    assert core_id is not None
    unknown = "0" * 32
    gone = await a.forget_bulk(ForgetBulkInput(memory_ids=[*stored, unknown]))
    assert gone.forgotten == 2 and gone.failed == 2
    errors = {i.memory_id: i.error for i in gone.items if i.error}
    assert errors[core_id] is not None and "force" in errors[core_id]
    assert errors[unknown] is not None and "no memory" in errors[unknown]
    forced = await a.forget_bulk(ForgetBulkInput(memory_ids=[core_id], force=True))
    assert forced.forgotten == 1
    assert (await a.recall_context(RecallInput())).memories == []


async def test_content_limit_is_bytes(make_service, project_id: str, project_path: Path) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as err:
        RememberInput(content="é" * 20_000)  # 20,000 characters, 40,000 bytes
    assert "content" in str(err.value) and "32768 bytes" in str(err.value)
    RememberInput(content="a" * 32_768)


async def test_second_process_sees_changes(make_service, project_id: str, project_path: Path) -> None:
    identity = make_identity(project_id, project_path)
    first = await make_service(identity)
    second = await make_service(identity)
    m = (await first.remember(RememberInput(content="written by the first"))).memory
    await eventually(lambda: m.id in ids_sync(second))
    await second.forget(ForgetInput(memory_id=m.id))
    await eventually(lambda: m.id not in ids_sync(first))


async def test_tampered_value_is_ignored(
    make_service, nc: NatsClient, project_id: str, project_path: Path
) -> None:
    a_identity = make_identity(project_id, project_path)
    a = await make_service(a_identity)
    # A record claiming agent B written under A's private key: key and value disagree.
    other = make_identity(project_id, project_path)
    forged = MemoryRecord(
        scope=Scope.TEAM,
        category=Category.RECENT,
        content="forged",
        agent_id=other.agent_id,
        project_id=project_id,
        user_id=other.user_id,
    )
    key = memory_key(Scope.TEAM, a.agent_id, Category.RECENT, forged.id)
    js = nc.jetstream()
    await js.publish(kv_subject(a.buckets.project, key), forged.model_dump_json().encode())
    sentinel = (await a.remember(RememberInput(content="after", scope=Scope.TEAM))).memory
    fresh = MemoryService(nc, a_identity, a.config)
    await fresh.start()
    try:
        assert ids_sync(fresh) == {sentinel.id}
    finally:
        await fresh.close()


async def test_unavailable_when_nats_is_gone(
    nats_server, project_id: str, project_path: Path, tmp_path: Path
) -> None:
    from shared.nats.client import connect

    client = await connect(url=nats_server.url)
    service = MemoryService(
        client, make_identity(project_id, project_path), PatternConfig(export_dir=tmp_path)
    )
    await service.start()
    await client.close()
    with pytest.raises(UnavailableError) as err:
        await service.remember(RememberInput(content="lost"))
    assert "NATS is not connected" in str(err.value)
    with pytest.raises(UnavailableError):
        await service.recall_context(RecallInput())
    health = service.health()
    assert health.status == "unavailable" and not health.connected
    await service.close()


async def test_not_ready_is_unavailable(nc: NatsClient, project_id: str, project_path: Path) -> None:
    service = MemoryService(nc, make_identity(project_id, project_path))
    with pytest.raises(UnavailableError) as err:
        await service.remember(RememberInput(content="too early"))
    assert "still loading" in str(err.value)
    assert service.health().status == "starting"


async def test_health(make_service, project_id: str, project_path: Path) -> None:
    a = await make_service(make_identity(project_id, project_path))
    await a.remember(RememberInput(content="x"))
    h = a.health()
    assert h.status == "ok" and h.connected and h.index_ready and h.server_ttl
    assert h.identity is not None and h.identity.agent_id == a.agent_id
    assert h.buckets["project"] == f"loom-{project_id}-memory"
    assert h.own_memories == 1 and h.limits["core_per_agent"] == 100
    assert "Pattern ok" in h.text()


async def test_public_memory_is_visible_everywhere(make_service, project_path: Path) -> None:
    a = await make_service(make_identity("t-pub-a-" + new_user_id(), project_path))
    b = await make_service(make_identity("t-pub-b-" + new_user_id(), project_path))
    learning = (
        await a.remember_learning(RememberLearningInput(content="public lesson", tags=["unique-pub-tag"]))
    ).memory
    shared = await a.share_learning(ShareLearningInput(memory_id=learning.id, scope="public"))
    assert shared.memory.scope is Scope.PUBLIC
    await eventually(lambda: shared.memory.id in ids_sync(b))
    got = await b.recall_context(RecallInput(scopes=[Scope.PUBLIC], tags=["unique-pub-tag"]))
    assert [m.id for m in got.memories] == [shared.memory.id]
    with pytest.raises(AccessDeniedError):
        await b.forget(ForgetInput(memory_id=shared.memory.id))
    await a.forget(ForgetInput(memory_id=shared.memory.id))


async def test_commit_insight_tag_limit(make_service, project_id: str, project_path: Path) -> None:
    a = await make_service(make_identity(project_id, project_path))
    m = (await a.remember(RememberInput(content="x", tags=[f"t{i}" for i in range(15)]))).memory
    with pytest.raises(InvalidInputError) as err:
        await a.commit_insight(CommitInsightInput(memory_id=m.id, tags=[f"n{i}" for i in range(10)]))
    assert str(err.value).startswith("tags:") and "at most 20" in str(err.value)
    assert ids(await a.recall_context(RecallInput(categories=[Category.RECENT]))) == {m.id}


async def test_pattern_memory_buckets_keep_their_settings(nc: NatsClient, project_id: str) -> None:
    """Pattern creates its buckets through ensure_kv: values up to MAX_VALUE_BYTES, expiry
    markers kept for the window asked, no direct get (as before it was shared)."""
    bucket = f"ens-{project_id}-memory"
    await ensure_bucket(nc.jetstream(), bucket, marker_ttl_s=30.0, description="memory")
    config = (await nc.jetstream().stream_info(kv_stream(bucket))).config
    assert config.max_msg_size == MAX_VALUE_BYTES and config.subject_delete_marker_ttl == 30.0
    assert config.max_msgs_per_subject == 1 and config.description == "memory"
    assert not config.allow_direct
