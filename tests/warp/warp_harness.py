"""Run ``.venv/bin/warp`` as a subprocess and talk MCP to it over its stdio.

A thin stdio transport of our own (rather than ``mcp.client.stdio``) so a test
knows the process id (``kill -9``), can close stdin on its own, and sees every
raw line the server wrote to stdout. The session on top is the SDK's
``ClientSession``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import anyio
import mcp_types as types
from anyio.abc import Process
from mcp import Client
from mcp.client.session import ClientSession
from mcp.shared.message import SessionMessage

from shared.identity import Identity
from testsupport.env import without_fabric
from testsupport.mcp import is_outage
from warp.zygote import ZYGOTE_ENV

WARP = str(Path(sys.executable).parent / "warp")


@dataclass
class WarpProc:
    proc: Process
    session: ClientSession
    stdout_lines: list[str]
    stderr_path: Path
    env: dict[str, str]
    exited: anyio.Event = field(default_factory=anyio.Event)

    @property
    def pid(self) -> int:
        return int(self.proc.pid)

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""

    async def call(self, name: str, arguments: dict[str, Any] | None = None) -> types.CallToolResult:
        with anyio.fail_after(60):
            return await self.session.call_tool(name, arguments or {})

    async def ok(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        res = await self.call(name, arguments)
        said = text(res)
        assert not res.is_error, f"{name} failed: {said}\n--- stderr ---\n{self.stderr()[-3000:]}"
        assert res.structured_content is not None, f"{name}: no structured content"
        return dict(res.structured_content)

    async def err(self, name: str, arguments: dict[str, Any] | None = None) -> str:
        res = await self.call(name, arguments)
        said = text(res)
        assert res.is_error, f"{name} unexpectedly succeeded: {said}"
        return said

    async def ready_ok(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """Like :meth:`ok`, retrying while the server says NATS (or Warp's hold of it) is not
        there yet (:func:`testsupport.mcp.is_outage`)."""
        with anyio.fail_after(30):
            while True:
                res = await self.call(name, arguments)
                if not res.is_error:
                    assert res.structured_content is not None
                    return dict(res.structured_content)
                assert is_outage(res), text(res)
                await anyio.sleep(0.2)

    async def ready_err(self, name: str, arguments: dict[str, Any] | None = None) -> str:
        """Like :meth:`err`, retrying while the server says NATS (or Warp's hold of it) is not
        there yet: the refusal the test expects, once it is one."""
        with anyio.fail_after(30):
            while True:
                res = await self.call(name, arguments)
                assert res.is_error, f"{name} unexpectedly succeeded: {text(res)}"
                if not is_outage(res):
                    return text(res)
                await anyio.sleep(0.2)

    def kill9(self) -> None:
        os.kill(self.pid, signal.SIGKILL)

    def signal(self, sig: int) -> None:
        os.kill(self.pid, sig)

    async def close_stdin(self) -> None:
        assert self.proc.stdin is not None
        await self.proc.stdin.aclose()

    async def wait_exit(self, timeout: float = 20) -> int:
        with anyio.fail_after(timeout):
            return int(await self.proc.wait())


def _stderr_file(tmp: Path, name: str) -> tuple[Path, BinaryIO]:
    path = tmp / f"{name}-{len(list(tmp.glob(name + '-*.stderr')))}.stderr"
    return path, path.open("wb")


@asynccontextmanager
async def spawn_warp(
    env: dict[str, str], tmp: Path, *, args: tuple[str, ...] = (), name: str = "warp"
) -> AsyncIterator[WarpProc]:
    full_env = without_fabric(also=(ZYGOTE_ENV,))  # forked only when ``env`` says so
    full_env.update(env)
    stderr_path, stderr_file = _stderr_file(tmp, name)
    proc = await anyio.open_process(
        [WARP, *args],
        stdin=-1,
        stdout=-1,
        stderr=stderr_file,
        env=full_env,
        cwd=env.get("LOOM_PROJECT_PATH") or str(tmp),
    )
    stdout_lines: list[str] = []
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](16)

    async def reader() -> None:
        assert proc.stdout is not None
        buffer = b""
        async with read_writer:
            try:
                async for chunk in proc.stdout:
                    buffer += chunk
                    *lines, buffer = buffer.split(b"\n")
                    for raw in lines:
                        line = raw.decode()
                        stdout_lines.append(line)
                        try:
                            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                        except ValueError as exc:
                            await read_writer.send(exc)
                            continue
                        await read_writer.send(SessionMessage(message))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
                pass
            if buffer:
                stdout_lines.append(buffer.decode(errors="replace"))

    async def writer() -> None:
        assert proc.stdin is not None
        async with write_reader:
            async for message in write_reader:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                try:
                    await proc.stdin.send(data.encode())
                except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                    return

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            tg.start_soon(writer)
            try:
                async with ClientSession(read_stream, write_stream, read_timeout_seconds=60) as session:
                    with anyio.fail_after(30):
                        await session.initialize()
                    yield WarpProc(proc, session, stdout_lines, stderr_path, full_env)
            finally:
                if proc.returncode is None:
                    try:
                        assert proc.stdin is not None
                        await proc.stdin.aclose()
                    except Exception:
                        pass
                    with anyio.move_on_after(15):
                        await proc.wait()
                    if proc.returncode is None:
                        proc.kill()
                        await proc.wait()
                tg.cancel_scope.cancel()
    finally:
        stderr_file.close()


def stdout_frames_only(lines: list[str]) -> None:
    """Every line the server wrote to stdout is one JSON-RPC message."""
    for line in lines:
        data = json.loads(line)
        assert data.get("jsonrpc") == "2.0", line


def make_identity(project_id: str, project_dir: Path, agent_id: str, **kw: object) -> Identity:
    data: dict[str, object] = {
        "project_id": project_id,
        "project_path": project_dir,
        "agent_id": agent_id,
        "base_agent_id": agent_id,
        "hostname": "test-host",
        "handle": f"agent-{agent_id[:4]}",
        "agent_type": "claude-code",
        "user_id": "1" * 16,
    }
    data.update(kw)
    return Identity(**data)  # type: ignore[arg-type]


async def eventually(
    check: Callable[[], Awaitable[bool]], timeout: float = 15.0, what: str = "condition"
) -> None:
    """Poll ``check`` until it holds (a bounded wait on a real event, never a bare sleep)."""
    with anyio.fail_after(timeout):
        while True:
            if await check():
                return
            await anyio.sleep(0.05)


def text(res: types.CallToolResult) -> str:
    """A tool result's text content."""
    return " ".join(c.text for c in res.content if isinstance(c, types.TextContent))


async def ok(client: Client, tool: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    """Call a tool that must succeed; its structured output."""
    res = await client.call_tool(tool, args or {})
    assert not res.is_error, text(res)
    assert res.structured_content is not None
    return dict(res.structured_content)
