"""The embedded nats-server launcher (shared/nats/server.py) with the real binary."""

from __future__ import annotations

import json
import os
import socket
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from shared.nats.client import connect
from shared.nats.server import (
    PICK_FROM,
    SYNC_RULE,
    EmbeddedNatsServer,
    NatsServerError,
    ServerConfig,
    check_sync_interval,
    find_binary,
    free_port,
    render_config,
)
from shared.settings import load_loom_settings


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port with a listener on it for the duration of the test."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


async def test_start_jetstream_and_stop_leaves_nothing_behind() -> None:
    server = EmbeddedNatsServer().start()
    pid = server.pid
    assert pid is not None and _alive(pid) and server.running
    workdir = server._workdir
    assert workdir is not None and workdir.is_dir()
    try:
        nc = await connect(url=server.url)
        try:
            js = nc.jetstream()
            stream = f"LAUNCH_{uuid.uuid4().hex[:8]}"
            await js.add_stream(name=stream, subjects=[f"{stream}.>"])
            for n in range(3):
                ack = await js.publish(f"{stream}.item", f"m{n}".encode())
                assert ack.seq == n + 1
            sub = await js.pull_subscribe(f"{stream}.item", durable="reader")
            msgs = await sub.fetch(3, timeout=5)
            assert [m.data for m in msgs] == [b"m0", b"m1", b"m2"]
            for m in msgs:
                await m.ack()
            info = await js.stream_info(stream)
            assert info.state.messages == 3
        finally:
            await nc.close()
    finally:
        server.stop()
    assert not _alive(pid)
    assert server.pid is None and not server.running
    assert not workdir.exists()
    server.stop()  # idempotent


def test_context_manager_stops_the_process() -> None:
    with EmbeddedNatsServer() as server:
        pid = server.pid
        assert pid is not None and _alive(pid)
        assert server.url.startswith("nats://127.0.0.1:") and server.client_port
    assert not _alive(pid)


def test_kill_keeps_a_given_store_dir(tmp_path: Path) -> None:
    store = tmp_path / "store"
    server = EmbeddedNatsServer(ServerConfig(store_dir=store)).start()
    pid = server.pid
    assert pid is not None
    server.kill()
    assert not _alive(pid) and not server.running
    assert store.is_dir()


def test_fixed_port_is_used() -> None:
    port = free_port()
    with EmbeddedNatsServer(ServerConfig(port=port)) as server:
        assert server.client_port == port
        assert server.url == f"nats://127.0.0.1:{port}"


def test_free_ports_are_outside_the_ephemeral_range() -> None:
    """An outgoing connection can never be given a picked port before its owner binds it."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    picked = {free_port() for _ in range(50)}
    assert all(PICK_FROM <= port < low for port in picked)
    for port in picked:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_a_process_never_gets_the_same_free_port_twice_in_a_row() -> None:
    """A cluster picks nine ports before any node binds one: they must all differ (random
    picks from the range met about once in 500 clusters and a node could not start)."""
    picked = [free_port() for _ in range(1500)]
    assert len(set(picked)) == len(picked)


def test_port_in_use_is_a_clear_error(busy_port: int) -> None:
    server = EmbeddedNatsServer(ServerConfig(port=busy_port))
    with pytest.raises(NatsServerError) as info:
        server.start()
    assert str(info.value) == f"nats-server could not start: port {busy_port} on 127.0.0.1 is already in use"
    assert server.pid is None and not server.running


def test_websocket_port_in_use_names_that_port(busy_port: int) -> None:
    with pytest.raises(NatsServerError, match=f"websocket port {busy_port} on 127.0.0.1 is already in use"):
        EmbeddedNatsServer(ServerConfig(websocket_port=busy_port)).start()


def test_websocket_listener_reported(nats_server: EmbeddedNatsServer) -> None:
    assert nats_server.websocket_port is not None
    assert nats_server.websocket_url == f"ws://127.0.0.1:{nats_server.websocket_port}"
    assert nats_server.websocket_port != nats_server.client_port
    with socket.create_connection(("127.0.0.1", nats_server.websocket_port), timeout=5):
        pass


def test_no_websocket_unless_asked() -> None:
    with EmbeddedNatsServer(ServerConfig(jetstream=False)) as server:
        assert server.websocket_port is None and server.websocket_url is None


def test_bad_config_exits_with_the_servers_reason() -> None:
    with pytest.raises(NatsServerError, match=r"nats-server exited with code \d+ during start-up: ") as info:
        EmbeddedNatsServer(ServerConfig(extra="this is { not valid")).start()
    assert "no output" not in str(info.value)


def test_double_start_refused() -> None:
    with (
        EmbeddedNatsServer(ServerConfig(jetstream=False)) as server,
        pytest.raises(NatsServerError, match="already"),
    ):
        server.start()


def test_find_binary_default() -> None:
    binary = find_binary()
    assert binary.is_file() and os.access(binary, os.X_OK)
    assert binary.name == "nats-server"


def test_find_binary_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "my-nats-server"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("LOOM_NATS_SERVER", str(fake))
    assert find_binary(load_loom_settings().nats_server) == fake


@pytest.mark.parametrize("kind", ["missing", "directory", "not-executable"])
def test_find_binary_bad_override_is_a_clear_error(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "nats-server"
    if kind == "directory":
        target.mkdir()
    elif kind == "not-executable":
        target.write_text("not a program")
    monkeypatch.setenv("LOOM_NATS_SERVER", str(target))
    override = load_loom_settings().nats_server
    with pytest.raises(NatsServerError) as info:
        find_binary(override)
    assert str(info.value) == f"LOOM_NATS_SERVER: {str(target)!r} is not an executable file"
    server = EmbeddedNatsServer(ServerConfig(binary=override))
    with pytest.raises(NatsServerError, match="LOOM_NATS_SERVER"):
        server.start()
    assert server.pid is None


def test_render_config_quotes_hostile_values(tmp_path: Path) -> None:
    text = render_config(ServerConfig(user='we"ird', password="p\\a}ss{"), tmp_path / "js")
    assert 'user: "we\\"ird"' in text and 'password: "p\\\\a}ss{"' in text


async def test_hostile_password_works_end_to_end() -> None:
    password = 'q"u\\o}t{e:@/%'
    with EmbeddedNatsServer(ServerConfig(user="u", password=password, jetstream=False)) as server:
        from urllib.parse import quote

        nc = await connect(url=f"nats://u:{quote(password, safe='')}@127.0.0.1:{server.client_port}")
        await nc.close()


@pytest.mark.parametrize(
    ("value", "rendered"), [("always", '"always"'), ("1s", '"1s"'), ("250ms", '"250ms"')]
)
def test_render_config_carries_the_sync_interval(tmp_path: Path, value: str, rendered: str) -> None:
    text = render_config(ServerConfig(sync_interval=value), tmp_path / "js")
    assert f"jetstream {{ store_dir: {json.dumps(str(tmp_path / 'js'))}, sync_interval: {rendered} }}" in text
    assert "sync_interval" not in render_config(ServerConfig(), tmp_path / "js")


@pytest.mark.parametrize("bad", ["", "never", "0s", "1", "1.5s", "2 m", "1d", "-1s", "ALWAYS", "1s }"])
def test_bad_sync_interval_is_refused_without_echoing_it(bad: str) -> None:
    with pytest.raises(ValueError) as info:
        check_sync_interval(bad, "LOOM_NATS_SYNC")
    assert str(info.value) == f"LOOM_NATS_SYNC must be {SYNC_RULE}"
    with pytest.raises(ValueError) as info:
        ServerConfig(sync_interval=bad)  # so it never reaches a config file
    assert str(info.value) == f"sync_interval must be {SYNC_RULE}"


@pytest.mark.parametrize(("value", "always", "interval_ns"), [("always", True, None), ("1s", False, 10**9)])
async def test_real_server_runs_with_the_sync_interval(
    value: str, always: bool, interval_ns: int | None
) -> None:
    """The server takes the setting (its /varz reports it) and JetStream publishes are acked."""
    config = ServerConfig(sync_interval=value, extra="http_port: -1")
    with EmbeddedNatsServer(config) as server:
        assert server.monitoring_port is not None
        async with httpx.AsyncClient() as client:
            varz = (await client.get(f"http://127.0.0.1:{server.monitoring_port}/varz")).json()
        js_config = varz["jetstream"]["config"]
        assert js_config.get("sync_always", False) is always
        if interval_ns is not None:
            assert js_config["sync_interval"] == interval_ns
        nc = await connect(url=server.url)
        try:
            js = nc.jetstream()
            stream = f"SYNC_{uuid.uuid4().hex[:8]}"
            await js.add_stream(name=stream, subjects=[f"{stream}.>"])
            acks = [await js.publish(f"{stream}.item", f"m{n}".encode()) for n in range(20)]
            assert [a.seq for a in acks] == list(range(1, 21))
            assert (await js.stream_info(stream)).state.messages == 20
        finally:
            await nc.close()
