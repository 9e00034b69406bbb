"""weft.mirror.BucketMirror: the start-up copy is complete, and read-your-writes stays quick."""

from __future__ import annotations

import uuid

import pytest
from nats.aio.client import Client as NatsClient

from shared.jsutil import drop_delete_marker
from weft.mirror import BucketMirror


async def test_start_holds_every_key_and_sync_does_not_wait_for_a_purged_marker(
    nc: NatsClient, caplog: pytest.LogCaptureFixture
) -> None:
    """Retention drops delete markers, so the stream's last sequence can name a message that
    is gone; a copy started afterwards must not wait for it on every read."""
    js = nc.jetstream()
    bucket = f"mirror-{uuid.uuid4().hex[:8]}"
    kv = await js.create_key_value(bucket=bucket, history=1)
    for n in range(50):
        await kv.put(f"k{n}", f"v{n}".encode())
    await kv.put("gone", b"x")
    await kv.delete("gone")
    await drop_delete_marker(js, bucket, "gone")  # the newest message of the stream is purged

    mirror = BucketMirror(js, kv, bucket, bytes.decode)
    with caplog.at_level("WARNING", logger="loom.weft.mirror"):
        await mirror.start()
        try:
            assert {key for key, _ in mirror.items()} == {f"k{n}" for n in range(50)}
            await mirror.sync()
            await kv.put("k0", b"new")
            await mirror.sync()
            assert mirror.get("k0") == "new"
        finally:
            await mirror.stop()
    assert "lags behind" not in caplog.text and "short of" not in caplog.text, caplog.text


async def test_start_on_an_empty_bucket(nc: NatsClient) -> None:
    js = nc.jetstream()
    bucket = f"mirror-{uuid.uuid4().hex[:8]}"
    kv = await js.create_key_value(bucket=bucket, history=1)
    mirror = BucketMirror(js, kv, bucket, bytes.decode)
    await mirror.start()
    try:
        assert list(mirror.items()) == []
        await kv.put("a", b"1")
        await mirror.sync()
        assert mirror.get("a") == "1"
    finally:
        await mirror.stop()
