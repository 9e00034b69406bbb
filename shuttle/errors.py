"""The exit-code contract of Shuttle (docs/shuttle.md, Exit codes and errors): every expected failure is one
line on stderr and one of these codes, never a traceback."""

from __future__ import annotations

from typing import Any

from shared.errors import Conflict, Invalid, LoomError, Unavailable

EXIT_OK = 0
EXIT_REFUSED = 1
"""Weft (or the work item's outcome) said no."""
EXIT_USAGE = 2
"""The caller's flags, arguments, files or config are wrong."""
EXIT_UNREACHABLE = 3
"""Weft could not be reached at the configured URL."""


class ShuttleError(LoomError):
    """An expected failure: ``message`` is shown as one line, ``exit_code`` is returned."""

    exit_code = EXIT_REFUSED

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class UsageError(ShuttleError, Invalid):
    """Bad flags, arguments, input files or configuration (exit 2); never repeats the value."""

    exit_code = EXIT_USAGE


class Unreachable(ShuttleError, Unavailable):
    """Weft did not answer: refused connection, DNS failure, timeout, TLS failure (exit 3)."""

    exit_code = EXIT_UNREACHABLE


class Refused(ShuttleError):
    """Weft answered with an error (exit 1); keeps the structured body for ``--json``."""

    exit_code = EXIT_REFUSED

    def __init__(
        self,
        message: str,
        *,
        status: int,
        code: str = "error",
        details: Any = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.details = details


class OutcomeFailed(ShuttleError, Conflict):
    """A followed work item ended in a state other than completed (exit 1)."""

    exit_code = EXIT_REFUSED
