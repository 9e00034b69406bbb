"""Real HTTP(S) servers standing in for third parties (GitHub, a Kubernetes API server, a
webhook receiver): aiohttp on a free port, recording every request, answering from a
handler the test supplies."""

from __future__ import annotations

import json
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from shared.nats.server import free_port


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


Reply = tuple[int, Any]
Handler = Callable[[Seen], Reply | Awaitable[Reply]]


@dataclass
class StubServer:
    handler: Handler
    tls: ssl.SSLContext | None = None
    requests: list[Seen] = field(default_factory=list)
    port: int = 0
    _runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def calls(self, method: str, path_prefix: str = "") -> list[Seen]:
        return [r for r in self.requests if r.method == method and r.path.startswith(path_prefix)]

    async def _handle(self, request: web.Request) -> web.Response:
        seen = Seen(
            method=request.method,
            path=request.path,
            query=dict(request.query),
            headers=dict(request.headers),
            body=await request.read(),
        )
        self.requests.append(seen)
        reply = self.handler(seen)
        if not isinstance(reply, tuple):
            reply = await reply
        status, payload = reply
        if payload is None:
            return web.Response(status=status)
        return web.json_response(payload, status=status)

    async def start(self) -> StubServer:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        self.port = free_port()
        await web.TCPSite(self._runner, "127.0.0.1", self.port, ssl_context=self.tls).start()
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
