"""The landing lock (shared/git/landlock.py) on a real nats-server: one holder at a time,
renewed and released only at its own revision, taken over once its holder stops renewing."""

from __future__ import annotations

import asyncio

import pytest
from nats.aio.client import Client as NatsClient

from shared.git.landlock import LandingLocks, LockLost
from shared.names import InvalidNameError, ProjectNames, landing_key

A = "a" * 32
B = "b" * 32


async def test_one_holder_at_a_time_and_a_lock_left_to_expire_is_taken_over(
    nc: NatsClient, project_id: str
) -> None:
    locks = LandingLocks(nc.jetstream(), ProjectNames(project_id))
    mine = await locks.acquire("main", A, ttl_s=30)
    assert mine is not None and mine.holder == A
    assert await locks.acquire("main", B, ttl_s=30) is None
    assert await locks.acquire("release/2.0", B, ttl_s=30) is not None  # another target: its own lock

    renewed = await locks.renew(mine, items=["1" * 32], ttl_s=0.5)
    assert renewed.items == ["1" * 32] and renewed.revision > mine.revision
    with pytest.raises(LockLost):
        await locks.renew(mine)  # a stale copy: someone (itself) changed it since
    await asyncio.sleep(0.6)
    theirs = await locks.acquire("main", B, ttl_s=30)
    assert theirs is not None and theirs.holder == B
    with pytest.raises(LockLost) as lost:
        await locks.renew(renewed)
    assert lost.value.field == "lock"
    assert await locks.release(renewed) is False  # not A's to free any more
    assert await locks.release(theirs) is True
    assert await locks.current("main") is None


async def test_two_landers_racing_for_a_free_lock_get_it_once(nc: NatsClient, project_id: str) -> None:
    locks = [LandingLocks(nc.jetstream(), ProjectNames(project_id)) for _ in range(2)]
    got = await asyncio.gather(locks[0].acquire("main", A), locks[1].acquire("main", B))
    assert sum(lock is not None for lock in got) == 1


async def test_a_holder_must_be_an_agent_id(nc: NatsClient, project_id: str) -> None:
    with pytest.raises(InvalidNameError):
        await LandingLocks(nc.jetstream(), ProjectNames(project_id)).acquire("main", "not an id")


def test_a_branch_a_key_cannot_hold_gets_a_digest_key() -> None:
    assert landing_key("main") == "target.main" and landing_key("release/2.0") == "target.release/2.0"
    odd = landing_key("feat+x")
    assert odd.startswith("digest.") and odd != landing_key("feat+y")
