"""A real Weft: the FastAPI app served by uvicorn (``testsupport.serving``) in a thread of its own.

Its own thread and event loop keep Weft answering while a scenario's loop is busy
driving MCP sessions or waiting for a Shuttle process.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from loom.retry import async_retrying
from shared.settings import NatsSettings
from shared.tls import client_tls
from testsupport.serving import CLIENT_TIMEOUT_S, OUTLIVING_SWEEP_S, SERVED_AT_ONCE, serve_in_thread

START_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class RunningWeft:
    url: str
    ws_url: str
    token: str | None = None

    def client(self, project: str | None = None) -> httpx.AsyncClient:
        """An HTTP client for Weft's REST API, naming ``project`` with ``X-Loom-Project``.

        Like Loom's own clients it asks a read again when Weft answers "NATS unavailable, try
        again shortly" (:mod:`loom.retry`): a scenario's probes poll reads, and on a loaded
        machine a NATS call Weft makes for one can time out."""
        headers: dict[str, str] = {}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if project:
            headers["X-Loom-Project"] = project
        return httpx.AsyncClient(
            base_url=self.url,
            headers=headers,
            timeout=CLIENT_TIMEOUT_S,
            transport=async_retrying(client_tls(self.url)),
        )


@contextlib.contextmanager
def run_weft(nats: NatsSettings, *, spinup: Any = None, **settings: Any) -> Iterator[RunningWeft]:
    """Serve Weft with ``WeftSettings(nats=nats, **settings)`` until the block ends.

    Scenario defaults: a fixed default project, short sweep and stale-check intervals.
    ``spinup``: the spin-up service for ``create_app``; default: Weft's managed spin-up with
    scenario timings (:func:`managed_spinup`), logs in a temporary folder. Agents it spun up
    and left running are stopped when the block ends."""
    from weft.app import create_app
    from weft.settings import WeftSettings

    values: dict[str, Any] = {
        "project_id": "scenarios-default",
        "sweep_interval_s": OUTLIVING_SWEEP_S,
        "stale_check_interval_s": OUTLIVING_SWEEP_S,
        "ws_ping_interval_s": 1.0,
        "api_tokens": [],
        "policy_file": None,
        "max_projects": SERVED_AT_ONCE,  # the worker's Weft outlives every scenario's project
    }
    if "loom" not in settings:  # its local state (repository copies, ...) in a folder of its own
        from shared.settings import LoomSettings

        values["loom"] = LoomSettings(data_dir=Path(tempfile.mkdtemp(prefix="loom-scenario-data-")))
    values.update(settings)
    config = WeftSettings(nats=nats, **values)
    if spinup is None:
        spinup = managed_spinup(Path(tempfile.mkdtemp(prefix="loom-scenario-spinup-")))
    tokens = values.get("api_tokens") or []
    token = str(tokens[0]) if tokens else None
    with serve_in_thread(create_app(config, spinup=spinup), start_timeout=START_TIMEOUT_S) as served:
        try:
            yield RunningWeft(url=served.url, ws_url=served.ws_url, token=token)
        finally:
            if served.thread is not None and served.thread.is_alive():
                stopping = asyncio.run_coroutine_threadsafe(stop_spun_up_agents(spinup), served.loop)
                with contextlib.suppress(Exception):
                    stopping.result(60)


def managed_spinup(log_dir: Path, **overrides: Any) -> Any:
    """Weft's managed spin-up service with scenario timings (fast ticks, no health checks).

    Short ticks and no health checks keep scenarios quick; ``run_weft`` uses it unless told
    otherwise."""
    from weft.spinup.managed import ManagedSpinup
    from weft.spinup.settings import SpinupSettings

    values: dict[str, Any] = {
        "tick_s": 0.2,
        "shutdown_grace_s": 3,
        "health_checks": False,
        "register_timeout_s": 60,
        "log_dir": log_dir,
    }
    values.update(overrides)
    return ManagedSpinup(SpinupSettings(**values), discover=False)


async def stop_spun_up_agents(spinup: Any) -> None:
    """Stop every agent process a scenario's spin-ups left running (a failed scenario's leftovers)."""
    from weft.spinup.managed import ManagedSpinup

    if not isinstance(spinup, ManagedSpinup) or spinup._hub is None:  # not managed, or never started
        return
    for project_id in list(spinup.project_ids):
        manager = await spinup.manager(project_id)
        for record in await manager.store.all():
            if record.op.handle.get("pid") and record.op.state.value not in (
                "stopped",
                "failed",
                "timed-out",
            ):
                await manager.stop(record.op.id, "scenario cleanup")
        await manager.drain(15)
