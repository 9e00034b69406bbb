"""Small helpers shared by the Pattern tests."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from shared.identity import Identity, subagent_id

T = TypeVar("T")


async def eventually(check: Callable[[], Awaitable[T | None] | T | None], timeout: float = 10.0) -> T:
    """Poll ``check`` until it returns something truthy (an event we cannot await directly)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(0.05)


def new_agent_id() -> str:
    return secrets.token_hex(16)


def new_user_id() -> str:
    return secrets.token_hex(8)


def make_identity(
    project_id: str,
    project_path: Path,
    *,
    agent_id: str | None = None,
    user_id: str | None = None,
    handle: str = "agent",
) -> Identity:
    agent = agent_id or new_agent_id()
    return Identity(
        project_id=project_id,
        project_path=project_path,
        agent_id=agent,
        base_agent_id=agent,
        hostname="test-host",
        handle=handle,
        agent_type="generic",
        user_id=user_id or new_user_id(),
    )


def sub_identity(parent: Identity, subagent_type: str = "reviewer") -> Identity:
    return Identity(
        project_id=parent.project_id,
        project_path=parent.project_path,
        agent_id=subagent_id(parent.agent_id, subagent_type),
        base_agent_id=parent.base_agent_id,
        hostname=parent.hostname,
        handle=f"{parent.handle}-{subagent_type}",
        agent_type=subagent_type,
        user_id=parent.user_id,
        parent_id=parent.agent_id,
        subagent_type=subagent_type,
    )
