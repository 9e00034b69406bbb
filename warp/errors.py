"""Errors Warp reports to agents.

Every refusal names the field it is about and the rule that was broken, so an
agent can correct its call; everything else that can go wrong (NATS down, a
slow server) is translated here into one clear sentence instead of a crash.
Each carries a code (``_meta["loom/error"].error`` of the tool result), so a
client can branch on it: the shared kinds (``invalid``, ``not_found``, ...),
``validation_error`` for arguments that break the schema, and Weft's codes for
the same NATS failures.
"""

from __future__ import annotations

import asyncio

from shared.errors import Conflict, Invalid, LoomError, NotFound, Unavailable

__all__ = ["Conflict", "NotFound", "Unavailable", "WarpError", "as_loom_error", "describe"]


class WarpError(Invalid):
    """A call Warp refuses by its own rules. ``message`` is what the agent sees."""


NATS_UNAVAILABLE = "nats_unavailable"
JETSTREAM_ERROR = "jetstream_error"
"""The codes Weft uses for the same two NATS failures."""


def as_loom_error(exc: BaseException, *, nats_url: str = "NATS") -> LoomError | None:
    """An anticipated exception as the refusal the agent gets (code and message),
    or None for a real bug."""
    from pydantic import ValidationError

    from shared.errors import describe_problems, validation_problems
    from shared.mcp.toolerrors import VALIDATION_ERROR

    if isinstance(exc, LoomError):
        return exc
    if isinstance(exc, ValidationError):
        problems = validation_problems(exc.errors(include_url=False))
        return LoomError(describe_problems(problems, limit=10), code=VALIDATION_ERROR)
    return _nats_error(exc, nats_url)


def describe(exc: BaseException, *, nats_url: str = "NATS") -> str | None:
    """The agent-facing text for an anticipated exception, or None for a real bug."""
    found = as_loom_error(exc, nats_url=nats_url)
    return None if found is None else found.message


def _nats_error(exc: BaseException, nats_url: str) -> LoomError | None:
    import nats.errors
    import nats.js.errors

    from shared.redact import redact

    retry = "Warp keeps reconnecting; retry in a few seconds."
    if isinstance(exc, nats.errors.TimeoutError | asyncio.TimeoutError | TimeoutError):
        return Unavailable(
            f"NATS at {nats_url} did not answer in time; the operation may not have happened. {retry}",
            code=NATS_UNAVAILABLE,
        )
    if isinstance(
        exc,
        nats.errors.ConnectionClosedError
        | nats.errors.StaleConnectionError
        | nats.errors.OutboundBufferLimitError
        | nats.errors.NoRespondersError
        | nats.js.errors.ServiceUnavailableError,
    ):
        return Unavailable(
            f"NATS at {nats_url} is unreachable ({type(exc).__name__}). {retry}", code=NATS_UNAVAILABLE
        )
    if isinstance(exc, nats.js.errors.APIError):
        return LoomError(
            redact(f"NATS refused the operation: {exc.description or exc}"), code=JETSTREAM_ERROR
        )
    return None
