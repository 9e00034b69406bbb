"""shared.nats.cas: the one compare-and-set loop, against a real nats-server.

The races are made deterministic: a ``decide`` that lets another writer in before it
answers is certain to lose its first write, so each test knows how many rounds ran.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from nats.aio.client import Client as NatsClient
from nats.js.kv import KeyValue

import shared.nats.cas as cas
from shared.errors import Conflict, Forbidden, NotFound
from shared.nats.cas import CAS_RETRIES, DELETE, Delete, Swap, cas_update, cas_upsert
from shared.nats.client import connect
from shared.nats.jetstream import ensure_kv, get_or_none
from shared.nats.server import EmbeddedNatsServer


class Gone(NotFound):
    pass


class Busy(Conflict):
    pass


def _gone() -> Gone:
    return Gone("no such key", field="key")


def _busy() -> Busy:
    return Busy("being changed concurrently; try again", field="key")


def _parse(raw: bytes) -> int:
    return int(json.loads(raw))


def _dump(value: int) -> bytes:
    return json.dumps(value).encode()


async def _bucket(nc: NatsClient, project_id: str, name: str) -> KeyValue:
    return await ensure_kv(nc.jetstream(), f"cas-{project_id}-{name}", history=5)


async def _stored(kv: KeyValue, key: str) -> tuple[int, int] | None:
    entry = await get_or_none(kv, key)
    if entry is None or entry.value is None:
        return None
    return _parse(entry.value), int(entry.revision or 0)


async def test_update_writes_on_the_revision_it_read(nc: NatsClient, project_id: str) -> None:
    kv = await _bucket(nc, project_id, "update")
    first = await kv.put("k", _dump(1))
    swap = await cas_update(kv, "k", lambda n: n + 1, parse=_parse, dump=_dump, absent=_gone, conflict=_busy)
    assert swap == Swap(before=1, after=2, revision=swap.revision, changed=True)
    assert swap.revision > first
    assert await _stored(kv, "k") == (2, swap.revision)


async def test_the_loser_of_a_race_between_two_writers_decides_again_on_the_winners_value(
    nats_server: EmbeddedNatsServer, project_id: str
) -> None:
    """Two connections (two processes, as far as NATS can tell): the other writer's
    increment lands between this writer's read and its write; neither is lost."""
    first = await connect(url=nats_server.url, name="cas-a")
    second = await connect(url=nats_server.url, name="cas-b")
    try:
        kv_a = await _bucket(first, project_id, "race")
        kv_b = await _bucket(second, project_id, "race")
        await kv_a.put("k", _dump(10))
        seen: list[int] = []

        async def add_one_late(n: int) -> int:
            seen.append(n)
            if len(seen) == 1:  # the other writer gets in first
                await cas_update(
                    kv_b, "k", lambda m: m * 2, parse=_parse, dump=_dump, absent=_gone, conflict=_busy
                )
            return n + 1

        swap = await cas_update(
            kv_a, "k", add_one_late, parse=_parse, dump=_dump, absent=_gone, conflict=_busy
        )
        assert seen == [10, 20]  # decided again on what the winner stored
        assert (swap.before, swap.after, swap.changed) == (20, 21, True)
        assert await _stored(kv_a, "k") == (21, swap.revision)
    finally:
        await first.close()
        await second.close()


async def test_many_concurrent_writers_lose_no_update(
    nats_server: EmbeddedNatsServer, project_id: str
) -> None:
    clients = [await connect(url=nats_server.url, name=f"cas-{i}") for i in range(2)]
    try:
        buckets = [await _bucket(c, project_id, "many") for c in clients]
        await asyncio.gather(
            *(
                cas_upsert(
                    buckets[i % 2],
                    "n",
                    lambda n: 1 if n is None else n + 1,
                    parse=_parse,
                    dump=_dump,
                    conflict=_busy,
                )
                for i in range(40)
            )
        )
        stored = await _stored(buckets[0], "n")
        assert stored is not None and stored[0] == 40
    finally:
        for client in clients:
            await client.close()


async def test_exhausted_retries_raise_the_callers_own_conflict(nc: NatsClient, project_id: str) -> None:
    """Another writer wins every round: after CAS_RETRIES rounds the caller's error, and the
    winner's value stays."""
    kv = await _bucket(nc, project_id, "exhaust")
    await kv.put("k", _dump(0))
    rounds = 0

    async def always_outrun(n: int) -> int:
        nonlocal rounds
        rounds += 1
        await kv.put("k", _dump(n + 100))
        return n + 1

    with pytest.raises(Busy) as info:
        await cas_update(kv, "k", always_outrun, parse=_parse, dump=_dump, absent=_gone, conflict=_busy)
    assert info.value.field == "key" and info.value.code == "conflict"
    assert rounds == CAS_RETRIES
    assert await _stored(kv, "k") == (CAS_RETRIES * 100, await _revision(kv, "k"))


async def _revision(kv: KeyValue, key: str) -> int:
    return int((await kv.get(key)).revision or 0)


async def test_update_refuses_an_absent_or_deleted_key_without_creating_it(
    nc: NatsClient, project_id: str
) -> None:
    kv = await _bucket(nc, project_id, "absent")
    called: list[int] = []

    def decide(n: int) -> int:
        called.append(n)
        return n

    for key in ("never", "deleted"):
        if key == "deleted":
            await kv.put(key, _dump(1))
            await kv.delete(key)
        with pytest.raises(Gone):
            await cas_update(
                kv,
                key,
                decide,
                parse=_parse,
                dump=_dump,
                absent=_gone,
                conflict=_busy,
            )
        assert await _stored(kv, key) is None
    assert called == []


async def test_upsert_creates_an_absent_key_and_a_lost_create_decides_again(
    nc: NatsClient, project_id: str
) -> None:
    kv = await _bucket(nc, project_id, "upsert")
    swap = await cas_upsert(
        kv, "fresh", lambda n: 7 if n is None else n, parse=_parse, dump=_dump, conflict=_busy
    )
    assert (swap.before, swap.after, swap.changed) == (None, 7, True)
    assert await _stored(kv, "fresh") == (7, swap.revision)

    seen: list[int | None] = []

    async def create_late(n: int | None) -> int:
        seen.append(n)
        if n is None:
            await kv.create("contested", _dump(5))  # another writer creates it first
        return 1 if n is None else n + 1

    swap = await cas_upsert(kv, "contested", create_late, parse=_parse, dump=_dump, conflict=_busy)
    assert seen == [None, 5]
    assert await _stored(kv, "contested") == (6, swap.revision)


async def test_upsert_recreates_a_deleted_key(nc: NatsClient, project_id: str) -> None:
    kv = await _bucket(nc, project_id, "recreate")
    await kv.put("k", _dump(3))
    await kv.delete("k")
    swap = await cas_upsert(
        kv, "k", lambda n: 1 if n is None else n + 1, parse=_parse, dump=_dump, conflict=_busy
    )
    assert (swap.before, swap.after) == (None, 1)
    assert await _stored(kv, "k") == (1, swap.revision)


async def test_a_refusal_is_raised_at_once_and_writes_nothing(nc: NatsClient, project_id: str) -> None:
    kv = await _bucket(nc, project_id, "refuse")
    revision = await kv.put("k", _dump(1))
    rounds = 0

    def refuse(_n: int) -> int:
        nonlocal rounds
        rounds += 1
        raise Forbidden("not yours", field="key")

    with pytest.raises(Forbidden):
        await cas_update(kv, "k", refuse, parse=_parse, dump=_dump, absent=_gone, conflict=_busy)
    with pytest.raises(Forbidden):
        await cas_upsert(kv, "k", lambda n: refuse(n or 0), parse=_parse, dump=_dump, conflict=_busy)
    assert rounds == 2
    assert await _stored(kv, "k") == (1, revision)


async def test_no_change_writes_nothing_and_reports_the_revision_read(
    nc: NatsClient, project_id: str
) -> None:
    kv = await _bucket(nc, project_id, "keep")
    revision = await kv.put("k", _dump(4))
    swap = await cas_update(kv, "k", lambda _n: None, parse=_parse, dump=_dump, absent=_gone, conflict=_busy)
    assert swap == Swap(before=4, after=4, revision=revision, changed=False)
    assert await _revision(kv, "k") == revision
    kept = await cas_upsert(kv, "none", lambda _n: None, parse=_parse, dump=_dump, conflict=_busy)
    assert kept == Swap(before=None, after=None, revision=0, changed=False)
    assert await _stored(kv, "none") is None


async def test_delete_only_on_the_revision_read(nc: NatsClient, project_id: str) -> None:
    kv = await _bucket(nc, project_id, "delete")
    await kv.put("k", _dump(1))
    seen: list[int] = []

    async def delete_late(n: int) -> Delete:
        seen.append(n)
        if len(seen) == 1:
            await kv.put("k", _dump(2))  # changed after the read: the delete must not land
        return DELETE

    swap = await cas_update(kv, "k", delete_late, parse=_parse, dump=_dump, absent=_gone, conflict=_busy)
    assert seen == [1, 2]
    assert (swap.before, swap.after, swap.changed) == (2, None, True)
    assert await _stored(kv, "k") is None


async def test_a_callers_read_and_on_lost_are_used(nc: NatsClient, project_id: str) -> None:
    """A caller with its own copy of the bucket reads from it and catches it up on each
    lost race (what the lease book does with its mirror)."""
    kv = await _bucket(nc, project_id, "copy")
    await kv.put("k", _dump(1))
    copy: dict[str, tuple[int, int]] = {"k": (1, await _revision(kv, "k"))}
    await kv.put("k", _dump(2))  # the copy is now behind
    reads = 0
    caught_up = 0

    async def read() -> tuple[int, int] | None:
        nonlocal reads
        reads += 1
        return copy.get("k")

    async def catch_up() -> None:
        nonlocal caught_up
        caught_up += 1
        stored = await _stored(kv, "k")
        assert stored is not None
        copy["k"] = stored

    swap = await cas_update(
        kv,
        "k",
        lambda n: n * 10,
        read=read,
        parse=_parse,
        dump=_dump,
        absent=_gone,
        conflict=_busy,
        on_lost=catch_up,
    )
    assert (reads, caught_up) == (2, 1)
    assert (swap.before, swap.after) == (2, 20)


async def test_a_known_value_is_decided_on_without_a_read_and_a_stale_one_loses_once(
    nc: NatsClient, project_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key's usual writer passes what it wrote last: current, it costs no read; stale
    (another writer got in), that write loses and the loop reads and decides again, without
    backing off (nobody may be racing any more)."""
    kv = await _bucket(nc, project_id, "known")
    revision = await kv.put("k", _dump(1))
    reads = 0

    async def read() -> tuple[int, int] | None:
        nonlocal reads
        reads += 1
        return await _stored(kv, "k")

    seen: list[int] = []

    def double(n: int) -> int:
        seen.append(n)
        return n * 2

    async def update(known: tuple[int, int]) -> Swap[int]:
        return await cas_update(
            kv, "k", double, read=read, parse=_parse, dump=_dump, absent=_gone, conflict=_busy, known=known
        )

    swap = await update((1, revision))
    assert (reads, seen, swap.after) == (0, [1], 2)

    await kv.put("k", _dump(7))  # another writer: the guess below is stale
    backoffs: list[int] = []

    async def no_sleep(attempt: int) -> None:
        backoffs.append(attempt)

    monkeypatch.setattr(cas, "cas_backoff", no_sleep)
    seen.clear()
    swap = await update((2, swap.revision))
    assert (reads, seen, backoffs) == (1, [2, 7], [])
    assert (swap.before, swap.after) == (7, 14)
    assert await _stored(kv, "k") == (14, swap.revision)


async def test_a_lost_create_counts_as_a_round(
    nc: NatsClient, project_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A create that finds the key taken every time ends in the caller's conflict too (a
    copy that never catches up says the key is absent; the server knows better)."""
    monkeypatch.setattr(cas, "CAS_RETRIES", 3)
    kv = await _bucket(nc, project_id, "create-lost")
    revision = await kv.put("k", _dump(9))
    rounds = 0

    def create(_n: int | None) -> int:
        nonlocal rounds
        rounds += 1
        return 0

    async def stale_copy() -> tuple[int, int] | None:
        return None

    with pytest.raises(Busy):
        await cas_upsert(kv, "k", create, read=stale_copy, parse=_parse, dump=_dump, conflict=_busy)
    assert rounds == 3
    assert await _stored(kv, "k") == (9, revision)
