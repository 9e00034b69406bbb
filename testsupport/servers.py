"""Pytest plugin: real nats-servers for tests (``pytest_plugins`` in the root conftest).

Session-scoped servers keep the suite fast; tests stay isolated by using a
fresh project id each (``project_id`` fixture), which is exactly the
isolation the fabric itself relies on.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from nats.aio.client import Client as NatsClient

from shared.nats.auth import Issuer, Permissions, parse_creds, server_auth_config
from shared.nats.client import connect
from shared.nats.server import EmbeddedNatsServer, ServerConfig, TlsFiles
from testsupport.sweep import SWEEPER


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
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedNatsServer]:
    """Plain nats-server with JetStream and a (non-TLS) WebSocket listener. Its log is kept
    in the worker's temporary folder, beside the tests' own, for reading after a failure.
    What each test file makes on it is deleted when the file ends (``testsupport.sweep``)."""
    log_file = tmp_path_factory.getbasetemp() / "nats-session.log"
    server = EmbeddedNatsServer(ServerConfig(websocket_port=-1), log_file=log_file)
    with server, SWEEPER.watching(server):
        yield server


# More streams than the JetStream API returns in one page (256 for STREAM.LIST, 1024 for
# STREAM.NAMES), named to sort before every loom stream so that ours land on a later page.
CROWD_STREAMS = 1100


async def _add_crowd(url: str) -> None:
    from nats.js.api import StorageType, StreamConfig

    client = await connect(url=url, name="loom-test-crowd")
    try:
        js = client.jetstream()
        for start in range(0, CROWD_STREAMS, 100):
            await asyncio.gather(
                *(
                    js.add_stream(
                        StreamConfig(
                            name=f"A-crowd-{i:04d}", subjects=[f"crowd.{i}"], storage=StorageType.MEMORY
                        )
                    )
                    for i in range(start, min(start + 100, CROWD_STREAMS))
                )
            )
    finally:
        await client.close()


@pytest.fixture(scope="session")
def crowded_nats_server() -> Iterator[EmbeddedNatsServer]:
    """A server already holding more streams than one API page: code that lists streams
    must page, as it must on a long-lived fabric hosting many projects."""
    with EmbeddedNatsServer(ServerConfig()) as server:
        asyncio.run(_add_crowd(server.url))
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


@dataclass
class CredsServer:
    server: EmbeddedNatsServer
    url: str
    creds_file: Path
    """A user of the server's account: connects."""
    foreign_creds_file: Path
    """A well-formed user of an account the server does not know: refused."""
    user_seed: str


@pytest.fixture(scope="session")
def nats_creds_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CredsServer]:
    """nats-server in operator (JWT) mode, with a ``.creds`` file for NATS_CREDS."""
    folder = tmp_path_factory.mktemp("creds")
    issuer, stranger = Issuer.generate(), Issuer.generate()
    creds, _ = issuer.user_creds("user", Permissions.everything())
    (folder / "user.creds").write_text(creds)
    (folder / "user.creds").chmod(0o600)
    foreign, _ = stranger.user_creds("stranger", Permissions.everything())
    (folder / "foreign.creds").write_text(foreign)
    extra = server_auth_config(issuer, None)
    with EmbeddedNatsServer(ServerConfig(jetstream=False, extra=extra)) as server:
        yield CredsServer(
            server=server,
            url=server.url,
            creds_file=folder / "user.creds",
            foreign_creds_file=folder / "foreign.creds",
            user_seed=parse_creds(creds)[1].decode(),
        )


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


# -- rejected input must not come back (issue 21) ---------------------------------------


def resolve_schema(root: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """Follow ``$ref`` (a JSON pointer into ``root``: OpenAPI's components or an MCP
    tool's ``$defs``) and take the one non-null branch of an ``anyOf`` (an optional value);
    an ``anyOf`` of several types (any JSON) is returned as it is."""
    while True:
        if "$ref" in schema:
            node: Any = root
            for part in schema["$ref"].removeprefix("#/").split("/"):
                node = node[part]
            schema = node
        elif "anyOf" in schema:
            branches = [s for s in schema["anyOf"] if s.get("type") != "null"]
            if len(branches) != 1:
                return schema
            schema = branches[0]
        else:
            return schema


def takes_any_text(root: dict[str, Any], schema: dict[str, Any]) -> bool:
    """Whether any string is a valid value (free text: no pattern, enum or format;
    or a list of such, or no type at all)."""
    resolved = resolve_schema(root, schema)
    if "anyOf" in resolved:
        return any(takes_any_text(root, branch) for branch in resolved["anyOf"])
    kind = resolved.get("type")
    if kind == "array":
        return takes_any_text(root, resolved.get("items", {}))
    if kind is None:
        return not ({"enum", "const", "properties"} & set(resolved))
    return kind == "string" and not ({"pattern", "enum", "const", "format"} & set(resolved))


def secret_inputs(root: dict[str, Any], schema: dict[str, Any], secret: str) -> list[tuple[str, Any, bool]]:
    """(property, a value carrying ``secret``, whether it is free text) for every
    property of an object schema: the secret itself, or in a list for a list."""
    properties = resolve_schema(root, schema).get("properties", {})
    return [
        (
            name,
            [secret] if resolve_schema(root, prop).get("type") == "array" else secret,
            takes_any_text(root, prop),
        )
        for name, prop in properties.items()
    ]
