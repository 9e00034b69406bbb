"""Weft's one NATS connection, and the bundled nats-server when ``NATS_URL`` is unset.

The embedded server keeps its JetStream data under the user's data home, so
work, targets and the registry survive a restart of ``weft serve``, and by default
syncs every write to disk (``LOOM_NATS_SYNC``), so they also survive a machine crash.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from nats.aio.client import Client as NatsClient
from pydantic import SecretStr

from shared.nats.auth import CredentialsError, Issuer, Permissions, server_auth_config
from shared.nats.client import NatsConnectError, connect, display_url, parse_url
from shared.nats.server import EmbeddedNatsServer, NatsServerError, ServerConfig
from shared.settings import NatsSettings
from weft.credentials import CredentialAuthority
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
    authority: CredentialAuthority | None = None
    """Scoped auth: issues agents' credentials (its system connection is closed with Weft's)."""

    async def close(self) -> None:
        connections = [self.nc] + ([self.authority.system_nc] if self.authority is not None else [])
        for nc in connections:
            try:
                if not nc.is_closed:
                    await asyncio.wait_for(nc.drain(), DRAIN_TIMEOUT_S)
            except Exception as exc:
                log.debug("NATS drain on shutdown: %s", exc)
                with contextlib.suppress(Exception):
                    await nc.close()
        if self.server is not None:
            await asyncio.to_thread(self.server.stop)


def _port_busy(port: int) -> bool:
    if port <= 0:
        return False
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.3)
        return sock.connect_ex((EMBEDDED_HOST, port)) == 0


def store_dir(settings: WeftSettings) -> Path:
    return settings.loom.data_home / "nats" / "jetstream"


def issuer_file(settings: WeftSettings) -> Path:
    if settings.nats_issuer is not None:
        return settings.nats_issuer
    if settings.nats.url is not None:
        raise NatsConnectError(
            "WEFT_NATS_ISSUER: is required with WEFT_NATS_AUTH=scoped and NATS_URL (the issuer file "
            "of that NATS's operator, made by `weft nats-auth init`)"
        )
    return settings.loom.data_home / "nats" / "issuer.json"


def load_issuer(settings: WeftSettings) -> Issuer:
    """The issuer's seeds; for the bundled server made on first use (mode 0600)."""
    path = issuer_file(settings)
    if not path.exists() and settings.nats.url is None:
        issuer = Issuer.generate()
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(issuer.to_json())
        log.info("created the NATS issuer (operator and account keys) in %s", path)
        return issuer
    try:
        text = path.read_text()
    except OSError:
        raise NatsConnectError(f"WEFT_NATS_ISSUER: {path} is not a readable file") from None
    try:
        return Issuer.from_json(text)
    except CredentialsError as exc:
        raise NatsConnectError(f"WEFT_NATS_ISSUER: {path}: {exc.message}") from None


def _has_credentials(url: str) -> bool:
    parsed = parse_url(url)
    return parsed.user is not None or parsed.token is not None


def with_creds(settings: NatsSettings, creds: str) -> NatsSettings:
    """``settings`` connecting with the creds text ``creds`` and nothing else."""
    cleared = {"creds": None, "user": None, "password": None, "token": None}
    return settings.model_copy(update={"creds_content": SecretStr(creds), **cleared})


async def start_embedded(settings: WeftSettings, issuer: Issuer | None = None) -> EmbeddedNatsServer:
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
    data = settings.loom.data_home
    folder = store_dir(settings)
    folder.mkdir(parents=True, exist_ok=True)
    config = ServerConfig(
        host=EMBEDDED_HOST,
        port=settings.nats_port,
        store_dir=folder,
        websocket_port=ws_port,
        server_name="loom-weft-embedded",
        sync_interval=settings.nats_sync,
        extra="" if issuer is None else server_auth_config(issuer, str(data / "nats" / "jwt")),
        binary=settings.loom.nats_server,
    )
    server = EmbeddedNatsServer(config, log_file=data / "nats" / "nats-server.log")
    return await asyncio.to_thread(server.start)


async def open_nats(settings: WeftSettings) -> NatsRuntime:
    issuer = load_issuer(settings) if settings.scoped_nats else None
    if issuer is not None and settings.nats.url and _has_credentials(settings.nats.url):
        raise NatsConnectError("NATS_URL: must not carry credentials with WEFT_NATS_AUTH=scoped")
    server: EmbeddedNatsServer | None = None
    if settings.nats.url is None:
        server = await start_embedded(settings, issuer)
        url = server.url
    else:
        url = settings.nats.url
    opened: list[NatsClient] = []
    replicas = settings.loom.js_replicas  # of the streams and buckets Weft creates, also for agents
    try:
        authority: CredentialAuthority | None = None
        if issuer is None:
            opened.append(
                await connect(
                    settings.nats, url=url, name="weft", mode="service", timeout=30, replicas=replicas
                )
            )
        else:
            # Weft's own user: every subject of the account, a key that never leaves this process
            own, _ = issuer.user_creds("loom-weft", Permissions.everything())
            mine = with_creds(settings.nats, own)
            opened.append(
                await connect(mine, url=url, name="weft", mode="service", timeout=30, replicas=replicas)
            )
            system, _ = issuer.user_creds(
                "loom-weft-system",
                Permissions(publish=(issuer.claims_update_subject(),), subscribe=("_INBOX.>",)),
                system=True,
            )
            opened.append(
                await connect(
                    with_creds(settings.nats, system), url=url, name="weft-system", mode="service", timeout=30
                )
            )
            authority = CredentialAuthority(
                issuer, opened[0], opened[1], default_ttl_s=settings.agent_credentials_ttl_s
            )
    except BaseException:
        for nc in opened:
            with contextlib.suppress(Exception):
                await nc.close()
        if server is not None:
            await asyncio.to_thread(server.stop)
        raise
    info = NatsInfo(
        url=display_url(url),
        embedded=server is not None,
        websocket_url=server.websocket_url if server is not None else None,
        store_dir=str(store_dir(settings)) if server is not None else None,
        scoped=issuer is not None,
    )
    return NatsRuntime(nc=opened[0], info=info, server=server, authority=authority)
