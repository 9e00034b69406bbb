"""Pytest plugin: real nats-servers for tests (loaded from the root conftest).

Session-scoped servers keep the suite fast; tests stay isolated by using a
fresh project id each (``project_id`` fixture), which is exactly the
isolation the fabric itself relies on.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from nats.aio.client import Client as NatsClient

from shared.natsclient import connect
from shared.server import EmbeddedNatsServer, ServerConfig, TlsFiles


@dataclass
class TlsServer:
    server: EmbeddedNatsServer
    ca_file: Path
    url: str
    websocket_url: str


@dataclass
class AuthServer:
    server: EmbeddedNatsServer
    url: str
    user: str
    password: str


@pytest.fixture(scope="session")
def nats_server() -> Iterator[EmbeddedNatsServer]:
    """Plain nats-server with JetStream and a (non-TLS) WebSocket listener."""
    with EmbeddedNatsServer(ServerConfig(websocket_port=-1)) as server:
        yield server


@pytest.fixture(scope="session")
def tls_material(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, TlsFiles]:
    """A throw-away CA and a server certificate for 127.0.0.1/localhost."""
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    folder = tmp_path_factory.mktemp("tls")
    ca_file = folder / "ca.pem"
    cert_file = folder / "server.pem"
    key_file = folder / "server.key"
    ca.cert_pem.write_to_path(str(ca_file))
    cert.private_key_pem.write_to_path(str(key_file))
    with cert_file.open("wb") as handle:
        for blob in cert.cert_chain_pems:
            handle.write(blob.bytes())
    return ca_file, TlsFiles(cert=cert_file, key=key_file)


@pytest.fixture(scope="session")
def nats_tls_server(tls_material: tuple[Path, TlsFiles]) -> Iterator[TlsServer]:
    """nats-server with TLS on the client port and a TLS WebSocket listener."""
    ca_file, files = tls_material
    config = ServerConfig(tls=files, websocket_port=-1, websocket_tls=files)
    with EmbeddedNatsServer(config) as server:
        assert server.websocket_url is not None
        yield TlsServer(
            server=server,
            ca_file=ca_file,
            url=server.url,
            websocket_url=server.websocket_url,
        )


@pytest.fixture(scope="session")
def nats_auth_server() -> Iterator[AuthServer]:
    """nats-server that requires a user and password (with URL-hostile characters)."""
    user, password = "loom-user", "s3cr3t:p@ss/word%"
    config = ServerConfig(user=user, password=password, websocket_port=-1)
    with EmbeddedNatsServer(config) as server:
        yield AuthServer(server=server, url=server.url, user=user, password=password)


@dataclass
class TokenServer:
    server: EmbeddedNatsServer
    url: str
    token: str


@pytest.fixture(scope="session")
def nats_token_server() -> Iterator[TokenServer]:
    """nats-server that requires a token (with characters a URL must percent-encode)."""
    token = "t0k:en/with@specials%"
    config = ServerConfig(token=token, websocket_port=-1)
    with EmbeddedNatsServer(config) as server:
        yield TokenServer(server=server, url=server.url, token=token)


@pytest.fixture
def project_id() -> str:
    """A project id no other test uses, so tests share a server without sharing data."""
    return f"t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def nc(nats_server: EmbeddedNatsServer) -> AsyncIterator[NatsClient]:
    client = await connect(url=nats_server.url, name="loom-test")
    try:
        yield client
    finally:
        await client.close()
