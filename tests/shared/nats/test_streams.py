"""shared.nats.jetstream.ensure_stream: create or update without shrinking replicas."""

from __future__ import annotations

import pytest
from nats.aio.client import Client as NatsClient
from nats.js.api import StreamConfig

from shared.nats.client import connect
from shared.nats.jetstream import ensure_stream, replicas_of
from shared.nats.server import EmbeddedNatsServer
from shared.settings import load_loom_settings


async def test_create_then_update_keeps_existing_replicas(
    nc: NatsClient, nats_server: EmbeddedNatsServer, project_id: str
) -> None:
    js = nc.jetstream()
    name = f"S-{project_id}"
    await ensure_stream(js, StreamConfig(name=name, subjects=[f"{project_id}.a"], max_msgs=10))
    info = await js.stream_info(name)
    assert info.config.num_replicas == 1 and info.config.max_msgs == 10
    # A later process with other limits updates them; its replica setting (here
    # LOOM_JS_REPLICAS=3, passed in where it connects) is not forced onto the existing
    # stream unless it asks explicitly.
    later = await connect(url=nats_server.url, replicas=3)
    try:
        assert replicas_of(later.jetstream()) == 3
        await ensure_stream(
            later.jetstream(), StreamConfig(name=name, subjects=[f"{project_id}.a"], max_msgs=20)
        )
        info = await js.stream_info(name)
        assert info.config.max_msgs == 20 and info.config.num_replicas == 1
    finally:
        await later.close()


async def test_bad_replica_setting_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    # refused at start-up, where the settings are read, before anything is created
    monkeypatch.setenv("LOOM_JS_REPLICAS", "many")
    with pytest.raises(ValueError, match="LOOM_JS_REPLICAS"):
        load_loom_settings()
