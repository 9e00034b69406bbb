"""What Weft's terminal shows of its HTTP server: the lines that mean something to the person
running it, not one per WebSocket connection (the console and every ``shuttle watch`` open
and close them all day)."""

from __future__ import annotations

import logging

UVICORN_LOGGER = "uvicorn.error"
PER_CONNECTION = frozenset({"connection open", "connection closed"})
DENIAL_ARTEFACT = "ASGI callable returned without completing handshake."
"""Logged at ERROR by uvicorn's websockets-sansio protocol after every denial response (a
refused token): it never marks the handshake done (Kludex/uvicorn#3138, open). Weft's one
WebSocket route always accepts or denies, so the line never means anything else here."""


class ServerNoise(logging.Filter):
    """Drops uvicorn's per-connection WebSocket lines and the denial artefact above."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message in PER_CONNECTION or message == DENIAL_ARTEFACT:
            return False
        return '"WebSocket ' not in message  # '127.0.0.1:5 - "WebSocket /api/ws" [accepted]'


def quiet_server_noise() -> None:
    logger = logging.getLogger(UVICORN_LOGGER)
    if not any(isinstance(f, ServerNoise) for f in logger.filters):
        logger.addFilter(ServerNoise())
