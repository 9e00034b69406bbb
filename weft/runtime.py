"""Weft's one NATS connection, and the bundled nats-server when ``NATS_URL`` is unset.

The embedded server keeps its JetStream data under the user's data home, so
work, targets and the registry survive a restart of ``weft serve``, and by default
syncs every write to disk (``LOOM_NATS_SYNC``), so they also survive a machine crash.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from dataclasses import dataclass
from pathlib import Path

from nats.aio.client import Client as NatsClient

from shared.natsclient import connect, display_url
from shared.server import EmbeddedNatsServer, NatsServerError, ServerConfig
from shared.settings import data_home
from weft.settings import WeftSettings
from weft.state import NatsInfo

log = logging.getLogger("loom.weft")

EMBEDDED_HOST = "127.0.0.1"
DRAIN_TIMEOUT_S = 5.0


@dataclass
class NatsRuntime:
    nc: NatsClient
    info: NatsInfo
    server: EmbeddedNatsServer | None = None

    async def close(self) -> None:
        try:
            if not self.nc.is_closed:
                await asyncio.wait_for(self.nc.drain(), DRAIN_TIMEOUT_S)
        except Exception as exc:
            log.debug("NATS drain on shutdown: %s", exc)
            with contextlib.suppress(Exception):
                await self.nc.close()
        if self.server is not None:
            await asyncio.to_thread(self.server.stop)


def _port_busy(port: int) -> bool:
    if port <= 0:
        return False
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.3)
        return sock.connect_ex((EMBEDDED_HOST, port)) == 0


def store_dir() -> Path:
    return data_home() / "nats" / "jetstream"


async def start_embedded(settings: WeftSettings) -> EmbeddedNatsServer:
    if _port_busy(settings.nats_port):
        raise NatsServerError(
            f"port {settings.nats_port} on {EMBEDDED_HOST} is already in use (another nats-server or weft?): "
            f"set NATS_URL=nats://{EMBEDDED_HOST}:{settings.nats_port} to use that server, or "
            "WEFT_NATS_PORT to start the bundled one on another port"
        )
    ws_port = settings.nats_ws_port
    if _port_busy(ws_port):
        log.warning("port %s is in use; the NATS WebSocket listener takes a free port instead", ws_port)
        ws_port = -1
    folder = store_dir()
    folder.mkdir(parents=True, exist_ok=True)
    config = ServerConfig(
        host=EMBEDDED_HOST,
        port=settings.nats_port,
        store_dir=folder,
        websocket_port=ws_port,
        server_name="loom-weft-embedded",
        sync_interval=settings.nats_sync,
    )
    server = EmbeddedNatsServer(config, log_file=data_home() / "nats" / "nats-server.log")
    return await asyncio.to_thread(server.start)


async def open_nats(settings: WeftSettings) -> NatsRuntime:
    server: EmbeddedNatsServer | None = None
    if settings.nats.url is None:
        server = await start_embedded(settings)
        url = server.url
    else:
        url = settings.nats.url
    try:
        nc = await connect(settings.nats, url=url, name="weft", mode="service", timeout=30)
    except BaseException:
        if server is not None:
            await asyncio.to_thread(server.stop)
        raise
    info = NatsInfo(
        url=display_url(url),
        embedded=server is not None,
        websocket_url=server.websocket_url if server is not None else None,
        store_dir=str(store_dir()) if server is not None else None,
    )
    return NatsRuntime(nc=nc, info=info, server=server)
