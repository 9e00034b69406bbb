"""What a client of Weft's API can be told (docs/client.md): Weft refused the request (its
structured error kept), or Weft could not be reached. Shuttle maps them onto its exit codes
(1 and 3, docs/shuttle.md)."""

from __future__ import annotations

from typing import Any

from shared.errors import LoomError, Unavailable


class ClientError(LoomError):
    """Weft said no, or did not answer; ``message`` is one line, safe to show."""


class Unreachable(ClientError, Unavailable):
    """Weft did not answer: refused connection, DNS failure, timeout, TLS failure."""


class Refused(ClientError):
    """Weft answered with an error; ``status``, ``code`` and ``details`` are its answer's."""

    def __init__(self, message: str, *, status: int, code: str = "error", details: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.details = details


class WatchTimedOut(ClientError):
    """An item followed with a timeout was not final by then; ``item`` is as last seen."""

    def __init__(self, message: str, *, item: dict[str, Any]) -> None:
        super().__init__(message)
        self.item = item
