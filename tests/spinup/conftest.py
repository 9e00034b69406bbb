"""Fixtures for the spin-up tests: targets in a real KV bucket, a spin-up service
with short timings, and a poll helper (no sleeps as synchronisation)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import uvicorn
from nats.aio.client import Client as NatsClient

from shared.models import AgentEntry, Event, Target
from shared.names import ProjectNames
from shared.natsclient import connect
from shared.registry import Registry
from shared.server import EmbeddedNatsServer, free_port
from shared.settings import NatsSettings
from tests.spinup.stubs import Seen, StubServer
from weft.app import create_app
from weft.settings import WeftSettings
from weft.spinup.config import validate_target_config
from weft.spinup.service import SpinupEngine
from weft.spinup.settings import SpinupSettings
from weft.spinup.targets import KvTargets
from weft.spinup.weft_service import WeftSpinup

ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")

_ENV_PREFIXES = ("NATS_", "LOOM_", "LOOMINAL_", "WEFT_")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's own NATS_URL, LOOM_* or WEFT_* must not leak into the tests (or the agents)."""
    for name in list(os.environ):
        if name.startswith(_ENV_PREFIXES):
            monkeypatch.delenv(name)


def demo_agent_command() -> list[str]:
    return [sys.executable, "-m", "weft.spinup.demo_agent"]


async def eventually(
    probe: Callable[[], Awaitable[T | None]], *, timeout: float = 30.0, interval: float = 0.05, what: str = ""
) -> T:
    """Poll ``probe`` until it returns something truthy; fail with ``what`` after ``timeout``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = await probe()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what or probe}")
        await asyncio.sleep(interval)


@pytest.fixture
async def receiver() -> AsyncIterator[StubServer]:
    """A webhook receiver that accepts every start and stop (modules that need other
    answers define their own ``receiver``)."""

    def accept(_: Seen) -> tuple[int, Any]:
        return 200, {"id": "remote-1"}

    server = await StubServer(accept).start()
    try:
        yield server
    finally:
        await server.stop()


def hook(receiver: StubServer) -> dict[str, Any]:
    """A webhook target's config that starts and stops agents through ``receiver``."""
    return {"url": f"{receiver.url}/start", "stop_url": f"{receiver.url}/stop"}


@pytest.fixture
def names(project_id: str) -> ProjectNames:
    return ProjectNames(project_id)


@pytest.fixture
def targets(nc: NatsClient, names: ProjectNames) -> KvTargets:
    return KvTargets(nc.jetstream(), names)


@pytest.fixture
def make_target(targets: KvTargets, project_id: str) -> Callable[..., Awaitable[Target]]:
    async def make(**fields: Any) -> Target:
        fields.setdefault("name", "t1")
        fields.setdefault("capabilities", ["code"])
        fields.setdefault("mechanism", "local")
        fields.setdefault("config", {"command": demo_agent_command(), "cwd": str(ROOT)})
        if fields["mechanism"] == "local":
            fields["config"].setdefault("env", {"LOOM_HEARTBEAT_S": "1"})
        fields["config"] = validate_target_config(fields["mechanism"], fields["config"])
        return await targets.put(Target(project_id=project_id, **fields))

    return make


@pytest.fixture
def spinup_settings(tmp_path: Path) -> SpinupSettings:
    return SpinupSettings(
        register_timeout_s=30,
        tick_s=0.1,
        shutdown_grace_s=3,
        stop_retry_s=30,
        health_checks=False,
        log_dir=tmp_path / "agent-logs",
    )


@pytest.fixture
async def service(
    nc: NatsClient, nats_server: EmbeddedNatsServer, spinup_settings: SpinupSettings
) -> AsyncIterator[SpinupEngine]:
    svc = SpinupEngine(nc, agent_nats_url=nats_server.url, settings=spinup_settings, discover=False)
    await svc.start()
    try:
        yield svc
    finally:
        for project_id in svc.project_ids:
            manager = await svc.manager(project_id)
            for record in await manager.store.all():
                if record.op.handle.get("pid"):
                    await manager.stop(record.op.id, "test cleanup")
            await manager.drain(15)
        await svc.stop()


async def published_events(nc: NatsClient, names: ProjectNames, kind: str) -> list[Event]:
    """Every event of ``kind`` in the project's events stream so far, in order."""
    js = nc.jetstream()
    sub = await js.subscribe(names.event_filter(kind), ordered_consumer=True)
    events: list[Event] = []
    try:
        while True:
            try:
                msg = await sub.next_msg(timeout=0.3)
            except Exception:
                break
            events.append(Event.model_validate_json(msg.data))
    finally:
        await sub.unsubscribe()
    return events


def read_text(path: Path) -> str:
    """A file's text, or "" while it does not exist yet."""
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


def pid_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


@dataclass
class RunningWeft:
    base_url: str
    spinup: WeftSpinup

    def client(self, project: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.base_url, headers={"X-Loom-Project": project}, timeout=15)


@asynccontextmanager
async def running_weft(
    nats_url: str,
    project_id: str,
    settings: SpinupSettings | None,
    *,
    expect: type[Any] = WeftSpinup,
    **overrides: Any,
) -> AsyncIterator[RunningWeft]:
    """A real Weft (uvicorn in-process, free port) with the managed spin-up service installed
    (``settings=None``: the one ``create_app`` installs by default)."""
    values: dict[str, Any] = {
        "project_id": project_id,
        "sweep_interval_s": 0.2,
        "stale_check_interval_s": 0.2,
        "nats": NatsSettings(url=nats_url),
    }
    values.update(overrides)
    installed = None if settings is None else WeftSpinup(settings, discover=False)
    app = create_app(WeftSettings(**values), spinup=installed)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign,assignment]
    task = asyncio.create_task(server.serve())
    try:
        await eventually(lambda: _started(server, task), timeout=20, interval=0.01, what="Weft to start")
        spinup = app.state.weft.spinup
        assert isinstance(spinup, expect)
        yield RunningWeft(f"http://127.0.0.1:{port}", spinup)
    finally:
        spinup = app.state.weft.spinup
        for project in spinup.engine.project_ids if isinstance(spinup, WeftSpinup) else []:
            manager = await spinup.engine.manager(project)
            for record in await manager.store.all():
                if record.op.handle.get("pid") and record.op.state.value not in (
                    "stopped",
                    "failed",
                    "timed-out",
                ):
                    await manager.stop(record.op.id, "test cleanup")
            await manager.drain(15)
        server.should_exit = True
        await asyncio.wait_for(task, 20)


async def _started(server: uvicorn.Server, task: asyncio.Task[Any]) -> bool:
    if task.done():
        task.result()
    return bool(server.started)


@pytest.fixture
async def weft(
    nats_server: EmbeddedNatsServer, project_id: str, spinup_settings: SpinupSettings
) -> AsyncIterator[RunningWeft]:
    async with running_weft(nats_server.url, project_id, spinup_settings) as running:
        yield running


@pytest.fixture
async def api(weft: RunningWeft, project_id: str) -> AsyncIterator[httpx.AsyncClient]:
    async with weft.client(project_id) as client:
        yield client


EngineFactory = Callable[..., Awaitable[SpinupEngine]]


@pytest.fixture
async def engine_factory(nats_server: EmbeddedNatsServer, tmp_path: Path) -> AsyncIterator[EngineFactory]:
    """``await engine_factory(shutdown_grace_s=0.5, ...)``: a started engine with its own
    connection (a separate Weft replica, as far as NATS is concerned)."""
    made: list[tuple[SpinupEngine, NatsClient]] = []

    async def make(**overrides: Any) -> SpinupEngine:
        values: dict[str, Any] = {
            "register_timeout_s": 30,
            "tick_s": 0.1,
            "shutdown_grace_s": 3,
            "stop_retry_s": 30,
            "health_checks": False,
            "log_dir": tmp_path / "agent-logs",
        }
        values.update(overrides)
        client = await connect(url=nats_server.url, name="spinup-engine")
        engine = SpinupEngine(
            client, agent_nats_url=nats_server.url, settings=SpinupSettings(**values), discover=False
        )
        await engine.start()
        made.append((engine, client))
        return engine

    yield make
    for engine, client in made:
        for project in engine.project_ids:
            manager = await engine.manager(project)
            await manager.drain(10)
        await engine.stop()
        await client.close()


async def register_agent(
    nc: NatsClient, project_id: str, agent_id: str, *, spinup_id: str, target_id: str, capabilities: list[str]
) -> AgentEntry:
    """Write the registry entry a started agent's Warp would write (for mechanisms whose
    agents run elsewhere: a Job, a workflow run, a webhook's worker)."""
    entry = AgentEntry(
        agent_id=agent_id,
        handle=f"remote-{agent_id[:8]}",
        project_id=project_id,
        user_id="0" * 16,
        capabilities=capabilities,
        spinup_id=spinup_id,
        target_id=target_id,
        heartbeat_interval_s=60,
    )
    await Registry(nc.jetstream(), ProjectNames(project_id)).put(entry)
    return entry
