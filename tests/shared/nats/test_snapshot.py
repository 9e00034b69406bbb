"""shared.nats.jetstream.snapshot: a complete one-pass read of a KV bucket."""

from __future__ import annotations

from nats.aio.client import Client as NatsClient

from shared.nats.jetstream import ONE_SHOT_INACTIVE_S, ensure_kv, snapshot, snapshot_keys


async def test_snapshot_sees_every_live_key_and_no_deleted_one(nc: NatsClient, project_id: str) -> None:
    kv = await ensure_kv(nc.jetstream(), f"snap-{project_id}")
    assert await snapshot(kv) == {}
    for i in range(300):
        await kv.put(f"k{i}", f"v{i}".encode())
    await kv.put("k0", b"new")
    await kv.delete("k299")  # the newest message in the bucket is a delete marker
    # Repeated reads: the watcher's early end-of-values marker must never cut one short.
    for _ in range(15):
        values = await snapshot(kv)
        assert len(values) == 299 and values["k0"] == b"new" and "k299" not in values


async def test_snapshot_where_keeps_only_values_that_pass(nc: NatsClient, project_id: str) -> None:
    """A key whose newest value fails the test is left out, even if an older one passed."""
    kv = await ensure_kv(nc.jetstream(), f"snap-{project_id}-where")
    for i in range(40):
        await kv.put(f"k{i}", b"keep" if i % 4 == 0 else b"skip")
    await kv.put("k0", b"skip now")
    await kv.put("k1", b"keep now")
    values = await snapshot(kv, where=lambda value: value.startswith(b"keep"))
    assert values == {f"k{i}": b"keep" for i in range(4, 40, 4)} | {"k1": b"keep now"}
    assert len(await snapshot(kv)) == 40


async def test_snapshot_of_a_bucket_holding_only_delete_markers(nc: NatsClient, project_id: str) -> None:
    kv = await ensure_kv(nc.jetstream(), f"snap-{project_id}-gone")
    await kv.put("a", b"1")
    await kv.delete("a")
    assert await snapshot(kv) == {}


async def test_snapshot_keys_reads_only_the_pattern_and_sees_deletes(nc: NatsClient, project_id: str) -> None:
    bucket = f"snap-{project_id}-keys"
    js = nc.jetstream()
    kv = await ensure_kv(js, bucket)
    assert await snapshot_keys(js, kv, bucket, "op.*") == {}  # empty bucket: answers at once
    await kv.put("slot.a", b"not an op")
    assert await snapshot_keys(js, kv, bucket, "op.*") == {}  # nothing under the pattern
    for i in range(50):
        await kv.put(f"op.{i}", f"v{i}".encode())
    await kv.delete("op.3")
    await kv.purge("op.4")
    await kv.put("op.0", b"new")
    for _ in range(10):  # repeated: the watcher's early end marker must never cut a read short
        values = await snapshot_keys(js, kv, bucket, "op.*")
        assert len(values) == 48 and values["op.0"] == b"new"
        assert "op.3" not in values and "op.4" not in values and "slot.a" not in values


async def test_one_shot_reads_leave_no_lasting_consumers(nc: NatsClient, project_id: str) -> None:
    """Weft's sweep reads the questions bucket every few seconds: each read's consumer must go
    within seconds, or the server's cap of 1,000 consumers per stream stops every sweep."""
    bucket = f"snap-{project_id}-consumers"
    js = nc.jetstream()
    kv = await ensure_kv(js, bucket)
    await kv.put("op.1", b"x")
    for _ in range(5):
        await snapshot(kv)
        await snapshot_keys(js, kv, bucket, "op.*")
    left = await js.consumers_info(f"KV_{bucket}")
    assert left and all(
        c.config.inactive_threshold is not None and c.config.inactive_threshold <= ONE_SHOT_INACTIVE_S
        for c in left
    ), [c.config.inactive_threshold for c in left]
