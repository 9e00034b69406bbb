"""weft.spinup.kvmirror.KvMirror: the start-up copy of the keys it follows, and only those."""

from __future__ import annotations

import uuid

from nats.aio.client import Client as NatsClient

from weft.spinup.kvmirror import KvMirror


async def test_start_holds_every_key_under_its_pattern(nc: NatsClient) -> None:
    js = nc.jetstream()
    bucket = f"kvm-{uuid.uuid4().hex[:8]}"
    kv = await js.create_key_value(bucket=bucket, history=1)
    for n in range(200):
        await kv.put(f"op.{n}", f"{n}".encode())
    await kv.put("op.gone", b"x")
    await kv.delete("op.gone")
    await kv.put("slot.a", b"not mine")  # the stream's newest message is outside the pattern

    mirror = KvMirror(js, kv, bucket, bytes.decode, keys="op.*")
    await mirror.start(timeout=5.0)
    try:
        assert {key for key, _ in mirror.items()} == {f"op.{n}" for n in range(200)}
        revision = await kv.put("op.new", b"late")
        assert await mirror.wait_for(revision)
        assert mirror.get("op.new") == "late"
    finally:
        await mirror.stop()


async def test_start_with_nothing_under_its_pattern(nc: NatsClient) -> None:
    js = nc.jetstream()
    bucket = f"kvm-{uuid.uuid4().hex[:8]}"
    kv = await js.create_key_value(bucket=bucket, history=1)
    await kv.put("slot.a", b"other keys only")
    mirror = KvMirror(js, kv, bucket, bytes.decode, keys="op.*")
    await mirror.start(timeout=5.0)
    try:
        assert mirror.items() == []
    finally:
        await mirror.stop()
