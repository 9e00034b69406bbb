"""shared.nats.jetstream.ensure_stream and ensure_kv: create or update without shrinking
replicas, and without a request the cluster need not answer."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from nats.aio.client import Client as NatsClient
from nats.js.api import StreamConfig

from shared.nats import jetstream
from shared.nats.client import connect
from shared.nats.jetstream import (
    PlacementError,
    ProvisionError,
    ensure_kv,
    ensure_stream,
    mark_provisioned,
    replicas_of,
)
from shared.nats.server import ClusterConfig, EmbeddedNatsServer, ServerConfig, free_port
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


async def test_a_stream_that_is_as_asked_is_neither_read_nor_updated(
    nc: NatsClient, nats_server: EmbeddedNatsServer, project_id: str
) -> None:
    """Every process ensures the streams it uses when it starts; a stream already as asked
    costs one create, answered at once, and no update (on a cluster, a change all its nodes
    agree on)."""
    name = f"S-{project_id}"
    watcher = await connect(url=nats_server.url)
    try:
        requests = await watcher.subscribe(f"$JS.API.STREAM.*.{name}")
        await watcher.flush()
        config = {"name": name, "subjects": [f"{project_id}.a"], "max_msgs": 10, "max_age": 60.0}
        for _ in range(3):
            await ensure_stream(nc.jetstream(), StreamConfig(**config))  # type: ignore[arg-type]
        await ensure_stream(nc.jetstream(), StreamConfig(**config | {"max_msgs": 20}))  # type: ignore[arg-type]
        await watcher.flush()  # every request the server passed on is queued here by now
        seen = [(await requests.next_msg()).subject.split(".")[3] for _ in range(requests.pending_msgs)]
        assert seen == ["CREATE", "CREATE", "CREATE", "CREATE", "INFO", "UPDATE"]
        assert (await nc.jetstream().stream_info(name)).config.max_msgs == 20
    finally:
        await watcher.close()


def cluster_nodes(folder: Path) -> list[EmbeddedNatsServer]:
    """Three nats-servers on loopback configured as one JetStream cluster, none started."""
    routes = [free_port() for _ in range(3)]
    return [
        EmbeddedNatsServer(
            ServerConfig(
                port=free_port(),
                server_name=f"n{i}",
                store_dir=folder / f"n{i}",
                cluster=ClusterConfig(
                    name="loom-test",
                    port=routes[i],
                    routes=[f"nats-route://127.0.0.1:{port}" for j, port in enumerate(routes) if j != i],
                ),
            ),
            log_file=folder / f"n{i}.log",
        )
        for i in range(3)
    ]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """Three nats-servers on loopback in one JetStream cluster; their client URLs."""
    servers = cluster_nodes(tmp_path_factory.mktemp("cluster"))
    try:
        for server in servers:
            server.start(20)
        yield [server.url for server in servers]
    finally:
        for server in servers:
            server.kill()


async def clients_of(cluster: list[str]) -> list[NatsClient]:
    """Six connections, two per node, once the cluster can make a replicated stream."""
    clients = [await connect(url=cluster[k % 3], replicas=3) for k in range(6)]
    first = clients[0].jetstream(timeout=2)
    while True:  # until the cluster has a meta leader and all three peers
        try:
            await first.add_stream(StreamConfig(name="WARM", subjects=["warm"], num_replicas=3))
            return clients
        except Exception:
            await asyncio.sleep(0.2)


async def test_processes_starting_together_on_a_cluster_wait_for_no_timeout(cluster: list[str]) -> None:
    """Six processes, two per node, start at once and ensure the same new replicated streams
    and buckets in turn. One creates each; the others must not ask for its info while it has
    no leader yet (such a request goes unanswered until it times out: on a fleet's first
    start, each process waited out one or two of its timeouts)."""
    clients = await clients_of(cluster)
    first = clients[0].jetstream(timeout=2)
    try:
        for round_ in range(2):

            async def start(client: NatsClient, round_: int = round_) -> None:
                """What a process does as it starts: its project's streams and buckets, in turn."""
                js = client.jetstream(timeout=2)
                for k in range(4):
                    name = f"R{round_}S{k}"
                    await ensure_stream(
                        js, StreamConfig(name=name, subjects=[f"r{round_}.s{k}"], max_msgs=100)
                    )
                    await ensure_kv(js, f"r{round_}-b{k}", history=2)

            results = await asyncio.gather(*(start(c) for c in clients), return_exceptions=True)
            assert [r for r in results if r is not None] == [], results
            stream = await first.stream_info(f"R{round_}S3")
            assert stream.config.num_replicas == 3 and stream.config.max_msgs == 100
            bucket = await first.stream_info(f"KV_r{round_}-b3")
            assert bucket.config.num_replicas == 3 and bucket.config.max_msgs_per_subject == 2
    finally:
        for client in clients:
            await client.close()


async def test_a_create_waits_for_a_live_peer_per_replica(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cluster and Weft often start together: Weft's first R3 create can reach a meta
    leader that has not heard from the third node yet, which the server refuses at once (a
    Weft failed to start so). The create is asked again until the peer is there; a peer that
    never comes is named as the cause once the wait is over."""
    nodes = cluster_nodes(tmp_path)
    client: NatsClient | None = None
    try:
        for node in nodes[:2]:
            node.start(20)
        client = await connect(url=nodes[0].url, replicas=3)
        js = client.jetstream(timeout=2)
        while True:  # until the two nodes have elected a meta leader
            try:
                await js.account_info()
                break
            except Exception:
                await asyncio.sleep(0.2)
        monkeypatch.setattr(jetstream, "PLACEMENT_WAIT_S", 0.5)
        with pytest.raises(
            PlacementError, match="bucket late-bucket: the NATS cluster has fewer than 3 live"
        ) as refused:
            await ensure_kv(js, "late-bucket")
        assert "LOOM_JS_REPLICAS" in str(refused.value)
        monkeypatch.setattr(jetstream, "PLACEMENT_WAIT_S", 60.0)
        creates = await client.subscribe("$JS.API.STREAM.CREATE.LATE")
        await client.flush()
        waiting = asyncio.create_task(ensure_stream(js, StreamConfig(name="LATE", subjects=["late"])))
        for _ in range(2):  # refused at least once, and asked again
            await creates.next_msg(timeout=10)
        assert not waiting.done()
        nodes[2].start(20)
        await asyncio.wait_for(waiting, 60)
        assert (await js.stream_info("LATE")).config.num_replicas == 3
    finally:
        if client is not None:
            await client.close()
        for node in nodes:
            node.kill()


async def test_a_scoped_connection_with_no_weft_to_ask_is_told_so_at_once(
    nats_server: EmbeddedNatsServer, project_id: str
) -> None:
    """A connection holding an agent's scoped credentials asks Weft to create what it lacks;
    with no Weft serving the project the request has no responders, and the error says what
    to check without waiting out the provisioning timeout."""
    agent = await connect(url=nats_server.url)
    try:
        mark_provisioned(agent, project_id)
        with pytest.raises(ProvisionError, match=r"is Weft running for this project\?"):
            await asyncio.wait_for(
                ensure_kv(agent.jetstream(), f"{project_id}-missing"),
                timeout=jetstream.PROVISION_TIMEOUT_S / 2,
            )
    finally:
        await agent.close()
