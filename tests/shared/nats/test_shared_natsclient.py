"""shared.nats.client.connect against real nats-servers: every transport, every
way to pass credentials, and every way it can fail (docs/architecture.md, Reaching NATS)."""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from urllib.parse import quote

import pytest
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg

from shared.nats.client import (
    MAX_OUTSTANDING_PINGS,
    PING_INTERVAL_S,
    NatsConnectError,
    build_options,
    connect,
    display_url,
    parse_url,
    settle,
)
from shared.nats.server import EmbeddedNatsServer, free_port
from shared.settings import NatsSettings
from testsupport.processes import frozen
from testsupport.servers import AuthServer, CredsServer, TlsServer, TokenServer

# The bound for "wrong password / server down -> clear error". Not a timing
# assertion about speed: it only proves the call returns instead of hanging.
BOUND_S = 5.0


def _enc(value: str) -> str:
    return quote(value, safe="")


async def _round_trip(nc: NatsClient) -> None:
    """Prove the connection carries traffic both ways."""
    subject = f"loom-test.{uuid.uuid4().hex}"
    sub = await nc.subscribe(subject)
    await nc.publish(subject, b"ping")
    msg = await sub.next_msg(timeout=5)
    assert msg.data == b"ping"
    await sub.unsubscribe()


@pytest.fixture
async def closing() -> AsyncIterator[list[NatsClient]]:
    """Clients appended here are closed after the test, pass or fail."""
    clients: list[NatsClient] = []
    yield clients
    for client in clients:
        if not client.is_closed:
            await client.close()


async def _connect_ok(closing: list[NatsClient], **kwargs: object) -> NatsClient:
    nc = await connect(**kwargs)  # type: ignore[arg-type]
    closing.append(nc)
    await _round_trip(nc)
    return nc


async def _connect_fails(**kwargs: object) -> tuple[NatsConnectError, float]:
    started = time.monotonic()
    with pytest.raises(NatsConnectError) as info:
        nc = await connect(**kwargs)  # type: ignore[arg-type]
        await nc.close()
    return info.value, time.monotonic() - started


def _error_texts(exc: BaseException) -> str:
    return "\n".join([str(exc), repr(exc), *traceback.format_exception(exc)])


# -- transports ------------------------------------------------------------------


async def test_nats_scheme(nats_server: EmbeddedNatsServer, closing: list[NatsClient]) -> None:
    assert nats_server.url.startswith("nats://")
    await _connect_ok(closing, url=nats_server.url)


async def test_nats_url_from_env(
    nats_server: EmbeddedNatsServer, closing: list[NatsClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NATS_URL", nats_server.url)
    await _connect_ok(closing)


async def test_empty_optional_variables_do_not_break_connecting(
    nats_server: EmbeddedNatsServer, closing: list[NatsClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NATS_URL", nats_server.url)
    for name in (
        "NATS_USER",
        "NATS_PASS",
        "NATS_TOKEN",
        "NATS_CREDS",
        "NATS_TLS_CA",
        "NATS_TLS_CERT",
        "NATS_TLS_KEY",
    ):
        monkeypatch.setenv(name, "")
    nc = await _connect_ok(closing)
    assert not nc._server_info.get("tls_required")


async def test_ws_scheme(nats_server: EmbeddedNatsServer, closing: list[NatsClient]) -> None:
    assert nats_server.websocket_url is not None and nats_server.websocket_url.startswith("ws://")
    await _connect_ok(closing, url=nats_server.websocket_url)


async def test_tls_with_ca_from_settings(nats_tls_server: TlsServer, closing: list[NatsClient]) -> None:
    assert nats_tls_server.url.startswith("tls://")
    nc = await _connect_ok(
        closing, url=nats_tls_server.url, settings=NatsSettings(tls_ca=nats_tls_server.ca_file)
    )
    assert nc._server_info.get("tls_required") is True


async def test_tls_with_ca_from_env(
    nats_tls_server: TlsServer, closing: list[NatsClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NATS_URL", nats_tls_server.url)
    monkeypatch.setenv("NATS_TLS_CA", str(nats_tls_server.ca_file))
    await _connect_ok(closing)


async def test_wss_scheme(nats_tls_server: TlsServer, closing: list[NatsClient]) -> None:
    assert nats_tls_server.websocket_url.startswith("wss://")
    settings = NatsSettings(tls_ca=nats_tls_server.ca_file)
    await _connect_ok(closing, url=nats_tls_server.websocket_url, settings=settings)


async def test_tls_with_wrong_ca_fails_clearly(nats_tls_server: TlsServer, other_ca_file: Path) -> None:
    error, elapsed = await _connect_fails(
        url=nats_tls_server.url, settings=NatsSettings(tls_ca=other_ca_file)
    )
    assert "TLS handshake failed" in str(error) and "certificate verify failed" in str(error)
    assert nats_tls_server.url in str(error)
    assert elapsed < BOUND_S


async def test_tls_without_the_ca_fails_clearly(nats_tls_server: TlsServer) -> None:
    error, _ = await _connect_fails(url=nats_tls_server.url, settings=NatsSettings())
    assert "certificate verify failed" in str(error)


async def test_tls_wrong_ca_fails_in_service_mode_too(
    nats_tls_server: TlsServer, other_ca_file: Path
) -> None:
    """A rejected certificate will not fix itself: no endless hang, even with timeout 0."""
    settings = NatsSettings(tls_ca=other_ca_file)
    error = await asyncio.wait_for(
        _connect_fails(url=nats_tls_server.url, settings=settings, mode="service", timeout=0), 30
    )
    assert "certificate verify failed" in str(error[0])


async def test_wss_with_wrong_ca_fails_clearly(nats_tls_server: TlsServer, other_ca_file: Path) -> None:
    error, elapsed = await _connect_fails(
        url=nats_tls_server.websocket_url, settings=NatsSettings(tls_ca=other_ca_file)
    )
    assert "TLS handshake failed" in str(error) and "CERTIFICATE_VERIFY_FAILED" in str(error)
    assert elapsed < BOUND_S


async def test_tls_scheme_to_plain_server_refused(
    nats_server: EmbeddedNatsServer, nats_tls_server: TlsServer
) -> None:
    url = nats_server.url.replace("nats://", "tls://")
    error, _ = await _connect_fails(url=url, settings=NatsSettings(tls_ca=nats_tls_server.ca_file))
    assert "tls:// was requested but the server does not offer TLS" in str(error)
    assert url in str(error)


async def test_tls_scheme_never_sends_credentials_to_a_plaintext_server(nats_tls_server: TlsServer) -> None:
    """The refusal happens before CONNECT: a fake plaintext server must not see the password."""
    received = bytearray()
    done = asyncio.Event()

    async def fake_nats(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        info = b'INFO {"server_id":"fake","version":"2.10.0","proto":1,"auth_required":true}'
        writer.write(info + b"\r\n")
        await writer.drain()
        try:
            while chunk := await asyncio.wait_for(reader.read(4096), 5):
                received.extend(chunk)
        except TimeoutError:
            pass
        finally:
            writer.close()
            done.set()

    server = await asyncio.start_server(fake_nats, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    password = "plaintext-must-not-see-" + uuid.uuid4().hex[:8]
    try:
        error, _ = await _connect_fails(
            url=f"tls://bob:{password}@127.0.0.1:{port}",
            settings=NatsSettings(tls_ca=nats_tls_server.ca_file),
        )
        await asyncio.wait_for(done.wait(), 10)
    finally:
        server.close()
        await server.wait_closed()
    assert "does not offer TLS" in str(error)
    assert password.encode() not in received
    assert b"CONNECT" not in received


async def test_nats_scheme_upgrades_when_server_requires_tls(
    nats_tls_server: TlsServer, closing: list[NatsClient]
) -> None:
    url = nats_tls_server.url.replace("tls://", "nats://")
    nc = await _connect_ok(closing, url=url, settings=NatsSettings(tls_ca=nats_tls_server.ca_file))
    assert nc._server_info.get("tls_required") is True


# -- credentials -----------------------------------------------------------------


def _auth_url(server: AuthServer, user: str, password: str, *, websocket: bool = False) -> str:
    port = server.server.websocket_port if websocket else server.server.client_port
    scheme = "ws" if websocket else "nats"
    return f"{scheme}://{_enc(user)}:{_enc(password)}@127.0.0.1:{port}"


@pytest.mark.parametrize("websocket", [False, True], ids=["nats", "ws"])
async def test_user_and_percent_encoded_password_in_url(
    nats_auth_server: AuthServer, closing: list[NatsClient], websocket: bool
) -> None:
    assert any(c in nats_auth_server.password for c in ":@/%")  # the fixture's point
    url = _auth_url(nats_auth_server, nats_auth_server.user, nats_auth_server.password, websocket=websocket)
    await _connect_ok(closing, url=url)


async def test_user_and_password_from_env(
    nats_auth_server: AuthServer, closing: list[NatsClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NATS_URL", nats_auth_server.url)
    monkeypatch.setenv("NATS_USER", nats_auth_server.user)
    monkeypatch.setenv("NATS_PASS", nats_auth_server.password)
    await _connect_ok(closing)


async def test_user_and_password_from_settings_over_websocket(
    nats_auth_server: AuthServer, closing: list[NatsClient]
) -> None:
    ws = nats_auth_server.server.websocket_url
    assert ws is not None
    settings = NatsSettings(user=nats_auth_server.user, password=nats_auth_server.password)
    await _connect_ok(closing, url=ws, settings=settings)


async def test_url_credentials_win_over_env(
    nats_auth_server: AuthServer, closing: list[NatsClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NATS_USER", nats_auth_server.user)
    monkeypatch.setenv("NATS_PASS", "wrong-env-password")
    await _connect_ok(
        closing, url=_auth_url(nats_auth_server, nats_auth_server.user, nats_auth_server.password)
    )
    # and the other way round: wrong URL credentials are not rescued by right env ones
    monkeypatch.setenv("NATS_PASS", nats_auth_server.password)
    error, _ = await _connect_fails(
        url=_auth_url(nats_auth_server, nats_auth_server.user, "wrong-url-password")
    )
    assert "authorization failed" in str(error)


async def test_token_in_url(nats_token_server: TokenServer, closing: list[NatsClient]) -> None:
    port = nats_token_server.server.client_port
    await _connect_ok(closing, url=f"nats://{_enc(nats_token_server.token)}@127.0.0.1:{port}")


async def test_token_in_ws_url(nats_token_server: TokenServer, closing: list[NatsClient]) -> None:
    port = nats_token_server.server.websocket_port
    await _connect_ok(closing, url=f"ws://{_enc(nats_token_server.token)}@127.0.0.1:{port}")


async def test_token_from_env(
    nats_token_server: TokenServer, closing: list[NatsClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NATS_URL", nats_token_server.url)
    monkeypatch.setenv("NATS_TOKEN", nats_token_server.token)
    await _connect_ok(closing)


async def test_wrong_token_fails(nats_token_server: TokenServer, log_text: Callable[[], str]) -> None:
    wrong = "wrong-token-" + uuid.uuid4().hex[:8]
    error, elapsed = await _connect_fails(url=nats_token_server.url, settings=NatsSettings(token=wrong))
    assert "authorization failed" in str(error)
    assert elapsed < BOUND_S
    for text in (_error_texts(error), log_text()):
        assert wrong not in text and nats_token_server.token not in text


async def test_missing_credentials_fail_as_authorization(nats_auth_server: AuthServer) -> None:
    error, elapsed = await _connect_fails(url=nats_auth_server.url)
    assert "authorization failed" in str(error)
    assert elapsed < BOUND_S


@pytest.mark.parametrize("how", ["url", "ws-url", "env"])
async def test_wrong_password_fails_fast_without_leaking(
    nats_auth_server: AuthServer,
    log_text: Callable[[], str],
    monkeypatch: pytest.MonkeyPatch,
    how: str,
) -> None:
    wrong = "wr0ng:p@ss/" + uuid.uuid4().hex[:8] + "%"
    if how == "env":
        monkeypatch.setenv("NATS_USER", nats_auth_server.user)
        monkeypatch.setenv("NATS_PASS", wrong)
        kwargs: dict[str, object] = {"url": nats_auth_server.url}
    else:
        url = _auth_url(nats_auth_server, nats_auth_server.user, wrong, websocket=how == "ws-url")
        kwargs = {"url": url}

    error, elapsed = await _connect_fails(**kwargs)

    assert elapsed < BOUND_S
    assert "authorization failed" in str(error)
    assert "127.0.0.1" in str(error)  # says where it tried
    secrets = [wrong, _enc(wrong), nats_auth_server.password, _enc(nats_auth_server.password), "wr0ng"]
    texts = {"error": _error_texts(error), "logs": log_text()}
    assert "NATS error" in texts["logs"]  # the failure was logged, so the log check is not vacuous
    for where, text in texts.items():
        for secret in secrets:
            assert secret not in text, f"{secret!r} leaked into {where}"


async def test_successful_connect_logs_no_password(
    nats_auth_server: AuthServer, closing: list[NatsClient], log_text: Callable[[], str]
) -> None:
    url = _auth_url(nats_auth_server, nats_auth_server.user, nats_auth_server.password)
    nc = await _connect_ok(closing, url=url)
    await nc.close()
    text = log_text()
    assert "NATS connected" in text and "NATS closed" in text
    assert nats_auth_server.password not in text and _enc(nats_auth_server.password) not in text


async def test_creds_file_from_settings(nats_creds_server: CredsServer, closing: list[NatsClient]) -> None:
    await _connect_ok(
        closing, url=nats_creds_server.url, settings=NatsSettings(creds=nats_creds_server.creds_file)
    )


async def test_creds_file_from_env(
    nats_creds_server: CredsServer, closing: list[NatsClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NATS_URL", nats_creds_server.url)
    monkeypatch.setenv("NATS_CREDS", str(nats_creds_server.creds_file))
    await _connect_ok(closing)


async def test_creds_of_an_unknown_account_refused_without_leaking(
    nats_creds_server: CredsServer, log_text: Callable[[], str]
) -> None:
    foreign = nats_creds_server.foreign_creds_file
    error, elapsed = await _connect_fails(url=nats_creds_server.url, settings=NatsSettings(creds=foreign))
    assert "authorization failed" in str(error)
    assert elapsed < BOUND_S
    seed_line = next(line for line in foreign.read_text().splitlines() if line.startswith("SU"))
    for text in (_error_texts(error), log_text()):
        assert seed_line not in text and nats_creds_server.user_seed not in text


async def test_no_creds_refused_by_an_operator_mode_server(nats_creds_server: CredsServer) -> None:
    error, _ = await _connect_fails(url=nats_creds_server.url)
    assert "authorization failed" in str(error)


# -- server down -----------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["nats", "tls", "ws"])
async def test_server_down_is_a_clear_error(scheme: str, log_text: Callable[[], str]) -> None:
    port = free_port()  # nothing listens here
    error, elapsed = await _connect_fails(url=f"{scheme}://bob:pw-down-123@127.0.0.1:{port}")
    assert elapsed < BOUND_S
    assert f"127.0.0.1:{port}" in str(error)
    assert "refused" in str(error) or "Cannot connect" in str(error)
    assert "pw-down-123" not in _error_texts(error) and "pw-down-123" not in log_text()


@pytest.mark.parametrize("scheme", ["nats", "tls"])
async def test_silent_server_times_out_clearly(scheme: str) -> None:
    """Something accepts the connection but never speaks NATS: the error says how long it waited."""
    connections: list[asyncio.StreamWriter] = []

    async def silent(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        error, elapsed = await _connect_fails(url=f"{scheme}://127.0.0.1:{port}", timeout=1.0)
    finally:
        for writer in connections:
            writer.close()
        server.close()
        await server.wait_closed()
    assert f"127.0.0.1:{port}" in str(error)
    assert "within 1s" in str(error)
    assert elapsed < BOUND_S  # the TLS probe counts against the same timeout


# -- service mode ----------------------------------------------------------------


async def test_service_mode_reconnects_after_server_restart(tmp_path: Path) -> None:
    from shared.nats.server import ServerConfig

    config = ServerConfig(port=free_port(), store_dir=tmp_path / "js")
    first = EmbeddedNatsServer(config).start()
    second: EmbeddedNatsServer | None = None
    states: asyncio.Queue[str] = asyncio.Queue()

    async def wait_for_state(wanted: str) -> None:
        while (state := await asyncio.wait_for(states.get(), 30)) != wanted:
            assert state != "closed", f"connection closed while waiting for {wanted}"

    nc = await connect(url=first.url, mode="service", on_state=states.put_nowait)
    try:
        await wait_for_state("connected")
        js = nc.jetstream()
        stream = f"RESTART_{uuid.uuid4().hex[:8]}"
        await js.add_stream(name=stream, subjects=[f"{stream}.>"])
        assert (await js.publish(f"{stream}.a", b"before")).seq == 1

        first.stop()
        await wait_for_state("disconnected")
        assert not nc.is_connected

        second = EmbeddedNatsServer(config).start()
        assert second.client_port == first.client_port
        await wait_for_state("reconnected")
        assert nc.is_connected

        ack = await js.publish(f"{stream}.b", b"after", timeout=10)
        assert ack.stream == stream and ack.seq == 2  # same store dir: the stream survived
        sub = await js.pull_subscribe(f"{stream}.>", durable="check")
        msgs = await sub.fetch(2, timeout=10)
        assert [m.data for m in msgs] == [b"before", b"after"]
    finally:
        await nc.close()
        first.stop()
        if second is not None:
            second.stop()


class _FailedAttempt(logging.Handler):
    """Sets an event when connect logs a failed attempt (logged on the event loop's thread)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("NATS error"):
            self.seen.set()


async def test_service_mode_waits_for_a_server_that_starts_later(tmp_path: Path) -> None:
    from shared.nats.server import ServerConfig

    config = ServerConfig(port=free_port(), store_dir=tmp_path / "js")
    url = f"nats://127.0.0.1:{config.port}"
    failed = _FailedAttempt()
    logging.getLogger("loom.nats").addHandler(failed)
    task = asyncio.create_task(connect(url=url, mode="service", timeout=30))
    server: EmbeddedNatsServer | None = None
    try:
        # the server starts only after connect has failed at least once: the point of the test
        await asyncio.wait_for(failed.seen.wait(), 10)
        assert not task.done()
        server = EmbeddedNatsServer(config).start()
        nc = await asyncio.wait_for(task, 30)
        try:
            await _round_trip(nc)
        finally:
            await nc.close()
    finally:
        logging.getLogger("loom.nats").removeHandler(failed)
        task.cancel()
        if server is not None:
            server.stop()


async def test_state_callback_may_be_async(nats_server: EmbeddedNatsServer) -> None:
    seen: list[str] = []

    async def on_state(state: str) -> None:
        seen.append(state)

    nc = await connect(url=nats_server.url, on_state=on_state)
    await nc.close()
    assert seen[0] == "connected" and "closed" in seen


# -- parsing and options ---------------------------------------------------------


def test_parse_url_decodes_credentials_and_strips_them() -> None:
    parsed = parse_url("nats://al%40ice:p%3Aw%2F%25@127.0.0.1:4222")
    assert (parsed.user, parsed.password, parsed.token) == ("al@ice", "p:w/%", None)
    assert parsed.servers == ["nats://127.0.0.1:4222"]
    assert "p:w" not in parsed.display and "%3A" not in parsed.display


def test_parse_url_token_and_cluster() -> None:
    parsed = parse_url("tls://t%2Fok@a.example:4222, tls://b.example:4223")
    assert parsed.token == "t/ok" and parsed.user is None
    assert parsed.servers == ["tls://a.example:4222", "tls://b.example:4223"]
    assert parsed.secure and parsed.scheme == "tls"


def test_parse_url_ipv6() -> None:
    assert parse_url("nats://[::1]:4222").servers == ["nats://[::1]:4222"]


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://h:1", "must start with nats://, tls://, ws:// or wss://"),
        ("nats://", "has no host"),
        ("nats://bob:secret-x@:4222", "has no host"),
        ("nats://a:1,ws://b:2", "cannot mix WebSocket and TCP"),
        (" , ", "no server given"),
    ],
)
def test_parse_url_errors(url: str, message: str) -> None:
    with pytest.raises(NatsConnectError, match=message) as info:
        parse_url(url)
    assert "NATS_URL" in str(info.value)
    assert "secret-x" not in str(info.value)


def test_display_url_never_shows_credentials() -> None:
    assert display_url("nats://bob:hunter2@h:1") == "nats://h:1"
    assert "hunter2" not in display_url("http://bob:hunter2@h:1")
    assert display_url(None) == "nats://127.0.0.1:4222"


def test_build_options_prefers_url_credentials(tmp_path: Path) -> None:
    settings = NatsSettings(user="env-user", password="env-pw", token="env-token")
    from_url = build_options(settings, url="nats://u:p@h:1").kwargs
    assert (from_url["user"], from_url["password"]) == ("u", "p") and "token" not in from_url
    from_env = build_options(settings, url="nats://h:1").kwargs
    assert (from_env["user"], from_env["password"]) == ("env-user", "env-pw")
    token_only = build_options(NatsSettings(token="tk-1"), url="nats://h:1").kwargs
    assert token_only["token"] == "tk-1" and "user" not in token_only


def test_missing_creds_file_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.creds"
    with pytest.raises(NatsConnectError, match=r"NATS_CREDS: .*nope\.creds is not a readable file"):
        build_options(NatsSettings(creds=missing), url="nats://h:1")


def test_unreadable_tls_files_are_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "ca.pem"
    bad.write_text("not a certificate")
    with pytest.raises(NatsConnectError, match="NATS TLS settings: cannot load certificates"):
        build_options(NatsSettings(tls_ca=bad), url="tls://h:1")
    with pytest.raises(NatsConnectError, match="NATS TLS settings"):
        build_options(NatsSettings(tls_ca=tmp_path / "missing.pem"), url="tls://h:1")


async def test_settle_means_the_server_has_a_subscription_just_made(
    nats_server: EmbeddedNatsServer, closing: list[NatsClient]
) -> None:
    """Subscribe, settle, and a request from another connection always finds the listener
    (with nats-py's flush() alone, some rounds got no responders: settle's docstring)."""
    listener = await connect(url=nats_server.url)
    asker = await connect(url=nats_server.url)
    closing.extend([listener, asker])
    subject = f"settle.{uuid.uuid4().hex}"

    async def answer(msg: Msg) -> None:
        await listener.publish(msg.reply, b"here")

    answered = 0
    for round_ in range(500):
        sub = await listener.subscribe(f"{subject}.{round_}", cb=answer)
        await settle(listener)
        reply = await asker.request(f"{subject}.{round_}", b"?", timeout=5)
        answered += reply.data == b"here"
        await sub.unsubscribe()
    assert answered == 500


async def test_a_service_connection_gives_up_a_server_that_stopped_answering(tmp_path: Path) -> None:
    """A partition leaves the socket open and sends no reset: only unanswered PINGs tell. The
    connection must give the server up (and go looking for another) in seconds, not the
    minutes of nats-py's defaults; the bound below is six times what the settings allow."""
    server = EmbeddedNatsServer(log_file=tmp_path / "nats.log").start()
    gone = asyncio.Event()

    async def on_state(state: str) -> None:
        if state == "disconnected":
            gone.set()

    nc = await connect(url=server.url, name="ping-test", mode="service", timeout=10, on_state=on_state)
    try:
        assert nc.is_connected
        assert server.pid is not None
        with frozen(server.pid):
            await asyncio.wait_for(gone.wait(), 6 * (1 + MAX_OUTSTANDING_PINGS) * PING_INTERVAL_S)
    finally:
        await nc.close()
        server.stop()
