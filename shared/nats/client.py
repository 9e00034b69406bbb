"""The one NATS connection factory every Loom part uses.

Two modes: ``bounded`` (CLI-style callers and tests: a clear error within the
timeout when the server is down or refuses us) and ``service`` (long-running
processes: reconnect forever with exponential backoff, each state change
logged). Credentials never reach a log line or an error message.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import unquote, urlsplit, urlunsplit

import nats
from nats.aio.client import Client as NatsClient
from nats.aio.client import RawCredentials, Server

from shared.errors import Unavailable
from shared.names import agent_inbox_prefix
from shared.nats.auth import CREDS_CONTENT, AgentCredential, CredentialsError, credential_of, creds_source
from shared.nats.jetstream import mark_provisioned, use_replicas
from shared.redact import redact, register_secret
from shared.settings import DEFAULT_REPLICAS, NATS_SCHEMES, NatsSettings, nats_schemes_text

log = logging.getLogger("loom.nats")

Mode = Literal["bounded", "service"]
StateCallback = Callable[[str], Awaitable[None] | None]

DEFAULT_URL = "nats://127.0.0.1:4222"
_BACKOFF_BASE_S = 0.25
_BACKOFF_MAX_S = 10.0
PING_INTERVAL_S = 5
MAX_OUTSTANDING_PINGS = 2
"""A server that stops answering (a partition leaves the socket open, with no reset) is
given up after about (1 + MAX_OUTSTANDING_PINGS) x PING_INTERVAL_S = 15 s, and the client
reconnects to another node of the cluster. nats-py's defaults (120 s, 2) took six minutes:
a Weft or an agent that had failed over to a node later cut off sat there that long
(scenario 31). One PING per connection every 5 s costs a fleet of 200 agents 40 small
messages a second."""


class NatsConnectError(Unavailable, ConnectionError):
    """NATS could not be reached or refused us. The message is safe to show."""


@dataclass
class ParsedUrl:
    servers: list[str]
    scheme: str
    user: str | None = None
    password: str | None = None
    token: str | None = None
    display: str = ""

    @property
    def secure(self) -> bool:
        return self.scheme in ("tls", "wss")


def parse_url(url: str) -> ParsedUrl:
    """Split a (possibly comma-separated) NATS URL into credential-free servers
    and the percent-decoded credentials of the first URL that carries them."""
    servers: list[str] = []
    user: str | None = None
    password: str | None = None
    token: str | None = None
    schemes: set[str] = set()
    for raw in (part.strip() for part in url.split(",") if part.strip()):
        parts = urlsplit(raw)
        if parts.scheme not in NATS_SCHEMES:
            raise NatsConnectError(f"NATS_URL: each URL must start with {nats_schemes_text()}")
        if not parts.hostname:
            raise NatsConnectError("NATS_URL: a URL has no host (e.g. nats://127.0.0.1:4222)")
        schemes.add(parts.scheme)
        if parts.username is not None and user is None and token is None:
            if parts.password is not None:
                user, password = unquote(parts.username), unquote(parts.password)
            else:
                token = unquote(parts.username)
        host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
        netloc = f"{host}:{parts.port}" if parts.port else host
        servers.append(urlunsplit((parts.scheme, netloc, parts.path, "", "")))
    if not servers:
        raise NatsConnectError("NATS_URL: no server given")
    if len({s in ("ws", "wss") for s in schemes}) > 1:
        raise NatsConnectError("NATS_URL: cannot mix WebSocket and TCP servers in one URL")
    for secret in (password, token):
        register_secret(secret)
    return ParsedUrl(
        servers=servers,
        scheme=sorted(schemes)[0] if len(schemes) == 1 else ("tls" if "tls" in schemes else "nats"),
        user=user,
        password=password,
        token=token,
        display=", ".join(servers),
    )


def _tls_context(settings: NatsSettings) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(settings.tls_ca) if settings.tls_ca else None)
    if settings.tls_cert:
        context.load_cert_chain(str(settings.tls_cert), str(settings.tls_key) if settings.tls_key else None)
    return context


@dataclass
class ConnectOptions:
    """What :func:`connect` passes to nats-py, minus the callbacks."""

    servers: list[str]
    display: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    require_tls: bool = False
    credential: AgentCredential | None = None
    """The agent scoped credentials are for: it may not create streams (see :mod:`shared.nats.jetstream`)."""


def build_options(settings: NatsSettings, *, url: str | None = None) -> ConnectOptions:
    parsed = parse_url(url or settings.url or DEFAULT_URL)
    kwargs: dict[str, Any] = {}
    if parsed.user is not None:
        kwargs["user"] = parsed.user
        kwargs["password"] = parsed.password
    elif parsed.token is not None:
        kwargs["token"] = parsed.token
    elif settings.user:
        kwargs["user"] = settings.user
        kwargs["password"] = settings.password.get_secret_value() if settings.password else ""
        register_secret(kwargs["password"])
    elif settings.token:
        kwargs["token"] = settings.token.get_secret_value()
        register_secret(kwargs["token"])
    credential: AgentCredential | None = None
    if (settings.creds or settings.creds_content) and "user" not in kwargs and "token" not in kwargs:
        creds, credential = read_credentials(settings)
        kwargs["user_credentials"] = creds
        if credential is not None:
            # Scoped credentials may subscribe only under the agent's own reply prefix.
            kwargs["inbox_prefix"] = agent_inbox_prefix(credential.agent_id)
    if parsed.secure or settings.tls_ca or settings.tls_cert:
        try:
            kwargs["tls"] = _tls_context(settings)
        except (OSError, ssl.SSLError) as exc:
            raise NatsConnectError(f"NATS TLS settings: cannot load certificates: {exc}") from None
        hostname = urlsplit(parsed.servers[0]).hostname
        if hostname:
            kwargs["tls_hostname"] = hostname
    return ConnectOptions(
        servers=parsed.servers,
        display=parsed.display,
        kwargs=kwargs,
        require_tls=parsed.scheme == "tls",
        credential=credential,
    )


def read_credentials(settings: NatsSettings) -> tuple[str | RawCredentials, AgentCredential | None]:
    """What nats-py reads the creds from (a path or the text), and the Loom agent they are for."""
    try:
        text, name = creds_source(settings)
        source = RawCredentials(text) if name == CREDS_CONTENT else str(settings.creds)
        return source, credential_of(text, name)
    except CredentialsError as exc:
        raise NatsConnectError(exc.message) from None


def _backoff_handler(servers: list[Server], _info: dict[str, Any]) -> tuple[Server | None, float]:
    """Pick the least-tried server; wait exponentially longer the more it failed."""
    chosen = min(servers, key=lambda s: s.reconnects)
    delay = min(_BACKOFF_MAX_S, _BACKOFF_BASE_S * (2 ** min(chosen.reconnects, 8)))
    return chosen, delay * (0.5 + random.random() / 2)


def _describe(exc: BaseException | None) -> str:
    if exc is None:
        return "no response"
    name = type(exc).__name__
    text = str(exc).strip()
    if "Authorization" in name or "authorization" in text.lower():
        return "authorization failed (check the user, password, token or creds)"
    if isinstance(exc, ssl.SSLError) or "SSL" in name or "certificate" in text.lower():
        return f"TLS handshake failed: {text or name}"
    if isinstance(exc, ConnectionRefusedError) or "refused" in text.lower():
        return "connection refused (is nats-server running?)"
    return text or name


def _most_telling(errors: list[BaseException]) -> BaseException | None:
    """The error to report after several attempts: a refusal of our credentials or
    certificate explains more than the connection reset that often follows it."""
    for kind in ("authorization", "TLS"):
        for exc in reversed(errors):
            if _describe(exc).startswith(kind):
                return exc
    return errors[-1] if errors else None


async def _server_requires_tls(server: str, timeout: float) -> bool | None:
    """Read the INFO line a NATS server sends first, before any credential leaves us.

    None when the server cannot be reached or does not answer like NATS; the
    connect itself then reports what is wrong.
    """
    parts = urlsplit(server)
    if not parts.hostname:
        return None
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(parts.hostname, parts.port or 4222), timeout
        )
    except (OSError, TimeoutError):
        return None
    try:
        line = await asyncio.wait_for(reader.readline(), timeout)
    except (OSError, TimeoutError):
        return None
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    if not line.startswith(b"INFO "):
        return None
    try:
        info = json.loads(line[5:])
    except ValueError:
        return None
    return bool(isinstance(info, dict) and info.get("tls_required"))


async def connect(
    settings: NatsSettings | None = None,
    *,
    url: str | None = None,
    name: str = "loom",
    mode: Mode = "bounded",
    timeout: float = 5.0,
    on_state: StateCallback | None = None,
    replicas: int = DEFAULT_REPLICAS,
) -> NatsClient:
    """Open a NATS connection.

    ``bounded``: fail with :class:`NatsConnectError` within ``timeout`` seconds.
    ``service``: retry the first connect until ``timeout`` (``0`` means forever)
    and then reconnect forever with exponential backoff. ``replicas``: of the streams and
    buckets created through it (``LOOM_JS_REPLICAS``, :func:`shared.nats.jetstream.use_replicas`).
    """
    s = settings if settings is not None else NatsSettings()
    options = build_options(s, url=url)
    errors: list[BaseException] = []
    fatal: list[BaseException] = []
    connecting = True
    cancelled_by_us: list[asyncio.Task[Any]] = []
    loop = asyncio.get_running_loop()
    started = loop.time()

    def remaining() -> float:
        return max(0.1, timeout - (loop.time() - started))

    if options.require_tls:
        # nats-py only upgrades when the server asks for TLS; a plaintext server would
        # receive our CONNECT, credentials included, so ask the server first.
        for server in (srv for srv in options.servers if urlsplit(srv).scheme == "tls"):
            if await _server_requires_tls(server, min(2.0, remaining()) if timeout else 2.0) is False:
                raise NatsConnectError(
                    f"NATS at {server}: tls:// was requested but the server does not offer TLS "
                    "(nothing was sent to it)"
                )

    async def notify(state: str) -> None:
        log.info("NATS %s: %s", state, options.display)
        if on_state is not None:
            result = on_state(state)
            if asyncio.iscoroutine(result):
                await result

    async def error_cb(exc: Exception) -> None:
        errors.append(exc)
        del errors[:-20]
        log.warning("NATS error (%s): %s", options.display, redact(_describe(exc)))
        if connecting and isinstance(exc, ssl.SSLError) and not fatal:
            # After a failed TLS upgrade nats-py waits forever for a socket that can no
            # longer close, and a rejected certificate will not fix itself: stop here.
            fatal.append(exc)
            task = asyncio.current_task()
            if task is not None:
                cancelled_by_us.append(task)
                task.cancel()

    async def disconnected_cb() -> None:
        await notify("disconnected")

    async def reconnected_cb() -> None:
        await notify("reconnected")

    async def closed_cb() -> None:
        await notify("closed")

    common: dict[str, Any] = dict(
        servers=options.servers,
        name=name,
        error_cb=error_cb,
        disconnected_cb=disconnected_cb,
        reconnected_cb=reconnected_cb,
        closed_cb=closed_cb,
        ping_interval=PING_INTERVAL_S,
        max_outstanding_pings=MAX_OUTSTANDING_PINGS,
        **options.kwargs,
    )
    if mode == "bounded":
        common.update(
            connect_timeout=max(1, min(int(timeout), 2)),
            reconnect_time_wait=0.25,
            max_reconnect_attempts=2,
        )
    else:
        common.update(
            connect_timeout=2,
            reconnect_time_wait=1,
            max_reconnect_attempts=-1,
            reconnect_to_server_handler=_backoff_handler,
        )

    try:
        if mode == "service" and timeout == 0:
            nc = await nats.connect(**common)
        else:
            nc = await asyncio.wait_for(nats.connect(**common), remaining())
    except TimeoutError:
        reason = _describe(_most_telling(errors))
        raise NatsConnectError(
            redact(f"cannot connect to NATS at {options.display} within {timeout:g}s: {reason}")
        ) from None
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current in cancelled_by_us:
            current.uncancel()
        if not fatal or (current is not None and current.cancelling() > 0):
            raise  # a real cancellation from our caller
        reason = _describe(fatal[0])
        raise NatsConnectError(redact(f"cannot connect to NATS at {options.display}: {reason}")) from None
    except NatsConnectError:
        raise
    except Exception as exc:  # nats-py raises a variety of types here
        reason = _describe(_most_telling(errors) or exc)
        raise NatsConnectError(redact(f"cannot connect to NATS at {options.display}: {reason}")) from None
    finally:
        connecting = False

    if options.require_tls and not _tls_in_use(nc):
        await nc.close()
        raise NatsConnectError(
            f"NATS at {options.display}: tls:// was requested but the server does not offer TLS"
        )
    await notify("connected")
    use_replicas(nc, replicas)
    if options.credential is not None:
        mark_provisioned(nc, options.credential.project_id)
    return nc


def _tls_in_use(nc: NatsClient) -> bool:
    info: dict[str, Any] = getattr(nc, "_server_info", {}) or {}
    return bool(info.get("tls_required"))


def display_url(url: str | None) -> str:
    """A credential-free rendering of a NATS URL, for banners and messages."""
    try:
        return parse_url(url or DEFAULT_URL).display
    except NatsConnectError:
        return redact(url or DEFAULT_URL)


async def settle(nc: NatsClient, timeout: int = 10) -> None:
    """Return once the server has processed everything this connection sent so far (a
    subscription just made, a message just published).

    nats-py's ``flush()`` alone does not promise that: it writes its PING straight to the
    socket while earlier commands can still wait in the client's pending buffer for its
    flusher task, so the PONG may come back before the server has seen a ``SUB`` made just
    before (measured: 132 of 3,000 subscribe-flush-request rounds got no responders). The
    pending buffer is written first here, then the round trip proves the server read it."""
    await nc._flush_pending(force_flush=True)
    await nc.flush(timeout=timeout)
