"""Following Weft's WebSocket (``/api/ws``): the event feed behind ``watch``,
``submit --wait`` and ``fleet --watch``.

The token travels in ``Sec-WebSocket-Protocol: bearer, <token>`` (never in the
URL, where proxies log it) and the project in ``X-Loom-Project``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from shuttle.client import PROJECT_HEADER, USER_AGENT, WeftClient, describe_error_body
from shuttle.errors import Refused, Unreachable

if TYPE_CHECKING:
    from websockets.sync.client import ClientConnection


class EventStream:
    """A subscription to some topics; iterate :meth:`events` for event dicts."""

    def __init__(
        self,
        client: WeftClient,
        topics: Sequence[str],
        filters: Mapping[str, Any] | None = None,
    ) -> None:
        self.client = client
        self.topics = list(topics)
        self.filters = dict(filters or {})
        self.url = client.ws_url()
        self._ws: ClientConnection | None = None

    def __enter__(self) -> EventStream:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> None:
        from websockets.exceptions import InvalidHandshake, InvalidStatus
        from websockets.sync.client import connect

        settings = self.client.settings
        headers = {PROJECT_HEADER: settings.project_id} if settings.project_id else {}
        subprotocols: Any = ["bearer", settings.api_token] if settings.api_token else None
        try:
            self._ws = connect(
                self.url,
                additional_headers=headers,
                subprotocols=subprotocols,
                user_agent_header=USER_AGENT,
                open_timeout=settings.timeout,
                proxy=None,
                compression=None,
            )
        except InvalidStatus as exc:
            response = exc.response
            try:
                body = json.loads(response.body or b"")
            except ValueError:
                body = None
            code, message, details = describe_error_body(response.status_code, response.reason_phrase, body)
            raise Refused(message, status=response.status_code, code=code, details=details) from None
        except (OSError, TimeoutError, InvalidHandshake) as exc:
            reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            raise Unreachable(
                f"cannot reach Weft at {self.client.base_url} (WebSocket {self.url}: {reason})"
            ) from None
        self._send({"action": "subscribe", "topics": self.topics, "filters": self.filters})

    def _send(self, message: dict[str, Any]) -> None:
        assert self._ws is not None
        self._ws.send(json.dumps(message))

    def close(self) -> None:
        if self._ws is not None:
            self._ws.close()
            self._ws = None

    def events(self, timeout: float | None = None) -> Iterator[dict[str, Any] | None]:
        """Yield each event; yields ``None`` when ``timeout`` seconds pass without one
        (so a caller can redraw or give up). Ends only by raising."""
        from websockets.exceptions import ConnectionClosed

        assert self._ws is not None
        while True:
            try:
                raw = self._ws.recv(timeout=timeout)
            except TimeoutError:
                yield None
                continue
            except ConnectionClosed as exc:
                reason = exc.rcvd.reason if exc.rcvd is not None and exc.rcvd.reason else "connection closed"
                code = exc.rcvd.code if exc.rcvd is not None else None
                if code in (4401, 4403, 1008):
                    raise Refused(f"Weft closed the event stream: {reason}", status=code or 0) from None
                raise Unreachable(
                    f"lost the connection to Weft at {self.client.base_url} (WebSocket: {reason})"
                ) from None
            message = _decode(raw)
            if message is None:
                continue
            if message.get("type") == "error" or ("error" in message and "message" in message):
                raise Refused(
                    str(message.get("message") or message.get("error")),
                    status=400,
                    code=str(message.get("error") or "error"),
                    details=message.get("details"),
                )
            event = unwrap(message)
            if event is not None:
                yield event


def _decode(raw: str | bytes) -> dict[str, Any] | None:
    try:
        message = json.loads(raw)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def unwrap(message: dict[str, Any]) -> dict[str, Any] | None:
    """The event inside a frame, or None for frames that carry none (acks, pings)."""
    inner = message.get("event")
    if isinstance(inner, dict):
        if "topic" in message and "topic" not in inner:
            inner = {**inner, "topic": message["topic"]}
        return inner
    if "kind" in message or "action" in message or ("type" in message and message["type"] != "subscribed"):
        return message
    return None


def event_type(event: Mapping[str, Any]) -> str:
    kind, action = event.get("kind"), event.get("action")
    if kind and action:
        return f"{kind}.{action}"
    return str(event.get("type") or "event")


def work_of(event: Mapping[str, Any]) -> dict[str, Any] | None:
    data = event.get("data")
    item = data.get("item") if isinstance(data, dict) else None
    return item if isinstance(item, dict) else None


class Deadline:
    """Remaining time until an optional overall timeout."""

    def __init__(self, seconds: float | None) -> None:
        self.end = None if seconds is None else time.monotonic() + seconds

    def remaining(self) -> float | None:
        return None if self.end is None else max(0.0, self.end - time.monotonic())

    def passed(self) -> bool:
        return self.end is not None and time.monotonic() >= self.end
