"""A real Weft for Shuttle's tests: uvicorn in its own thread and event loop on the
real nats-server, so the synchronous CLI under test can block while Weft answers."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import uvicorn

from shared.nats.server import free_port
from shared.tls import client_tls
from testsupport.serving import OUTLIVING_SWEEP_S, SERVED_AT_ONCE

TOKEN = "shuttle-test-token"
READ_TOKEN = "shuttle-read-token"
"""A token with only the read scope (issue 24)."""


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
        return httpx.Client(base_url=self.url, headers=headers, timeout=10, verify=client_tls(self.url))

    def websocket_clients(self) -> float:
        """Weft's own gauge of connected WebSocket clients (from /metrics)."""
        text = httpx.get(f"{self.url}/metrics", timeout=10).text
        for line in text.splitlines():
            if line.startswith("weft_websocket_clients"):
                return float(line.rsplit(" ", 1)[1])
        return 0.0


@contextlib.contextmanager
def running_weft(nats_url: str) -> Iterator[WeftServer]:
    """Start a Weft (uvicorn in its own thread and event loop); stop it on exit."""
    from shared.settings import NatsSettings
    from weft.app import create_app
    from weft.settings import WeftSettings
    from weft.spinup.managed import ManagedSpinup
    from weft.spinup.settings import SpinupSettings

    settings = WeftSettings(
        nats=NatsSettings(url=nats_url),
        project_id="shuttle-default",
        api_tokens=[TOKEN, f"read:{READ_TOKEN}"],
        sweep_interval_s=OUTLIVING_SWEEP_S,
        stale_check_interval_s=OUTLIVING_SWEEP_S,
        ws_ping_interval_s=1.0,
        max_projects=SERVED_AT_ONCE,
    )
    port = free_port()
    config = uvicorn.Config(
        # No background health checks: the tests register targets on made-up hosts (an ssh
        # box, GitHub, a cluster) that must never be contacted from here; `targets test`
        # still checks a target on demand.
        create_app(settings, spinup=ManagedSpinup(SpinupSettings(health_checks=False))),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="on",
    )
    server = uvicorn.Server(config)
    server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign,assignment]  # not the main thread
    failure: list[BaseException] = []

    def serve() -> None:
        try:
            asyncio.run(server.serve())
        except BaseException as exc:  # surfaced below
            failure.append(exc)

    thread = threading.Thread(target=serve, name="weft", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    if not server.started:
        raise RuntimeError(f"Weft did not start: {failure!r}")
    try:
        yield WeftServer(url=f"http://127.0.0.1:{port}", token=TOKEN, nats_url=nats_url)
    finally:
        server.should_exit = True
        thread.join(30)
