"""Loom's public Python client (docs/client.md): ``LoomClient`` and ``AsyncLoomClient`` over
Weft's REST and WebSocket API, with typed models.

    from loom import LoomClient

    with LoomClient("http://127.0.0.1:8080", project="myapp") as loom:
        item = loom.submit("Fix the flaky test", capability="code")
        done = loom.wait(item.id)

The clients are imported on first use, so a program that only needs the transport (Shuttle)
does not load the models.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loom.errors import ClientError, Refused, Unreachable

if TYPE_CHECKING:
    from loom.client import AsyncLoomClient, LoomClient

__all__ = ["AsyncLoomClient", "ClientError", "LoomClient", "Refused", "Unreachable"]


def __getattr__(name: str) -> Any:
    if name in ("LoomClient", "AsyncLoomClient"):
        from loom import client

        return getattr(client, name)
    raise AttributeError(name)
