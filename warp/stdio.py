"""MCP over stdin/stdout on non-blocking pipes (no worker threads).

The SDK's stdio transport reads stdin and writes stdout through worker
threads: every frame costs thread hand-offs, and a blocking read of stdin
cannot be interrupted when Warp must exit on its own (a shutdown request).
Here the same SDK transport (``stdio_server``) is fed from asyncio pipes
instead, so frames go straight through the event loop and Warp can stop
reading whenever it decides to.

Like the SDK, the real descriptors are taken over first: fd 0 then reads
``/dev/null`` and fd 1 points at stderr, so nothing printed by accident (or by
a library) can corrupt the MCP stream. If the pipes cannot be set up (stdin is
a terminal or a regular file, say), the SDK's own transport is used.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server

log = logging.getLogger("loom.warp.stdio")

_LINE_LIMIT = 64 * 1024 * 1024


class _Lines:
    """``async for line in stdin`` over an asyncio stream."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


class _Out:
    """``await stdout.write(text)`` / ``await stdout.flush()`` over an asyncio pipe."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()


class StdioPipes:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def stop_reading(self) -> None:
        """End the session from our side: the transport sees end of input."""
        self.reader.feed_eof()


def _is_pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


async def open_pipes() -> StdioPipes:
    """Take over fds 0 and 1 when both are pipes (what MCP clients give a server).

    A terminal or a file is left to the SDK's transport: switching a terminal
    shared with the shell to non-blocking mode would upset the shell.
    """
    if not (_is_pipe(0) and _is_pipe(1)):
        raise ValueError("stdin/stdout are not both pipes")
    loop = asyncio.get_running_loop()
    in_fd, out_fd = os.dup(0), os.dup(1)
    try:
        reader = asyncio.StreamReader(limit=_LINE_LIMIT)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(in_fd, "rb", 0))
        transport, protocol = await loop.connect_write_pipe(
            lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()), os.fdopen(out_fd, "wb", 0)
        )
    except (OSError, ValueError):
        for fd in (in_fd, out_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
        raise
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    return StdioPipes(reader, writer)


async def serve_stdio(server: MCPServer[Any], pipes: StdioPipes | None) -> None:
    """Serve one MCP session on stdio until the input ends."""
    lowlevel = getattr(server, "_lowlevel_server", None)
    if pipes is None or lowlevel is None:
        await server.run_stdio_async()
        return
    async with stdio_server(stdin=_Lines(pipes.reader), stdout=_Out(pipes.writer)) as (read, write):  # type: ignore[arg-type]
        await lowlevel.run(read, write, lowlevel.create_initialization_options())
