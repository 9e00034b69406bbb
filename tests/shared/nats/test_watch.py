"""shared.nats.watch.KeyWatch, the one watch of a KV bucket, against a real nats-server."""

from __future__ import annotations

import asyncio

from nats.aio.client import Client as NatsClient

from shared.names import kv_stream, kv_subject
from shared.nats.jetstream import ensure_kv
from shared.nats.watch import DEL, PURGE, PUT, KeyChange, KeyWatch

WAIT_S = 30.0
"""Only a bound on a hang: no assertion depends on how fast anything is."""


async def _next(watch: KeyWatch) -> KeyChange | None:
    return await asyncio.wait_for(anext(watch), WAIT_S)


async def _initial(watch: KeyWatch) -> dict[str, bytes]:
    """The live values read up to the end-of-initial-values marker (a deleted key's last
    message, its delete marker, is initial too)."""
    values: dict[str, bytes] = {}
    while (change := await _next(watch)) is not None:
        if change.removed:
            values.pop(change.key, None)
        else:
            assert change.operation == PUT
            values[change.key] = change.value
    return values


async def test_current_values_then_the_end_marker_then_every_change(nc: NatsClient, project_id: str) -> None:
    js = nc.jetstream()
    bucket = f"watch-{project_id}"
    kv = await ensure_kv(js, bucket, history=5)
    for n in range(300):
        await kv.put(f"k{n}", f"v{n}".encode())
    await kv.put("k0", b"newer")  # only the newest value of a key is initial
    await kv.put("gone", b"x")
    await kv.delete("gone")  # the newest message of the bucket is a delete marker
    # Repeated watches: the end marker must never come before an initial value.
    for _ in range(10):
        watch = await KeyWatch(js, bucket).start()
        try:
            values = await _initial(watch)
            assert watch.loaded.is_set()
            assert len(values) == 300 and values["k0"] == b"newer" and "gone" not in values
        finally:
            await watch.stop()

    for key in ("op.a", "op.b", "op.c"):
        await kv.put(key, b"op")
    watch = await KeyWatch(js, bucket, "op.*").start()
    try:
        assert set(await _initial(watch)) == {"op.a", "op.b", "op.c"}
        revision = await kv.put("op.a", b"live")
        await kv.put("k1", b"not under the pattern")
        await kv.delete("op.b")
        await kv.purge("op.c")
        put, deleted, purged = await _next(watch), await _next(watch), await _next(watch)
        assert put is not None and (put.key, put.value, put.revision, put.removed) == (
            "op.a",
            b"live",
            revision,
            False,
        )
        assert deleted is not None and (deleted.key, deleted.operation, deleted.removed) == (
            "op.b",
            DEL,
            True,
        )
        assert purged is not None and (purged.key, purged.operation, purged.removed) == ("op.c", PURGE, True)
        assert not deleted.expired and not purged.expired
    finally:
        await watch.stop()


async def test_an_empty_bucket_is_loaded_at_once(nc: NatsClient, project_id: str) -> None:
    js = nc.jetstream()
    bucket = f"watch-{project_id}-empty"
    kv = await ensure_kv(js, bucket)
    await kv.put("elsewhere", b"1")
    watch = await KeyWatch(js, bucket, "none.*").start()
    try:
        assert watch.loaded.is_set()
        assert await _next(watch) is None
        await kv.put("none.a", b"first")
        change = await _next(watch)
        assert change is not None and change.key == "none.a" and change.value == b"first"
    finally:
        await watch.stop()


async def test_stop_ends_an_iterating_reader(nc: NatsClient, project_id: str) -> None:
    js = nc.jetstream()
    bucket = f"watch-{project_id}-stop"
    kv = await ensure_kv(js, bucket)
    await kv.put("a", b"1")
    watch = await KeyWatch(js, bucket).start()
    seen: list[KeyChange | None] = []

    async def read() -> None:
        async for change in watch:
            seen.append(change)

    reader = asyncio.create_task(read())
    await asyncio.wait_for(watch.loaded.wait(), WAIT_S)
    await watch.stop()
    await asyncio.wait_for(reader, WAIT_S)  # the loop ended by itself
    assert [c.key if c else None for c in seen] == ["a", None]
    await watch.stop()  # twice is fine


async def test_an_expiry_is_told_from_a_forget(nc: NatsClient, project_id: str) -> None:
    """The server's own marker (per-message TTL ran out) arrives as an expiry, with the
    time it was placed; a purge someone published is not one."""
    js = nc.jetstream()
    bucket = f"watch-{project_id}-ttl"
    kv = await ensure_kv(js, bucket, marker_ttl=60.0)
    changes: asyncio.Queue[KeyChange] = asyncio.Queue()

    async def record(change: KeyChange) -> None:
        await changes.put(change)

    watch = await KeyWatch(js, bucket, on_change=record, heartbeat_s=1.0).start()
    try:
        await kv.create("brief", b"x", msg_ttl=1)
        await kv.put("forgotten", b"y")
        await kv.purge("forgotten")
        seen: dict[tuple[str, str], KeyChange] = {}
        while ("brief", PURGE) not in seen or ("forgotten", PURGE) not in seen:
            change = await asyncio.wait_for(changes.get(), WAIT_S)
            seen[(change.key, change.operation)] = change
        expired, forgotten = seen[("brief", PURGE)], seen[("forgotten", PURGE)]
        assert expired.expired and expired.removed and expired.value == b""
        assert expired.stored_at >= seen[("brief", PUT)].stored_at
        assert not forgotten.expired and forgotten.removed
    finally:
        await watch.stop()


async def test_a_failing_handler_does_not_stop_the_watch(nc: NatsClient, project_id: str) -> None:
    js = nc.jetstream()
    bucket = f"watch-{project_id}-bad"
    kv = await ensure_kv(js, bucket)
    await kv.put("bad", b"1")
    await kv.put("good", b"2")
    handled: list[str] = []
    later = asyncio.Event()

    async def handle(change: KeyChange) -> None:
        if change.key == "bad":
            raise ValueError("cannot read this one")
        handled.append(change.key)
        if change.key == "later":
            later.set()

    watch = await KeyWatch(js, bucket, on_change=handle).start()
    try:
        await asyncio.wait_for(watch.loaded.wait(), WAIT_S)  # set although one handler failed
        assert handled == ["good"]
        await kv.put("later", b"3")
        await asyncio.wait_for(later.wait(), WAIT_S)
        assert handled == ["good", "later"]
    finally:
        await watch.stop()


async def test_a_consumer_reads_the_kv_stream_itself(nc: NatsClient, project_id: str) -> None:
    """What KeyWatch reads is the bucket's own stream: a message published straight to a
    key's subject (as Pattern does, to set a per-message TTL) is a change like any other."""
    js = nc.jetstream()
    bucket = f"watch-{project_id}-raw"
    await ensure_kv(js, bucket)
    watch = await KeyWatch(js, bucket).start()
    try:
        assert await _next(watch) is None
        ack = await js.publish(kv_subject(bucket, "raw"), b"direct", stream=kv_stream(bucket))
        change = await _next(watch)
        assert change is not None and (change.key, change.value, change.revision) == (
            "raw",
            b"direct",
            ack.seq,
        )
    finally:
        await watch.stop()
