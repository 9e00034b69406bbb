"""Following Weft's WebSocket (``/api/ws``): the feed behind Shuttle's ``watch``,
``submit --wait`` and ``fleet --watch``, and :meth:`loom.client.LoomClient.watch`.

Subscriptions are made at connect time (``?topics=work&work_id=...``), and
:meth:`EventStream.open` returns only after Weft's ``welcome`` frame, so every
event after that moment reaches us. The token travels in
``Sec-WebSocket-Protocol: bearer, <token>`` (never in the URL, where proxies
log it) and the project in ``X-Loom-Project``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from loom.errors import Refused, Unreachable, WatchTimedOut
from loom.transport import PROJECT_HEADER, WeftClient, describe_error_body, seg

if TYPE_CHECKING:
    from websockets.sync.client import ClientConnection

FRAMES_OUT = frozenset({"event", "stats", "lagged"})
"""Frame types handed to the caller; welcome/subscribed/ping/pong are handled here."""


HANDSHAKE_ATTEMPTS = 2
"""Tries of a WebSocket handshake that times out before Weft counts as unreachable."""


class EventStream:
    """A live subscription; iterate :meth:`frames` for event, stats and lagged frames."""

    def __init__(
        self,
        client: WeftClient,
        topics: Sequence[str],
        filters: Mapping[str, Any] | None = None,
    ) -> None:
        self.client = client
        self.topics = list(topics)
        self.filters = {k: v for k, v in (filters or {}).items() if v is not None}
        self.url = client.ws_url("/api/ws", {"topics": ",".join(self.topics), **self.filters})
        self._ws: ClientConnection | None = None
        self.welcome: dict[str, Any] = {}

    def __enter__(self) -> EventStream:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> None:
        """Connect and wait for Weft's welcome. A handshake that times out is tried once more
        (a busy Weft answers late) before the server counts as unreachable."""
        from websockets.exceptions import InvalidHandshake, InvalidStatus
        from websockets.sync.client import connect

        settings = self.client.settings
        headers = {PROJECT_HEADER: settings.project_id} if settings.project_id else {}
        subprotocols: Any = ["bearer", settings.api_token] if settings.api_token else None
        try:
            for attempt in range(1, HANDSHAKE_ATTEMPTS + 1):
                try:
                    self._ws = connect(
                        self.url,
                        additional_headers=headers,
                        subprotocols=subprotocols,
                        user_agent_header=self.client.user_agent,
                        open_timeout=settings.timeout,
                        proxy=True,  # like httpx: honour HTTP(S)_PROXY / NO_PROXY
                        compression=None,
                        max_size=16 * 2**20,
                    )
                    break
                except TimeoutError:  # Weft took the connection but answered nothing in time
                    if attempt == HANDSHAKE_ATTEMPTS:
                        raise
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
                f"cannot reach Weft at {self.client.base_url} (WebSocket {self._shown_url()}: {reason})"
            ) from None
        self._await_welcome(settings.timeout)

    def _shown_url(self) -> str:
        return self.url.split("?", 1)[0]

    def _await_welcome(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            frame = self._recv(max(0.0, deadline - time.monotonic()))
            if frame is None:
                raise Unreachable(
                    f"Weft at {self.client.base_url} accepted the WebSocket but sent no welcome "
                    f"within {timeout:g}s"
                )
            if frame.get("type") == "welcome":
                self.welcome = frame
                return

    def close(self) -> None:
        if self._ws is not None:
            self._ws.close()
            self._ws = None

    def _recv(self, timeout: float | None) -> dict[str, Any] | None:
        """The next frame Weft sends (None on timeout); raises on error frames and closes."""
        from websockets.exceptions import ConnectionClosed

        assert self._ws is not None
        while True:
            try:
                raw = self._ws.recv(timeout=timeout)
            except TimeoutError:
                return None
            except ConnectionClosed as exc:
                rcvd = exc.rcvd
                reason = rcvd.reason if rcvd is not None and rcvd.reason else "connection closed"
                if rcvd is not None and rcvd.code in (1008, 4401, 4403):
                    raise Refused(f"Weft closed the event stream: {reason}", status=rcvd.code) from None
                raise Unreachable(
                    f"lost the connection to Weft at {self.client.base_url} (WebSocket: {reason})"
                ) from None
            try:
                frame = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(frame, dict):
                continue
            kind = frame.get("type")
            if kind == "ping":
                self._ws.send(json.dumps({"type": "pong"}))
                continue
            if kind == "error":
                raise Refused(
                    f"Weft refused the event stream: {frame.get('message') or frame.get('error')}",
                    status=400,
                    code=str(frame.get("error") or "error"),
                    details=frame.get("details"),
                )
            return frame

    def frames(self, timeout: float | None = None) -> Iterator[dict[str, Any] | None]:
        """Yield event/stats/lagged frames; yield ``None`` whenever ``timeout`` seconds pass
        without one (so a caller can redraw, re-check or give up). Ends only by raising."""
        while True:
            frame = self._recv(timeout)
            if frame is None or frame.get("type") in FRAMES_OUT:
                yield frame


def event_type(event: Mapping[str, Any]) -> str:
    kind, action = event.get("kind"), event.get("action")
    return f"{kind}.{action}" if kind and action else "event"


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


def parse_time(value: Any) -> datetime | None:
    """An ISO 8601 time from Weft (``Z`` or an offset; naive read as UTC); None if not one."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _older(candidate: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    """An event emitted before the snapshot we already hold (it must not move the state back)."""
    a, b = parse_time(candidate.get("updated_at")), parse_time(current.get("updated_at"))
    return a is not None and b is not None and a < b


def recheck_kind(item: dict[str, Any], final: Collection[str]) -> str:
    """What a record read again shows: its final status as the event that ended it
    (``work.completed``: the event itself was skipped or late), else ``recheck``."""
    status = item.get("status")
    return f"work.{status}" if status in final else "recheck"


def item_changes(
    client: WeftClient,
    work_id: str,
    *,
    final: Collection[str],
    recheck_s: float,
    timeout: float | None = None,
) -> Iterator[tuple[str, dict[str, Any], dict[str, Any] | None]]:
    """One item's changes until its status is in ``final``: ``("snapshot", item, None)``
    first, then ``(event type, item, event)`` per change, or ``("recheck", item, None)`` when
    a quiet stream (``recheck_s``) or a lagged one made it read the record again (named
    ``work.<status>`` when that record is final). Subscribed
    before the item is read, so no change falls between the two. Raises
    :class:`WatchTimedOut` once ``timeout`` seconds pass first (Shuttle's ``watch`` and
    ``submit --wait``, :meth:`loom.client.LoomClient.watch`)."""
    path = f"/api/work/{seg(work_id)}"
    deadline = Deadline(timeout)
    with EventStream(client, ["work"], {"work_id": work_id}) as stream:
        item: dict[str, Any] = client.get(path)
        work_id = item.get("id", work_id)
        yield "snapshot", item, None
        frames = stream.frames(timeout=recheck_s if timeout is None else min(recheck_s, timeout))
        while item.get("status") not in final:
            frame = next(frames)
            if deadline.passed():
                raise WatchTimedOut(
                    f"work {work_id} is still {item.get('status')} after {timeout:g}s", item=item
                )
            if frame is None or frame.get("type") == "lagged":
                # quiet for a while, or Weft skipped events for us: read the record itself
                fresh: dict[str, Any] = client.get(path)
                if fresh.get("updated_at") != item.get("updated_at"):
                    item = fresh
                    yield recheck_kind(item, final), item, None
                continue
            event = frame.get("event")
            if not isinstance(event, dict) or event.get("subject_id") != work_id:
                continue
            updated = work_of(event)
            if updated is None or _older(updated, item):
                continue
            item = updated
            yield event_type(event), item, event
