"""shared.nats.jetstream's KV helpers (get_or_none, the conditional writes) against a real
nats-server: typed nats-py errors and JetStream error codes, never the text of an exception."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

import pytest
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.js.errors import InvalidKeyError, KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

from shared.models import WorkSubmission
from shared.names import ProjectNames, kv_stream, kv_subject
from shared.nats.jetstream import (
    create_if_absent,
    create_new,
    delete_unchanged,
    ensure_kv,
    get_or_none,
    publish_unchanged,
    through_leader,
    update_unchanged,
)
from shared.work.rules import WorkNotFound
from testsupport.work import work_queue

MALFORMED_KEYS = ["", "a b", ".x", "x.", "a*", "a>", "ü", "tab\there"]


async def test_nats_py_raises_typed_errors_for_missing_and_malformed_keys(
    nc: NatsClient, project_id: str
) -> None:
    """What the helpers rely on: nats-py's own exception types, checked on this version."""
    kv = await ensure_kv(nc.jetstream(), f"kvh-{project_id}-raw")
    with pytest.raises(KeyNotFoundError):
        await kv.get("never-written")
    for key in MALFORMED_KEYS:
        with pytest.raises(InvalidKeyError):
            await kv.get(key)
    await kv.put("taken", b"1")
    with pytest.raises(KeyWrongLastSequenceError):
        await kv.create("taken", b"2")


async def test_get_or_none(nc: NatsClient, project_id: str) -> None:
    kv = await ensure_kv(nc.jetstream(), f"kvh-{project_id}-get")
    assert await get_or_none(kv, "never-written") is None
    revision = await kv.put("live", b"value")
    entry = await get_or_none(kv, "live")
    assert entry is not None and entry.value == b"value" and entry.revision == revision
    await kv.put("deleted", b"x")
    await kv.delete("deleted")
    assert await get_or_none(kv, "deleted") is None
    await kv.put("purged", b"x")
    await kv.purge("purged")
    assert await get_or_none(kv, "purged") is None
    for key in MALFORMED_KEYS:
        assert await get_or_none(kv, key) is None, key


async def test_an_absent_key_is_asked_again_of_the_leader(nc: NatsClient, project_id: str) -> None:
    """A direct get may be answered by a replica that is behind: with ``confirm_absent``,
    "no such key" is believed only once the stream leader (``STREAM.MSG.GET``) says it
    too. A key found needs no second read. Counted on the wire: every JetStream API
    request is a message that a subscriber of its subject receives too; a marker sent
    after each read closes its count."""
    bucket = f"kvh-{project_id}-leader"
    kv = await ensure_kv(nc.jetstream(), bucket)
    stream = kv_stream(bucket)
    asked: list[str] = []
    marker = asyncio.Event()

    async def seen(msg: Msg) -> None:
        if msg.subject.endswith(f".{stream}.marker"):
            marker.set()
        elif msg.subject.startswith(f"$JS.API.DIRECT.GET.{stream}"):
            asked.append("direct")
        elif msg.subject == f"$JS.API.STREAM.MSG.GET.{stream}":
            asked.append("leader")

    async def reads_of(read: Awaitable[object]) -> tuple[object, list[str]]:
        asked.clear()
        marker.clear()
        got = await read
        await nc.publish(f"$JS.API.TEST.{stream}.marker", b"")
        await asyncio.wait_for(marker.wait(), 10)
        return got, list(asked)

    sub = await nc.subscribe("$JS.API.>", cb=seen)
    try:
        await kv.put("live", b"value")
        entry, reads = await reads_of(get_or_none(kv, "live"))
        assert isinstance(entry, KeyValue.Entry) and entry.value == b"value"
        assert reads == ["direct"]
        entry, reads = await reads_of(get_or_none(kv, "never-written", confirm_absent=True))
        assert entry is None and reads == ["direct", "leader"]
        entry, reads = await reads_of(get_or_none(kv, "live", confirm_absent=True))
        assert isinstance(entry, KeyValue.Entry) and reads == ["direct"]
        entry, reads = await reads_of(get_or_none(kv, "never-written"))
        assert entry is None and reads == ["direct"]  # deciding nothing: one read
        leader = through_leader(kv)
        entry, reads = await reads_of(leader.get("live"))
        assert isinstance(entry, KeyValue.Entry) and entry.value == b"value"
        assert reads == ["leader"]
        assert through_leader(leader) is leader
    finally:
        await sub.unsubscribe()


async def test_create_if_absent(nc: NatsClient, project_id: str) -> None:
    kv = await ensure_kv(nc.jetstream(), f"kvh-{project_id}-create")
    assert await create_if_absent(kv, "k", b"first") is True
    assert await create_if_absent(kv, "k", b"second") is False
    assert (await kv.get("k")).value == b"first"
    await kv.delete("k")
    assert await create_if_absent(kv, "k", b"again") is True  # a deleted key can be created again
    assert (await kv.get("k")).value == b"again"
    with pytest.raises(InvalidKeyError):  # a malformed key is a bug of the caller, not "exists"
        await create_if_absent(kv, "a b", b"x")


async def test_create_if_absent_lets_exactly_one_of_many_writers_win(nc: NatsClient, project_id: str) -> None:
    kv = await ensure_kv(nc.jetstream(), f"kvh-{project_id}-race")
    for round_ in range(5):
        key = f"race-{round_}"
        if round_ % 2:  # odd rounds race to re-create a deleted key
            await kv.put(key, b"old")
            await kv.delete(key)
        won = await asyncio.gather(*(create_if_absent(kv, key, f"w{i}".encode()) for i in range(8)))
        assert won.count(True) == 1, won
        assert (await kv.get(key)).value == f"w{won.index(True)}".encode()


async def test_create_new_returns_the_revision_or_none(nc: NatsClient, project_id: str) -> None:
    kv = await ensure_kv(nc.jetstream(), f"kvh-{project_id}-new")
    revision = await create_new(kv, "k", b"first")
    assert revision is not None and (await kv.get("k")).revision == revision
    assert await create_new(kv, "k", b"second") is None
    assert (await kv.get("k")).value == b"first"


async def test_update_unchanged_writes_only_on_the_revision_given(nc: NatsClient, project_id: str) -> None:
    kv = await ensure_kv(nc.jetstream(), f"kvh-{project_id}-update")
    first = await kv.put("k", b"1")
    second = await update_unchanged(kv, "k", b"2", first)
    assert second is not None and second > first
    assert await update_unchanged(kv, "k", b"3", first) is None  # stale revision: refused
    assert (await kv.get("k")).value == b"2"
    await kv.delete("k")
    assert await update_unchanged(kv, "k", b"4", second) is None  # deleted since
    assert await get_or_none(kv, "k") is None


async def test_delete_unchanged_deletes_only_on_the_revision_given(nc: NatsClient, project_id: str) -> None:
    kv = await ensure_kv(nc.jetstream(), f"kvh-{project_id}-delete")
    first = await kv.put("k", b"1")
    second = await kv.put("k", b"2")
    assert await delete_unchanged(kv, "k", first) is False
    assert (await kv.get("k")).value == b"2"
    assert await delete_unchanged(kv, "k", second) is True
    assert await get_or_none(kv, "k") is None


async def test_publish_unchanged_appends_only_onto_the_sequence_given(
    nc: NatsClient, project_id: str
) -> None:
    js = nc.jetstream()
    bucket = f"kvh-{project_id}-publish"
    kv = await ensure_kv(js, bucket)
    last = await kv.put("a", b"1")
    await kv.put("b", b"2")  # another key: the whole bucket's sequence moved on
    assert await publish_unchanged(js, kv_subject(bucket, "c"), b"3", last) is None
    assert await get_or_none(kv, "c") is None
    seq = await publish_unchanged(js, kv_subject(bucket, "c"), b"3", last + 1)
    assert seq == last + 2 and (await kv.get("c")).value == b"3"


@pytest.mark.parametrize("work_id", ["0" * 32, "not a key", "a*", "", "ghp_Secret9Token"])
async def test_unknown_or_malformed_work_id_is_work_not_found(
    nc: NatsClient, project_id: str, work_id: str
) -> None:
    queue = work_queue(nc, ProjectNames(project_id))
    await queue.submit(WorkSubmission(task_id="t", description="d", capability="code"), submitted_by="test")
    with pytest.raises(WorkNotFound) as info:
        await queue.get(work_id)
    assert info.value.field == "work_id" and info.value.code == "not_found"
    if work_id:
        assert work_id not in info.value.message
