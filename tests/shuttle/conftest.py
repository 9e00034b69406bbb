"""Fixtures for Shuttle's tests: a clean environment, a URL where nothing listens
(Weft down), and a real Weft on the real nats-server."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import uvicorn
from shuttle_helpers import Cli

from shared.server import EmbeddedNatsServer, free_port


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """No LOOM_* from the developer's shell, and a throw-away HOME for ~/.loom."""
    for name in list(os.environ):
        if name.startswith(("LOOM_", "LOOMINAL_")) or name == "NO_COLOR":
            monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    yield home


@pytest.fixture
def dead_url() -> str:
    """A localhost URL on a port that was free a moment ago (nothing listens)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


# -- a real Weft on the real nats-server ------------------------------------------

TOKEN = "shuttle-test-token"


@dataclass
class WeftServer:
    """Weft served by uvicorn in its own thread and event loop, so that the
    synchronous CLI under test can block while Weft keeps answering."""

    url: str
    token: str
    nats_url: str

    def api(self, project: str | None = None, token: str | None = TOKEN) -> httpx.Client:
        headers = {}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if project:
            headers["X-Loom-Project"] = project
        return httpx.Client(base_url=self.url, headers=headers, timeout=10)

    def websocket_clients(self) -> float:
        """Weft's own gauge of connected WebSocket clients (from /metrics)."""
        text = httpx.get(f"{self.url}/metrics", timeout=10).text
        for line in text.splitlines():
            if line.startswith("weft_websocket_clients"):
                return float(line.rsplit(" ", 1)[1])
        return 0.0


@pytest.fixture(scope="session")
def weft_server(nats_server: EmbeddedNatsServer) -> Iterator[WeftServer]:
    from shared.settings import NatsSettings
    from weft.app import create_app
    from weft.settings import WeftSettings

    settings = WeftSettings(
        nats=NatsSettings(url=nats_server.url),
        project_id="shuttle-default",
        api_tokens=[TOKEN],
        sweep_interval_s=0.2,
        stale_check_interval_s=0.2,
        ws_ping_interval_s=1.0,
    )
    port = free_port()
    config = uvicorn.Config(
        create_app(settings), host="127.0.0.1", port=port, log_level="warning", lifespan="on"
    )
    server = uvicorn.Server(config)
    server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign,assignment]  # not the main thread
    failure: list[BaseException] = []

    def serve() -> None:
        try:
            asyncio.run(server.serve())
        except BaseException as exc:  # surfaced by the fixture below
            failure.append(exc)

    thread = threading.Thread(target=serve, name="weft", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    if not server.started:
        raise RuntimeError(f"Weft did not start: {failure!r}")
    try:
        yield WeftServer(url=f"http://127.0.0.1:{port}", token=TOKEN, nats_url=nats_server.url)
    finally:
        server.should_exit = True
        thread.join(30)


@pytest.fixture
def cli(weft_server: WeftServer, project_id: str) -> Cli:
    """The CLI pointed at the session's Weft, in a project of its own (via the environment)."""
    return Cli(
        env={
            "LOOM_API_URL": weft_server.url,
            "LOOM_API_TOKEN": weft_server.token,
            "LOOM_PROJECT_ID": project_id,
        },
        weft=weft_server,
        project=project_id,
    )
