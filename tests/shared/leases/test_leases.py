"""File leases (shared.leases): the pure rules, then against a real nats-server: conflicts
name the holder, concurrent acquires from separate connections never both win, fencing
tokens only grow, leases end by themselves, and projects never see each other's leases."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from nats.aio.client import Client as NatsClient

from shared.errors import LoomError
from shared.leases.book import (
    LeaseBook,
    LeaseConflict,
    LeaseError,
    LeaseFilter,
    LeaseNotFound,
    NotHolder,
    check_ttl,
    ended_by,
    renew_rule,
    stands_in_way,
)
from shared.models import Lease, LeaseMode, WorkItem, WorkStatus
from shared.names import ProjectNames
from shared.nats.client import connect
from shared.nats.server import EmbeddedNatsServer

A = "a" * 32
B = "b" * 32
C = "c" * 32
WORK = "d" * 32
NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def lease(
    holder: str = A, mode: LeaseMode = LeaseMode.EXCLUSIVE, *, ttl: float = 60, **fields: object
) -> Lease:
    return Lease.model_validate(
        {
            "project_id": "demo",
            "holder": holder,
            "patterns": ["src/**"],
            "mode": mode,
            "ttl_s": ttl,
            "acquired_at": NOW,
            "renewed_at": NOW,
            "expires_at": NOW + timedelta(seconds=ttl),
            **fields,
        }
    )


def item(status: WorkStatus, assigned_to: str | None = A) -> WorkItem:
    return WorkItem(
        id=WORK,
        task_id="t",
        description="d",
        capability="code",
        project_id="demo",
        status=status,
        assigned_to=assigned_to,
    )


# -- rules ------------------------------------------------------------------------------------------


def test_who_stands_in_the_way() -> None:
    exclusive, shared = lease(), lease(mode=LeaseMode.SHARED)
    assert stands_in_way(exclusive, B, LeaseMode.SHARED, NOW)
    assert stands_in_way(shared, B, LeaseMode.EXCLUSIVE, NOW)
    assert not stands_in_way(shared, B, LeaseMode.SHARED, NOW)
    assert not stands_in_way(exclusive, A, LeaseMode.EXCLUSIVE, NOW), "one's own lease"
    assert not stands_in_way(exclusive, B, LeaseMode.EXCLUSIVE, NOW + timedelta(minutes=2)), "expired"


def test_when_a_lease_has_ended() -> None:
    tied = lease(work_id=WORK)
    assert ended_by(tied, NOW) is None
    assert ended_by(tied, NOW + timedelta(seconds=61)) == "expired"
    assert ended_by(tied, NOW, holder_online=lambda agent: agent != A) == "holder offline"
    for status in (WorkStatus.CLAIMED, WorkStatus.IN_PROGRESS, WorkStatus.WAITING_ON_OPERATOR):
        assert ended_by(tied, NOW, work_item=lambda _w, s=status: item(s)) is None
    for status in (WorkStatus.COMPLETED, WorkStatus.FAILED, WorkStatus.CANCELLED, WorkStatus.IN_REVIEW):
        assert ended_by(tied, NOW, work_item=lambda _w, s=status: item(s)) == "work ended"
    assert ended_by(tied, NOW, work_item=lambda _w: item(WorkStatus.IN_PROGRESS, B)) == "work ended"
    assert ended_by(tied, NOW, work_item=lambda _w: None) == "work ended"
    assert ended_by(lease(), NOW, work_item=lambda _w: None) is None, "not tied to work"


def test_renewal_rules() -> None:
    held = lease()
    renewed = renew_rule(held, 41, A, 120, NOW + timedelta(seconds=30))
    assert renewed.expires_at == NOW + timedelta(seconds=150)
    assert renewed.token == 41, "the grant's sequence stays its token"
    assert renew_rule(renewed, 57, A, None, NOW).token == 41
    with pytest.raises(NotHolder):
        renew_rule(held, 41, B, None, NOW)
    with pytest.raises(LeaseError, match="expired") as caught:
        renew_rule(held, 41, A, None, NOW + timedelta(minutes=5))
    assert caught.value.code == "conflict"


@pytest.mark.parametrize("bad", [0, 4.9, 86_401, True, "60"])
def test_ttl_bounds(bad: object) -> None:
    with pytest.raises(LeaseError) as caught:
        check_ttl(bad)  # type: ignore[arg-type]
    assert caught.value.field == "ttl_s"


# -- against nats-server ----------------------------------------------------------------------------


@pytest.fixture
def names(project_id: str) -> ProjectNames:
    return ProjectNames(project_id)


async def test_a_conflicting_acquire_names_the_holder(nc: NatsClient, names: ProjectNames) -> None:
    book = LeaseBook(nc, names)
    try:
        mine = await book.acquire(
            A, ["src/api/**"], reason="refactor", work_id=WORK, handle="alice", ttl_s=60
        )
        assert mine.patterns == ["src/api/**"] and mine.token > 0
        with pytest.raises(LeaseConflict) as caught:
            await book.acquire(B, ["src/api/users.py"], handle="bob")
        (clash,) = caught.value.clashes
        assert clash.lease.id == mine.id and clash.path == "src/api/users.py"
        for shown in (mine.id, A, "alice", WORK, "src/api/**", mine.expires_at.isoformat()):
            assert shown in caught.value.message
        assert caught.value.field == "patterns" and caught.value.code == "conflict"
        other = await book.acquire(B, ["docs/*.md"], handle="bob")
        assert other.token > mine.token
        again = await book.acquire(A, ["src/api/users.py"])  # one's own lease never conflicts
        assert again.token > other.token
    finally:
        await book.stop()


async def test_shared_leases_coexist_but_not_with_an_exclusive_one(
    nc: NatsClient, names: ProjectNames
) -> None:
    book = LeaseBook(nc, names)
    try:
        await book.acquire(A, ["docs/**"], mode=LeaseMode.SHARED)
        await book.acquire(B, ["docs/guide.md"], mode=LeaseMode.SHARED)
        with pytest.raises(LeaseConflict) as caught:
            await book.acquire(C, ["docs/guide.md"])
        assert {c.lease.holder for c in caught.value.clashes} == {A, B}
    finally:
        await book.stop()


async def test_concurrent_overlapping_acquires_from_separate_connections_grant_one(
    nats_server: EmbeddedNatsServer, names: ProjectNames
) -> None:
    """Twelve processes (each its own connection and copy) race for one file: one wins,
    whatever the interleaving; then twelve race for twelve different files: all win."""
    agents = [f"{n:032x}" for n in range(1, 13)]
    conns = [await connect(url=nats_server.url) for _ in agents]
    books = [LeaseBook(nc, names) for nc in conns]
    try:
        await asyncio.gather(*(book.start() for book in books))
        outcomes = await asyncio.gather(
            *(book.acquire(agent, ["src/app.py"]) for book, agent in zip(books, agents, strict=True)),
            return_exceptions=True,
        )
        won = [o for o in outcomes if isinstance(o, Lease)]
        assert len(won) == 1, outcomes
        assert all(isinstance(o, LeaseConflict) for o in outcomes if not isinstance(o, Lease))
        spread = await asyncio.gather(
            *(
                book.acquire(agent, [f"pkg/m{n}.py"])
                for n, (book, agent) in enumerate(zip(books, agents, strict=True))
            )
        )
        tokens = [lease.token for lease in spread]
        assert len(set(tokens)) == len(tokens) and min(tokens) > won[0].token
        listed = await books[0].listing()
        assert len(listed) == 1 + len(agents)
    finally:
        for book in books:
            await book.stop()
        for nc in conns:
            await nc.close()


async def test_wait_blocks_until_the_holder_releases(nc: NatsClient, names: ProjectNames) -> None:
    book = LeaseBook(nc, names)
    try:
        held = await book.acquire(A, ["src/**"])
        waiter = asyncio.create_task(book.acquire(B, ["src/main.py"], wait_s=20))
        await asyncio.sleep(0.2)
        assert not waiter.done()
        with pytest.raises(NotHolder):
            await book.release(held.id, holder=B)
        await book.release(held.id, holder=A)
        taken = await asyncio.wait_for(waiter, 10)
        assert taken.holder == B and taken.token > held.token
        with pytest.raises(LeaseConflict):
            await book.acquire(A, ["src/main.py"], wait_s=0.3)
        with pytest.raises(LeaseNotFound):
            await book.release(held.id, holder=A)
    finally:
        await book.stop()


async def test_renewal_keeps_the_token_and_an_expired_lease_blocks_nobody(
    nc: NatsClient, names: ProjectNames
) -> None:
    book = LeaseBook(nc, names)
    try:
        held = await book.acquire(A, ["lib/**"], ttl_s=5)
        renewed = await book.renew(held.id, A, ttl_s=5)
        assert renewed.token == held.token and renewed.expires_at > held.expires_at
        assert (await book.get(held.id)).token == held.token
        with pytest.raises(NotHolder):
            await book.renew(held.id, B)
        short = await book.acquire(A, ["bin/**"], ttl_s=5)
        ended = await book.sweep(now=short.expires_at + timedelta(seconds=1))
        assert {(lease.id, why) for lease, why in ended} == {(held.id, "expired"), (short.id, "expired")}
        with pytest.raises(LeaseNotFound):
            await book.renew(short.id, A)
    finally:
        await book.stop()


async def test_sweeps_end_leases_of_offline_holders_and_ended_work(
    nc: NatsClient, names: ProjectNames
) -> None:
    book = LeaseBook(nc, names)
    try:
        tied = await book.acquire(A, ["a/**"], work_id=WORK)
        loose = await book.acquire(A, ["b/**"])
        other = await book.acquire(B, ["c/**"])
        ended = await book.sweep(work_item=lambda _w: item(WorkStatus.COMPLETED))
        assert [(lease.id, why) for lease, why in ended] == [(tied.id, "work ended")]
        ended = await book.sweep(holder_online=lambda agent: agent != A)
        assert [(lease.id, why) for lease, why in ended] == [(loose.id, "holder offline")]
        assert [lease.id for lease in await book.listing()] == [other.id]
        released = await book.release_work(WORK, B)
        assert released == []
    finally:
        await book.stop()


async def test_a_lease_for_work_not_held_is_refused_and_nothing_is_kept(
    nc: NatsClient, names: ProjectNames
) -> None:
    from shared.work.rules import NotClaimant

    async def not_held(_work_id: str) -> None:
        raise NotClaimant(WORK)

    book = LeaseBook(nc, names)
    try:
        with pytest.raises(NotClaimant):
            await book.acquire(A, ["x/**"], work_id=WORK, holds_work=not_held)
        assert await book.listing() == []
    finally:
        await book.stop()


async def test_bad_input_is_refused_naming_the_field(nc: NatsClient, names: ProjectNames) -> None:
    book = LeaseBook(nc, names)
    secret = "s3cr3t-T0KEN-value"
    try:
        cases: list[tuple[dict[str, object], str]] = [
            ({"patterns": [f"../{secret}"]}, "patterns.0"),
            ({"patterns": []}, "patterns"),
            ({"patterns": ["ok"], "ttl_s": 10**9}, "ttl_s"),
            ({"patterns": ["ok"], "reason": "x" * 501}, "reason"),
            ({"patterns": ["ok"], "wait_s": -1}, "wait_s"),
            ({"patterns": ["ok"], "work_id": secret}, "work_id"),
        ]
        for kwargs, field in cases:
            with pytest.raises(LoomError) as caught:
                await book.acquire(A, **kwargs)  # type: ignore[arg-type]
            assert caught.value.field == field and caught.value.code == "invalid"
            assert secret not in str(caught.value)
        assert await book.listing() == []
    finally:
        await book.stop()


async def test_projects_never_see_or_clash_with_each_other(nc: NatsClient, project_id: str) -> None:
    one, two = LeaseBook(nc, ProjectNames(project_id)), LeaseBook(nc, ProjectNames(project_id + "-b"))
    try:
        held = await one.acquire(A, ["src/**"])
        theirs = await two.acquire(B, ["src/**"])  # the same paths in another project
        assert [lease.id for lease in await one.listing()] == [held.id]
        assert [lease.id for lease in await two.listing()] == [theirs.id]
        assert await two.conflicting(["src/x.py"], holder=C) != []
        with pytest.raises(LeaseNotFound):
            await two.release(held.id, holder=A)
        assert (await one.listing(LeaseFilter(holder=A)))[0].id == held.id
    finally:
        await one.stop()
        await two.stop()
