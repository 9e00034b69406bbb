"""shared.nats.jetstream.ensure_kv, the one bind-or-create of a KV bucket, against a real
nats-server (Pattern's memory buckets: tests/pattern/test_pattern_service.py)."""

from __future__ import annotations

import asyncio

from nats.aio.client import Client as NatsClient
from nats.js.kv import KeyValue

from shared.names import kv_stream
from shared.nats.jetstream import ensure_kv


async def test_ensure_kv_creates_with_the_settings_asked_for(nc: NatsClient, project_id: str) -> None:
    bucket = f"ens-{project_id}"
    kv = await ensure_kv(
        nc.jetstream(), bucket, history=3, ttl=60.0, description="d", max_value_size=1024, marker_ttl=5.0
    )
    assert isinstance(kv, KeyValue)
    config = (await nc.jetstream().stream_info(kv_stream(bucket))).config
    assert config.max_msgs_per_subject == 3 and config.max_age == 60.0 and config.description == "d"
    assert config.max_msg_size == 1024 and config.subject_delete_marker_ttl == 5.0
    assert config.allow_direct is True


async def test_an_existing_bucket_is_bound_as_it_is(nc: NatsClient, project_id: str) -> None:
    bucket = f"ens-{project_id}-kept"
    js = nc.jetstream()
    first = await ensure_kv(js, bucket, history=2, description="first")
    await first.put("k", b"v")
    again = await ensure_kv(js, bucket, history=5, description="second")
    assert (await again.get("k")).value == b"v"
    config = (await js.stream_info(kv_stream(bucket))).config
    assert config.max_msgs_per_subject == 2 and config.description == "first"


async def test_concurrent_creators_all_get_the_bucket(nc: NatsClient, project_id: str) -> None:
    bucket = f"ens-{project_id}-race"
    buckets = await asyncio.gather(*(ensure_kv(nc.jetstream(), bucket) for _ in range(6)))
    await buckets[0].put("k", b"v")
    for kv in buckets:
        assert (await kv.get("k")).value == b"v"
