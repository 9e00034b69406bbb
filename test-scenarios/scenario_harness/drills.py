"""Failure drills: a nats-server that can be killed and restarted as the same server, Weft as a
real ``weft serve`` process (so it can be killed), agents that can be killed with SIGKILL, a
worker loop that keeps going through faults, and a recorder for the drill figures.

Used by scenario 15 (failure recovery) and 17 (NATS cluster).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import re
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from scenario_harness.agents import WarpAgent
from scenario_harness.fabric import Fabric, new_project_id
from scenario_harness.mcp_process import BIN, ToolCallError
from scenario_harness.weft_server import RunningWeft
from shared.nats.server import EmbeddedNatsServer, ServerConfig, free_port
from testsupport.mcp import is_outage
from testsupport.zygote import zygote_env

WEFT_START_TIMEOUT_S = 30.0


def now() -> float:
    return time.monotonic()


# -- nats-server that survives its own restart ------------------------------------------


class RestartableNats:
    """One nats-server with a fixed client port and data folder: a restart is the same server."""

    def __init__(self, folder: Path, config: ServerConfig | None = None) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.config = config or ServerConfig(port=free_port(), store_dir=folder / "jetstream")
        if self.config.store_dir is None:
            self.config.store_dir = folder / "jetstream"
        self.log_file = folder / f"nats-{self.config.server_name or 'server'}.log"
        self.server: EmbeddedNatsServer | None = None

    @property
    def url(self) -> str:
        return f"nats://{self.config.host}:{self.config.port}"

    @property
    def running(self) -> bool:
        return self.server is not None and self.server.running

    def start(self, timeout: float = 20.0) -> None:
        assert not self.running, "already running"
        self.server = EmbeddedNatsServer(self.config, log_file=self.log_file).start(timeout)

    def kill(self) -> None:
        """SIGKILL: what a crash looks like (the data folder stays)."""
        if self.server is not None:
            self.server.kill()
            self.server = None

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None


# -- Weft as a process -----------------------------------------------------------------


class WeftProcess:
    """``weft serve`` on a fixed port, so Shuttle and clients find it again after a restart."""

    def __init__(
        self,
        nats_url: str,
        folder: Path,
        *,
        env: dict[str, str] | None = None,
        host: str = "127.0.0.1",
        launch: Sequence[str] = (),
        token: str | None = None,
    ) -> None:
        """``host``: the address it listens on; ``launch``: a command prefix (e.g. run it on
        another host of :mod:`scenario_harness.hosts`); ``token``: an ``operate`` API token
        (needed to listen beyond loopback), which its clients send."""
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.host = host
        self.launch = list(launch)
        self.token = token
        self.port = free_port()
        self.nats_url = nats_url
        self.extra_env = env or {}
        self.proc: asyncio.subprocess.Process | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def running_weft(self) -> RunningWeft:
        return RunningWeft(url=self.url, ws_url=f"ws://{self.host}:{self.port}", token=self.token)

    def env(self) -> dict[str, str]:
        home = self.folder / "home"
        home.mkdir(exist_ok=True)
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "NATS_URL": self.nats_url,
            "WEFT_HOST": self.host,
            "WEFT_PORT": str(self.port),
            "WEFT_PROJECT_ID": "scenarios-default",
            "WEFT_SWEEP_INTERVAL_S": "0.5",
            "WEFT_STALE_CHECK_INTERVAL_S": "0.5",
            "WEFT_LOG_LEVEL": "INFO",
            "LOOM_DATA_DIR": str(self.folder / "data"),
            "PYTHONUNBUFFERED": "1",
            **({"WEFT_API_TOKENS": f"operate:{self.token}"} if self.token else {}),
            # forked from the test process's zygote, unless it runs on another "host"
            **({} if self.launch else zygote_env()),
            **self.extra_env,
        }

    async def start(self) -> float:
        """Start it; returns the seconds until ``/health`` said ok (NATS connected)."""
        assert self.proc is None or self.proc.returncode is not None, "already running"
        self.starts += 1
        log = (self.folder / f"weft-{self.starts}.log").open("wb")
        started = now()
        self.proc = await asyncio.create_subprocess_exec(
            *self.launch,
            str(BIN / "weft"),
            "serve",
            env=self.env(),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
        log.close()
        await self.wait_healthy()
        return now() - started

    async def wait_healthy(self, timeout: float = WEFT_START_TIMEOUT_S) -> None:
        deadline = now() + timeout
        async with httpx.AsyncClient(timeout=2) as http:
            while now() < deadline:
                assert self.proc is not None
                if self.proc.returncode is not None:
                    raise AssertionError(f"weft exited with {self.proc.returncode}: {self.log_tail()}")
                with contextlib.suppress(httpx.HTTPError):
                    response = await http.get(f"{self.url}/health")
                    if response.status_code == 200 and response.json().get("nats") == "connected":
                        return
                await asyncio.sleep(0.05)
        raise AssertionError(f"weft not healthy within {timeout:g}s: {self.log_tail()}")

    def log_tail(self, chars: int = 3000) -> str:
        path = self.folder / f"weft-{self.starts}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    async def kill(self) -> None:
        """SIGKILL, the way a crashed pod goes; returns once its port is free (a Weft forked
        from a zygote dies just after its stand-in: it sees the stand-in gone)."""
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGKILL)
            await self.proc.wait()
            await self._port_freed()

    async def _port_freed(self, timeout: float = 10.0) -> None:
        deadline = now() + timeout
        while now() < deadline:
            try:
                _, writer = await asyncio.open_connection(self.host, self.port)
            except OSError:
                return
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
            await asyncio.sleep(0.02)
        raise AssertionError(f"weft's port {self.port} still answers {timeout:g}s after its SIGKILL")

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), 15)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()


def fabric_for(conn_url: str, weft: WeftProcess, workdir: Path, project_id: str | None = None) -> Fabric:
    """A :class:`Fabric` over a drill's own nats-server and Weft process."""
    from scenario_harness.agents import Connection

    return Fabric(
        conn=Connection(conn_url),
        weft=weft.running_weft,
        project_id=project_id or new_project_id("drill"),
        workdir=workdir,
    )


# -- killing an agent ------------------------------------------------------------------


def _parent_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def _is_descendant(pid: int, ancestor: int) -> bool:
    seen = 0
    while pid > 1 and seen < 64:
        parent = _parent_of(pid)
        if parent is None:
            return False
        if parent == ancestor:
            return True
        pid, seen = parent, seen + 1
    return False


def _alive(pid: int) -> bool:
    """Running (a zombie has exited: only its parent has not collected it yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def pids_with_env(variable: str, value: str) -> list[int]:
    """Live processes started (directly or not) by this test process whose environment has
    ``variable=value``: how a scenario finds the agents Weft spun up for it."""
    marker = f"{variable}={value}".encode()
    me = os.getpid()
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        pid = int(entry.name)
        if marker in environ.split(b"\0") and _is_descendant(pid, me) and _alive(pid):
            found.append(pid)
    return sorted(found)


def agent_pid(agent: WarpAgent) -> int:
    """The pid of the ``warp`` process behind ``agent`` (a child this test process started)."""
    found = pids_with_env("LOOM_AGENT_ID", agent.env["LOOM_AGENT_ID"])
    if not found:
        raise AssertionError(f"no warp process found for {agent.handle}")
    return found[0]


def kill_agent(agent: WarpAgent) -> int:
    """SIGKILL the agent's Warp process (no goodbye: heartbeats just stop)."""
    pid = agent_pid(agent)
    os.kill(pid, signal.SIGKILL)
    return pid


# -- a worker that keeps going through faults ------------------------------------------


@dataclass
class WorkerLog:
    handle: str
    completed: list[str] = field(default_factory=list)
    claims: list[str] = field(default_factory=list)
    errors: int = 0
    lost_claims: list[str] = field(default_factory=list)
    """Claims this worker could no longer finish (redelivered elsewhere meanwhile)."""
    last_ok: float = 0.0
    last_error: str = ""
    calling: tuple[str, float] | None = None
    """The tool call under way and when it began (a call that hangs shows here)."""

    def explain(self, stderr: str = "") -> str:
        """What the worker is doing, for a drill's failure message."""
        call = f"in {self.calling[0]} for {now() - self.calling[1]:.1f}s" if self.calling else "between calls"
        said = f"{self.handle}: {call}; {self.errors} error(s), last: {self.last_error[:300]!r}"
        return said + (f"\n--- {self.handle} stderr (tail) ---\n{stderr[-1500:]}" if stderr else "")


async def call_retrying(
    agent: WarpAgent, tool: str, log: WorkerLog, *, give_up: float = 60.0, **arguments: Any
) -> dict[str, Any] | str:
    """Call until NATS answers: the structured output, or the error text of a definite refusal."""
    deadline = now() + give_up
    while True:
        log.calling = (tool, now())
        try:
            result = await agent.raw(tool, **arguments)
        finally:
            log.calling = None
        if not result.is_error:
            log.last_ok = now()
            return dict(result.structured_content or {})
        text = " ".join(getattr(c, "text", "") for c in result.content)
        log.last_error = text
        if not is_outage(result):
            return text  # a real refusal (e.g. no longer the holder), not an outage
        log.errors += 1
        if now() > deadline:
            raise ToolCallError(f"{agent.handle}: {tool} still failing after {give_up:g}s: {text}")
        await asyncio.sleep(0.2)


HELD = re.compile(r"you already hold \d+ item\(s\) \(([0-9a-f]{32})")
"""Warp's refusal of a claim while the agent holds its maximum names the items it holds."""


async def work_loop(
    agent: WarpAgent,
    log: WorkerLog,
    stop: asyncio.Event,
    *,
    work_s: float = 0.05,
    on_claim: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
) -> None:
    """Claim -> progress -> (work) -> complete until ``stop`` is set; rides out NATS outages."""
    while not stop.is_set():
        out = await call_retrying(agent, "warp_work_claim", log)
        held = HELD.search(out) if isinstance(out, str) else None
        if held is not None:
            # a claim that stood while its answer failed (NATS went away right after it): the
            # refusal names the item this agent holds, so it goes on with that one
            item = {"id": held.group(1)}
        elif isinstance(out, str) or not out.get("claimed"):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.1)
            continue
        else:
            item = out["item"]
        log.claims.append(item["id"])
        if on_claim is not None:
            await on_claim(item)
        progress = await call_retrying(agent, "warp_work_progress", log, work_id=item["id"], percent=50)
        if isinstance(progress, str):
            log.lost_claims.append(item["id"])
            continue
        await asyncio.sleep(work_s)
        done = await call_retrying(
            agent, "warp_work_complete", log, work_id=item["id"], result={"by": agent.handle}
        )
        if isinstance(done, str):
            log.lost_claims.append(item["id"])
        else:
            log.completed.append(item["id"])


@contextlib.asynccontextmanager
async def workers(agents: dict[str, WarpAgent], **options: Any) -> AsyncIterator[dict[str, WorkerLog]]:
    """Run :func:`work_loop` for each agent while the block runs; stops them at its end."""
    stop = asyncio.Event()
    logs = {handle: WorkerLog(handle) for handle in agents}
    tasks = {
        handle: asyncio.create_task(work_loop(agent, logs[handle], stop, **options), name=f"worker-{handle}")
        for handle, agent in agents.items()
    }
    try:
        yield logs
    finally:
        stop.set()
        done, _ = await asyncio.wait(tasks.values(), timeout=90)
        for task in tasks.values():
            if task not in done:
                task.cancel()
        for task in done:
            if not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]


async def until(
    probe: Callable[[], Any],
    *,
    timeout: float,
    what: str,
    interval: float = 0.1,
    explain: Callable[[], str] | None = None,
) -> float:
    """Poll ``probe`` (sync or async) until truthy; returns the seconds it took (recovery
    figures). ``explain``: what to add to the failure message (the state of the parts)."""
    started = now()
    while True:
        with contextlib.suppress(httpx.HTTPError, ToolCallError, OSError):
            value = probe()
            if inspect.isawaitable(value):
                value = await value
            if value:
                return now() - started
        if now() - started > timeout:
            detail = f"\n{explain()}" if explain is not None else ""
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}{detail}")
        await asyncio.sleep(interval)


# -- ground truth and figures ----------------------------------------------------------


async def work_records(nats_url: str, project_id: str) -> dict[str, dict[str, Any]]:
    """Every work record of the project, read straight from NATS KV (not through Weft).

    Read-only on purpose: it binds to the bucket and never "ensures" streams, so an audit
    cannot change what it audits (stream replicas, for one)."""
    from shared.names import ProjectNames
    from shared.nats.client import connect
    from shared.nats.jetstream import snapshot
    from shared.work.rules import WorkRecord

    nc = await connect(url=nats_url, name="drill-audit", timeout=10)
    try:
        kv = await nc.jetstream(timeout=5).key_value(ProjectNames(project_id).work_records_bucket)
        items = [WorkRecord.model_validate_json(raw).item for raw in (await snapshot(kv)).values()]
        return {item.id: item.model_dump(mode="json") for item in items}
    finally:
        await nc.close()


async def rest_items(api: httpx.AsyncClient) -> dict[str, dict[str, Any]]:
    """Every work item Weft lists (all pages)."""
    items: dict[str, dict[str, Any]] = {}
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 200}
        if cursor:
            params["cursor"] = cursor
        response = await api.get("/api/work", params=params)
        response.raise_for_status()
        page = response.json()
        items.update({item["id"]: item for item in page["items"]})
        cursor = page.get("next_cursor")
        if not cursor:
            return items


def work_figures(submitted: set[str], records: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """submitted / completed / dead-lettered / lost (submitted but neither finished nor recorded)."""
    statuses = {wid: records[wid]["status"] for wid in submitted if wid in records}
    completed = sorted(w for w, s in statuses.items() if s == "completed")
    dead = sorted(w for w, s in statuses.items() if s == "dead-lettered")
    unfinished = sorted(w for w, s in statuses.items() if s not in ("completed", "dead-lettered"))
    missing = sorted(submitted - set(records))
    attempts = [records[w]["attempts"] for w in completed]
    return {
        "submitted": len(submitted),
        "completed": len(completed),
        "dead_lettered": len(dead),
        "unfinished": len(unfinished),
        "lost": len(missing) + len(unfinished),
        "redelivered": sum(1 for a in attempts if a > 1),
        "max_attempts_seen": max(attempts, default=0),
    }


class Figures:
    """Drill figures, printed and merged into one JSON file in the scenario's ``tmp/``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def record(self, drill: str, figures: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data: dict[str, Any] = {}
        if self.path.exists():
            with contextlib.suppress(ValueError):
                data = json.loads(self.path.read_text())
        data[drill] = {**figures, "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        self.path.write_text(json.dumps(data, indent=2, sort_keys=True))
        print(f"\n[{drill}] " + json.dumps(figures, sort_keys=True))
