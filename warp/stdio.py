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

The pipes are open before the SDK is imported, so the first message can be answered
early: :func:`answer_initialize` answers a well-formed ``initialize`` from
:mod:`warp.handshake` while the SDK loads; :func:`serve_stdio` then gives the SDK that
same request first (so its session knows the client) and drops the SDK's answer to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from warp import handshake

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

log = logging.getLogger("loom.warp.stdio")

_LINE_LIMIT = 64 * 1024 * 1024


class _Lines:
    """``async for line in stdin`` over an asyncio stream, after the line read early (if any)."""

    def __init__(self, reader: asyncio.StreamReader, first: bytes = b"") -> None:
        self._reader = reader
        self._first = first

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        line, self._first = self._first or await self._reader.readline(), b""
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


class _Out:
    """``await stdout.write(text)`` / ``await stdout.flush()`` over an asyncio pipe, leaving
    out the SDK's answer to an ``initialize`` that was answered early."""

    def __init__(self, writer: asyncio.StreamWriter, answered: int | str | None = None) -> None:
        self._writer = writer
        self._answered = answered

    async def write(self, text: str) -> None:
        if self._answered is not None and self._answers_early_request(text):
            return
        self._writer.write(text.encode("utf-8"))

    def _answers_early_request(self, text: str) -> bool:
        try:
            frame = json.loads(text)
        except ValueError:
            return False
        if not isinstance(frame, dict) or frame.get("id") != self._answered or "method" in frame:
            return False
        self._answered = None  # once: the SDK's answer to the replayed initialize
        if "result" not in frame:
            log.warning("the SDK refused an initialize Warp had already accepted: %s", frame.get("error"))
        return True

    async def flush(self) -> None:
        await self._writer.drain()


@dataclass(frozen=True)
class Early:
    """What happened on stdin before the SDK was up: the line read (to hand to the SDK
    first), and the id of the ``initialize`` it was, when Warp answered it already."""

    line: bytes = b""
    answered: int | str | None = None


async def answer_initialize(pipes: StdioPipes) -> Early:
    """Read the first message and answer it when it is a well-formed ``initialize``
    (:mod:`warp.handshake`); cancel it to leave an unread first message to the SDK."""
    line = await pipes.reader.readline()
    request = handshake.initialize_request(line)
    if request is None:
        return Early(line)
    request_id, version = request
    pipes.writer.write(handshake.answer(request_id, version).encode("utf-8"))
    await pipes.writer.drain()
    return Early(line, request_id)


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


async def pipe_streams(
    read_fd: int, write_fd: int, *, limit: int = _LINE_LIMIT
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Asyncio streams over two pipe descriptors (taken over: closed with the streams)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(read_fd, "rb", 0))
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()), os.fdopen(write_fd, "wb", 0)
    )
    return reader, asyncio.StreamWriter(transport, protocol, None, loop)


async def open_pipes() -> StdioPipes:
    """Take over fds 0 and 1 when both are pipes (what MCP clients give a server).

    A terminal or a file is left to the SDK's transport: switching a terminal
    shared with the shell to non-blocking mode would upset the shell.
    """
    if not (_is_pipe(0) and _is_pipe(1)):
        raise ValueError("stdin/stdout are not both pipes")
    in_fd, out_fd = os.dup(0), os.dup(1)
    try:
        reader, writer = await pipe_streams(in_fd, out_fd)
    except (OSError, ValueError):
        for fd in (in_fd, out_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
        raise
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    return StdioPipes(reader, writer)


async def serve_stdio(server: MCPServer[Any], pipes: StdioPipes | None, early: Early | None = None) -> None:
    """Serve one MCP session on stdio until the input ends (after ``early``'s line, if any)."""
    from mcp.server.stdio import stdio_server

    lowlevel = getattr(server, "_lowlevel_server", None)
    if pipes is None or lowlevel is None:
        await server.run_stdio_async()
        return
    early = early or Early()
    stdin, stdout = _Lines(pipes.reader, early.line), _Out(pipes.writer, early.answered)
    async with stdio_server(stdin=stdin, stdout=stdout) as (read, write):  # type: ignore[arg-type]
        await lowlevel.run(read, write, lowlevel.create_initialization_options())
