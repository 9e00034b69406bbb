"""shared.nats.jetstream.ensure_stream: create or update without shrinking replicas."""

from __future__ import annotations

import pytest
from nats.aio.client import Client as NatsClient
from nats.js.api import StreamConfig

from shared.nats.jetstream import ensure_stream


async def test_create_then_update_keeps_existing_replicas(
    nc: NatsClient, project_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    js = nc.jetstream()
    name = f"S-{project_id}"
    await ensure_stream(js, StreamConfig(name=name, subjects=[f"{project_id}.a"], max_msgs=10))
    info = await js.stream_info(name)
    assert info.config.num_replicas == 1 and info.config.max_msgs == 10
    # A later process with other limits updates them; its replica setting (here the
    # default) is not forced onto the existing stream unless it asks explicitly.
    monkeypatch.setenv("LOOM_JS_REPLICAS", "3")
    await ensure_stream(js, StreamConfig(name=name, subjects=[f"{project_id}.a"], max_msgs=20))
    info = await js.stream_info(name)
    assert info.config.max_msgs == 20 and info.config.num_replicas == 1


async def test_bad_replica_setting_is_named(monkeypatch: pytest.MonkeyPatch, nc: NatsClient) -> None:
    monkeypatch.setenv("LOOM_JS_REPLICAS", "many")
    with pytest.raises(ValueError, match="LOOM_JS_REPLICAS"):
        await ensure_stream(nc.jetstream(), StreamConfig(name="S-bad-replicas", subjects=["bad.replicas"]))
