"""Stream listing through the JetStream API, with the server-side subject filter
and paging that nats-py's ``streams_info`` does not expose."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from nats.aio.client import Client as NatsClient
from nats.js.errors import APIError

from shared.work import JS_API

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


@dataclass
class StoredMessage:
    seq: int
    subject: str
    data: bytes
    headers: dict[str, str]
    time: datetime | None
    pending: int


def parse_timestamp(raw: str | None) -> datetime | None:
    if not raw:
        return None
    text = raw.rstrip("Z")
    head, _, fraction = text.partition(".")
    try:
        return datetime.fromisoformat(f"{head}.{fraction[:6]}" if fraction else head).replace(tzinfo=UTC)
    except ValueError:
        return None


async def read_batch(
    nc: NatsClient, stream: str, *, start_seq: int, count: int, timeout: float = 5.0
) -> list[StoredMessage]:
    """Up to ``count`` stored messages from ``start_seq`` on, in one direct-get request.

    Needs ``allow_direct`` on the stream (Warp's channel streams have it); the
    server streams the messages to our inbox and ends with an end-of-batch status.
    """
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    found: list[StoredMessage] = []
    try:
        request = json.dumps({"seq": max(1, start_seq), "batch": count}).encode()
        await nc.publish(f"{JS_API}.DIRECT.GET.{stream}", request, reply=inbox)
        while len(found) < count:
            msg = await sub.next_msg(timeout=timeout)
            headers = dict(msg.headers or {})
            status = headers.get("Status")
            if status in ("204", "404"):
                break
            if status is not None:
                raise APIError(code=int(status), description=headers.get("Description", ""))
            found.append(
                StoredMessage(
                    seq=int(headers.get("Nats-Sequence", "0") or 0),
                    subject=headers.get("Nats-Subject", msg.subject),
                    data=msg.data,
                    headers=headers,
                    time=parse_timestamp(headers.get("Nats-Time-Stamp")),
                    pending=int(headers.get("Nats-Num-Pending", "0") or 0),
                )
            )
    finally:
        await sub.unsubscribe()
    return found
