"""testsupport.sweep: what a finished test file made on the session server is deleted, except
what was kept before it, the buckets of no one project and a session Weft's own projects.
Run against a server of its own: the session server's sweeper must not see these streams."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from nats.js.api import StorageType, StreamConfig

from shared.names import GLOBAL_REGISTRY_BUCKET, ProjectNames, kv_stream
from shared.nats.client import connect
from shared.nats.server import EmbeddedNatsServer, ServerConfig
from testsupport.sweep import _NOT_ONE_PROJECT, _listed, _sweep


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddedNatsServer]:
    with EmbeddedNatsServer(ServerConfig()) as started:
        yield started


async def _add(url: str, *names: str) -> None:
    client = await connect(url=url, name="loom-test-sweep-test")
    try:
        js = client.jetstream()
        for i, name in enumerate(names):
            await js.add_stream(
                StreamConfig(name=name, subjects=[f"sweep-test.{name}.{i}"], storage=StorageType.MEMORY)
            )
    finally:
        await client.close()


async def test_a_sweep_deletes_what_is_new_and_keeps_the_rest(server: EmbeddedNatsServer) -> None:
    default, finished = ProjectNames("sweep-default"), ProjectNames("t-sweep-finished")
    before = (ProjectNames("t-sweep-before").work_stream,)
    await _add(server.url, *before)
    kept = await _listed(server.url)
    assert set(before) <= kept
    protected = (_NOT_ONE_PROJECT, f"LOOM-{default.project_id}-", kv_stream(f"loom-{default.project_id}-"))
    made = (
        finished.work_stream,
        finished.events_stream,
        kv_stream(finished.registry_bucket),
        default.work_stream,  # a session Weft's default project, made on first use
        kv_stream(default.config_bucket),
        kv_stream(GLOBAL_REGISTRY_BUCKET),
    )
    await _add(server.url, *made)
    left = await _sweep(server.url, kept, protected)
    on_server = await _listed(server.url)
    assert left == on_server
    assert on_server >= {
        *before,
        default.work_stream,
        kv_stream(default.config_bucket),
        kv_stream(GLOBAL_REGISTRY_BUCKET),
    }
    assert not on_server & {finished.work_stream, finished.events_stream, kv_stream(finished.registry_bucket)}
    assert await _sweep(server.url, left, protected) == on_server  # nothing new: nothing deleted
