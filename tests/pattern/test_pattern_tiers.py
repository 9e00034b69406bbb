"""Importance and tiers (pattern/importance.py), accesses written back by the sweep,
versioned writes, read by id in scope order, the tiered and chat-shaped build, and the
compaction pack, against the real session nats-server."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from nats.aio.client import Client as NatsClient
from pattern_helpers import eventually, make_identity, sub_identity

from pattern.config import PatternConfigError, load_settings
from pattern.errors import AccessDeniedError, ChangedError, InvalidInputError, NotFoundError
from pattern.importance import ImportancePolicy, Tier, parse_weights
from pattern.inputs import (
    BuildContextInput,
    PackInput,
    ReadInput,
    RecallInput,
    RememberInput,
    RestoreInput,
)
from pattern.models import Category, MemoryRecord, Scope
from pattern.pack import pack_id
from pattern.service import MemoryService
from shared.models import WorkSubmission
from shared.names import ProjectNames
from testsupport.work import work_queue

ServiceFactory = Callable[..., Awaitable[MemoryService]]
T0 = datetime(2026, 11, 29, 12, tzinfo=UTC)


def _record(category: Category = Category.LONGTERM, **kw: object) -> MemoryRecord:
    return MemoryRecord(
        scope=Scope.PRIVATE,
        category=category,
        content="x",
        agent_id="a" * 32,
        project_id="p",
        user_id="0" * 16,
        created_at=T0,
        updated_at=T0,
        **kw,  # type: ignore[arg-type]
    )


def test_a_memory_read_often_rises_and_one_left_alone_decays() -> None:
    policy = ImportancePolicy()
    fresh = _record(Category.CORE)
    assert policy.tier(policy.score(fresh, T0)) is Tier.WARM  # new: recent, weighty, never read
    read_often = _record(Category.CORE, access_count=40, accessed_at=T0)
    assert policy.tier(policy.score(read_often, T0)) is Tier.HOT
    # left alone for three days (three half-lives of its recency): down a tier, then to cold
    assert policy.tier(policy.score(read_often, T0 + timedelta(days=3))) is Tier.WARM
    assert policy.tier(policy.score(fresh, T0 + timedelta(days=30))) is Tier.COLD
    # accesses counted since the last sweep count too; a recent read renews recency
    assert (
        policy.score(fresh, T0 + timedelta(days=2), extra_accesses=40, last=T0 + timedelta(days=2))
        >= policy.hot
    )
    # category weights order equally fresh, unread memories
    assert policy.score(_record(Category.DECISIONS), T0) > policy.score(_record(Category.RECENT), T0)
    assert policy.score(fresh, T0) <= 1.0


def test_the_policy_is_configurable_and_bad_settings_name_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert parse_weights("core=0.1, recent=0.3")[Category.RECENT] == 0.3
    monkeypatch.setenv("PATTERN_CATEGORY_WEIGHTS", "core=2")
    with pytest.raises(PatternConfigError, match="PATTERN_CATEGORY_WEIGHTS"):
        load_settings()
    monkeypatch.setenv("PATTERN_CATEGORY_WEIGHTS", "core=0.3")
    monkeypatch.setenv("PATTERN_TIER_WARM", "0.9")
    with pytest.raises(PatternConfigError, match="PATTERN_TIER_WARM: must be below PATTERN_TIER_HOT"):
        load_settings()
    monkeypatch.setenv("PATTERN_TIER_WARM", "0.3")
    monkeypatch.setenv("PATTERN_TIER_HOT", "0.6")
    policy = load_settings().importance()
    assert (policy.hot, policy.warm, policy.weights[Category.CORE]) == (0.6, 0.3, 0.3)


async def test_reads_are_counted_and_written_back_by_the_sweep(
    make_service: ServiceFactory, project_id: str, project_path: Path
) -> None:
    me = make_identity(project_id, project_path)
    service = await make_service(me)
    stored = (
        await service.remember(
            RememberInput(content="the parser uses PEG", category=Category.DECISIONS, scope=Scope.TEAM)
        )
    ).memory
    for _ in range(3):
        found = await service.recall_context(RecallInput(search="PEG"))
        assert [m.id for m in found.memories] == [stored.id]
    read = await service.read_memory(ReadInput(memory_id=stored.id))
    assert read.found_in == "own" and read.memory.access_count == 0  # not written back yet
    assert await service.sweep() == 1
    other = await make_service(make_identity(project_id, project_path))
    await eventually(lambda: [e for e in other.index.get(stored.id) if e.record.access_count == 4])
    seen = (await other.read_memory(ReadInput(memory_id=stored.id))).memory
    assert seen.access_count == 4 and seen.accessed_at is not None
    assert seen.version == 1  # an access is not a new version


async def test_a_new_version_records_who_wrote_it_and_loses_no_race(
    make_service: ServiceFactory, project_id: str, project_path: Path
) -> None:
    alice = await make_service(make_identity(project_id, project_path, handle="alice"))
    bob = await make_service(make_identity(project_id, project_path, handle="bob"))
    first = (
        await alice.remember(
            RememberInput(content="deploy on fridays", category=Category.DECISIONS, scope=Scope.TEAM)
        )
    ).memory
    await eventually(lambda: bob.index.get(first.id))  # bob's copy has it
    change = RememberInput(
        content="never deploy on fridays", category=Category.DECISIONS, scope=Scope.TEAM, memory_id=first.id
    )
    second = (await bob.remember(change)).memory
    assert (second.version, second.updated_by, second.agent_id) == (2, bob.agent_id, alice.agent_id)
    assert second.created_at == first.created_at
    moved = change.model_copy(update={"scope": Scope.PUBLIC})
    with pytest.raises(InvalidInputError) as kept:
        await bob.remember(moved)
    assert kept.value.field == "scope"
    private = (await alice.remember(RememberInput(content="mine", category=Category.LONGTERM))).memory
    # a private memory of another agent is not even visible: a write to its id makes bob's own
    made = (
        await bob.remember(RememberInput(content="bob's", category=Category.LONGTERM, memory_id=private.id))
    ).memory
    assert made.agent_id == bob.agent_id and made.version == 1


async def test_a_write_from_a_stale_copy_is_refused(
    make_service: ServiceFactory, project_id: str, project_path: Path
) -> None:
    """Two processes of one agent: the second stops following the bucket, so its copy
    still holds version 1 when it writes; the compare-and-set refuses it, nothing is lost."""
    me = make_identity(project_id, project_path)
    first, second = await make_service(me), await make_service(me)
    memory = (
        await first.remember(RememberInput(content="v1", category=Category.LONGTERM, scope=Scope.TEAM))
    ).memory
    await eventually(lambda: second.index.get(memory.id))
    for watch in second._watches:
        await watch.stop()
    second._watches = []
    change = RememberInput(content="v2", category=Category.LONGTERM, scope=Scope.TEAM, memory_id=memory.id)
    assert (await first.remember(change)).memory.version == 2
    with pytest.raises(ChangedError) as lost:
        await second.remember(change.model_copy(update={"content": "v2 from the stale copy"}))
    assert lost.value.field == "memory_id"
    assert (await first.read_memory(ReadInput(memory_id=memory.id))).memory.content == "v2"


async def test_read_by_id_follows_the_scope_order(
    make_service: ServiceFactory, project_id: str, project_path: Path
) -> None:
    parent = make_identity(project_id, project_path)
    mine = await make_service(parent)
    own = (await mine.remember(RememberInput(content="parent's note", category=Category.LONGTERM))).memory
    child = await make_service(sub_identity(parent))
    await eventually(lambda: child.index.get(own.id))
    assert (await child.read_memory(ReadInput(memory_id=own.id))).found_in == "inherited"
    team = (
        await mine.remember(RememberInput(content="shared", category=Category.LEARNINGS, scope=Scope.TEAM))
    ).memory
    stranger = await make_service(make_identity(project_id, project_path))
    await eventually(lambda: stranger.index.get(team.id))
    assert (await stranger.read_memory(ReadInput(memory_id=team.id))).found_in == "team"
    with pytest.raises(NotFoundError) as hidden:
        await stranger.read_memory(ReadInput(memory_id=own.id))
    assert hidden.value.field == "memory_id"
    # anyone writes a team memory's next version; a sub-agent never writes its parent's
    edited = (
        await stranger.remember(
            RememberInput(
                content="shared, edited", category=Category.LEARNINGS, scope=Scope.TEAM, memory_id=team.id
            )
        )
    ).memory
    assert (edited.version, edited.updated_by) == (2, stranger.agent_id)
    with pytest.raises(AccessDeniedError) as denied:
        await child.remember(RememberInput(content="x", category=Category.LONGTERM, memory_id=own.id))
    assert denied.value.field == "memory_id"


async def test_the_build_takes_the_hot_tier_first_and_reports_what_it_left(
    make_service: ServiceFactory, project_id: str, project_path: Path
) -> None:
    service = await make_service(make_identity(project_id, project_path))
    words = " ".join(["filler"] * 60)
    cold = []
    for n in range(6):
        cold.append(
            (
                await service.remember(
                    RememberInput(content=f"old note {n} {words}", category=Category.RECENT)
                )
            ).memory
        )
    hot = (
        await service.remember(RememberInput(content=f"the one rule {words}", category=Category.LONGTERM))
    ).memory
    for _ in range(40):
        await service.read_memory(ReadInput(memory_id=hot.id))
    built = await service.build_context(BuildContextInput(budget_tokens=200))
    own = [i for i in built.items if i.layer == "own"]
    assert own[0].id == hot.id  # the newest-first order would have put it after none: it is hot
    assert {o.tier for o in built.omitted} <= {"warm", "cold"}
    assert "hot" not in built.omitted_by_tier and built.omitted_by_tier["warm"] >= 1
    only_hot = await service.build_context(BuildContextInput(budget_tokens=4000, tiers=["hot"]))
    assert [i.id for i in only_hot.items] == [hot.id]
    assert only_hot.omitted_by_tier == {}  # warm ones not asked for: not looked at
    assert [u.omitted for u in only_hot.layers if u.layer == "own"] == [6]
    chat = await service.build_context(BuildContextInput(budget_tokens=4000, shape="chat"))
    assert chat.chat is not None and "the one rule" in chat.chat.system and chat.chat.messages == []


async def test_a_pack_is_stored_once_per_item_and_restored_by_the_next_attempt(
    make_service: ServiceFactory, nc: NatsClient, project_id: str, project_path: Path
) -> None:
    me = await make_service(make_identity(project_id, project_path, handle="coder"))
    queue = work_queue(nc, ProjectNames(project_id))
    work_id = (
        await queue.submit(WorkSubmission(task_id="lex", description="port the lexer", capability="code"))
    ).id
    other_item = (await queue.submit(WorkSubmission(task_id="doc", description="docs", capability="code"))).id
    req = PackInput(
        summary="Porting the lexer to the new token types; tests 1-40 pass.",
        open_work=["tests 41-60", "update the docs"],
        decisions=["keep the old Token alias for one release"],
        files=["src/lexer.py", "tests/test_lexer.py"],
        work_id=work_id,
        budget_tokens=2000,
        shape="chat",
    )
    packed = await me.pack(req)
    assert packed.pack.scope is Scope.TEAM and "tests 41-60" in packed.pack.content
    assert packed.context.items[0].layer == "pack" and packed.context.used_tokens <= 2000
    assert (
        packed.context.chat is not None and "restored from a pack" in packed.context.chat.messages[0].content
    )
    again = await me.pack(req.model_copy(update={"summary": "tests 1-50 pass"}))
    assert again.pack.id == packed.pack.id and again.pack.version == 2
    # the item's next attempt, by another agent
    other = await make_service(make_identity(project_id, project_path))
    await eventually(lambda: [e for e in other.index.get(packed.pack.id) if e.record.version == 2])
    restored = await other.restore(RestoreInput(work_id=work_id, budget_tokens=1000))
    assert restored.pack.id == packed.pack.id and "tests 1-50 pass" in restored.context.context
    with pytest.raises(NotFoundError) as none:
        await other.restore(RestoreInput(work_id="f" * 32))
    assert none.value.field == "work_id"
    long = PackInput(summary=" ".join(["lexer"] * 1300), work_id=other_item, budget_tokens=4000)
    await me.pack(long)
    await eventually(lambda: [e for e in other.index.get(pack_id(me.agent_id, other_item))])
    with pytest.raises(InvalidInputError) as small:
        await other.restore(RestoreInput(work_id=other_item, budget_tokens=256))
    assert small.value.field == "budget_tokens" and "the pack alone takes" in str(small.value)
    secret = "ghp_" + "Q" * 36
    warned = await me.pack(PackInput(summary=f"token {secret} in .env", budget_tokens=2000))
    assert warned.warnings and all(secret not in w for w in warned.warnings)


async def test_another_projects_agent_finds_no_pack_and_reads_no_memory(
    make_service: ServiceFactory, nc: NatsClient, project_id: str, project_path: Path
) -> None:
    me = await make_service(make_identity(project_id, project_path))
    work_id = (
        await work_queue(nc, ProjectNames(project_id)).submit(
            WorkSubmission(task_id="iso", description="isolation", capability="code")
        )
    ).id
    packed = await me.pack(PackInput(summary="our plan", work_id=work_id, budget_tokens=1000))
    team = (
        await me.remember(RememberInput(content="ours", category=Category.DECISIONS, scope=Scope.TEAM))
    ).memory
    elsewhere = await make_service(make_identity(f"{project_id}-other", project_path))
    with pytest.raises(NotFoundError):
        await elsewhere.restore(RestoreInput(work_id=work_id))
    for memory_id in (packed.pack.id, team.id):
        with pytest.raises(NotFoundError):
            await elsewhere.read_memory(ReadInput(memory_id=memory_id))
    with pytest.raises(NotFoundError):
        await elsewhere.restore(RestoreInput(pack_id=packed.pack.id))
