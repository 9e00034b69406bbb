"""A scenario's view of the fabric: one NATS, one Weft, one project, and ways to add actors.

``fabric.agent(...)`` starts a Warp agent, ``fabric.memory(...)`` a Pattern session,
``fabric.shuttle(...)`` runs the CLI and ``fabric.api()`` talks to Weft directly, all
in the scenario's project. ``fabric.project(other_id)`` is the same fabric seen from
another project (multi-tenant scenarios).
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx

from scenario_harness.agents import (
    Connection,
    PatternSession,
    WarpAgent,
    new_agent_id,
    new_user_id,
    pattern_session,
    warp_agent,
)
from scenario_harness.shuttle_cli import ShuttleResult, run_shuttle
from scenario_harness.weft_server import RunningWeft

T = TypeVar("T")


def new_project_id(prefix: str = "s") -> str:
    """A project id no other scenario uses."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@dataclass(frozen=True)
class Fabric:
    conn: Connection
    weft: RunningWeft
    project_id: str
    workdir: Path

    def project(self, project_id: str) -> Fabric:
        """The same NATS, Weft and folder, acting in another project."""
        return dataclasses.replace(self, project_id=project_id)

    def served_by(self, weft: RunningWeft) -> Fabric:
        """The same project, with another Weft (one started with other settings)."""
        return dataclasses.replace(self, weft=weft)

    def via(self, conn: Connection) -> Fabric:
        """The same project, reaching NATS another way (TLS, WebSocket)."""
        return dataclasses.replace(self, conn=conn)

    @property
    def project_path(self) -> Path:
        """The folder agents of this project run in (holds ``.loom/config.json``)."""
        path = self.workdir / "projects" / self.project_id
        path.mkdir(parents=True, exist_ok=True)
        return path

    @property
    def home(self) -> Path:
        """HOME of every process the scenario starts (its ``~/.loom`` is the scenario's own)."""
        path = self.workdir / "home"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def agent(self, handle: str, **options: Any) -> AbstractAsyncContextManager[WarpAgent]:
        """A Warp agent in this project; options as :func:`scenario_harness.agents.warp_agent`."""
        return warp_agent(self.conn, self.project_id, self.workdir, handle, **options)

    def memory(
        self, name: str, *, agent_id: str | None = None, user_id: str | None = None, **options: Any
    ) -> AbstractAsyncContextManager[PatternSession]:
        """A Pattern session in this project (pass the agent's and user's ids to act as it)."""
        return pattern_session(
            self.conn,
            self.project_id,
            self.workdir,
            name,
            agent_id=agent_id or new_agent_id(),
            user_id=user_id or new_user_id(),
            **options,
        )

    async def shuttle(self, *args: str, stdin: str | None = None) -> ShuttleResult:
        """Run the ``shuttle`` CLI against this fabric's Weft, in this project."""
        return await run_shuttle(
            *args,
            api_url=self.weft.url,
            project_id=self.project_id,
            home=self.home,
            token=self.weft.token,
            stdin=stdin,
        )

    async def shuttle_json(self, *args: str) -> Any:
        """``shuttle --json *args``, which must succeed; its JSON document."""
        return (await self.shuttle("--json", *args)).json()

    def api(self) -> httpx.AsyncClient:
        """Weft's REST API, in this project."""
        return self.weft.client(self.project_id)


async def eventually(
    probe: Callable[[], Awaitable[T | None]], *, timeout: float = 20.0, interval: float = 0.1, what: str = ""
) -> T:
    """Poll ``probe`` until it returns something truthy; fail naming ``what`` after ``timeout``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        last = await probe()
        if last:
            return last
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what or probe}; last: {last!r}")
        await asyncio.sleep(interval)


async def agents_in(stack: Any, fabric: Fabric, specs: dict[str, dict[str, Any]]) -> dict[str, WarpAgent]:
    """Start several agents (``{handle: options}``) inside an ``AsyncExitStack``, in parallel:
    every process is spawned first, then all handshakes, NATS waits and registrations run at once.
    An option ``fabric`` starts that agent in another fabric (another project, another transport)."""
    spawned: dict[str, tuple[WarpAgent, dict[str, Any]]] = {}
    for handle, options in specs.items():
        opts = dict(options)
        where: Fabric = opts.pop("fabric", fabric)
        start = {"wait_ready": opts.pop("wait_ready", True), "register": opts.pop("register", True)}
        agent = await stack.enter_async_context(where.agent(handle, defer_start=True, **opts))
        spawned[handle] = (agent, start)
    await asyncio.gather(*(agent.start(**start) for agent, start in spawned.values()))
    return {handle: agent for handle, (agent, _) in spawned.items()}


async def drain(agent: WarpAgent, capability: str | None = None) -> AsyncIterator[dict[str, Any]]:
    """Claim until nothing eligible is left, yielding each claimed item."""
    while (item := await agent.claim(capability)) is not None:
        yield item
