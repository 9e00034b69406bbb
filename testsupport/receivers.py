"""Stand-ins for the services notifications reach (docs/operator.md, Notifications), as
servers speaking their protocols on loopback: an HTTP receiver that answers as a generic
JSON webhook, ntfy, Slack's incoming webhooks and Loom's signed webhook would, and an SMTP
server (aiosmtpd) that keeps every message.

Slack's Apprise plugin posts to ``https://hooks.slack.com/services/...``, a fixed address;
:func:`slack_to` points that one class attribute of the plugin at the receiver for the
length of a test, so the real plugin builds and sends its real payload to the stand-in.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from typing import Any

from aiosmtpd.controller import Controller
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from shared.nats.server import free_port
from testsupport.serving import serve_in_loop, serve_in_thread


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float

    def json(self) -> Any:
        import json

        return json.loads(self.body)


@dataclass
class Receiver:
    """What the HTTP stand-in was sent (ntfy's posts: at ``/``); ``failing`` paths answer 500."""

    url: str = ""
    requests: list[Received] = field(default_factory=list)
    failing: set[str] = field(default_factory=set)

    def at(self, path: str) -> list[Received]:
        return [r for r in self.requests if r.path == path or r.path.startswith(path + "/")]

    async def wait_for(self, path: str, count: int = 1, timeout: float = 10.0) -> list[Received]:
        """The first ``count`` requests to ``path`` (failing the test after ``timeout``)."""
        deadline = time.monotonic() + timeout
        while len(self.at(path)) < count:  # polled: the receiver may serve from another thread
            if time.monotonic() > deadline:
                raise AssertionError(f"{path}: {len(self.at(path))} of {count} requests after {timeout} s")
            await asyncio.sleep(0.02)
        return self.at(path)[:count]


def _app(receiver: Receiver) -> FastAPI:
    app = FastAPI()

    @app.post("/{path:path}")
    async def anything(path: str, request: Request) -> Response:
        got = Received("/" + path, dict(request.headers), await request.body(), time.monotonic())
        receiver.requests.append(got)
        if any(got.path.startswith(p) for p in receiver.failing):
            return PlainTextResponse("down", status_code=500)
        if got.path.startswith("/slack"):
            return PlainTextResponse("ok")  # what Slack's incoming webhooks answer
        if got.path == "/":  # ntfy posts {"topic", "title", "message"} to the server's root
            return JSONResponse({"id": "x1", "event": "message"})  # what an ntfy server answers
        return JSONResponse({"ok": True})

    return app


@contextlib.asynccontextmanager
async def http_receiver() -> AsyncIterator[Receiver]:
    """The receiver, served in the running event loop."""
    receiver = Receiver()
    async with serve_in_loop(_app(receiver)) as served:
        receiver.url = served.url
        yield receiver


@contextlib.contextmanager
def http_receiver_in_thread() -> Iterator[Receiver]:
    """The receiver, served from a thread of its own (for callers that block their loop,
    such as Shuttle's commands run in the test's process)."""
    receiver = Receiver()
    with serve_in_thread(_app(receiver), name="receiver") as served:
        receiver.url = served.url
        yield receiver


@contextlib.contextmanager
def slack_to(receiver: Receiver) -> Iterator[None]:
    """Apprise's Slack plugin posts to the receiver's ``/slack/services/...`` meanwhile."""
    from apprise.plugins.slack import NotifySlack

    before = NotifySlack.webhook_url
    NotifySlack.webhook_url = f"{receiver.url}/slack/services"
    try:
        yield
    finally:
        NotifySlack.webhook_url = before


@contextlib.asynccontextmanager
async def black_hole() -> AsyncIterator[str]:
    """``host:port`` of a server that takes connections and never answers (a hung service);
    its connections are closed when the block ends, so nothing waits on them past it."""
    held: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.close()
        for writer in held:
            writer.close()
        await server.wait_closed()


@dataclass
class Mailbox:
    """What the SMTP stand-in received."""

    host: str
    port: int
    messages: list[Message] = field(default_factory=list)

    def url(self, to: str = "ops@example.com") -> str:
        """The Apprise URL of a plain SMTP server on loopback (no TLS, no login)."""
        return f"mailto://{self.host}:{self.port}?from=loom@example.com&to={to}&mode=insecure"

    async def wait_for(self, count: int = 1, timeout: float = 10.0) -> list[Message]:
        deadline = time.monotonic() + timeout
        while len(self.messages) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"SMTP: {len(self.messages)} of {count} messages after {timeout} s")
            await asyncio.sleep(0.05)
        return self.messages[:count]


class _Keep:
    def __init__(self, box: Mailbox) -> None:
        self.box = box

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.box.messages.append(message_from_bytes(envelope.content))
        return "250 OK"


@contextlib.contextmanager
def smtp_server() -> Iterator[Mailbox]:
    box = Mailbox("127.0.0.1", free_port())
    controller = Controller(_Keep(box), hostname=box.host, port=box.port)
    controller.start()
    try:
        yield box
    finally:
        controller.stop()
