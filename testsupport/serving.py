"""An ASGI app (Weft) served by uvicorn inside the test process, for the tests, the
scenarios and the benches.

Two ways, one start-up: :func:`serve_in_loop` serves in the caller's event loop (Weft's
and the console's tests); :func:`serve_in_thread` in a thread and loop of its own, so the
app keeps answering while the caller's loop is busy or blocked (the scenarios, the
Shuttle and lease benches).

The listening socket is bound before uvicorn starts and handed to it, so no other process
(a parallel test worker, say) can take the port between choosing it and listening on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import uvicorn

from weft.cli import KEEP_ALIVE_S

HOST = "127.0.0.1"
SERVED_AT_ONCE = 4
"""``WeftSettings.max_projects`` for a Weft that outlives many tests (a session's, a module's):
each test works in a project of its own (a few at most at once), and every project Weft
serves costs CPU while it is served, idle or not. Measured on the two-core machine, one
``weft serve`` with its nats-server: 2.3% of a core serving only its default project at a
0.2 s sweep, 8.8% serving 8 more, 5.3% serving 4 more (docs/performance.md, "The test
suite"). The least recently used beyond this many stop being served; a test's next request
serves its project again."""

OUTLIVING_SWEEP_S = 0.5
"""The sweep and stale-check interval of a Weft that outlives many tests. Tests of timing
edges run Wefts of their own at 0.2 s; for the rest, a sweep every half second costs a few
tenths of a second where a test waits for one, and serving 8 idle projects at 0.5 s costs
5.3% of a core against 8.8% at 0.2 s (the same measurement)."""

CLIENT_TIMEOUT_S = 45.0
"""How long a test's HTTP client (httpx, Shuttle) waits for a served Weft's answer, and a
WebSocket client for its opening handshake (:func:`ws_connect`). Tests check
what Weft answers, not how fast (the performance suite does): the first request for a project
opens it (a dozen streams and buckets), which on two loaded cores took Weft over 10 s in a
fresh-clone run, and twice past httpx's default of 5 s in CI."""


def ws_connect(url: str, **kwargs: Any) -> Any:
    """A test's WebSocket connection to a served Weft (``async with``): the handshake waits as
    long as an HTTP answer, since a socket's first touch of a project opens it too (websockets'
    own 10 s ran out in a fresh-clone run)."""
    from websockets.asyncio.client import connect

    return connect(url, open_timeout=CLIENT_TIMEOUT_S, **kwargs)


@dataclass(frozen=True)
class Served:
    server: uvicorn.Server
    port: int
    loop: asyncio.AbstractEventLoop
    """The loop the app runs in (the thread's own, with :func:`serve_in_thread`)."""
    thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://{HOST}:{self.port}"


def _bound_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit it. Without it, a response written in two parts waits for
    # the client's delayed ACK (about 40 ms on Linux) before its second part goes out.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((HOST, 0))
    return sock


def _server(app: Any, port: int) -> uvicorn.Server:
    config = uvicorn.Config(
        app, host=HOST, port=port, log_level="warning", lifespan="on", timeout_keep_alive=KEEP_ALIVE_S
    )
    server = uvicorn.Server(config)
    server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign,assignment]  # tests own signals
    return server


@contextlib.asynccontextmanager
async def serve_in_loop(
    app: Any, *, start_timeout: float = 15.0, stop_timeout: float = 15.0
) -> AsyncIterator[Served]:
    """Serve ``app`` in the running event loop until the block ends."""
    loop = asyncio.get_running_loop()
    with _bound_socket() as sock:
        port = int(sock.getsockname()[1])
        server = _server(app, port)
        task = asyncio.create_task(server.serve(sockets=[sock]))
        try:
            deadline = loop.time() + start_timeout
            # uvicorn says it has started with a plain flag, not an event to wait on
            while not server.started and not task.done() and loop.time() < deadline:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
            if task.done():
                task.result()  # start-up failed: its own error
            if not server.started:
                raise RuntimeError(f"the app did not start within {start_timeout} s")
            yield Served(server, port, loop)
        finally:
            server.should_exit = True
            await asyncio.wait_for(task, stop_timeout)


@contextlib.contextmanager
def serve_in_thread(
    app: Any, *, name: str = "weft", start_timeout: float = 30.0, stop_timeout: float = 30.0
) -> Iterator[Served]:
    """Serve ``app`` in a thread with its own event loop until the block ends."""
    with _bound_socket() as sock:
        port = int(sock.getsockname()[1])
        server = _server(app, port)
        failure: list[BaseException] = []
        loops: list[asyncio.AbstractEventLoop] = []

        async def main() -> None:
            loops.append(asyncio.get_running_loop())
            await server.serve(sockets=[sock])

        def serve() -> None:
            try:
                asyncio.run(main())
            except BaseException as exc:  # reported by the start-up check below
                failure.append(exc)

        thread = threading.Thread(target=serve, name=f"{name}-{port}", daemon=True)
        thread.start()
        try:
            deadline = time.monotonic() + start_timeout
            while not server.started and thread.is_alive() and time.monotonic() < deadline:
                time.sleep(0.02)
            if not server.started:
                raise RuntimeError(f"{name} did not start: {failure!r}")
            yield Served(server, port, loops[0], thread)
        finally:
            server.should_exit = True
            thread.join(stop_timeout)
