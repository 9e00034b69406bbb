"""Warp agents and Pattern sessions as real MCP stdio processes.

Each helper builds the process environment from scratch (no ``NATS_*``/``LOOM_*``
leaks from the developer's shell), points ``HOME`` at the scenario's own folder
(so no ``~/.loom`` of the developer is read) and waits until the process has
reached NATS before handing it to the scenario.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from scenario_harness.mcp_process import BIN, McpProcess, spawn_mcp
from testsupport.zygote import zygote_env

READY_TIMEOUT_S = 30.0


def new_agent_id() -> str:
    """An agent id in the format identity produces (32 lowercase hex)."""
    return uuid.uuid4().hex


def new_user_id() -> str:
    """A user id (16 lowercase hex), as ``LOOM_USER_ID`` accepts it."""
    return uuid.uuid4().hex[:16]


@dataclass(frozen=True)
class Connection:
    """Where and how a process reaches NATS."""

    url: str
    tls_ca: Path | None = None

    def env(self) -> dict[str, str]:
        env = {"NATS_URL": self.url}
        if self.tls_ca is not None:
            env["NATS_TLS_CA"] = str(self.tls_ca)
        return env


def base_env(home: Path) -> dict[str, str]:
    return {"HOME": str(home), "LOOM_LOG_LEVEL": "INFO", "PYTHONUNBUFFERED": "1"}


class WarpAgent(McpProcess):
    """One agent: a ``warp`` process and the MCP session that drives it."""

    agent_id: str
    handle: str

    async def start(self, *, wait_ready: bool = True, register: bool = True) -> None:
        """Handshake, wait for NATS, register (what :func:`warp_agent` does unless deferred)."""
        await self.initialize()
        if wait_ready:
            await self.wait_ready()
            if register:
                await self.register()

    async def wait_ready(self) -> None:
        """Until Warp has reached NATS (its agent id is final from then on)."""
        answers, last = 0, None
        try:
            with anyio.fail_after(READY_TIMEOUT_S):
                while True:
                    info = await self.call("warp_handle_get")
                    answers, last = answers + 1, info
                    if info["connected"]:
                        self.agent_id = str(info["agent_id"])
                        return
                    await anyio.sleep(0.05)
        except TimeoutError:
            # say whether Warp answered at all (not connected) or stopped answering (a stall)
            raise AssertionError(
                f"{self.name}: not connected within {READY_TIMEOUT_S:g}s; {answers} warp_handle_get "
                f"answers, the last {last}\n--- {self.name} stderr (tail) ---\n{self.stderr()[-2000:]}"
            ) from None

    async def register(self, **arguments: Any) -> dict[str, Any]:
        """``warp_registry_register``; without arguments it uses the LOOM_* settings it started with."""
        entry = await self.call("warp_registry_register", **arguments)
        self.agent_id = str(entry["agent_id"])
        return entry

    async def claim(self, capability: str | None = None) -> dict[str, Any] | None:
        """The claimed item, or None when nothing eligible is queued."""
        args = {} if capability is None else {"capability": capability}
        out = await self.call("warp_work_claim", **args)
        return dict(out["item"]) if out["claimed"] else None


@asynccontextmanager
async def warp_agent(
    conn: Connection,
    project_id: str,
    workdir: Path,
    handle: str,
    *,
    capabilities: Sequence[str] = (),
    boundaries: Sequence[str] = (),
    agent_type: str | None = None,
    scope: str | None = None,
    agent_id: str | None = None,
    user_id: str | None = None,
    project_path: Path | None = None,
    heartbeat_s: float | None = None,
    max_concurrent_tasks: int | None = None,
    register: bool = True,
    wait_ready: bool = True,
    defer_start: bool = False,
    extra_env: dict[str, str] | None = None,
    launch: Sequence[str] | None = None,
) -> AsyncIterator[WarpAgent]:
    """Run ``.venv/bin/warp`` for one agent; connected to NATS (unless ``wait_ready=False``) and
    registered with its LOOM_* settings (unless ``register=False``). Leaving the block closes its
    stdin: Warp marks itself offline and exits. ``defer_start=True`` yields the process as soon
    as it is spawned; the caller then awaits ``agent.start(...)`` (several at once, in any task).
    ``launch``: the command that starts it instead (e.g. the agent hosts' plugin launcher)."""
    home = workdir / "home"
    home.mkdir(parents=True, exist_ok=True)
    path = project_path or workdir / "projects" / project_id
    path.mkdir(parents=True, exist_ok=True)
    ident = agent_id or new_agent_id()
    env = base_env(home) | conn.env()
    if launch is None:  # forked from this process's zygote; a launcher's place may differ
        env |= zygote_env()
    env |= {
        "LOOM_PROJECT_ID": project_id,
        "LOOM_PROJECT_PATH": str(path),
        "LOOM_AGENT_ID": ident,
        "LOOM_HANDLE": handle,
    }
    optional = {
        "LOOM_CAPABILITIES": ",".join(capabilities),
        "LOOM_BOUNDARIES": ",".join(boundaries),
        "LOOM_AGENT_TYPE": agent_type,
        "LOOM_SCOPE": scope,
        "LOOM_USER_ID": user_id,
        "LOOM_HEARTBEAT_S": None if heartbeat_s is None else str(heartbeat_s),
        "LOOM_MAX_CONCURRENT_TASKS": None if max_concurrent_tasks is None else str(max_concurrent_tasks),
    }
    env |= {key: value for key, value in optional.items() if value}
    env |= extra_env or {}
    logs = workdir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    stderr_path = logs / f"warp-{handle}-{ident[:8]}.stderr"
    command, *args = launch or [str(BIN / "warp")]
    async with spawn_mcp(
        command, env, cwd=path, stderr_path=stderr_path, name=handle, initialize=False, args=args
    ) as proc:
        agent = WarpAgent(proc.name, proc.session, proc.stderr_path, proc.env)
        agent.agent_id = ident
        agent.handle = handle
        if not defer_start:
            await agent.start(wait_ready=wait_ready, register=register)
        yield agent


class PatternSession(McpProcess):
    """One agent's memory: a ``pattern`` process and its MCP session."""

    agent_id: str

    async def wait_ready(self) -> None:
        with anyio.fail_after(READY_TIMEOUT_S):
            while True:
                result = await self.raw("pattern_health")
                content = result.structured_content or {}
                if not result.is_error and content.get("status") == "ok":
                    return
                await anyio.sleep(0.1)


@asynccontextmanager
async def pattern_session(
    conn: Connection,
    project_id: str,
    workdir: Path,
    name: str,
    *,
    agent_id: str,
    user_id: str,
    project_path: Path | None = None,
    extra_env: dict[str, str] | None = None,
) -> AsyncIterator[PatternSession]:
    """Run ``.venv/bin/pattern`` for one agent; ready (NATS reached) when the block starts."""
    home = workdir / "home"
    home.mkdir(parents=True, exist_ok=True)
    path = project_path or workdir / "projects" / project_id
    path.mkdir(parents=True, exist_ok=True)
    env = base_env(home) | conn.env() | zygote_env()  # forked from this process's zygote
    env |= {
        "LOOM_PROJECT_ID": project_id,
        "LOOM_PROJECT_PATH": str(path),
        "LOOM_AGENT_ID": agent_id,
        "LOOM_USER_ID": user_id,
        "PATTERN_EXPORT_DIR": str(workdir / "exports"),
    }
    env |= extra_env or {}
    logs = workdir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    stderr_path = logs / f"pattern-{name}-{agent_id[:8]}.stderr"
    async with spawn_mcp(str(BIN / "pattern"), env, cwd=path, stderr_path=stderr_path, name=name) as proc:
        session = PatternSession(proc.name, proc.session, proc.stderr_path, proc.env)
        session.agent_id = agent_id
        await session.wait_ready()
        yield session
