"""Helpers for the console's browser tests: Debian's chromium driven by Playwright, a real
Weft (uvicorn in this event loop) on the real nats-server, real Warp processes, the real
Shuttle CLI.

The browser is never one Playwright downloads (``testsupport.browser``: ``/usr/bin/chromium``,
which ``make install`` installs, or ``LOOM_CHROMIUM``). Without it these tests fail, saying
so: CI must run them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from nats.aio.client import Client as NatsClient
from playwright.async_api import BrowserContext, Page

from shared.agents.registry import Registry
from shared.models import AgentEntry
from shared.names import ProjectNames
from shared.settings import LoomSettings, NatsSettings
from shared.work.rules import Claimant
from testsupport.serving import SERVED_AT_ONCE, serve_in_loop
from testsupport.zygote import zygote_env
from weft.app import create_app
from weft.settings import WeftSettings
from weft.spinup import DisabledSpinup, SpinupService

ADMIN_TOKEN = "console-admin-7c1f0e9b2d"
READ_TOKEN = "console-read-4a8e2b6c1f"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "console"
WARP = str(Path(sys.executable).parent / "warp")
SHUTTLE = str(Path(sys.executable).parent / "shuttle")


@dataclass
class ConsoleWeft:
    url: str
    nats_url: str
    settings: WeftSettings

    def api(self, project: str, token: str = ADMIN_TOKEN) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {token}", "X-Loom-Project": project}
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=10)

    def console(self, project: str, view: str = "fleet") -> str:
        return f"{self.url}/?project={project}#{view}"


@dataclass
class Tab:
    """A browser tab of its own (own session storage), with every script error it raised."""

    page: Page
    context: BrowserContext
    errors: list[str]


async def sign_in(page: Page, url: str, token: str = ADMIN_TOKEN) -> None:
    """Open the console and give it the token; returns once the live feed is connected."""
    from playwright.async_api import expect

    await page.goto(url)
    await page.get_by_label("API token").fill(token)
    await page.get_by_role("button", name="Open the console").click()
    await expect(page.locator("#live")).to_have_text("live", timeout=10_000)


def snap(page: Page, name: str, *, full_page: bool = False) -> Any:
    """A screenshot for docs/console.md, only with LOOM_CONSOLE_SCREENSHOTS=1 (so test runs
    leave the tree alone)."""
    if os.environ.get("LOOM_CONSOLE_SCREENSHOTS") != "1":
        return asyncio.sleep(0)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=full_page)


@dataclass
class WarpProcess:
    agent_id: str
    proc: asyncio.subprocess.Process

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)


@contextlib.asynccontextmanager
async def warp_agent(
    nats_url: str, project: str, folder: Path, *, capabilities: str = "code", agent_type: str = "generic"
) -> AsyncIterator[WarpProcess]:
    """A real Warp (the MCP server process) that registers itself and beats every 0.5 s.
    Its stdin stays open (an MCP client that says nothing), so it lives until killed,
    told to shut down, or the block ends."""
    agent_id = uuid.uuid4().hex
    home = folder / agent_id[:8]
    home.mkdir(parents=True)
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "NATS_URL": nats_url,
        "LOOM_PROJECT_ID": project,
        "LOOM_AGENT_ID": agent_id,
        "LOOM_PROJECT_PATH": str(home),
        "LOOM_CAPABILITIES": capabilities,
        "LOOM_AGENT_TYPE": agent_type,
        "LOOM_AUTO_REGISTER": "1",
        "LOOM_HEARTBEAT_S": "0.5",
        "LOOM_HANDLE": f"warp-{agent_id[:6]}",
        **zygote_env(),
    }
    with (home / "warp.stderr").open("w") as errlog:
        proc = await asyncio.create_subprocess_exec(
            WARP,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=errlog,
            env=env,
            cwd=str(home),
        )
        try:
            yield WarpProcess(agent_id, proc)
        finally:
            if proc.returncode is None:
                proc.kill()
            await proc.wait()


async def shuttle(weft: ConsoleWeft, project: str, *args: str) -> str:
    """Run the real Shuttle CLI against the test's Weft; its stdout."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        "LOOM_API_URL": weft.url,
        "LOOM_API_TOKEN": ADMIN_TOKEN,
        "LOOM_PROJECT_ID": project,
        "NO_COLOR": "1",
    }
    proc = await asyncio.create_subprocess_exec(
        SHUTTLE, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, f"shuttle {' '.join(args)} failed: {err.decode()}"
    return out.decode()


async def eventually(probe: Callable[[], Awaitable[bool]], timeout: float = 10.0, what: str = "") -> None:
    """Poll ``probe`` until it is true (or fail after ``timeout``)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not await probe():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what or probe}")
        await asyncio.sleep(0.05)


async def register(nc: NatsClient, project: str, handle: str, agent_type: str, **fields: Any) -> AgentEntry:
    """A registry entry written the way Warp writes it (for agents a test needs many of, or
    that were spun up by a target)."""
    entry = AgentEntry(
        agent_id=uuid.uuid4().hex,
        handle=handle,
        agent_type=agent_type,
        project_id=project,
        user_id="0123456789abcdef",
        hostname="host-1",
        **fields,
    )
    await Registry(nc.jetstream(), ProjectNames(project)).put(entry)
    return entry


def claimant(entry: AgentEntry) -> Claimant:
    return Claimant(
        agent_id=entry.agent_id,
        agent_type=entry.agent_type,
        capabilities=tuple(entry.capabilities),
        boundaries=tuple(entry.boundaries),
    )


@contextlib.asynccontextmanager
async def serving_weft(
    nats_url: str, api_tokens: list[str], spinup: SpinupService | None = None
) -> AsyncIterator[ConsoleWeft]:
    """A Weft serving the console; it starts no agents unless given a ``spinup`` service."""
    settings = WeftSettings(
        nats=NatsSettings(url=nats_url),
        project_id=f"console-{uuid.uuid4().hex[:8]}",
        api_tokens=api_tokens,
        sweep_interval_s=0.2,
        stale_check_interval_s=0.2,
        max_projects=SERVED_AT_ONCE,
        loom=LoomSettings(data_dir=Path(tempfile.mkdtemp(prefix="loom-console-data-"))),
    )
    async with serve_in_loop(create_app(settings, spinup=spinup or DisabledSpinup())) as served:
        yield ConsoleWeft(served.url, nats_url, settings)
