"""Fixtures for Weft's tests: a real Weft (uvicorn, in-process, on a free port) over the real
nats-server from ``testsupport.servers``, and HTTP/WebSocket clients for it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import uvicorn
from nats.aio.client import Client as NatsClient

from shared.nats.server import EmbeddedNatsServer
from shared.settings import NatsSettings
from shared.tls import client_tls
from testsupport.env import strip_fabric
from testsupport.serving import CLIENT_TIMEOUT_S, serve_in_loop
from weft.app import create_app
from weft.runtime import NatsRuntime
from weft.settings import WeftSettings
from weft.spinup import DisabledSpinup, SpinupService


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's own NATS_URL, LOOM_* or WEFT_* must not leak into the settings under test."""
    strip_fabric(monkeypatch)


@dataclass
class RunningWeft:
    base_url: str
    ws_url: str
    settings: WeftSettings
    server: uvicorn.Server

    def client(self, token: str | None = None, project: str | None = None) -> httpx.AsyncClient:
        headers: dict[str, str] = {}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        if project is not None:
            headers["X-Loom-Project"] = project
        return httpx.AsyncClient(
            base_url=self.base_url,
            headers=headers,
            timeout=CLIENT_TIMEOUT_S,
            verify=client_tls(self.base_url),
        )


WeftFactory = Callable[..., AbstractAsyncContextManager[RunningWeft]]


@pytest.fixture
def weft_factory(nats_server: EmbeddedNatsServer) -> WeftFactory:
    """``async with weft_factory(project_id=..., api_tokens=...) as weft:`` runs a real Weft."""

    @asynccontextmanager
    async def start(
        *,
        spinup: SpinupService | None = None,
        nc: NatsClient | None = None,
        runtime: NatsRuntime | None = None,
        **overrides: Any,
    ) -> AsyncIterator[RunningWeft]:
        values: dict[str, Any] = {
            "sweep_interval_s": 0.2,
            "stale_check_interval_s": 0.2,
            "nats": NatsSettings(url=nats_server.url),
        }
        values.update(overrides)
        settings = WeftSettings(**values)
        # Weft's own tests pin the no-op seam (the spin-up manager has its own tests in tests/spinup).
        app = create_app(settings, spinup=spinup or DisabledSpinup(), nc=nc, runtime=runtime)
        async with serve_in_loop(app) as served:
            yield RunningWeft(served.url, served.ws_url, settings, served.server)

    return start


@pytest.fixture
async def weft(weft_factory: WeftFactory, project_id: str) -> AsyncIterator[RunningWeft]:
    async with weft_factory(project_id=project_id) as running:
        yield running


@pytest.fixture
async def api(weft: RunningWeft) -> AsyncIterator[httpx.AsyncClient]:
    async with weft.client() as client:
        yield client
