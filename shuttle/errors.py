"""The exit-code contract of Shuttle (docs/shuttle.md, Exit codes and errors): every expected failure is one
line on stderr and one of these codes, never a traceback."""

from __future__ import annotations

from loom.errors import ClientError, Refused, Unreachable
from shared.errors import Conflict, Invalid, LoomError

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


class OutcomeFailed(ShuttleError, Conflict):
    """A followed work item ended in a state other than completed (exit 1)."""

    exit_code = EXIT_REFUSED


__all__ = [
    "ClientError",
    "OutcomeFailed",
    "Refused",
    "ShuttleError",
    "Unreachable",
    "UsageError",
    "exit_code_of",
]


def exit_code_of(exc: ShuttleError | ClientError) -> int:
    """The exit code of an expected failure: Weft unreachable 3, Weft refused 1, else the
    error's own."""
    if isinstance(exc, Unreachable):
        return EXIT_UNREACHABLE
    if isinstance(exc, Refused):
        return EXIT_REFUSED
    return exc.exit_code if isinstance(exc, ShuttleError) else EXIT_REFUSED
