"""Stream listing through the JetStream API, with the server-side subject filter
and paging that nats-py's ``streams_info`` does not expose."""

from __future__ import annotations

import json
from typing import Any

from nats.aio.client import Client as NatsClient
from nats.js.errors import APIError

from shared.nats.jsapi import JS_API

_MAX_PAGES = 1000


async def list_streams(
    nc: NatsClient, *, subject: str | None = None, timeout: float = 5.0
) -> list[dict[str, Any]]:
    """Every stream's info (config and state), optionally only those that capture ``subject``."""
    streams: list[dict[str, Any]] = []
    offset = 0
    for _ in range(_MAX_PAGES):
        request: dict[str, Any] = {"offset": offset}
        if subject:
            request["subject"] = subject
        reply = await nc.request(f"{JS_API}.STREAM.LIST", json.dumps(request).encode(), timeout=timeout)
        body = json.loads(reply.data)
        if "error" in body:
            APIError.from_error(body["error"])  # raises  # type: ignore[no-untyped-call]
        page = body.get("streams") or []
        streams.extend(page)
        offset += len(page)
        if not page or offset >= int(body.get("total", 0)):
            break
    return streams


async def stream_names(nc: NatsClient, *, timeout: float = 5.0) -> list[str]:
    names: list[str] = []
    offset = 0
    for _ in range(_MAX_PAGES):
        reply = await nc.request(
            f"{JS_API}.STREAM.NAMES", json.dumps({"offset": offset}).encode(), timeout=timeout
        )
        body = json.loads(reply.data)
        if "error" in body:
            APIError.from_error(body["error"])  # raises  # type: ignore[no-untyped-call]
        page = body.get("streams") or []
        names.extend(page)
        offset += len(page)
        if not page or offset >= int(body.get("total", 0)):
            break
    return names
