"""shared.nats.mirror.BucketMirror: the start-up copy is complete, read-your-writes is quick and
right with key patterns, and a watch re-opened after an outage rebuilds the copy."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

import nats.errors
import pytest
from nats.aio.client import Client as NatsClient
from weft_helpers import eventually

from shared.names import kv_stream
from shared.nats.client import connect
from shared.nats.jetstream import drop_delete_marker
from shared.nats.mirror import BucketMirror, Slot
from shared.nats.server import EmbeddedNatsServer, ServerConfig
from testsupport.processes import frozen


def text(_key: str, raw: bytes) -> str:
    return raw.decode()


async def _bucket(nc: NatsClient) -> tuple[Any, str]:
    bucket = f"mirror-{uuid.uuid4().hex[:8]}"
    return await nc.jetstream().create_key_value(bucket=bucket, history=1), bucket


async def test_start_holds_every_key_and_sync_does_not_wait_for_a_purged_marker(
    nc: NatsClient, caplog: pytest.LogCaptureFixture
) -> None:
    """Retention drops delete markers, so the stream's last sequence can name a message that
    is gone; a copy started afterwards must not wait for it on every read."""
    js = nc.jetstream()
    kv, bucket = await _bucket(nc)
    for n in range(50):
        await kv.put(f"k{n}", f"v{n}".encode())
    await kv.put("gone", b"x")
    await kv.delete("gone")
    await drop_delete_marker(js, bucket, "gone")  # the newest message of the stream is purged

    mirror = BucketMirror(js, bucket, text, nc=nc)
    with caplog.at_level("WARNING", logger="loom.shared.mirror"):
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
    kv, bucket = await _bucket(nc)
    mirror = BucketMirror(nc.jetstream(), bucket, text, nc=nc)
    await mirror.start()
    try:
        assert list(mirror.items()) == []
        await kv.put("a", b"1")
        await mirror.sync()
        assert mirror.get("a") == "1"
    finally:
        await mirror.stop()


async def test_a_key_pattern_holds_its_keys_only_and_its_waits_ignore_the_others(
    nc: NatsClient, caplog: pytest.LogCaptureFixture
) -> None:
    """The server filters the keys; every wait is computed for the pattern, so a write to a
    key outside it (the stream's newest message) is never waited for."""
    js = nc.jetstream()
    kv, bucket = await _bucket(nc)
    for n in range(200):
        await kv.put(f"op.{n}", f"{n}".encode())
    await kv.put("op.gone", b"x")
    await kv.delete("op.gone")
    await kv.put("slot.a", b"not mine")

    mirror = BucketMirror(js, bucket, text, keys="op.*", nc=nc)
    with caplog.at_level("WARNING", logger="loom.shared.mirror"):
        await mirror.start()
        try:
            assert {key for key, _ in mirror.items()} == {f"op.{n}" for n in range(200)}
            await kv.put("slot.b", b"still not mine")
            await mirror.sync()  # the newest write is outside the pattern: nothing to wait for
            revision = await kv.put("op.new", b"late")
            assert await mirror.wait_for(revision)
            assert mirror.get("op.new") == "late" and mirror.get("slot.b") is None
            assert [key for key, _ in mirror.items("op.1")][:1] == ["op.1"]
        finally:
            await mirror.stop()
    assert "lags behind" not in caplog.text and "short of" not in caplog.text, caplog.text


async def test_start_with_nothing_under_its_pattern(nc: NatsClient) -> None:
    kv, bucket = await _bucket(nc)
    await kv.put("slot.a", b"other keys only")
    mirror = BucketMirror(nc.jetstream(), bucket, text, keys="op.*", nc=nc)
    await mirror.start()
    try:
        assert list(mirror.items()) == []
    finally:
        await mirror.stop()


async def test_an_unreadable_record_is_skipped_not_fatal(nc: NatsClient) -> None:
    def number(_key: str, raw: bytes) -> int:
        return int(raw)  # ValueError for anything else

    kv, bucket = await _bucket(nc)
    await kv.put("a", b"1")
    await kv.put("b", b"not a number")
    mirror = BucketMirror(nc.jetstream(), bucket, number, nc=nc)
    await mirror.start()
    try:
        assert dict(mirror.items()) == {"a": 1}
        assert mirror.get("b") is None and len(mirror) == 2
    finally:
        await mirror.stop()


class CuttableLink:
    """A TCP relay to the nats-server whose link the test can cut and restore: a real
    outage of one client's connection while the server (and other clients) carry on."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = 0
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    async def open(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def cut(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()
        for writer in list(self._writers):
            writer.close()
        for task in list(self._pipes):
            task.cancel()
        self._writers.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        self._writers |= {writer, up_writer}
        for source, sink in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.create_task(self._pipe(source, sink))
            self._pipes.add(task)
            task.add_done_callback(self._pipes.discard)

    @staticmethod
    async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.CancelledError):
            while data := await source.read(65536):
                sink.write(data)
                await sink.drain()
        sink.close()


async def test_a_server_slow_to_answer_is_a_copy_that_cannot_catch_up_a_server_gone_is_an_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A read that syncs first waits at most its timeout, however slow the server is to say how
    far the bucket goes (a frozen server: the connection still stands), and then serves the copy;
    with the connection lost, it is an error the caller reports (Weft: 503), not a stale answer."""
    server = EmbeddedNatsServer(ServerConfig()).start()
    client = await connect(url=server.url, name="mirror-under-test", mode="service", timeout=10)
    try:
        kv, bucket = await _bucket(client)
        await kv.put("a", b"1")
        mirror = BucketMirror(client.jetstream(), bucket, text, nc=client)
        await mirror.start()
        assert server.pid is not None
        with frozen(server.pid), caplog.at_level("WARNING", logger="loom.mirror"):
            assert client.is_connected
            assert await mirror.sync(timeout=0.5) is False
            assert "did not say how far it goes" in caplog.text
            assert mirror.get("a") == "1"  # what it has, served
        await kv.put("a", b"2")
        assert await mirror.sync() is True
        assert mirror.get("a") == "2"

        server.kill()

        async def cut_off() -> bool:
            return not client.is_connected

        await eventually(cut_off, what="the client to notice the server is gone")
        with pytest.raises((TimeoutError, nats.errors.Error)):
            await mirror.sync(timeout=0.5)
        await mirror.stop()
    finally:
        with contextlib.suppress(OSError):  # nats-py's close flushes to a socket that may be gone
            await client.close()
        server.stop()


async def test_a_watch_reopened_after_an_outage_drops_keys_deleted_and_purged_meanwhile(
    nc: NatsClient, nats_server: EmbeddedNatsServer
) -> None:
    """While a Weft is cut off, a key is deleted and retention purges its delete marker: no
    watch can ever deliver that delete. The copy must be rebuilt from a new snapshot when the
    connection comes back, or it keeps the key for good."""
    js = nc.jetstream()
    kv, bucket = await _bucket(nc)
    await kv.put("stays", b"1")
    await kv.put("goes", b"2")
    port = int(nats_server.url.rsplit(":", 1)[1])
    link = CuttableLink(port)
    await link.open()
    client = await connect(url=link.url, name="mirror-under-test", mode="service", timeout=10)
    changes: list[tuple[str, str | None]] = []

    async def record(key: str, _before: Slot[str] | None, after: Slot[str] | None, initial: bool) -> None:
        if not initial:
            changes.append((key, None if after is None else after.raw.decode()))

    mirror = BucketMirror(
        client.jetstream(),
        bucket,
        text,
        on_change=record,
        nc=client,
    )
    await mirror.start()
    try:
        assert dict(mirror.items()) == {"stays": "1", "goes": "2"}
        await link.cut()
        await kv.delete("goes")
        await drop_delete_marker(js, bucket, "goes")
        await kv.put("new", b"3")
        await link.open()

        async def rebuilt() -> bool:
            return dict(mirror.items()) == {"stays": "1", "new": "3"}

        await eventually(rebuilt, timeout=30, what="the copy rebuilt after the outage")
        assert ("goes", None) in changes and ("new", "3") in changes
        assert ("stays", "1") not in changes  # unchanged keys are not reported again
        assert mirror.restarts >= 1
        await kv.put("after", b"4")
        await mirror.sync()
        assert mirror.get("after") == "4"  # and it follows the bucket again
    finally:
        await mirror.stop()
        await client.close()
        await link.cut()


async def test_a_watch_whose_consumer_is_gone_is_reopened_once_reads_find_it_stalled(
    nc: NatsClient, caplog: pytest.LogCaptureFixture
) -> None:
    """A partition can leave a watch's consumer on a server cut off from the client, or a
    server can lose it: no error, no reconnect, the watch just falls silent and nats-py's
    ordered consumer never notices. Reads that keep finding the copy behind at one revision
    must re-open the watch; before, the copy served the old value for good."""
    js = nc.jetstream()
    kv, bucket = await _bucket(nc)
    await kv.put("a", b"1")
    mirror = BucketMirror(js, bucket, text, nc=nc, stall_s=1.0)
    await mirror.start()
    try:
        for consumer in await js.consumers_info(kv_stream(bucket)):
            await js.delete_consumer(kv_stream(bucket), consumer.name)
        await kv.put("a", b"2")
        assert not await mirror.sync(timeout=0.3)  # behind: the watch delivers nothing

        async def caught_up() -> bool:
            return await mirror.sync(timeout=0.3) and mirror.get("a") == "2"

        with caplog.at_level("WARNING", logger="loom.mirror"):
            await eventually(caught_up, timeout=30, what="the stalled copy re-opened and caught up")
        assert mirror.restarts == 1
        assert "re-opening it" in caplog.text
        await kv.put("a", b"3")
        assert await mirror.sync()
        assert mirror.get("a") == "3"  # and it follows the bucket again
    finally:
        await mirror.stop()
