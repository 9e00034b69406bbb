"""Fixtures for Pattern tests: services over the real session nats-server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from nats.aio.client import Client as NatsClient

from pattern.config import PatternConfig
from pattern.service import MemoryService
from shared.identity import Identity

ServiceFactory = Callable[..., Awaitable[MemoryService]]


@pytest.fixture
async def make_service(nc: NatsClient, tmp_path: Path) -> AsyncIterator[ServiceFactory]:
    """Start MemoryServices sharing one NATS connection (as Warp would)."""
    started: list[MemoryService] = []

    async def factory(identity: Identity, config: PatternConfig | None = None, **kw: Any) -> MemoryService:
        cfg = config or PatternConfig(export_dir=tmp_path / "exports", **kw)
        service = MemoryService(nc, identity, cfg, nats_url="nats://test")
        await service.start()
        started.append(service)
        return service

    yield factory
    for service in started:
        await service.close()


@pytest.fixture
def project_path(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path
