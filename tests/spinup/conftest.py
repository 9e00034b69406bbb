"""Fixtures for the spin-up tests: Weft's project layer with the managed spin-up service
(without HTTP, or a whole Weft), targets in a real KV bucket, and a poll helper (no sleeps
as synchronisation)."""

from __future__ import annotations

import asyncio
import contextlib
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

from shared.agents.registry import Registry
from shared.models import AgentEntry, Event, SpinupOperation, Target, TargetSpec
from shared.names import ProjectNames
from shared.nats.client import connect
from shared.nats.server import EmbeddedNatsServer, free_port
from shared.settings import NatsSettings
from shared.tls import client_tls
from tests.spinup.stubs import Seen, StubServer
from testsupport.env import strip_fabric
from testsupport.serving import CLIENT_TIMEOUT_S
from weft.app import create_app
from weft.metrics import Metrics
from weft.project.hub import ProjectHub
from weft.settings import WeftSettings
from weft.spinup.base import SPINUP_EXTENSION
from weft.spinup.managed import ManagedSpinup
from weft.spinup.mechanisms import validate_target_config
from weft.spinup.settings import SpinupSettings
from weft.spinup.store import newest_first
from weft.targets.store import TargetStore

ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's own NATS_URL, LOOM_* or WEFT_* must not leak into the tests (or the agents)."""
    strip_fabric(monkeypatch)


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
def hubs() -> list[ProjectHub]:
    """Every Weft project layer a test started (so target writes can wait for each to see them)."""
    return []


@pytest.fixture
async def targets(nc: NatsClient, names: ProjectNames) -> AsyncIterator[TargetStore]:
    """The project's targets, written as an operator's Weft would (another replica's store)."""
    store = TargetStore(nc, nc.jetstream(), names)
    await store.start()
    try:
        yield store
    finally:
        await store.stop()


MakeTarget = Callable[..., Awaitable[Target]]


@pytest.fixture
def make_target(targets: TargetStore, hubs: list[ProjectHub], project_id: str) -> MakeTarget:
    """Register a target; returns once every running Weft of the test has it in its copy."""

    async def make(**fields: Any) -> Target:
        fields.setdefault("name", "t1")
        fields.setdefault("capabilities", ["code"])
        fields.setdefault("mechanism", "local")
        fields.setdefault("config", {"command": demo_agent_command(), "cwd": str(ROOT)})
        if fields["mechanism"] == "local":
            fields["config"].setdefault("env", {"LOOM_HEARTBEAT_S": "1"})
        fields["config"] = validate_target_config(fields["mechanism"], fields["config"])
        target = await targets.create(TargetSpec(**fields))
        await seen_by_all(hubs, project_id)
        return target

    return make


async def seen_by_all(hubs: list[ProjectHub], project_id: str) -> None:
    """Wait until every Weft serving ``project_id`` has every target write so far in its copy."""
    for hub in hubs:
        for context in hub.served():
            if context.project_id == project_id:
                await context.targets.mirror.sync()


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


async def start_spinup(
    nc: NatsClient, nats_url: str, settings: SpinupSettings, *, discover: bool = False
) -> ManagedSpinup:
    """Weft's project layer and managed spin-up on ``nc``, without HTTP (one Weft replica)."""
    spinup = ManagedSpinup(settings, discover=discover)
    weft_settings = WeftSettings(nats=NatsSettings(url=nats_url), stale_check_interval_s=0.2)
    hub = ProjectHub(nc, weft_settings, Metrics(), None, extensions={SPINUP_EXTENSION: spinup.attach})
    await spinup.start(hub)
    return spinup


async def stop_spinup(spinup: ManagedSpinup, *, stop_agents: bool = True) -> None:
    """Stop what the test's agents still run (local processes), then the replica."""
    for project_id in spinup.project_ids:
        manager = await spinup.manager(project_id)
        if stop_agents:
            for record in await manager.store.all():
                if record.op.handle.get("pid") and record.op.state.value not in (
                    "stopped",
                    "failed",
                    "timed-out",
                ):
                    await manager.stop(record.op.id, "test cleanup")
        await manager.drain(15)
    await spinup.stop()
    await spinup.hub.close()


async def tick(spinup: ManagedSpinup, project_id: str, *, health: bool = False) -> None:
    """One spin-up pass for a project now, as the loop runs every ``tick_s``, on the project's
    copies brought up to date first (so it sees what the test just wrote)."""
    part = await spinup.project(project_id)
    context = part.context
    for mirror in (context.agents.mirror, context.work.mirror, context.targets.mirror):
        await mirror.sync()
    await part.store.sync()
    await part.tick(health=health)


async def list_operations(spinup: ManagedSpinup, project_id: str) -> list[SpinupOperation]:
    """The project's spin-up operations, newest first, as the stats route lists them."""
    return newest_first(await (await spinup.project(project_id)).store.all())


@pytest.fixture
async def service(
    nc: NatsClient, nats_server: EmbeddedNatsServer, spinup_settings: SpinupSettings, hubs: list[ProjectHub]
) -> AsyncIterator[ManagedSpinup]:
    svc = await start_spinup(nc, nats_server.url, spinup_settings)
    hubs.append(svc.hub)
    try:
        yield svc
    finally:
        await stop_spinup(svc)


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


@dataclass
class RunningWeft:
    base_url: str
    spinup: ManagedSpinup

    def client(self, project: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.base_url,
            headers={"X-Loom-Project": project},
            timeout=CLIENT_TIMEOUT_S,
            verify=client_tls(self.base_url),
        )


@asynccontextmanager
async def running_weft(
    nats_url: str,
    project_id: str,
    settings: SpinupSettings | None,
    *,
    expect: type[Any] = ManagedSpinup,
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
    installed = None if settings is None else ManagedSpinup(settings, discover=False)
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
        for project in spinup.project_ids if isinstance(spinup, ManagedSpinup) else []:
            manager = await spinup.manager(project)
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
    nats_server: EmbeddedNatsServer, project_id: str, spinup_settings: SpinupSettings, hubs: list[ProjectHub]
) -> AsyncIterator[RunningWeft]:
    async with running_weft(nats_server.url, project_id, spinup_settings) as running:
        hubs.append(running.spinup.hub)
        yield running


@pytest.fixture
async def api(weft: RunningWeft, project_id: str) -> AsyncIterator[httpx.AsyncClient]:
    async with weft.client(project_id) as client:
        yield client


EngineFactory = Callable[..., Awaitable[ManagedSpinup]]


@pytest.fixture
async def engine_factory(
    nats_server: EmbeddedNatsServer, tmp_path: Path, hubs: list[ProjectHub]
) -> AsyncIterator[EngineFactory]:
    """``await engine_factory(shutdown_grace_s=0.5, ...)``: a started Weft replica (project
    layer and managed spin-up, no HTTP) with its own NATS connection."""
    made: list[tuple[ManagedSpinup, NatsClient]] = []

    async def make(*, discover: bool = False, **overrides: Any) -> ManagedSpinup:
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
        engine = await start_spinup(client, nats_server.url, SpinupSettings(**values), discover=discover)
        hubs.append(engine.hub)
        made.append((engine, client))
        return engine

    yield make
    for engine, client in made:
        await stop_spinup(engine, stop_agents=False)
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
