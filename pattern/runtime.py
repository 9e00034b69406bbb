"""Bring the memory service up in the background.

The MCP handshake must never wait for NATS: the runtime connects (or takes
the host's connection, for Warp) and starts the service in a background task,
retrying with backoff; until then :meth:`PatternRuntime.get_service` raises
:class:`UnavailableError` with the reason, and every tool reports it.

Mounted in Warp, the agent id is Warp's: it is settled only when Warp has
taken its instance id on NATS (another Warp in the folder may hold the plain
id), so until :meth:`PatternRuntime.use_connection` hands it over,
``pattern_health`` shows no identity rather than one that may be another's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from nats.aio.client import Client as NatsClient

from pattern.config import PatternConfig
from pattern.errors import PatternError, UnavailableError
from pattern.results import HealthIdentity, HealthResult
from pattern.service import MemoryService
from shared.identity import Identity
from shared.nats.client import NatsConnectError, connect, display_url
from shared.redact import redact
from shared.settings import NatsSettings
from shared.tasks import raise_if_cancelling, tick

log = logging.getLogger("loom.pattern.runtime")

_RETRY_MIN_S = 0.5
_RETRY_MAX_S = 10.0


class PatternRuntime:
    """Owns (standalone) or borrows (Warp) the NATS connection and the service."""

    def __init__(
        self,
        identity: Identity,
        config: PatternConfig | None = None,
        *,
        nats_settings: NatsSettings | None = None,
        connect_timeout: float = 5.0,
        identity_settled: bool = True,
    ) -> None:
        self.identity = identity
        self.identity_settled = identity_settled
        """False while a host (Warp) has yet to settle the instance id; health then shows no identity."""
        self.config = config or PatternConfig()
        self._nats_settings = nats_settings or NatsSettings()
        self.nats_url = display_url(self._nats_settings.url)
        self._connect_timeout = connect_timeout
        self._nc: NatsClient | None = None
        self._owns_connection = False
        self._service: MemoryService | None = None
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self.last_error: str | None = None

    # -- starting -------------------------------------------------------------------
    def start(self) -> None:
        """Connect to NATS and start the service in the background (standalone use)."""
        if self._task is None:
            self._owns_connection = True
            self._task = asyncio.create_task(self._run(None), name="pattern-start")

    def use_connection(self, nc: NatsClient, identity: Identity | None = None) -> None:
        """Start the service on a connection the host process owns (Warp), as ``identity``
        (the one the host settled on) if given."""
        if identity is not None:
            self.identity = identity
            self.identity_settled = True
        if self._task is None:
            self._task = asyncio.create_task(self._run(nc), name="pattern-start")

    async def _run(self, borrowed: NatsClient | None) -> None:
        delay = _RETRY_MIN_S
        nc = borrowed
        while nc is None:
            try:
                nc = await connect(
                    self._nats_settings,
                    name="loom-pattern",
                    mode="service",
                    timeout=self._connect_timeout,
                    replicas=self.config.replicas,
                )
            except NatsConnectError as exc:
                self.last_error = str(exc)
                log.warning("%s; retrying in %.1fs", self.last_error, delay)
                await tick(delay)
                delay = min(_RETRY_MAX_S, delay * 2)
        self._nc = nc
        self.last_error = None
        service = MemoryService(nc, self.identity, self.config, nats_url=self.nats_url)
        delay = _RETRY_MIN_S
        while True:
            try:
                await service.start()
                break
            except Exception as exc:  # keep retrying whatever went wrong; say what it was
                raise_if_cancelling()  # a stop that nats-py turned into an error ends the retries
                await service.close()
                if not isinstance(exc, PatternError | TimeoutError):
                    log.exception("unexpected error starting the memory service")
                self.last_error = redact(str(exc) or "timed out loading memories")
                log.warning("memory service not ready: %s; retrying in %.1fs", self.last_error, delay)
                await tick(delay)
                delay = min(_RETRY_MAX_S, delay * 2)
        self.last_error = None
        self._service = service
        self._ready.set()

    async def wait_ready(self, timeout: float) -> MemoryService:
        """For tests and embedders: the service once it is up."""
        await asyncio.wait_for(self._ready.wait(), timeout)
        assert self._service is not None
        return self._service

    # -- serving --------------------------------------------------------------------
    async def until_ready(self) -> None:
        """Wait for the service at most ``config.ready_wait_s`` (a tool called while it loads:
        an agent host calls Pattern the moment it starts it); the caller then asks again."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._ready.wait(), self.config.ready_wait_s)

    def get_service(self) -> MemoryService:
        service = self._service
        if service is not None and service.ready:
            return service
        raise UnavailableError(self._why())

    def _why(self) -> str:
        if self._nc is None:
            reason = f": {self.last_error}" if self.last_error else " (still connecting)"
            return (
                f"Pattern is not connected to NATS at {self.nats_url}{reason}; "
                "it keeps retrying in the background — try again shortly"
            )
        reason = f": {self.last_error}" if self.last_error else ""
        return f"the memory service is still loading{reason}; try again shortly"

    def health(self) -> HealthResult:
        if self._service is not None and self._service.ready:
            return self._service.health()
        i = self.identity
        return HealthResult(
            status="starting" if self._nc is not None or self.last_error is None else "unavailable",
            nats_url=self.nats_url,
            connected=bool(self._nc is not None and self._nc.is_connected),
            error=self._why(),
            identity=HealthIdentity(
                agent_id=i.agent_id,
                project_id=i.project_id,
                user_id=i.user_id,
                handle=i.handle,
                parent_id=i.parent_id,
                subagent_type=i.subagent_type,
            )
            if self.identity_settled
            else None,
            temporary_ttl_s=self.config.temporary_ttl_s,
            secret_scan=self.config.secret_scan.value,
            export_dir=str(self.config.export_root(i.project_path)),
        )

    # -- stopping -------------------------------------------------------------------
    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._service is not None:
            await self._service.close()
            self._service = None
        if self._owns_connection and self._nc is not None:
            with contextlib.suppress(Exception):
                await self._nc.drain()
        self._nc = None
