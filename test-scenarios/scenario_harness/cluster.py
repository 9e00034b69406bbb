"""A 3-node NATS cluster on loopback for scenario 17.

Each node has its own client, route and monitoring ports (fixed, so a restarted node is
the same node), its own data folder and a unique ``server_name`` (JetStream needs one per
node). Nodes can be stopped and started one at a time; ``connections`` reads a node's
``/connz`` so a scenario can see which client is on which node.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from nats.js import JetStreamContext

from scenario_harness.drills import RestartableNats
from shared.nats.client import connect
from shared.nats.server import ClusterConfig, ServerConfig, free_port

CLUSTER_NAME = "loom-drill"


@contextlib.asynccontextmanager
async def jetstream_at(url: str, *, name: str, timeout: float = 5.0) -> AsyncIterator[JetStreamContext]:
    """A JetStream context on a connection of its own to ``url``, closed after the block."""
    nc = await connect(url=url, name=name, timeout=20)
    try:
        yield nc.jetstream(timeout=timeout)
    finally:
        await nc.close()


async def wait_jetstream(url: str, timeout: float = 30.0) -> None:
    """Until JetStream answers through ``url`` (a meta leader has been elected)."""
    async with jetstream_at(url, name="cluster-probe", timeout=2) as js:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            try:
                await js.account_info()
                return
            except Exception:
                if asyncio.get_running_loop().time() > deadline:
                    raise
                await asyncio.sleep(0.2)


class NatsCluster:
    def __init__(self, folder: Path, size: int = 3) -> None:
        self.folder = folder
        client = [free_port() for _ in range(size)]
        routes = [free_port() for _ in range(size)]
        self.monitor = [free_port() for _ in range(size)]
        self.nodes: list[RestartableNats] = []
        for i in range(size):
            others = [f"nats-route://127.0.0.1:{routes[j]}" for j in range(size) if j != i]
            config = ServerConfig(
                port=client[i],
                store_dir=folder / f"n{i}" / "jetstream",
                server_name=f"n{i}",
                cluster=ClusterConfig(name=CLUSTER_NAME, port=routes[i], routes=others),
                extra=f"http: 127.0.0.1:{self.monitor[i]}",
            )
            self.nodes.append(RestartableNats(folder / f"n{i}", config))

    @property
    def url(self) -> str:
        """Every node, for clients that may use any of them."""
        return ",".join(node.url for node in self.nodes)

    def node_url(self, i: int) -> str:
        return self.nodes[i].url

    def name(self, i: int) -> str:
        return f"n{i}"

    def index_of(self, name: str) -> int:
        return int(name.removeprefix("n"))

    async def start(self) -> None:
        for node in self.nodes:
            await asyncio.to_thread(node.start)
        for i in range(len(self.nodes)):
            await self.wait_jetstream(i)

    async def wait_jetstream(self, i: int, timeout: float = 30.0) -> None:
        """Until JetStream answers through node ``i`` (a meta leader has been elected)."""
        await wait_jetstream(self.node_url(i), timeout)

    async def stop_node(self, i: int) -> None:
        await asyncio.to_thread(self.nodes[i].stop)

    def kill_node(self, i: int) -> None:
        """SIGKILL node ``i`` (a crash; its data folder stays)."""
        self.nodes[i].kill()

    async def start_node(self, i: int) -> None:
        await asyncio.to_thread(self.nodes[i].start)

    def stop_all(self) -> None:
        for node in self.nodes:
            with contextlib.suppress(Exception):
                node.stop()

    async def connections(self, i: int) -> list[dict[str, Any]]:
        """The client connections node ``i`` holds right now (its ``/connz``)."""
        async with httpx.AsyncClient(timeout=5) as http:
            response = await http.get(f"http://127.0.0.1:{self.monitor[i]}/connz", params={"limit": 1024})
            response.raise_for_status()
            return list(response.json().get("connections") or [])

    async def node_of(self, connection_name: str) -> int | None:
        """Which node a named client is connected to (None: none right now)."""
        for i, node in enumerate(self.nodes):
            if not node.running:
                continue
            with contextlib.suppress(httpx.HTTPError):
                if any(c.get("name") == connection_name for c in await self.connections(i)):
                    return i
        return None
