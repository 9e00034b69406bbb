"""What one running Weft holds: settings, the project hub, routing, spin-up, metrics."""

from __future__ import annotations

import logging
from collections.abc import Coroutine
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from shared.models import utcnow
from shared.tasks import Background
from weft.credentials import CredentialAuthority
from weft.interop import ProtocolDirectory
from weft.metrics import Metrics
from weft.project.hub import ProjectHub
from weft.routing import Router
from weft.settings import WeftSettings
from weft.spinup.base import SpinupService

log = logging.getLogger("loom.weft")


@dataclass
class NatsInfo:
    url: str
    """Credential-free URL Weft connected to."""
    embedded: bool
    websocket_url: str | None = None
    store_dir: str | None = None
    scoped: bool = False
    """NATS in operator mode: every agent needs credentials Weft issues."""


@dataclass
class WeftState:
    settings: WeftSettings
    hub: ProjectHub
    router: Router
    spinup: SpinupService
    metrics: Metrics
    nats: NatsInfo
    interop: ProtocolDirectory
    """The agents of Synadia's Agent Protocol that are not Loom's (docs/interop.md)."""
    credentials: CredentialAuthority | None = None
    a2a_grpc_port: int | None = None
    """The port of the A2A gRPC binding once it listens (``WEFT_A2A_GRPC_PORT``; None: off)."""
    started_at: datetime = field(default_factory=utcnow)
    _tasks: Background = field(default_factory=lambda: Background(log))

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> None:
        """Run ``coro`` in the background, keeping a reference and logging a failure."""
        self._tasks.spawn(coro, name)

    async def drain(self, timeout: float = 5.0) -> None:
        await self._tasks.wait(timeout)
        await self._tasks.close()
