"""Warp's and Pattern's Streamable HTTP mode: one way to serve an MCP server over HTTP.

Every SSE event carries an id kept by :class:`MemoryEventStore`, so a client whose
connection dropped reconnects with ``Last-Event-ID`` and receives what it missed (the
MCP SDK's resumability, which needs an event store it does not ship). The store is in
memory and bounded: a server process is one agent's, and what a reconnect needs is the
last few seconds of a stream, not its history.
"""

from __future__ import annotations

import contextlib
import itertools
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any, Final

from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp.types import JSONRPCMessage

MAX_EVENTS_PER_STREAM: Final = 500
MAX_STREAMS: Final = 200
RETRY_MS: Final = 1000
"""How soon a client should reconnect after its stream ended early (SSE ``retry``)."""


class MemoryEventStore(EventStore):
    """The last :data:`MAX_EVENTS_PER_STREAM` events of the last :data:`MAX_STREAMS` streams.

    An event id is ``<stream id>:<sequence>``: the stream a ``Last-Event-ID`` belongs to is
    read from it, and the events after it are those of the same stream with a higher
    sequence. An id the store no longer holds replays nothing (the client starts over)."""

    def __init__(self, max_events: int = MAX_EVENTS_PER_STREAM, max_streams: int = MAX_STREAMS) -> None:
        self._max_events = max_events
        self._max_streams = max_streams
        self._streams: OrderedDict[StreamId, deque[tuple[int, JSONRPCMessage | None]]] = OrderedDict()
        self._sequence = itertools.count(1)

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        events = self._streams.get(stream_id)
        if events is None:
            events = self._streams[stream_id] = deque(maxlen=self._max_events)
            while len(self._streams) > self._max_streams:
                self._streams.popitem(last=False)
        else:
            self._streams.move_to_end(stream_id)
        sequence = next(self._sequence)
        events.append((sequence, message))
        return f"{stream_id}:{sequence}"

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        stream_id, _, after = last_event_id.rpartition(":")
        events = self._streams.get(stream_id)
        if events is None or not after.isdigit():
            return None
        for sequence, message in list(events):
            if sequence > int(after) and message is not None:  # None: the priming event, no content
                await send_callback(EventMessage(message, f"{stream_id}:{sequence}"))
        return stream_id


def streamable_app(server: Any, *, path: str, host: str) -> Any:
    """``server``'s Streamable HTTP app (an MCP SDK ``MCPServer``), resumable."""
    return server.streamable_http_app(
        streamable_http_path=path, host=host, event_store=MemoryEventStore(), retry_interval=RETRY_MS
    )


async def serve_http(
    app: Any,
    host: str,
    port: int,
    on_server: Callable[[Any], None] | None = None,
    *,
    stop_on_signals: bool = False,
) -> None:
    """Serve ``app`` until stopped; ``on_server`` gets the uvicorn server (to stop it).

    ``stop_on_signals``: SIGTERM and SIGINT end the serving and this call returns, so the
    caller's clean-up runs (uvicorn's own handling raises the signal again once it stopped,
    which ends the process before any ``finally`` of the caller)."""
    import asyncio
    import signal

    import uvicorn

    config = uvicorn.Config(app, host=host, port=port, log_config=None, access_log=False, lifespan="on")
    http = uvicorn.Server(config)
    if on_server is not None:
        on_server(http)
    if stop_on_signals:
        http.capture_signals = contextlib.nullcontext  # type: ignore[method-assign,assignment]
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, setattr, http, "should_exit", True)
    await http.serve()
