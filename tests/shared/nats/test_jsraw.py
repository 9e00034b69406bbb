"""shared.nats.jsapi: multi-reply JetStream requests over one routed inbox per connection."""

from __future__ import annotations

import asyncio

import pytest
from nats.aio.client import Client as NatsClient
from nats.js.api import AckPolicy, ConsumerConfig, RetentionPolicy, StorageType, StreamConfig

from shared.nats.jsapi import JetStreamReplyError, _routers, ack_all, consumer_next, direct_get_batch


async def _stream(nc: NatsClient, name: str, *, work_queue: bool = False) -> None:
    await nc.jetstream().add_stream(
        StreamConfig(
            name=name,
            subjects=[f"{name}.>"],
            storage=StorageType.MEMORY,
            allow_direct=True,
            retention=RetentionPolicy.WORK_QUEUE if work_queue else RetentionPolicy.LIMITS,
        )
    )


async def test_batched_direct_get_pages_from_a_sequence(nc: NatsClient, project_id: str) -> None:
    stream = f"RAW-{project_id}"
    await _stream(nc, stream)
    assert await direct_get_batch(nc, stream, start_seq=1, batch=10) == []  # empty: ends at once
    js = nc.jetstream()
    for i in range(5):
        await js.publish(f"{stream}.a" if i % 2 == 0 else f"{stream}.b", f"m{i}".encode())
    page = await direct_get_batch(nc, stream, start_seq=2, batch=3)
    assert [(m.seq, m.data) for m in page] == [(2, b"m1"), (3, b"m2"), (4, b"m3")]
    assert page[-1].pending == 1  # one more after this page
    only_a = await direct_get_batch(nc, stream, start_seq=1, batch=10, subject=f"{stream}.a")
    assert [m.data for m in only_a] == [b"m0", b"m2", b"m4"]
    assert await direct_get_batch(nc, stream, start_seq=6, batch=10) == []


async def test_concurrent_requests_on_one_connection_get_only_their_own_replies(
    nc: NatsClient, project_id: str
) -> None:
    streams = [f"RAW-{project_id}-{i}" for i in range(4)]
    js = nc.jetstream()
    for i, stream in enumerate(streams):
        await _stream(nc, stream)
        for n in range(i + 1):
            await js.publish(f"{stream}.x", f"{stream}/{n}".encode())
    pages = await asyncio.gather(
        *(direct_get_batch(nc, stream, start_seq=1, batch=10) for stream in streams for _ in range(5))
    )
    for index, page in enumerate(pages):
        stream = streams[index // 5]
        assert [m.data.decode() for m in page] == [f"{stream}/{n}" for n in range(index // 5 + 1)]
    assert not _routers[nc]._waiting  # every request let go of its inbox


async def test_error_status_is_raised_and_the_inbox_released(nc: NatsClient, project_id: str) -> None:
    with pytest.raises(JetStreamReplyError) as err:
        await direct_get_batch(nc, f"NO-SUCH-{project_id}", start_seq=1, batch=1)
    assert err.value.status == "503"  # nobody answers for a stream that does not exist
    stream = f"RAW-{project_id}"
    await _stream(nc, stream)
    with pytest.raises(JetStreamReplyError):
        await consumer_next(nc, stream, "no-such-consumer", batch=1)
    assert not _routers[nc]._waiting


async def test_a_request_that_times_out_leaves_nothing_behind(nc: NatsClient, project_id: str) -> None:
    stream = f"RAW-{project_id}"
    await _stream(nc, stream, work_queue=True)
    await nc.jetstream().add_consumer(stream, ConsumerConfig(durable_name="c", ack_policy=AckPolicy.EXPLICIT))
    with pytest.raises(TimeoutError):  # the server may wait 2 s, the caller only 0.2 s
        await consumer_next(nc, stream, "c", batch=1, timeout=0.2, expires_s=2.0)
    silent = await nc.subscribe(f"$JS.API.DIRECT.GET.{stream}-SILENT")  # listens, never answers
    with pytest.raises(TimeoutError):
        await direct_get_batch(nc, f"{stream}-SILENT", start_seq=1, batch=1, timeout=0.2)
    await silent.unsubscribe()
    assert not _routers[nc]._waiting


async def test_a_pull_given_up_on_hands_back_what_the_server_delivered_after(
    nc: NatsClient, project_id: str
) -> None:
    """A caller that stops waiting (a stalled event loop, a cancelled claim) before the
    answer arrives does not leave the message it pulled pending for the ack wait: it
    is NAKed and the next pull gets it."""
    stream = f"RAW-{project_id}"
    await _stream(nc, stream, work_queue=True)
    js = nc.jetstream()
    await js.add_consumer(
        stream, ConsumerConfig(durable_name="c", ack_policy=AckPolicy.EXPLICIT, ack_wait=60)
    )
    await js.publish(f"{stream}.w", b"job")
    # Gives up before any answer can arrive. The pull may wait (expires_s): a no-wait pull
    # right after the publish can be answered 404 by the server, delivering nothing.
    with pytest.raises(TimeoutError):
        await consumer_next(nc, stream, "c", batch=1, timeout=1e-9, expires_s=5.0)
    again = await consumer_next(nc, stream, "c", batch=1, timeout=10, expires_s=5.0)
    assert [m.data for m in again] == [b"job"]
    assert again[0].metadata.num_delivered == 2  # it was delivered to the pull given up on


async def test_a_cancelled_pull_hands_back_what_it_had_taken(nc: NatsClient, project_id: str) -> None:
    stream = f"RAW-{project_id}"
    await _stream(nc, stream, work_queue=True)
    js = nc.jetstream()
    await js.add_consumer(
        stream, ConsumerConfig(durable_name="c", ack_policy=AckPolicy.EXPLICIT, ack_wait=60)
    )
    await js.publish(f"{stream}.w", b"first")
    # Asks for two, waiting up to 30 s for the second: cancelled while it holds the first.
    pull = asyncio.create_task(consumer_next(nc, stream, "c", batch=2, timeout=40, expires_s=30.0))
    for _ in range(200):
        info = await js.consumer_info(stream, "c")
        if info.num_ack_pending == 1:
            break
        await asyncio.sleep(0.02)
    assert info.num_ack_pending == 1
    pull.cancel()
    with pytest.raises(asyncio.CancelledError):
        await pull
    again = await consumer_next(nc, stream, "c", batch=1, timeout=10, expires_s=5.0)
    assert [m.data for m in again] == [b"first"]


async def test_pull_takes_what_is_there_and_acks_are_on_record(nc: NatsClient, project_id: str) -> None:
    stream = f"RAW-{project_id}"
    await _stream(nc, stream, work_queue=True)
    js = nc.jetstream()
    await js.add_consumer(stream, ConsumerConfig(durable_name="c", ack_policy=AckPolicy.EXPLICIT))
    assert await consumer_next(nc, stream, "c", batch=5) == []  # no wait when nothing is there
    for i in range(3):
        await js.publish(f"{stream}.w", f"w{i}".encode())
    got = await consumer_next(nc, stream, "c", batch=5)
    assert [m.data for m in got] == [b"w0", b"w1", b"w2"]
    await ack_all(nc, got, b"+ACK")
    assert (await js.stream_info(stream)).state.messages == 0  # work queue: acked means removed
