"""shared.nats.jsapi: stream listing pages through the JetStream API; on a server with
more streams than one page holds, nothing past the first page is missed."""

from __future__ import annotations

from nats.aio.client import Client as NatsClient
from nats.js.api import StorageType, StreamConfig

from shared.nats.client import connect
from shared.nats.jsapi import list_streams, stream_names
from shared.nats.server import EmbeddedNatsServer
from testsupport.servers import CROWD_STREAMS


async def _client(server: EmbeddedNatsServer) -> NatsClient:
    return await connect(url=server.url, name="jsapi-test")


async def test_stream_names_covers_every_page(crowded_nats_server: EmbeddedNatsServer) -> None:
    nc = await _client(crowded_nats_server)
    try:
        names = await stream_names(nc)
    finally:
        await nc.close()
    crowd = {f"A-crowd-{i:04d}" for i in range(CROWD_STREAMS)}
    assert crowd <= set(names)  # 1100 names: more than the server's 1024 per page
    assert len(names) == len(set(names))


async def test_list_streams_covers_every_page_and_filters_by_subject(
    crowded_nats_server: EmbeddedNatsServer, project_id: str
) -> None:
    nc = await _client(crowded_nats_server)
    try:
        late = f"Z-{project_id}"  # sorts after the crowd: the last page
        await nc.jetstream().add_stream(
            StreamConfig(name=late, subjects=[f"{project_id}.late"], storage=StorageType.MEMORY)
        )
        everything = await list_streams(nc)
        only_late = await list_streams(nc, subject=f"{project_id}.>")
    finally:
        await nc.close()
    names = [info["config"]["name"] for info in everything]
    assert len(names) > CROWD_STREAMS and late in names  # 256 per page: five pages
    assert [info["config"]["name"] for info in only_late] == [late]
